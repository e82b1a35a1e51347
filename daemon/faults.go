package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
)

// The daemon rides out faults instead of exiting (package internal/fault): /readyz
// answers 503 with the reasons while a fault lasts, and the metrics count the retries.

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
				d.faults.Recovered("outbox")
				return nil
			}
			err = fmt.Errorf("%d outputs waiting, limits.max_outbox is %d: ingestion and queries paused", n, d.cfg.Limits.MaxOutbox)
		}
		d.faults.Fail("outbox", err, fault.RetryMin)
		if !fault.Sleep(ctx, fault.RetryMin) {
			return ctx.Err()
		}
	}
}

// readiness is /readyz's verdict once Run serves: a model to answer with, the broker
// reachable, the outbox under its bound, no component failing.
func (d *Daemon) readiness() error {
	var errs []error
	if d.serve.model.Load() == nil {
		errs = append(errs, errors.New("model: none yet (the first refit needs refit.min_points points)"))
	}
	errs = append(errs, d.broker.Err())
	if p := d.pub.Load(); p != nil {
		if s := p.State(); s.Failing {
			errs = append(errs, fmt.Errorf("publisher: failing since %s (%d retries): %v", s.Since.UTC().Format(time.RFC3339), s.Retries, s.LastError))
		}
	}
	errs = append(errs, d.faults.Err())
	if d.conn != nil {
		errs = append(errs, d.conn.TopicsErr())
	}
	return errors.Join(errs...)
}
