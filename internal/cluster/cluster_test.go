package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/stream"
)

// TestKafkaConfig: the SASL mechanism names map onto stream's, and TLS and
// kafka.allow_plaintext_sasl are carried.
func TestKafkaConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
	}{{"plain", stream.SASLPlain}, {"scram-sha-256", stream.SASLScramSHA256}, {"scram-sha-512", stream.SASLScramSHA512}} {
		cfg := config.Default()
		cfg.Kafka.Brokers = []string{"b:9092"}
		cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.Username = c.name, "u"
		cfg.Kafka.TLS.Enabled, cfg.Kafka.AllowPlaintextSASL = true, true
		k := KafkaConfig(cfg)
		if k.SASL.Mechanism != c.want || k.SASL.Username != "u" || !k.TLS.Enable || !k.AllowPlaintextSASL ||
			len(k.Brokers) != 1 || k.ClientID != "cairnd" {
			t.Errorf("%s: %+v", c.name, k)
		}
	}
}

// TestConnectEmbedded: without brokers Connect starts the embedded broker with every
// topic, whose settings pass the check (TopicConfigs), in the data directory; Close
// stops it.
func TestConnectEmbedded(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.EmbeddedBroker = "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, cfg, fault.NewTracker(zerolog.Nop(), nil), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if c.Embedded == nil || c.TrainPolicy != "compact" || len(c.Kafka.Brokers) != 1 || c.TopicsErr() != nil {
		t.Errorf("embedded %v, train policy %q, brokers %v, topics %v", c.Embedded != nil, c.TrainPolicy, c.Kafka.Brokers, c.TopicsErr())
	}
	tp := cfg.Kafka.Topics
	for _, topic := range []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status, tp.Models, tp.Leader} {
		if _, err := stream.EndOffsets(ctx, c.Kafka, topic); err != nil {
			t.Errorf("topic %s: %v", topic, err)
		}
	}
	if p, err := stream.TopicSetting(ctx, c.Kafka, tp.Audits, "retention.ms"); err != nil || p != "-1" {
		t.Errorf("audit topic retention.ms %q, %v; want -1", p, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
