package stream

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestInboxFair: the partitions' channels hold two batches together, any one of them up
// to a batch; a batch takes its share of every partition that has messages waiting
// (max/n each), not whatever one sender pushed first, and rounds again while messages
// wait (one partition alone gives a batch all it holds); every message comes once, each
// partition's in order, with senders running concurrently with the batches; collect
// ends with ctx.
func TestInboxFair(t *testing.T) {
	const parts, per, max = 3, 200, 30
	const held = 2 * max / parts
	in := newInbox(parts, max)
	for _, ch := range in.chs {
		if cap(ch) != max {
			t.Fatalf("a partition's channel holds %d, want %d", cap(ch), max)
		}
	}
	ctx := context.Background()
	for p := range parts {
		for i := range held { // partition 0's first, as a sender running first would
			in.send(ctx, p, Message{Partition: p, Offset: int64(i)})
		}
	}
	// The room is shared: with two batches waiting, a further send waits, whichever
	// partition it is for.
	full, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	if in.send(full, 1, Message{Partition: 1, Offset: held}) {
		t.Fatalf("a send with two batches (%d messages) waiting did not wait", parts*held)
	}
	stop()
	batch, ok := in.collect(ctx, nil)
	if !ok || len(batch) != max {
		t.Fatalf("first batch: %d messages (ok %v), want %d", len(batch), ok, max)
	}
	count := map[int]int{}
	for _, m := range batch {
		count[m.Partition]++
	}
	for p := range parts {
		if count[p] != max/parts {
			t.Errorf("first batch: %d of partition %d, want %d (its share): %v", count[p], p, max/parts, count)
		}
	}
	// One partition alone may fill a batch, more than its two shares.
	solo := newInbox(parts, max)
	for i := range max {
		solo.send(ctx, 1, Message{Partition: 1, Offset: int64(i)})
	}
	if b, _ := solo.collect(ctx, nil); len(b) != max {
		t.Errorf("one partition with %d waiting: a batch of %d, want %d", max, len(b), max)
	}

	next := map[int]int64{}
	check := func(b []Message) {
		t.Helper()
		for _, m := range b {
			if m.Offset != next[m.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", m.Partition, m.Offset, next[m.Partition])
			}
			next[m.Partition]++
		}
	}
	check(batch)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := held; i < per; i++ {
				if !in.send(cctx, p, Message{Partition: p, Offset: int64(i)}) {
					return
				}
			}
		})
	}
	for got := len(batch); got < parts*per; {
		b, ok := in.collect(cctx, nil)
		if !ok {
			t.Fatalf("collect ended after %d of %d messages", got, parts*per)
		}
		if len(b) > max {
			t.Fatalf("a batch of %d, over the bound %d", len(b), max)
		}
		check(b)
		got += len(b)
	}
	wg.Wait()
	cancel()
	if b, ok := in.collect(cctx, nil); ok || len(b) != 0 {
		t.Errorf("collect after ctx ended: %d messages, ok %v; want none, false", len(b), ok)
	}
}
