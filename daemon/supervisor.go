package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// refitRetry is how long the supervisor waits after a failed refit before trying again.
const refitRetry = 5 * time.Second

// runRefits is the refit supervisor: every 100 ms, or when the train handler pokes it,
// it starts a refit when a drift trigger fires (refitReason), or else a background pool
// sync when one is due (syncDue). Both take a snapshot under the ingest lock (pointers
// to the cached points, O(n)) and do their O(n q m) work without it, on this goroutine,
// so ingestion and queries never wait for them; one runs at a time.
func (d *Daemon) runRefits(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.kick:
		}
		snap, err := d.nextJob(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if snap == nil {
			continue
		}
		start := time.Now()
		if snap.reason == "" {
			_, err = d.syncSnapshot(ctx, snap)
		} else {
			d.refitRunning.Store(true)
			err = d.refit(ctx, snap)
			d.refitRunning.Store(false)
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			if snap.reason != "" {
				d.metrics.ObserveRefit(time.Since(start).Seconds(), context.Canceled)
			}
			return nil
		}
		if errors.Is(err, ErrBroken) {
			continue // the train goroutine rebuilds the ingest
		}
		if snap.reason != "" {
			d.metrics.ObserveRefit(time.Since(start).Seconds(), err)
		}
		d.log.Error().Err(err).Str("reason", snap.reason).Dur("retry_in", refitRetry).Msg("refit or sync failed")
		d.mu.Lock()
		d.changes = max(d.changes, 1)
		d.retryAt = time.Now().Add(refitRetry)
		d.mu.Unlock()
	}
}

// nextJob returns the snapshot of the next refit (reason set) or background sync
// (reason empty), or nil when nothing is due.
func (d *Daemon) nextJob(ctx context.Context) (*snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.ingest
	if time.Now().Before(d.retryAt) {
		return nil, nil
	}
	reason := d.refitReason(ctx)
	if reason == "" && !d.syncDue(ctx) {
		return nil, nil
	}
	snap, err := in.snapshot()
	if err != nil {
		return nil, err
	}
	d.servMu.Lock()
	snap.mark = len(d.removals)
	d.servMu.Unlock()
	snap.reason = reason
	if reason != "" {
		d.emitStatus("drift", map[string]any{"reason": reason, "changes": d.changes, "points": len(snap.ids),
			"pending_deletions": len(snap.pending), "residual_ratio": ratioOf(snap.residual),
			"residual_ratio_at_last_fit": d.lastFit.ratio})
		d.changes = 0
	}
	return snap, nil
}

// syncDue reports whether a background sync should run now (d.mu held): the pool is
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
	in := d.ingest
	if !in.SyncDue() {
		return false
	}
	a, b := in.Certificates()
	if !a.Exact || !b.Exact {
		return !(d.cfg.Refit.OnDelete && len(in.pending) > 0)
	}
	return in.Len() >= 2*max(d.lastSyncN, 1) && d.caughtUp(ctx)
}

// certificateStatus is the data of a "certificate" status event: the pool's residual
// certificate per view (d.mu held).
func (d *Daemon) certificateStatus(why string) map[string]any {
	r := d.ingest.residuals()
	return map[string]any{"why": why, "points": d.ingest.Len(),
		"residual": [2]certify.Residual{residualOf(r[0]), residualOf(r[1])}, "stale": [2]bool{r[0].Stale, r[1].Stale}}
}

// emitStatus commits one cairn.status event through the outbox; a failure is logged,
// not fatal (status events are informational).
func (d *Daemon) emitStatus(kind string, data any) {
	err := d.store.Apply(func(tx *storage.Tx) error { return statusEvent(tx, d.cfg.Kafka.Topics.Status, kind, data) })
	if err != nil {
		d.log.Warn().Err(err).Str("kind", kind).Msg("status event not written")
	}
}

