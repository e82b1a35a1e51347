package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lineage"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// job is one refit (reason set) or background sync (reason empty): the snapshot it
// works on, mark, len(serveState.removals) when it was taken, and a refit's lineage run
// (the offsets applied and the model serving when it was taken; lineage.go).
type job struct {
	*ingest.Snapshot
	mark   int
	reason string
	run    lineage.Refit
}

// syncSnapshot selects both views' landmarks over snap by batch greedy (ingest.Select:
// the features are the point cache's own rows, not copies), outside any lock (the
// O(n q m) work), then installs the result in the pool if no point was applied since
// the snapshot (ingest.State.Adopt); otherwise the pool stays as it is (a valid bound)
// and a later sync catches up. It records view A's d_eff for the UI (refit.Deff).
func (d *Daemon) syncSnapshot(ctx context.Context, snap *job) (*ingest.Selection, error) {
	sel, err := ingest.Select(ctx, d.feat, d.pcfg, snap.IDs, snap.Entries, d.train.cache.Load())
	if err != nil {
		return nil, err
	}
	if v, ok := refit.Deff(sel, len(snap.IDs), d.pcfg.Budget.Lambda); ok {
		d.deff.Store(math.Float64bits(v))
	}
	d.train.mu.Lock()
	defer d.train.mu.Unlock()
	switch err := d.train.ingest.Adopt(snap.Version, snap.IDs, sel); {
	case err == nil:
		d.train.lastSyncN = len(snap.IDs)
		d.publishPool()
		d.emitStatus("certificate", d.certificateStatus("sync"))
	case errors.Is(err, ingest.ErrChanged):
		d.log.Debug().Msg("points changed during the sync; the pool stays stale")
	default:
		return nil, err
	}
	return sel, nil
}

// newServing builds the serving form of in under the configured serving settings (exact
// rows past query.exact_memory_bytes in d.serve.disk; a failure there is logged and the
// model answers sketched); a sketched model's evaluation draw is named by the version,
// the daemon's draw nonce and a counter, so every draw is fresh.
func (d *Daemon) newServing(in serving.Input) (*serving.Model, error) {
	s, err := serving.New(in, serving.Settings{
		Backbone: d.feat.Backbone(), H: d.cfg.Sketch.H, S: d.cfg.Sketch.S, Seed: d.cfg.Model.Seed,
		DrawName:         fmt.Sprintf("daemon/eval/%d/%d/%d", in.Version, d.serve.drawNonce, d.serve.drawCount.Add(1)),
		ExactMemoryBytes: d.cfg.Query.ExactMemoryBytes, ExactDisk: d.serve.disk, Fits: d.cfg.Fit.Fits,
		ExactRowsCap: d.cfg.Query.ExactRowsCap, StableJaccard: d.cfg.Query.StableJaccard,
	})
	if err == nil && s.ExactRowsErr != nil {
		d.log.Warn().Err(s.ExactRowsErr).Uint64("model", in.Version).Msg("exact rows on disk failed: answers use the sketched evaluation draw")
	}
	return s, err
}

// refit runs one refit from snap: fit, effects of the pending deletions, one
// transaction (model, fit statistics, audits, pending records removed, a status event),
// then the new serving model is installed with the landmarks removed since the
// snapshot masked.
func (d *Daemon) refit(ctx context.Context, snap *job) (err error) {
	if len(snap.IDs) < d.cfg.Refit.MinPoints {
		return d.auditWithoutModel(snap)
	}
	started, err := d.refitStarted(snap.run)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && started && ctx.Err() == nil {
			d.refitFailed(snap.run, err)
		}
	}()
	start := time.Now()
	var latest uint64
	err = d.store.View(func(tx *storage.ReadTx) error {
		m, ok, err := tx.LatestModel()
		if ok {
			latest = m.Version
		}
		return err
	})
	if err != nil {
		return err
	}
	// Above every version on the models topic too: replicas install only newer ones.
	version := max(latest, d.models.floor.Load()) + 1
	sel, err := d.syncSnapshot(ctx, snap)
	if err != nil {
		return err
	}
	syncSecs := time.Since(start).Seconds()
	ft, err := d.fitter.Fit(ctx, snap.Snapshot, sel, version)
	if err != nil {
		return err
	}
	refit.Effects(snap.Pending, d.serve.model.Load(), d.cfg.Audit.Random, d.cfg.Model.Seed)
	done := time.Now()
	secs := done.Sub(start).Seconds()
	sval, err := ft.StatusEvent(version, snap.reason, len(snap.Pending), secs, done)
	if err != nil {
		return err
	}
	// Only the leader audits, serves and announces; a standby's refit stores the model
	// (its state stays the leader's) and leaves the deletions pending until it adopts
	// the leader's audits of them (internal/role/standby).
	c := &refitCommit{ft: ft, latest: latest, version: version, status: sval, done: done, leading: d.leading.Load()}
	if err := d.store.Apply(func(tx *storage.Tx) error { return d.writeRefit(tx, snap, c) }); err != nil {
		return fmt.Errorf("daemon: commit model %d: %w", version, err)
	}
	d.finishRefit(snap, c, secs, syncSecs)
	return nil
}

