package stream

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// addN enqueues n entries whose values count the outbox's sequence.
func (o *memOutbox) addN(topic string, n int) {
	for range n {
		o.mu.Lock()
		v := fmt.Appendf(nil, "%05d", o.next+1)
		o.mu.Unlock()
		o.add(topic, []byte("k"), v)
	}
}

func (o *memOutbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entries)
}

// TestPublisherRidesOutage: with the broker gone, the publisher keeps its entries,
// reports the failure (State, OnError with waits doubling up to RetryMax) and never
// returns; once a broker is back on the same address with the same data, every entry
// goes out, in outbox order, and the state clears.
func TestPublisherRidesOutage(t *testing.T) {
	const topic = "out"
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic}, DataDir: filepath.Join(dir, "kafka")}
	b, err := StartBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = b.Addr()
	w := newTestWriter(t, b.Addr(), func(c *WriterConfig) {
		c.Attempts, c.BackoffMax, c.Timeout = 2, 20*time.Millisecond, 300*time.Millisecond
	})
	box := &memOutbox{}
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	pub, err := NewPublisher(w, box, PublisherConfig{Batch: 8, Poll: 10 * time.Millisecond, RetryMin: 20 * time.Millisecond,
		RetryMax: 80 * time.Millisecond, OnError: func(_ error, failures int, wait time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if failures != len(waits)+1 {
				t.Errorf("OnError failures %d, want %d", failures, len(waits)+1)
			}
			waits = append(waits, wait)
		}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pub.Run(pctx) }()
	box.addN(topic, 20)
	waitFor(t, 10*time.Second, "the first entries to go out", func() bool { return box.len() == 0 })

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	box.addN(topic, 30)
	waitFor(t, 20*time.Second, "five failed rounds", func() bool { mu.Lock(); defer mu.Unlock(); return len(waits) >= 5 })
	if s := pub.State(); !s.Failing || s.LastError == nil || s.Since.IsZero() || s.Retries < 5 {
		t.Errorf("state during the outage %+v, want failing with an error", s)
	}
	mu.Lock()
	for i, want := range []time.Duration{20, 40, 80, 80, 80} {
		if waits[i] != want*time.Millisecond {
			t.Errorf("wait %d = %v, want %v (doubling from RetryMin to RetryMax)", i, waits[i], want*time.Millisecond)
		}
	}
	mu.Unlock()
	if n := box.len(); n != 30 {
		t.Errorf("%d entries left in the outbox during the outage, want 30", n)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned during the outage: %v", err)
	default:
	}

	b2, err := startOnAddr(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	waitFor(t, 30*time.Second, "the outbox to drain after the outage", func() bool { return box.len() == 0 })
	if s := pub.State(); s.Failing || s.LastError != nil {
		t.Errorf("state after the outage %+v, want healthy", s)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b2.Addr()}}, Topics: []string{topic},
		Start: storedOffsets{}.start, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(50), 20*time.Second)
	if len(got) < 50 {
		t.Fatalf("read back %d messages, want 50", len(got))
	}
	// At least once, in outbox order: the values' first occurrences are 1…50 in order.
	next := 1
	for _, m := range got {
		if v := string(m.Value); v == fmt.Sprintf("%05d", next) {
			next++
		} else if v > fmt.Sprintf("%05d", next) {
			t.Fatalf("value %s before %05d: out of order", v, next)
		}
	}
	if next != 51 {
		t.Errorf("only values up to %d arrived in order", next-1)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPublisherFence: with First set, every round writes the fence topic's entries,
// acknowledged, before the others, whatever their outbox order.
func TestPublisherFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{"models", "audits"},
		DataDir: filepath.Join(t.TempDir(), "kafka")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var (
		mu     sync.Mutex
		writes [][]string
	)
	w := newTestWriter(t, b.Addr(), func(c *WriterConfig) {
		c.OnWritten = func(msgs []Message) {
			mu.Lock()
			defer mu.Unlock()
			var ts []string
			for _, m := range msgs {
				ts = append(ts, m.Topic+":"+string(m.Value))
			}
			writes = append(writes, ts)
		}
	})
	box := &memOutbox{}
	box.add("audits", []byte("a"), []byte("1"))
	box.add("models", []byte("m"), []byte("2"))
	box.add("audits", []byte("a"), []byte("3"))
	box.add("models", []byte("m"), []byte("4"))
	pub, err := NewPublisher(w, box, PublisherConfig{First: []string{"models"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := pub.Drain(ctx); err != nil || n != 4 {
		t.Fatalf("drain: %d, %v", n, err)
	}
	want := [][]string{{"models:2", "models:4"}, {"audits:1", "audits:3"}}
	if fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Fatalf("writes %v, want %v", writes, want)
	}
}
