package stream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestDeliverAhead: with Ahead set, every message reaches the handler once and in
// order; each batch is prepared before the handler gets it, and the next batch is
// prepared while the handler still works on the one before (the overlap Ahead exists
// for); a handler error stops deliver, which joins its goroutine and returns the error.
func TestDeliverAhead(t *testing.T) {
	const n, size = 40, 4
	var mu sync.Mutex
	prepared := map[int64]bool{} // first offset of each batch Ahead saw
	aheadCalled := make(chan int64, n)
	stop := errors.New("stop")
	r := &Reader{cfg: ReaderConfig{MaxBatch: size, Ahead: func(_ context.Context, b []Message) {
		mu.Lock()
		prepared[b[0].Offset] = true
		mu.Unlock()
		aheadCalled <- b[0].Offset
	}}}
	ch := make(chan Message, n)
	for i := range n {
		ch <- Message{Offset: int64(i)}
	}
	var got []int64
	overlapped := 0
	handle := func(_ context.Context, b []Message) error {
		mu.Lock()
		ok := prepared[b[0].Offset]
		mu.Unlock()
		if !ok {
			t.Errorf("batch at %d handled before Ahead prepared it", b[0].Offset)
		}
		for _, m := range b {
			got = append(got, m.Offset)
		}
		if len(got) == n {
			return stop
		}
		// The next batch is prepared while this one is still being handled.
		deadline := time.After(5 * time.Second)
		for {
			select {
			case off := <-aheadCalled:
				if off > b[0].Offset {
					overlapped++
					return nil
				}
				continue
			case <-deadline:
				t.Errorf("batch after %d not prepared while %d was handled", b[0].Offset, b[0].Offset)
				return nil
			}
		}
	}
	in := &inbox{chs: []chan Message{ch}, wake: make(chan struct{}, 1), max: size}
	if err := r.deliver(context.Background(), in, handle); !errors.Is(err, stop) {
		t.Fatalf("deliver: %v, want the handler's error", err)
	}
	if len(got) != n {
		t.Fatalf("handled %d messages, want %d", len(got), n)
	}
	for i, off := range got {
		if off != int64(i) {
			t.Fatalf("message %d has offset %d: out of order or repeated", i, off)
		}
	}
	if overlapped != n/size-1 {
		t.Errorf("%d batches prepared during the handling of the one before, want %d", overlapped, n/size-1)
	}
}

// TestDeliverAheadCancel: deliver returns nil when ctx ends, whether the Ahead goroutine
// waits for messages or to hand a batch over.
func TestDeliverAheadCancel(t *testing.T) {
	r := &Reader{cfg: ReaderConfig{MaxBatch: 2, Ahead: func(context.Context, []Message) {}}}
	ch := make(chan Message, 8)
	for i := range 3 {
		ch <- Message{Offset: int64(i)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	handled := 0
	in := &inbox{chs: []chan Message{ch}, wake: make(chan struct{}, 1), max: 2}
	err := r.deliver(ctx, in, func(context.Context, []Message) error {
		handled++
		if handled == 2 {
			cancel() // the goroutine now waits on ch, empty
		}
		return nil
	})
	if err != nil || handled != 2 {
		t.Errorf("deliver: %v after %d batches, want nil after 2", err, handled)
	}
}