// refitReason names the drift trigger of DESIGN.md section 4 that fires now, or "".
// d.mu is held.
func (d *Daemon) refitReason(ctx context.Context) string {
	r, in, now := d.cfg.Refit, d.ingest, time.Now()
	if n := len(in.pending); n > 0 && r.OnDelete && now.Sub(in.pending[n-1].Applied) >= r.DeleteDebounce {
		return "deletion" // deletions within the debounce share this refit
	}
	if in.Len() < r.MinPoints {
		return ""
	}
	// Idle means caught up, not merely paused (a sync holds ingestion for a while).
	idle := r.Idle > 0 && d.changes > 0 && now.Sub(d.lastTrain) >= r.Idle && d.caughtUp(ctx)
	many := r.PointsChanged > 0 && d.changes >= r.PointsChanged
	if d.serving.Load() == nil {
		if idle || many {
			return "first_fit"
		}
		return ""
	}
	if many {
		return "points_changed"
	}
	if r.PoolChangeFraction > 0 && d.changes > 0 {
		cur := in.Landmarks()
		changed := 0
		for _, id := range cur {
			if !contains(d.lastFit.landmarks, id) {
				changed++
			}
		}
		if len(cur) > 0 && float64(changed) >= r.PoolChangeFraction*float64(len(cur)) {
			return "pool_changed"
		}
	}
	if r.ResidualIncrease > 0 && d.changes > 0 && d.lastFit.ratio > 0 &&
		ratioOf(in.residuals())/d.lastFit.ratio-1 >= r.ResidualIncrease {
		return "residual_increase"
	}
	if idle {
		return "idle"
	}
	return ""
}

// caughtUp reports whether every message of the training topic has been applied:
// the broker's end offsets against the ingest's applied offsets. d.mu is held. A
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
		last, ok := d.ingest.last[partition{topic, part}]
		if end > 0 && (!ok || last+1 < end) {
			return false
		}
	}
	return true
}

// auditWithoutModel answers pending deletions when too few points are left to fit:
// the audits say model_after 0 and the serving model is withdrawn.
func (d *Daemon) auditWithoutModel(snap *snapshot) error {
	done := time.Now()
	err := d.store.Apply(func(tx *storage.Tx) error {
		for _, rec := range snap.pending {
			if _, err := appendAudit(tx, d.cfg.Kafka.Topics.Audits, rec, nil, done); err != nil {
				return err
			}
			if _, err := tx.DeletePending(rec.Seq); err != nil {
				return err
			}
		}
		return statusEvent(tx, d.cfg.Kafka.Topics.Status, "model", map[string]any{
			"version": 0, "points": len(snap.ids), "reason": "fewer stored points than refit.min_points: no model"})
	})
	if err != nil {
		return err
	}
	d.servMu.Lock()
	d.serving.Store(nil)
	d.removals = d.removals[:0]
	d.servMu.Unlock()
	d.metrics.SetModel(0, 0)
	d.mu.Lock()
	d.ingest.dropPending(snap.pending)
	d.publishPool()
	d.mu.Unlock()
	return nil
}

// loadServing rebuilds the serving form of the latest stored model after a restart,
// with the landmarks no longer stored masked (restoreModel), and returns it with the
// hash of the points it was fitted on (nil, "" without a model). The audit blocks are
// rebuilt from the points stored now by the same rules as a refit.
func (d *Daemon) loadServing() (*serving, string, error) {
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
	cache := d.cache.Load()
	rm, err := restoreModel(d.feat, m, func(id string) ([]float64, bool) {
		if e := cache.get(id); e != nil {
			return e.x, true
		}
		return nil, false
	})
	if err != nil {
		return nil, "", err
	}
	meta, mm := rm.meta, len(m.Landmarks)
	si := servingInput{version: m.Version, id: meta.ID, points: meta.Points, landmarkIDs: m.Landmarks,
		views: rm.views, missing: rm.missing, a: rm.a, b: m.B.Data, scale: meta.KernelScale,
		residual: meta.Residual, landmarkX: rm.xs, omega: rm.omega}
	if haveFS && len(fs.Mean) == mm {
		si.omegaMean = fs.Mean
		if len(fs.Var) == mm {
			si.tau2 = fs.Var
		}
	}
	var lf []float64
	for l, id := range m.Landmarks {
		if rm.missing[l] {
			lf = append(lf, make([]float64, d.feat.Dim())...)
			continue
		}
		row, err := featureRows(context.Background(), d.feat, []string{id}, []*cached{cache.get(id)}, rm.view(l))
		if err != nil {
			return nil, "", err
		}
		lf = append(lf, row...)
	}
	// Audit blocks from the points stored now, as a refit picks them.
	ids := cache.ids()
	snap := &snapshot{ids: ids, entries: make([]*cached, len(ids))}
	for i, id := range ids {
		snap.entries[i] = cache.get(id)
	}
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
			rid, ren := pick(ids, snap.entries, rows)
			g, _ := featureRows(context.Background(), d.feat, rid, ren, 0) // no ctx: cannot fail
			k := mat.NewDense(len(rows), mm, nil)
			k.Mul(mat.NewDense(len(rows), d.feat.Dim(), g), lm.T())
			k.Scale(meta.KernelScale, k)
			return k
		}
		si.kRef, si.kTest = against(refRows), against(testRows)
		si.refLabels = labelsOf(snap.entries, refRows)
	}
	s, err := d.newServing(si)
	if err != nil {
		return nil, "", err
	}
	d.log.Info().Uint64("model", m.Version).Str("model_id", meta.ID).Int("masked", s.maskedCount()).Msg("model restored")
	return s, meta.PointsHash, nil
}

