package fault

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/stream"
)

// TestBackoff: waits double from RetryMin and stay at RetryMax; Reset starts over.
func TestBackoff(t *testing.T) {
	var b Backoff
	var got []time.Duration
	for range 9 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("wait %d = %v, want %v", i, got[i], want[i]*time.Millisecond)
		}
	}
	b.Reset()
	if w := b.Next(); w != RetryMin {
		t.Errorf("after reset: %v, want %v", w, RetryMin)
	}
}

// TestTracker: faults are reported in component order with their reasons, the first
// report of a fault is logged and repeats within LogEvery are not, a cleared fault
// says how long it lasted, and Fail counts every report.
func TestTracker(t *testing.T) {
	var retries atomic.Int32
	f := NewTracker(zerolog.Nop(), func(string) { retries.Add(1) })
	if f.Err() != nil {
		t.Fatal("a fresh tracker reports a fault")
	}
	if !f.report("train", errors.New("disk full")) {
		t.Error("the first report of a fault is not logged")
	}
	if f.report("train", errors.New("disk still full")) {
		t.Error("a repeat within LogEvery is logged")
	}
	f.Fail("refit", errors.New("boom"), time.Second)
	if n := retries.Load(); n != 1 {
		t.Errorf("onRetry called %d times, want 1", n)
	}
	err := f.Err()
	if err == nil {
		t.Fatal("no fault reported")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "refit: failing since") || !strings.HasSuffix(lines[1], "disk still full") {
		t.Errorf("faults %q, want refit then train with the latest reason", lines)
	}
	if d := f.clear("train"); d <= 0 {
		t.Errorf("clear of a fault returned %v", d)
	}
	if d := f.clear("train"); d != 0 {
		t.Errorf("clear of no fault returned %v", d)
	}
	f.Recovered("refit")
	if err := f.Err(); err != nil {
		t.Errorf("after every fault cleared: %v", err)
	}
}

// TestBroker: a failing poll counts only after BrokerGrace, and one answer clears it.
func TestBroker(t *testing.T) {
	var b Broker
	b.Polled(errors.New("refused"))
	if err := b.Err(); err != nil {
		t.Errorf("within the grace: %v", err)
	}
	b.downSince.Store(time.Now().Add(-2 * BrokerGrace).UnixNano())
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("after the grace: %v, want the last error", err)
	}
	b.Polled(nil)
	if err := b.Err(); err != nil {
		t.Errorf("after an answer: %v", err)
	}
}

// failingReader fails its first runs, then blocks until ctx ends.
type failingReader struct{ fails, runs int }

func (r *failingReader) Run(ctx context.Context, _ stream.Handler) error {
	r.runs++
	if r.runs <= r.fails {
		return errors.New("fetch failed")
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestKeepReading: a failing reader is restarted (after repair) and its fault
// reported until it runs; the call returns nil when ctx ends.
func TestKeepReading(t *testing.T) {
	f := NewTracker(zerolog.Nop(), nil)
	r := &failingReader{fails: 2}
	repairs := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.KeepReading(ctx, "train", r, nil, func() error { repairs++; return nil })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := f.Err(); err == nil || !strings.Contains(err.Error(), "train: failing since") {
		t.Errorf("fault while the reader fails: %v", err)
	}
	time.Sleep(RetryMin + 2*RetryMin + 100*time.Millisecond) // both waits
	cancel()
	if err := <-done; err != nil {
		t.Errorf("KeepReading returned %v, want nil at ctx's end", err)
	}
	if r.runs != 3 || repairs != 2 {
		t.Errorf("runs %d, repairs %d; want 3 and 2", r.runs, repairs)
	}
}
