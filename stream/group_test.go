package stream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestGroupReaderAtLeastOnce: a batch whose handler fails is not committed, and the
// next member of the group gets it again; once handled, a batch is committed and never
// delivered again.
func TestGroupReaderAtLeastOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{"q"},
		DataDir: filepath.Join(t.TempDir(), "kafka")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := newTestWriter(t, b.Addr(), nil)
	var msgs []Message
	for i := range 20 {
		msgs = append(msgs, Message{Topic: "q", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	newReader := func() *GroupReader {
		g, err := NewGroupReader(GroupReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Group: "g", Topic: "q",
			MaxBatch: 8, SessionTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// The first member fails its first batch.
	boom := errors.New("boom")
	var failed []string
	err = newReader().Run(ctx, func(_ context.Context, batch []Message) error {
		for _, m := range batch {
			failed = append(failed, string(m.Key))
		}
		return boom
	})
	if !errors.Is(err, boom) || len(failed) == 0 {
		t.Fatalf("first member: %v after %d messages; want its handler's error", err, len(failed))
	}
	// The second member gets everything, the failed batch included.
	seen := map[string]int{}
	rctx, rcancel := context.WithCancel(ctx)
	err = newReader().Run(rctx, func(_ context.Context, batch []Message) error {
		for _, m := range batch {
			seen[string(m.Key)]++
		}
		if len(seen) == len(msgs) {
			rcancel()
		}
		return nil
	})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range failed {
		if seen[k] == 0 {
			t.Errorf("%s failed on the first member and never came to the second", k)
		}
	}
	if len(seen) != len(msgs) {
		t.Fatalf("second member saw %d of %d keys", len(seen), len(msgs))
	}
	// Everything handled was committed: a third member gets only what is new.
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	if err := w.Write(ctx, Message{Topic: "q", Key: []byte("new"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := newReader().Run(tctx, func(_ context.Context, batch []Message) error {
		for _, m := range batch {
			got = append(got, string(m.Key))
			if string(m.Key) == "new" {
				tcancel()
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "new" {
		t.Fatalf("a third member got %v; want only the new message", got)
	}
}
