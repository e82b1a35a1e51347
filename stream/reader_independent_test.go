package stream

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestReaderIndependent: with Independent, a handler call that blocks on one partition
// holds back that partition alone: every message of the other partition is handled,
// each call gets one partition's messages in offset order, and Run joins the blocked
// call and returns nil when ctx ends. (Without Independent the one delivery goroutine
// would wait in the blocked call and the other partition's messages would never come.)
func TestReaderIndependent(t *testing.T) {
	const topic, n = "t.independent", 100
	b := startBroker(t, 2, topic)
	w := newTestWriter(t, b.Addr(), func(c *WriterConfig) { c.Partitioned = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write := func(part int) {
		t.Helper()
		var msgs []Message
		for i := range n {
			m := msgKeyVal(topic, i)
			m.Partition = part
			msgs = append(msgs, m)
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 0's messages first: its handler call blocks before partition 1 has any.
	write(0)
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic},
		Start: storedOffsets{}.start, MaxBatch: 4, Independent: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[int]int64{0: -1, 1: -1}
	got := 0
	blocked, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	handle := func(hctx context.Context, batch []Message) error {
		p := batch[0].Partition
		mu.Lock()
		for _, m := range batch {
			if m.Partition != p || m.Offset <= last[p] {
				mu.Unlock()
				t.Errorf("a call got partition %d offset %d after partition %d offset %d", m.Partition, m.Offset, p, last[p])
				return nil
			}
			last[p] = m.Offset
			if p == 1 {
				if got++; got == n {
					close(done)
				}
			}
		}
		mu.Unlock()
		if p == 0 {
			// The call stays here until Run ends (deliver may make one more call as it
			// ends, with hctx done).
			once.Do(func() { close(blocked) })
			<-hctx.Done()
			return hctx.Err()
		}
		return nil
	}
	rctx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(rctx, handle) }()
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("no call for partition 0 in 20 s")
	}
	write(1)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		mu.Lock()
		t.Errorf("%d of partition 1's %d messages handled while partition 0's call was blocked", got, n)
		mu.Unlock()
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v, want nil once ctx ends", err)
	}
}

// TestReaderIndependentWithAhead: Independent and Ahead are refused together.
func TestReaderIndependentWithAhead(t *testing.T) {
	_, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{"127.0.0.1:1"}}, Topics: []string{"t"},
		Start: storedOffsets{}.start, Independent: true, Ahead: func(context.Context, []Message) {}})
	if err == nil {
		t.Fatal("NewReader accepted Independent with Ahead")
	}
}
