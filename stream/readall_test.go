package stream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestReadAll: every record up to the end offsets at the call, in offset order per
// partition, and nothing written after; an empty topic reads as none; a reader whose
// context ends first says so.
func TestReadAll(t *testing.T) {
	const topic = "t.all"
	b := startBroker(t, 2, topic)
	cfg := Config{Brokers: []string{b.Addr()}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if got, err := ReadAll(ctx, cfg, topic); err != nil || len(got) != 0 {
		t.Fatalf("empty topic: %d records, %v", len(got), err)
	}
	w := newTestWriter(t, b.Addr(), nil)
	var msgs []Message
	for i := range 40 {
		msgs = append(msgs, Message{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(ctx, cfg, topic)
	if err != nil || len(got) != len(msgs) {
		t.Fatalf("ReadAll: %d records, %v; want %d", len(got), err, len(msgs))
	}
	last := map[int]int64{0: -1, 1: -1}
	for _, m := range got {
		if m.Offset <= last[m.Partition] {
			t.Fatalf("partition %d: offset %d after %d", m.Partition, m.Offset, last[m.Partition])
		}
		last[m.Partition] = m.Offset
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := ReadAll(done, cfg, topic); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAll with an ended context: %v, want context.Canceled", err)
	}
}
