package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
	"github.com/rs/zerolog"
)

// The daemon rides out faults instead of exiting (DESIGN.md section 4): a broker
// outage, a failed commit (a full disk, an I/O error, a failed fsync) or a failed
// erasure pauses the part of the work it hits, which retries with a doubling wait
// (retryMin to retryMax) until the fault clears or shutdown is asked for. Nothing is
// lost or applied twice meanwhile: every input is applied by a transaction that also
// records its offset, every output waits in the outbox, and an ingest a failure left
// ahead of the store is rebuilt from it. /readyz answers 503 with the reasons while a
// fault lasts (faultState), and the metrics count the retries.

// Waits between retries after a fault.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 10 * time.Second
	// brokerGrace is how long the lag poller may fail before the broker counts as
	// unreachable (it polls every second).
	brokerGrace = 5 * time.Second
	// faultLogEvery bounds how often one fault is logged while it lasts.
	faultLogEvery = 10 * time.Second
)

// backoff is a doubling wait from retryMin to retryMax.
type backoff struct{ cur time.Duration }

func (b *backoff) next() time.Duration {
	b.cur = min(max(2*b.cur, retryMin), retryMax)
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// faultState is what is wrong now, per component, for /readyz and the logs.
type faultState struct {
	mu     sync.Mutex
	faults map[string]fault
}

type fault struct {
	reason string
	since  time.Time
	logged time.Time
}

// set records that component fails with err, and reports whether the fault should be
// logged now (first occurrence, then once per faultLogEvery).
func (f *faultState) set(component string, err error) (log bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults == nil {
		f.faults = map[string]fault{}
	}
	now := time.Now()
	old, had := f.faults[component]
	x := fault{reason: err.Error(), since: now, logged: old.logged}
	if had {
		x.since = old.since
	}
	if log = now.Sub(x.logged) >= faultLogEvery; log {
		x.logged = now
	}
	f.faults[component] = x
	return log
}

// clear records that component works again, and returns how long it had failed (0 if
// it had not).
func (f *faultState) clear(component string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.faults[component]
	if !ok {
		return 0
	}
	delete(f.faults, component)
	return time.Since(x.since)
}

// err joins the current faults in component order, or nil.
func (f *faultState) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, c := range slices.Sorted(maps.Keys(f.faults)) {
		x := f.faults[c]
		errs = append(errs, fmt.Errorf("%s: failing since %s: %s", c, x.since.UTC().Format(time.RFC3339), x.reason))
	}
	return errors.Join(errs...)
}

// fail records a fault of component and logs it (rate-limited).
func (d *Daemon) fail(component string, err error, retryIn time.Duration) {
	d.metrics.AddFaultRetry(component)
	if d.faults.set(component, err) {
		d.log.Error().Err(err).Str("component", component).Dur("retry_in", retryIn).Msg("fault; retrying")
	}
}

// recovered clears a fault of component and logs its end.
func (d *Daemon) recovered(component string) {
	if dur := d.faults.clear(component); dur > 0 {
		d.log.Info().Str("component", component).Dur("after", dur).Msg("fault cleared")
	}
}

// rebuildIngest replaces a broken ingest by one restored from the store (ingest.New,
// which also retries an erasure a failed Compact left undone). It is a no-op when the
// ingest is not broken.
func (d *Daemon) rebuildIngest() error {
	d.train.mu.Lock()
	defer d.train.mu.Unlock()
	old := d.train.ingest
	if old.Broken() == nil {
		return nil
	}
	in, err := ingest.New(d.cfg, d.store, d.log)
	if err != nil {
		return fmt.Errorf("rebuild the ingest from the store: %w", err)
	}
	in.Succeed(old) // its hooks; no background sync of the old one is adopted
	d.train.ingest = in
	d.train.cache.Store(in.Points())
	d.publishPool()
	d.log.Info().Int("points", in.Len()).Msg("ingest rebuilt from the store")
	return nil
}