// restoredModel is a stored model version decoded for serving: its fit metadata, Ã, and
// per landmark in model row order its view ('A' or 'B'), its augmented input (xs, M×D)
// and ω in raw kernel units. A landmark whose point is no longer stored is missing: its
// row of xs stays zero and it is masked from the start.
type restoredModel struct {
	meta    modelMeta
	a       *mat.Dense
	omega   []float64
	views   []byte
	xs      []float64
	missing []bool
}

// view is landmark l's view index (0 for 'A', 1 for 'B').
func (r *restoredModel) view(l int) int {
	if r.views[l] == 'B' {
		return 1
	}
	return 0
}

// restoreModel decodes the stored model m and rebuilds its landmarks from the points
// stored now (point returns a stored point's raw input): the first meta.ViewA rows are
// view A's pivots, the rest view B's; a landmark's input is the augmented view of its
// stored point; ω_ℓ = kernel_scale·‖Ã_ℓ − Ã_{0,ℓ}‖₂. A landmark whose id point does not
// know is missing. This is the one rule for masks rebuilt from storage, used by a
// restart (loadServing) and by exports of stored versions (ExportStored): a deletion
// removes the point from the points bucket in the same transaction that writes its
// pending deletion record, so "not stored" covers deletions audited and pending alike.
func restoreModel(f *pipeline.Features, m storage.Model, point func(id string) ([]float64, bool)) (*restoredModel, error) {
	var meta modelMeta
	if err := json.Unmarshal(m.Meta, &meta); err != nil {
		return nil, fmt.Errorf("%w: model %d meta: %w", ErrPoolState, m.Version, err)
	}
	mm := len(m.Landmarks)
	if m.A.Rows != mm || m.A0.Rows != mm || m.A0.Cols != m.A.Cols || m.B.Rows != 1 || m.B.Cols != m.A.Cols ||
		meta.ViewA < 0 || meta.ViewA > mm || !(meta.KernelScale > 0) {
		return nil, fmt.Errorf("%w: model %d has inconsistent shapes", ErrPoolState, m.Version)
	}
	a := mat.NewDense(m.A.Rows, m.A.Cols, m.A.Data)
	a0 := mat.NewDense(m.A0.Rows, m.A0.Cols, m.A0.Data)
	dim := f.InputDim()
	r := &restoredModel{meta: meta, a: a, omega: scaled(fit.Omega(a, a0), meta.KernelScale),
		views: make([]byte, mm), xs: make([]float64, mm*dim), missing: make([]bool, mm)}
	for l, id := range m.Landmarks {
		v := 0
		r.views[l] = 'A'
		if l >= meta.ViewA {
			v, r.views[l] = 1, 'B'
		}
		x, ok := point(id)
		if !ok {
			r.missing[l] = true
			continue
		}
		if len(x) != dim {
			return nil, fmt.Errorf("%w: model %d landmark %q has %d inputs, want %d", ErrPoolState, m.Version, id, len(x), dim)
		}
		f.ViewTo(r.xs[l*dim:(l+1)*dim], x, id, v)
	}
	return r, nil
}
