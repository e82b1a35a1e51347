package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// runRefits is the refit supervisor: every 100 ms, or when the train handler pokes it,
// it starts a refit when a drift trigger fires (refitReason), or else a background pool
// sync when one is due (syncDue). Both take a snapshot under the ingest lock (pointers
// to the cached points, O(n)) and do their O(n q m) work without it, on this goroutine,
// so ingestion and queries never wait for them; one runs at a time. A failure (a commit
// the store refused, a broken ingest, which it rebuilds) never ends it: the job is
// retried after a doubling wait (faults.go).
func (d *Daemon) runRefits(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var b fault.Backoff
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.refits.kick:
		}
		reason, err := d.runJob(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			b.Reset()
			d.faults.Recovered("refit")
			continue
		}
		wait := b.Next()
		d.faults.Fail("refit", fmt.Errorf("%s: %w", cmp.Or(reason, "sync"), err), wait)
		if errors.Is(err, ErrBroken) {
			if rerr := d.rebuildIngest(); rerr != nil {
				d.faults.Fail("refit", rerr, wait)
			}
		}
		d.train.mu.Lock()
		d.train.changes = max(d.train.changes, 1)
		d.train.retryAt = time.Now().Add(wait)
		d.train.mu.Unlock()
	}
}

// runJob runs the next refit or sync, if one is due, and returns its reason ("" for a
// sync) and error.
func (d *Daemon) runJob(ctx context.Context) (string, error) {
	snap, err := d.nextJob(ctx)
	if err != nil || snap == nil {
		return "", err
	}
	start := time.Now()
	if snap.reason == "" {
		_, err = d.syncSnapshot(ctx, snap)
		return "", err
	}
	d.refits.running.Store(true)
	err = d.refit(ctx, snap)
	d.refits.running.Store(false)
	if err != nil {
		if ctx.Err() != nil {
			err = context.Canceled
		}
		d.metrics.ObserveRefit(time.Since(start).Seconds(), err)
	}
	return snap.reason, err
}

// nextJob returns the snapshot of the next refit (reason set) or background sync
// (reason empty), or nil when nothing is due.
func (d *Daemon) nextJob(ctx context.Context) (*job, error) {
	d.train.mu.Lock()
	defer d.train.mu.Unlock()
	in := d.train.ingest
	if time.Now().Before(d.train.retryAt) {
		return nil, nil
	}
	reason := d.refitReason(ctx)
	if reason == "" && !d.syncDue(ctx) {
		return nil, nil
	}
	s, err := in.Snapshot()
	if err != nil {
		return nil, err
	}
	snap := &job{Snapshot: s, reason: reason}
	d.serve.mu.Lock()
	snap.mark = len(d.serve.removals)
	d.serve.mu.Unlock()
	if reason != "" {
		d.emitStatus("drift", map[string]any{"reason": reason, "changes": d.train.changes, "points": len(snap.IDs),
			"pending_deletions": len(snap.Pending), "residual_ratio": ratioOf(snap.Residual),
			"residual_ratio_at_last_fit": d.train.lastFit.ratio})
		d.train.changes = 0
	}
	return snap, nil
}

// syncDue reports whether a background sync should run now (d.train.mu held): the pool is
// inexact (a landmark was deleted) or stale over pool.sync_stale_fraction of its budget
// (Ingest.SyncDue), and either a landmark deletion made it inexact with no deletion
// refit pending (that refit syncs anyway), or the points have doubled since the last
// sync and the training topic is caught up. This schedule is our choice: while a pool
// fills, nearly every insert displaces a pivot, and syncing at every threshold crossing
// would cost O(n q m) per batch; doubling keeps the total O(n q m), and waiting until
// the backlog is applied keeps those cores for ingestion (measured: background syncs
// during a 2,000-point burst halved the ingest rate). Between syncs the certificate is
// a valid bound that says it is one, and every refit syncs.
func (d *Daemon) syncDue(ctx context.Context) bool {
	in := d.train.ingest
	if !in.SyncDue() {
		return false
	}
	a, b := in.Certificates()
	if !a.Exact || !b.Exact {
		return !(d.cfg.Refit.OnDelete && in.PendingCount() > 0)
	}
	return in.Len() >= 2*max(d.train.lastSyncN, 1) && d.caughtUp(ctx)
}

// certificateStatus is the data of a "certificate" status event: the pool's residual
// certificate per view (d.train.mu held).
func (d *Daemon) certificateStatus(why string) map[string]any {
	r := d.train.ingest.Residuals()
	return map[string]any{"why": why, "points": d.train.ingest.Len(),
		"residual": [2]certify.Residual{serving.ResidualOf(r[0]), serving.ResidualOf(r[1])}, "stale": [2]bool{r[0].Stale, r[1].Stale}}
}