// waitOutbox blocks while the outbox holds limits.max_outbox entries or more (the
// publisher cannot keep up, or the broker is down), so that an outage means
// back-pressure on the readers instead of an outbox that grows without bound. It
// returns ctx's error if ctx ends first.
func (d *Daemon) waitOutbox(ctx context.Context) error {
	if !d.leading.Load() {
		return nil // a standby publishes nothing; its outbox waits for its leadership
	}
	for {
		if d.compactWaits.Load() > 0 {
			return nil // the publisher waits for this reader (compact): no back-pressure
		}
		n, err := d.store.OutboxSpan()
		if err == nil {
			d.outbox.Store(int64(n))
			d.metrics.SetOutbox(n)
			if n < d.cfg.Limits.MaxOutbox {
				d.recovered("outbox")
				return nil
			}
			err = fmt.Errorf("%d outputs waiting, limits.max_outbox is %d: ingestion and queries paused", n, d.cfg.Limits.MaxOutbox)
		}
		d.fail("outbox", err, retryMin)
		if !sleep(ctx, retryMin) {
			return ctx.Err()
		}
	}
}

// brokerState tracks whether the broker answers, from the lag poller (every second)
// and the publisher.
type brokerState struct {
	downSince atomic.Int64 // unix nanoseconds of the first failed poll in a row; 0 when up
	lastErr   atomic.Pointer[string]
}

func (b *brokerState) polled(err error) {
	if err == nil {
		b.downSince.Store(0)
		return
	}
	b.downSince.CompareAndSwap(0, time.Now().UnixNano())
	msg := err.Error()
	b.lastErr.Store(&msg)
}

// err reports the broker unreachable once polls have failed for brokerGrace.
func (b *brokerState) err() error {
	since := b.downSince.Load()
	if since == 0 || time.Since(time.Unix(0, since)) < brokerGrace {
		return nil
	}
	msg := ""
	if p := b.lastErr.Load(); p != nil {
		msg = *p
	}
	return fmt.Errorf("broker: unreachable since %s: %s", time.Unix(0, since).UTC().Format(time.RFC3339), msg)
}

// readiness is /readyz's verdict once Run serves: a model to answer with, the broker
// reachable, the outbox under its bound, no component failing.
func (d *Daemon) readiness() error {
	var errs []error
	if d.serve.model.Load() == nil {
		errs = append(errs, errors.New("model: none yet (the first refit needs refit.min_points points)"))
	}
	errs = append(errs, d.broker.err())
	if p := d.pub.Load(); p != nil {
		if s := p.State(); s.Failing {
			errs = append(errs, fmt.Errorf("publisher: failing since %s (%d retries): %v", s.Since.UTC().Format(time.RFC3339), s.Retries, s.LastError))
		}
	}
	errs = append(errs, d.faults.err())
	if p := d.topicErr.Load(); p != nil {
		errs = append(errs, *p)
	}
	return errors.Join(errs...)
}

// observeElection logs the election's steps: each generation at info, the first error
// after a generation at warn and the rest at debug (kafka-go's own messages say where
// a join or a sync failed), a consumer group made anew at warn. Election errors are
// not faults: a rebalance, which a replica joining causes, reports one.
func (d *Daemon) observeElection(ev stream.ElectionEvent) {
	switch ev.Kind {
	case stream.EventGeneration:
		d.electionFailing.Store(false)
		d.log.Info().Int("generation", ev.Generation).Str("member", ev.Member).Bool("leads", ev.Leads).Msg("election generation")
	case stream.EventRejoin:
		d.log.Warn().Err(ev.Err).Msg("election: making the consumer group anew")
	default:
		err := ev.Err
		if ev.Kind == stream.EventClient {
			err = errors.New(ev.Client)
		}
		lvl := zerolog.DebugLevel
		if !d.electionFailing.Swap(true) {
			lvl = zerolog.WarnLevel
		}
		d.log.WithLevel(lvl).Err(err).Msg("election: retrying")
	}
}
