package fault

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/stream"
)

// Waits between retries after a fault, and how often a lasting fault is logged.
const (
	RetryMin = 100 * time.Millisecond
	RetryMax = 10 * time.Second
	// BrokerGrace is how long polls may fail before the broker counts as unreachable
	// (the daemon's lag poller polls every second).
	BrokerGrace = 5 * time.Second
	// LogEvery bounds how often one fault is logged while it lasts.
	LogEvery = 10 * time.Second
)

// Backoff is a doubling wait from RetryMin to RetryMax; the zero value starts at
// RetryMin.
type Backoff struct{ cur time.Duration }

// Next returns the next wait: RetryMin first, then twice the last, at most RetryMax.
func (b *Backoff) Next() time.Duration {
	b.cur = min(max(2*b.cur, RetryMin), RetryMax)
	return b.cur
}

// Reset starts the waits over at RetryMin.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits d or until ctx ends, and reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Tracker is what fails now, per component, for /readyz and the logs.
type Tracker struct {
	log     zerolog.Logger
	onRetry func(component string)
	mu      sync.Mutex
	faults  map[string]fault
}

type fault struct {
	reason string
	since  time.Time
	logged time.Time
}

// NewTracker returns a Tracker that logs to log and calls onRetry (if set) with the
// component of every reported fault (the daemon counts them in its metrics).
func NewTracker(log zerolog.Logger, onRetry func(component string)) *Tracker {
	return &Tracker{log: log, onRetry: onRetry, faults: map[string]fault{}}
}

// Fail records a fault of component that is retried in retryIn, and logs it ("fault;
// retrying", fields component and retry_in) at its first report and then at most once
// per LogEvery.
func (t *Tracker) Fail(component string, err error, retryIn time.Duration) {
	if t.onRetry != nil {
		t.onRetry(component)
	}
	if t.report(component, err) {
		t.log.Error().Err(err).Str("component", component).Dur("retry_in", retryIn).Msg("fault; retrying")
	}
}

// Recovered clears a fault of component and logs its end ("fault cleared", fields
// component and after); it does nothing when component does not fail.
func (t *Tracker) Recovered(component string) {
	if dur := t.clear(component); dur > 0 {
		t.log.Info().Str("component", component).Dur("after", dur).Msg("fault cleared")
	}
}

// report records that component fails with err, and reports whether the fault should
// be logged now (first occurrence, then once per LogEvery).
func (t *Tracker) report(component string, err error) (log bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	old, had := t.faults[component]
	x := fault{reason: err.Error(), since: now, logged: old.logged}
	if had {
		x.since = old.since
	}
	if log = now.Sub(x.logged) >= LogEvery; log {
		x.logged = now
	}
	t.faults[component] = x
	return log
}

// clear records that component works again, and returns how long it had failed (0 if
// it had not).
func (t *Tracker) clear(component string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	x, ok := t.faults[component]
	if !ok {
		return 0
	}
	delete(t.faults, component)
	return time.Since(x.since)
}

// Err joins the current faults in component order ("COMPONENT: failing since TIME:
// REASON"), or nil.
func (t *Tracker) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, c := range slices.Sorted(maps.Keys(t.faults)) {
		x := t.faults[c]
		errs = append(errs, fmt.Errorf("%s: failing since %s: %s", c, x.since.UTC().Format(time.RFC3339), x.reason))
	}
	return errors.Join(errs...)
}

// Reader is what KeepReading runs: a stream.Reader, or a replica's stream.GroupReader.
type Reader interface {
	Run(ctx context.Context, h stream.Handler) error
}

// KeepReading runs reader r with handler h until ctx ends. A failure (a commit the
// store refused, an ingest left broken, a broker that stopped answering) never ends it:
// repair (if set) runs until it succeeds, then the reader restarts after a doubling
// wait, resuming after the last committed offset, so nothing is lost or applied twice.
// The fault is reported under component; h clears it when it next succeeds. It
// returns nil once ctx ends.
func (t *Tracker) KeepReading(ctx context.Context, component string, r Reader, h stream.Handler, repair func() error) error {
	var b Backoff
	for {
		err := r.Run(ctx, h)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("reader stopped")
		}
		wait := b.Next()
		t.Fail(component, err, wait)
		for repair != nil {
			rerr := repair()
			if rerr == nil {
				break
			}
			wait = b.Next()
			t.Fail(component, rerr, wait)
			if !Sleep(ctx, wait) {
				return nil
			}
		}
		if !Sleep(ctx, wait) {
			return nil
		}
	}
}

// Broker tracks whether the broker answers, from the polls reported to it.
type Broker struct {
	downSince atomic.Int64 // unix nanoseconds of the first failed poll in a row; 0 when up
	lastErr   atomic.Pointer[string]
}

// Polled reports a poll of the broker that failed with err (nil: it answered).
func (b *Broker) Polled(err error) {
	if err == nil {
		b.downSince.Store(0)
		return
	}
	b.downSince.CompareAndSwap(0, time.Now().UnixNano())
	msg := err.Error()
	b.lastErr.Store(&msg)
}

// Err reports the broker unreachable once polls have failed for BrokerGrace.
func (b *Broker) Err() error {
	since := b.downSince.Load()
	if since == 0 || time.Since(time.Unix(0, since)) < BrokerGrace {
		return nil
	}
	msg := ""
	if p := b.lastErr.Load(); p != nil {
		msg = *p
	}
	return fmt.Errorf("broker: unreachable since %s: %s", time.Unix(0, since).UTC().Format(time.RFC3339), msg)
}