// refitCommit is a refit's transaction: what it writes, and the audits it wrote.
type refitCommit struct {
	ft              *refit.Fitted
	latest, version uint64 // the latest stored version before the refit, and the new one
	status          []byte // the "model" status event
	done            time.Time
	leading         bool // whether this daemon led throughout, as late as the commit
	audits          []stream.Audit
	audited         []*ingest.Deletion
}

// writeRefit is the refit's transaction: the model and its fit statistics, and, while
// this daemon leads, the audits of the pending deletions of snap with a checkpoint and
// the status event. It may run more than once (a retried transaction).
func (d *Daemon) writeRefit(tx *storage.Tx, snap *job, c *refitCommit) error {
	c.audits, c.audited = c.audits[:0], c.audited[:0]
	m, ok, err := tx.LatestModel()
	if err != nil {
		return err
	}
	if ok && m.Version != c.latest {
		return fmt.Errorf("daemon: model version %d appeared during the refit", m.Version)
	}
	if err := tx.PutModel(c.ft.Model); err != nil {
		return err
	}
	if c.ft.Stats != nil {
		if err := tx.PutFitStats(*c.ft.Stats); err != nil {
			return err
		}
	}
	c.leading = c.leading && d.leading.Load() // as late as possible: a leader may have stepped down
	for _, rec := range snap.Pending {
		if !c.leading {
			break
		}
		audit, err := d.withTombstone(tx, rec)
		if err != nil {
			return err
		}
		// A deletion whose audit was adopted meanwhile (a standby that just took
		// over) is audited already.
		if existed, err := tx.DeletePending(rec.Seq); err != nil || !existed {
			if err != nil {
				return err
			}
			continue
		}
		a, err := ingest.AppendAudit(tx, d.cfg.Kafka.Topics.Audits, audit, c.ft.Serving, c.done, d.signer)
		if err != nil {
			return err
		}
		c.audits, c.audited = append(c.audits, a), append(c.audited, rec)
	}
	if len(c.audits) > 0 {
		if err := d.checkpoint(tx, c.audits[len(c.audits)-1]); err != nil {
			return err
		}
	}
	if !c.leading {
		return nil
	}
	if _, err := tx.Enqueue(d.cfg.Kafka.Topics.Status, []byte("model"), c.status); err != nil {
		return err
	}
	return d.refitCompleted(tx, snap.run, c)
}

// finishRefit follows a committed refit: the leader installs the new serving model with
// the deletions still pending masked and announces it; every role drops the audited
// deletions, publishes the pool and records the fit's baseline, counters and log line.
func (d *Daemon) finishRefit(snap *job, c *refitCommit, secs, syncSecs float64) {
	ft, version, audits, audited := c.ft, c.version, c.audits, c.audited
	if c.leading {
		// Deletions still pending (applied after the snapshot, or before a takeover) stay
		// masked in the new model too.
		d.train.mu.Lock()
		var still []string
		for _, id := range d.train.ingest.PendingIDs() {
			if !slices.ContainsFunc(audited, func(r *ingest.Deletion) bool { return r.ID == id }) {
				still = append(still, id)
			}
		}
		d.train.mu.Unlock()
		d.install(ft.Serving.WithMask(still), snap.mark)
		d.serveStored(d.train.cache.Load().IDs()) // the points stored since the snapshot
		d.models.pub.Kick()
	}
	d.train.mu.Lock()
	d.train.ingest.DropPending(audited)
	d.publishPool()
	d.train.lastFit = ft.Baseline()
	d.train.mu.Unlock()
	ph := map[string]float64{"sync": syncSecs, "blocks": ft.Seconds["blocks"], "init": ft.Seconds["kernel"] + ft.Seconds["init"],
		"fit": ft.Seconds["fit"], "reseed": ft.Seconds["reseed"], "reseed_beside": ft.Seconds["reseed_beside"], "serving": ft.Seconds["serving"]}
	d.refits.last.Store(&refitRecord{secs: secs, phases: ph})
	d.refits.count.Add(1)
	d.metrics.ObserveRefit(secs, nil)
	for _, rec := range audited {
		d.metrics.ObserveAudit(time.Since(rec.Applied).Seconds())
	}
	ev := d.log.Info().Uint64("model", version).Str("model_id", ft.Meta.ID).Int("points", ft.Meta.Points).
		Int("landmarks", len(ft.Model.Landmarks)).Str("reason", snap.reason).Float64("seconds", secs).
		Int("audits", len(audits)).Str("selected_by", ft.Meta.SelectedBy).Int("epochs", ft.Meta.Epochs).Int("best_epoch", ft.Meta.BestEpoch)
	for _, k := range []string{"sync", "blocks", "init", "fit", "reseed", "reseed_beside", "serving"} {
		ev = ev.Float64(k+"_seconds", ph[k])
	}
	ev.Msg("model installed")
}
