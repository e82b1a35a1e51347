package stream

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestSASL runs a write and a read through a kfake cluster that requires
// SASL, once per mechanism, and checks that a wrong password fails rather
// than being ignored.
func TestSASL(t *testing.T) {
	const topic = "t.sasl"
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "cairn", "s3cret"), kfake.SeedTopics(1, topic))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// kfake speaks SASL without TLS: the test network is loopback.
			cfg := Config{Brokers: c.ListenAddrs(), SASL: SASLConfig{Mechanism: mech, Username: "cairn", Password: "s3cret"}, AllowPlaintextSASL: true}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w, err := NewWriter(WriterConfig{Kafka: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("hello")}); err != nil {
				t.Fatalf("Write with %s: %v", mech, err)
			}
			r, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, Start: storedOffsets{}.start})
			if err != nil {
				t.Fatal(err)
			}
			got := runReader(t, r, newCollector(1), 5*time.Second)
			if len(got) != 1 || !slices.Equal(got[0].Value, []byte("hello")) {
				t.Errorf("read %v, want one message hello", got)
			}

			bad := cfg
			bad.SASL.Password = "wrong"
			wb, err := NewWriter(WriterConfig{Kafka: bad, Attempts: 2, BackoffMin: 10 * time.Millisecond, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer wb.Close()
			if err := wb.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("x")}); err == nil {
				t.Errorf("Write with a wrong %s password succeeded", mech)
			}
		})
	}
}
