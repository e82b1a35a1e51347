package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// leader is what the leading daemon runs besides what every daemon with a store runs
// (ingest, refits, lag): the outbox's publisher, the writer of the model publisher, and
// the query reader when query.on_primary is set.
type leader struct {
	pub     *stream.Publisher
	w       *stream.Writer
	queries *stream.Reader
}

// lead runs the leader's components until ctx ends (shutdown, or, when elected, the
// loss of the leadership). An elected leader first takes over (takeOver) and runs its
// publisher itself; a primary on the embedded broker leads from its start and Run
// owns its publisher, so that the outbox drains after the readers stop.
func (d *Daemon) lead(ctx context.Context, l leader, elected bool) error {
	if elected {
		// The group gave this daemon the leadership: a failed takeover (the broker not
		// answering) is retried, never abandoned, or nobody would lead.
		var b fault.Backoff
		for {
			err := d.takeOver(ctx)
			if err == nil {
				d.faults.Recovered("leader")
				break
			}
			wait := b.Next()
			d.faults.Fail("leader", fmt.Errorf("take over: %w", err), wait)
			if !fault.Sleep(ctx, wait) {
				return nil
			}
		}
		d.leading.Store(true)
		defer d.leading.Store(false)
		d.emitStatus("audit_key", d.AuditKey())
	}
	d.metrics.SetLeading(true)
	defer d.metrics.SetLeading(false)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.runModels(ctx, l.w); err != nil {
			d.log.Error().Err(err).Msg("model publisher stopped")
		}
	})
	if d.cfg.Query.OnPrimary {
		wg.Go(func() {
			if err := d.faults.KeepReading(ctx, "queries", l.queries, d.handleQueries, nil); err != nil {
				d.log.Error().Err(err).Msg("query reader stopped")
			}
		})
	}
	if elected {
		wg.Go(func() {
			if err := l.pub.Run(ctx); err != nil {
				d.log.Error().Err(err).Msg("publisher stopped")
			}
		})
	}
	d.poke()
	wg.Wait()
	return nil
}

// takeOver makes an elected standby the leader: it adopts every audit the previous
// leader published (so its chain continues the published one and no deletion is
// audited twice), masks every pending deletion in the serving model (a model from the
// models topic, which the previous leader may not have masked yet), and enqueues that
// mask, so it goes out first.
func (d *Daemon) takeOver(ctx context.Context) error {
	t0 := time.Now()
	if err := d.adoptAll(ctx); err != nil {
		return err
	}
	d.train.mu.Lock()
	ids := d.train.ingest.PendingIDs()
	// The serving model came from the models topic (or from before the leadership was
	// lost); when the store's own latest fit differs from it, a refit brings the served
	// model up to the stored points and publishes it (the idle trigger).
	if s := d.serve.model.Load(); s == nil || d.latestStoredID() != s.ID {
		d.train.changes = max(d.train.changes, 1)
	}
	d.train.mu.Unlock()
	d.serve.mu.Lock()
	s := d.serve.model.Load()
	if s != nil {
		s = s.WithMask(ids)
		d.serve.model.Store(s)
	}
	d.serve.mu.Unlock()
	if s != nil {
		m := modelbus.Mask(s.Version, s.MaskedIDs())
		if err := d.store.Apply(func(tx *storage.Tx) error {
			_, err := tx.Enqueue(d.cfg.Kafka.Topics.Models, m.Key, m.Value)
			return err
		}); err != nil {
			return err
		}
	}
	d.metrics.ObserveTakeover(time.Since(t0).Seconds())
	d.log.Info().Dur("took", time.Since(t0)).Int("pending", len(ids)).Uint64("floor", d.models.floor.Load()).Msg("took over as leader")
	return nil
}

// latestStoredID is the model id of the store's latest model ("" for none or unreadable).
func (d *Daemon) latestStoredID() string {
	var id string
	_ = d.store.View(func(tx *storage.ReadTx) error {
		m, ok, err := tx.LatestModel()
		var meta serving.Meta
		if ok && json.Unmarshal(m.Meta, &meta) == nil {
			id = meta.ID
		}
		return err
	})
	return id
}
