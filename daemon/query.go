package daemon

import (
	"context"
	"errors"

	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// errServingChanged makes a query batch recompute: the serving model changed (a
// deletion masked a landmark, or a refit installed a model) between computing the
// answers and committing them, and an answer committed after a deletion must not name
// the deleted point.
var errServingChanged = errors.New("daemon: serving model changed during the batch")

// handleQueries answers one batch of cairn.queries: each valid query gets a certified
// attribution from the serving model, emitted to cairn.attributions through the
// outbox in one transaction with the batch's offsets; invalid ones and queries naming
// unknown ids go to the dead-letter topic. Before the first model exists it waits (the
// queries stay in Kafka). The commit checks that the serving model is still the one the
// answers were computed on, else the batch is recomputed.
func (d *Daemon) handleQueries(ctx context.Context, batch []stream.Message) error {
	select {
	case <-d.serve.modelReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := d.waitOutbox(ctx); err != nil {
		return err
	}
	w := &d.query.work
	for {
		s := d.serve.model.Load()
		if s != nil && s.Draw != nil && s.Draw.Used.Load()+int64(len(batch)) > int64(d.cfg.Query.DrawQueries) {
			if err := d.redraw(s); err != nil {
				return err
			}
			continue
		}
		outs := d.answers.Batch(w, s, batch, d.answered)
		seen := map[partition]int64{}
		err := d.store.Apply(func(tx *storage.Tx) error {
			if d.serve.model.Load() != s {
				return errServingChanged
			}
			for _, o := range outs {
				if o.Skip {
					continue
				}
				if _, err := tx.Enqueue(o.Topic, o.Key, o.Value); err != nil {
					return err
				}
				if err := tx.SetOffset(o.Msg.Topic, int32(o.Msg.Partition), o.Msg.Offset); err != nil {
					return err
				}
				seen[partition{o.Msg.Topic, o.Msg.Partition}] = o.Msg.Offset
			}
			return nil
		})
		if errors.Is(err, errServingChanged) {
			continue
		}
		if err != nil {
			return err
		}
		d.faults.Recovered("queries")
		for k, off := range seen {
			d.query.last[k] = off
		}
		d.answers.Account(outs, s)
		return nil
	}
}

// answered reports whether the query message m was answered already (a re-delivery
// of an offset at or below the last one committed).
func (d *Daemon) answered(m stream.Message) bool {
	last, ok := d.query.last[partition{m.Topic, m.Partition}]
	return ok && m.Offset <= last
}

// Answer computes the certified attribution of one query on the serving model, in
// process (no Kafka, nothing stored): what the query path emits for q. It returns
// ErrNoModel before the first model. It counts against the evaluation draw's query
// budget like any answer.
func (d *Daemon) Answer(q stream.QueryEvent) (stream.Attribution, error) {
	return d.answers.Answer(d.serve.model.Load(), q)
}

// redraw replaces the serving model's evaluation draw, whose query budget is used up,
// with a fresh one (same model, same mask).
func (d *Daemon) redraw(s *serving.Model) error {
	ns, err := d.newServing(s.Input())
	if err != nil {
		return err
	}
	ns = ns.WithGradOf(s) // Input carries no gradient rows
	d.serve.mu.Lock()
	if d.serve.model.Load() != s {
		d.serve.mu.Unlock()
		return nil // changed meanwhile; the caller reloads
	}
	d.serve.model.Store(ns)
	d.serve.mu.Unlock()
	d.log.Info().Uint64("model", s.Version).Str("eval_seed_hash", serving.SeedHash(ns.Draw.Seed)).Msg("new evaluation draw")
	d.retire(s.Version, s.Draw)
	return nil
}

// retire publishes the seed of an evaluation draw that no answer will use any more (a
// new draw or a new model replaced it) on the status topic, kind "eval_draw": answers
// carried only its hash, so queries could not be chosen against it while it served.
func (d *Daemon) retire(version uint64, dr *serving.Draw) {
	if dr == nil {
		return
	}
	d.emitStatus("eval_draw", map[string]any{"model": version, "seed": dr.Seed, "seed_hash": serving.SeedHash(dr.Seed),
		"answers": dr.Used.Load()})
}