// emitStatus commits one cairn.status event through the outbox; a failure is logged,
// not fatal (status events are informational).
func (d *Daemon) emitStatus(kind string, data any) {
	if d.store == nil { // a replica: no outbox, written at once
		d.emitDirect(kind, data)
		return
	}
	if !d.leading.Load() {
		return // a standby publishes nothing
	}
	err := d.store.Apply(func(tx *storage.Tx) error { return statusEvent(tx, d.cfg.Kafka.Topics.Status, kind, data) })
	if err != nil {
		d.log.Warn().Err(err).Str("kind", kind).Msg("status event not written")
	}
}

// refitReason names the drift trigger of DESIGN.md section 4 that fires now, or "".
// d.train.mu is held.
func (d *Daemon) refitReason(ctx context.Context) string {
	r, in, now := d.cfg.Refit, d.train.ingest, time.Now()
	// Deletions are the leader's to audit: a standby leaves them to the leader's
	// refit (its own state follows through the other triggers).
	if last := in.LastPending(); last != nil && r.OnDelete && d.leading.Load() && now.Sub(last.Applied) >= r.DeleteDebounce {
		return "deletion" // deletions within the debounce share this refit
	}
	if in.Len() < r.MinPoints {
		return ""
	}
	// Idle means caught up, not merely paused (a sync holds ingestion for a while).
	idle := r.Idle > 0 && d.train.changes > 0 && now.Sub(d.train.lastTrain) >= r.Idle && d.caughtUp(ctx)
	many := r.PointsChanged > 0 && d.train.changes >= r.PointsChanged
	if d.serve.model.Load() == nil {
		if idle || many {
			return "first_fit"
		}
		return ""
	}
	if many {
		return "points_changed"
	}
	if r.PoolChangeFraction > 0 && d.train.changes > 0 {
		cur := in.Landmarks()
		changed := 0
		for _, id := range cur {
			if !slices.Contains(d.train.lastFit.landmarks, id) {
				changed++
			}
		}
		if len(cur) > 0 && float64(changed) >= r.PoolChangeFraction*float64(len(cur)) {
			return "pool_changed"
		}
	}
	if r.ResidualIncrease > 0 && d.train.changes > 0 && d.train.lastFit.ratio > 0 &&
		ratioOf(in.Residuals())/d.train.lastFit.ratio-1 >= r.ResidualIncrease {
		return "residual_increase"
	}
	if idle {
		return "idle"
	}
	return ""
}

// caughtUp reports whether every message of the training topic has been applied:
// the broker's end offsets against the ingest's applied offsets. d.train.mu is held. A
// broker that does not answer counts as not caught up.
func (d *Daemon) caughtUp(ctx context.Context) bool {
	topic := d.cfg.Kafka.Topics.Train
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := stream.EndOffsets(lctx, d.kafka, topic)
	if err != nil {
		return false
	}
	for part, end := range ends {
		last, ok := d.train.ingest.Applied(topic, part)
		if end > 0 && (!ok || last+1 < end) {
			return false
		}
	}
	return true
}

// withTombstone is rec as its audit in tx states it: with where its tombstone landed
// (ingest.Outbox.TombstoneOf) when rec is of a stored id and does not say yet. rec is
// not modified, so that a transaction that fails and runs again looks again.
func (d *Daemon) withTombstone(tx *storage.Tx, rec *ingest.Deletion) (*ingest.Deletion, error) {
	if !rec.Known || rec.Tombstone != nil {
		return rec, nil
	}
	t, err := d.box.TombstoneOf(tx, rec)
	if err != nil {
		return nil, err
	}
	c := *rec
	c.Tombstone = t
	return &c, nil
}

