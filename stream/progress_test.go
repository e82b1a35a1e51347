package stream

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestProgress: a group without members holds what Publish commits; Read returns it
// for the partitions asked, and nothing for a partition never published; a later
// Publish replaces the offsets (also downwards, as a commit does), and a second
// Progress on the same group reads the same.
func TestProgress(t *testing.T) {
	const topic = "t.progress"
	b := startBroker(t, 3, topic)
	cfg := Config{Brokers: []string{b.Addr()}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProgress(cfg, "g.applied", topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Read(ctx, []int{0, 1, 2})
	if err != nil || len(got) != 0 {
		t.Fatalf("Read before any Publish: %v, %v; want nothing", got, err)
	}
	if err := p.Publish(ctx, map[int]int64{0: 17, 2: 5}); err != nil {
		t.Fatal(err)
	}
	if got, err = p.Read(ctx, []int{0, 1, 2}); err != nil || !maps.Equal(got, map[int]int64{0: 17, 2: 5}) {
		t.Fatalf("Read = %v, %v; want partitions 0 and 2 at 17 and 5", got, err)
	}
	if err := p.Publish(ctx, map[int]int64{0: 3, 1: 9}); err != nil {
		t.Fatal(err)
	}
	q, err := NewProgress(cfg, "g.applied", topic)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got, err = q.Read(ctx, []int{0, 1, 2}); err != nil || !maps.Equal(got, map[int]int64{0: 3, 1: 9, 2: 5}) {
		t.Fatalf("Read after the second Publish = %v, %v; want 0: 3, 1: 9, 2: 5", got, err)
	}
	if _, err := NewProgress(cfg, "", topic); err == nil {
		t.Error("NewProgress without a group: nil error")
	}
}