// auditWithoutModel answers pending deletions when too few points are left to fit:
// the audits say model_after 0 and the serving model is withdrawn.
func (d *Daemon) auditWithoutModel(snap *job) error {
	if !d.leading.Load() {
		return nil // a standby adopts the leader's audits (adopt.go)
	}
	done := time.Now()
	err := d.store.Apply(func(tx *storage.Tx) error {
		var last stream.Audit
		for _, rec := range snap.Pending {
			audit, err := d.withTombstone(tx, rec)
			if err != nil {
				return err
			}
			a, err := ingest.AppendAudit(tx, d.cfg.Kafka.Topics.Audits, audit, nil, done, d.signer)
			if err != nil {
				return err
			}
			last = a
			if _, err := tx.DeletePending(rec.Seq); err != nil {
				return err
			}
		}
		if last.Seq > 0 {
			if err := d.checkpoint(tx, last); err != nil {
				return err
			}
		}
		return statusEvent(tx, d.cfg.Kafka.Topics.Status, "model", map[string]any{
			"version": 0, "points": len(snap.IDs), "reason": "fewer stored points than refit.min_points: no model"})
	})
	if err != nil {
		return err
	}
	d.serve.mu.Lock()
	d.serve.model.Store(nil)
	d.serve.removals = d.serve.removals[:0]
	d.serve.mu.Unlock()
	d.metrics.SetModel(0, 0)
	d.train.mu.Lock()
	d.train.ingest.DropPending(snap.Pending)
	d.publishPool()
	d.train.mu.Unlock()
	return nil
}

// loadServing rebuilds the serving form of the latest stored model after a restart,
// with the landmarks no longer stored, or whose input changed since the fit, masked
// (serving.Restore, as the live daemon masked them), and returns it with the
// hash of the points it was fitted on (nil, "" without a model). The audit blocks are
// rebuilt from the points stored now by the same rules as a refit.
func (d *Daemon) loadServing() (*serving.Model, string, error) {
	var (
		m      storage.Model
		ok     bool
		fs     storage.FitStats
		haveFS bool
	)
	err := d.store.View(func(tx *storage.ReadTx) error {
		var err error
		if m, ok, err = tx.LatestModel(); err != nil || !ok {
			return err
		}
		fs, haveFS, err = tx.FitStats(m.Version)
		return err
	})
	if err != nil || !ok {
		return nil, "", err
	}
	cache := d.train.cache.Load()
	rm, err := serving.Restore(d.feat, m, func(id string) ([]float64, bool) {
		if e := cache.Get(id); e != nil {
			return e.X, true
		}
		return nil, false
	})
	if err != nil {
		return nil, "", err
	}
	meta, mm := rm.Meta, len(m.Landmarks)
	si := serving.Input{Version: m.Version, ID: meta.ID, Points: meta.Points, LandmarkIDs: m.Landmarks,
		Views: rm.Views, Missing: rm.Missing, A: rm.A, B: m.B.Data, Scale: meta.KernelScale,
		Residual: meta.Residual, LandmarkX: rm.Xs, Omega: rm.Omega, PoolStability: meta.PoolStability()}
	if haveFS && len(fs.Mean) == mm {
		si.OmegaMean = fs.Mean
		if len(fs.Var) == mm {
			si.Tau2 = fs.Var
		}
	}
	var lf []float64
	for l, id := range m.Landmarks {
		if rm.Missing[l] {
			lf = append(lf, make([]float64, d.feat.Dim())...)
			continue
		}
		row, err := ingest.FeatureRows(context.Background(), d.feat, []string{id}, []*ingest.Entry{cache.Get(id)}, rm.View(l))
		if err != nil {
			return nil, "", err
		}
		for _, x := range row[0] {
			lf = append(lf, float64(x))
		}
	}
	// Audit blocks from the points stored now, as a refit picks them.
	snap := ingest.SnapshotOf(cache)
	ids := snap.IDs
	var tr, va []int
	for i, id := range ids {
		if isVal(d.cfg.Model.Seed, id, d.cfg.Fit.ValFraction) {
			va = append(va, i)
		} else {
			tr = append(tr, i)
		}
	}
	refRows := auditRows(d.cfg.Model.Seed, "ref", snap, tr, d.cfg.Audit.Reference)
	testRows := auditRows(d.cfg.Model.Seed, "test", snap, va, d.cfg.Audit.Test)
	if len(refRows) >= 2 && len(testRows) >= 1 {
		lm := mat.NewDense(mm, d.feat.Dim(), lf)
		against := func(rows []int) *mat.Dense {
			rid, ren := pick(ids, snap.Entries, rows)
			g, _ := ingest.FeatureRows(context.Background(), d.feat, rid, ren, 0) // no ctx: cannot fail
			k := mat.NewDense(len(rows), mm, nil)
			pipeline.KernelTo(k, g, lm)
			k.Scale(meta.KernelScale, k)
			return k
		}
		si.KRef, si.KTest = against(refRows), against(testRows)
		si.RefLabels = labelsOf(snap.Entries, refRows)
	}
	s, err := d.newServing(si)
	if err != nil {
		return nil, "", err
	}
	d.log.Info().Uint64("model", m.Version).Str("model_id", meta.ID).Int("masked", s.MaskedCount()).Msg("model restored")
	return s, meta.PointsHash, nil
}
