package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/rng"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// job is one refit (reason set) or background sync (reason empty): the snapshot it
// works on, and mark, len(serveState.removals) when it was taken.
type job struct {
	*ingest.Snapshot
	mark   int
	reason string
}

// fitted is a refit's outcome before it is committed.
type fitted struct {
	model storage.Model
	stats *storage.FitStats
	serv  *serving.Model
	meta  serving.Meta
	// seconds is the wall time of fitSnapshot's phases: "blocks" (the kernel blocks),
	// "kernel" and "init" (pipeline.Started), "fit" (the Adam fits), "serving".
	seconds map[string]float64
}

// isVal reports whether the point id is held out for checkpoint selection: a seeded
// hash of the id below frac, so a point's role never depends on arrival order.
func isVal(seed uint64, id string, frac float64) bool {
	return float64(rng.Seed(seed, "daemon/val/"+id)>>11)/(1<<53) < frac
}

// synced is batch greedy pivoted Cholesky of both views over a snapshot
// (ingest.Select, computed without any lock): the features g (one float32 row per point
// and view, in snapshot order: the point cache's own rows, not copies), the budgets and
// the results.
type synced struct {
	*ingest.Selection
}

// residual is the exact certificate of view v's greedy landmarks over the snapshot, with
// the bound for the unrounded features (certify.RoundingBound from the greedy factor).
func (sy *synced) residual(v int) (certify.Residual, error) {
	r := sy.Res[v]
	c := certify.Residual{TraceR: r.Trace, TraceK: r.Trace, Exact: true}
	if len(r.ResidualTrace) > 0 {
		c.TraceR = r.ResidualTrace[len(r.ResidualTrace)-1]
	}
	b, err := certify.RoundingBound(c.TraceR, c.TraceK, r.Factor, r.Greedy, certify.Float32Unit)
	if !math.IsInf(b, 0) { // a singular factor bounds nothing: the field stays unset
		c.UnroundedBound = b
	}
	return c, err
}

// syncSnapshot selects both views' landmarks over snap by batch greedy, outside any
// lock (the O(n q m) work, DESIGN.md section 4), then installs the result in the pool
// if no point was applied since the snapshot (Ingest.adopt); otherwise the pool stays
// as it is (a valid bound) and a later sync catches up.
func (d *Daemon) syncSnapshot(ctx context.Context, snap *job) (*synced, error) {
	sel, err := ingest.Select(ctx, d.feat, d.pcfg, snap.IDs, snap.Entries, d.train.cache.Load())
	if err != nil {
		return nil, err
	}
	sy := &synced{sel}
	d.recordDeff(sel, len(snap.IDs))
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
	return sy, nil
}

// landmarks lists the synced pivots of both views in model row order (view A's, then
// view B's): their ids, views ('A' or 'B'), snapshot rows per view and fit-draw features
// L (M×q, row-major).
func (sy *synced) landmarks(ids []string, q int) (lids []string, views []byte, lrows [2][]int, lf []float64) {
	for v := range 2 {
		for _, r := range sy.Res[v].Pivots {
			lids = append(lids, ids[r])
			views = append(views, "AB"[v])
			lrows[v] = append(lrows[v], r)
			for _, x := range sy.G[v][r] {
				lf = append(lf, float64(x))
			}
		}
	}
	return lids, views, lrows, lf
}

// fitSnapshot fits model version on snap (paper Alg. cairn-stage2, as cairnctl fit
// does): the greedy landmarks of sy (view A's pivots, then view B's), kernel blocks of
// the training points' two views against them, validation blocks of the held-out
// points, and the fit recipe (pipeline.RecipeOf, the same as cairnctl fit's) on
// all cores. It then builds the serving form: the evaluation draw and the audit
// blocks.
func (d *Daemon) fitSnapshot(ctx context.Context, snap *job, sy *synced, version uint64) (*fitted, error) {
	cfg, f := d.cfg, d.feat
	seed := cfg.Model.Seed
	q := f.Dim()
	index := make(map[string]int, len(snap.IDs))
	for i, id := range snap.IDs {
		index[id] = i
	}
	t0 := time.Now()
	lids, views, lrows, lf := sy.landmarks(snap.IDs, q)
	mm := len(lids)
	if mm < 2 {
		return nil, fmt.Errorf("daemon: refit: %d landmarks, need at least 2", mm)
	}
	lm := mat.NewDense(mm, q, lf)

	tr, va, err := splitVal(seed, snap.IDs, cfg.Fit.ValFraction)
	if err != nil {
		return nil, err
	}
	prob := fitProblem(sy, snap, tr, va, lm)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	blocks := time.Since(t0).Seconds()

	rec, err := pipeline.RecipeOf(cfg.Fit)
	if err != nil {
		return nil, err
	}
	ft, err := rec.Run(ctx, prob, seed)
	if err != nil {
		return nil, err
	}
	rep, scale := ft.Fits, ft.KernelScale
	f0 := rep.Fits[0]

	var res [2]certify.Residual
	for v := range res {
		if res[v], err = sy.residual(v); err != nil {
			return nil, err
		}
	}
	out := &fitted{seconds: map[string]float64{"blocks": blocks}}
	for _, ph := range []string{"kernel", "init", "fit"} {
		out.seconds[ph] = ft.Seconds[ph]
	}
	t1 := time.Now()
	reseed, err := d.measureReseed(ctx, snap, sy)
	if err != nil {
		return nil, err
	}
	out.seconds["reseed"] = time.Since(t1).Seconds()
	t1 = time.Now()
	out.meta = serving.Meta{
		ViewA: len(lrows[0]), KernelScale: scale, Points: len(snap.IDs), Train: len(tr), Val: len(va),
		Loss: rec.Loss.String(), Init: rec.Init.String(), Fits: cfg.Fit.Fits, SelectedBy: f0.SelectedBy,
		BestEpoch: f0.BestEpoch, Epochs: f0.Epochs,
		Residual: res,
		ID:       serving.ModelID(lids, views, f0.A, f0.B), PointsHash: ingest.PointsHash(snap.IDs, snap.Entries),
		Reseed: reseed, Inputs: make([]string, len(lids)),
	}
	for l, id := range lids {
		out.meta.Inputs[l] = serving.InputHash(snap.Entries[index[id]].X)
	}
	meta, err := json.Marshal(out.meta)
	if err != nil {
		return nil, err
	}
	out.model = storage.Model{Version: version, Landmarks: lids, A: dense(f0.A), A0: dense(f0.A0),
		B: storage.Matrix{Rows: 1, Cols: len(f0.B), Data: slices.Clone(f0.B)}, Meta: meta}
	si := serving.Input{
		Version: version, Points: len(snap.IDs), LandmarkIDs: lids, Views: views,
		A: f0.A, B: f0.B, Scale: scale, Residual: out.meta.Residual, ID: out.meta.ID,
		LandmarkX: make([]float64, mm*f.InputDim()), PoolStability: out.meta.PoolStability(),
	}
	d.landmarkViewsTo(si.LandmarkX, snap, index, lids, views)
	si.Omega = serving.Scaled(f0.Omega, scale)
	si.OmegaMean = serving.Scaled(rep.OmegaMean, scale)
	if rep.OmegaVar != nil {
		si.Tau2 = serving.Scaled(rep.OmegaVar, scale*scale)
		out.stats = &storage.FitStats{Version: version, Seeds: rep.Seeds, Mean: si.OmegaMean, Var: si.Tau2}
	}
	// Audit blocks: labelled training rows as the reference set, labelled held-out
	// rows as test points, each the first ones in a seeded id order.
	refRows := auditRows(seed, "ref", snap.Snapshot, tr, cfg.Audit.Reference)
	testRows := auditRows(seed, "test", snap.Snapshot, va, cfg.Audit.Test)
	if len(refRows) >= 2 && len(testRows) >= 1 {
		si.KRef = rowsOf(prob.KA, tr, refRows)
		si.KTest = rowsOf(prob.Val.K, va, testRows)
		si.RefLabels = labelsOf(snap.Entries, refRows)
	}
	if out.serv, err = d.newServing(si); err != nil {
		return nil, err
	}
	out.seconds["serving"] = time.Since(t1).Seconds()
	return out, nil
}

// fitProblem is the fit's problem for the landmarks lm (M×q, the synced pivots' fit-draw
// features): kernel blocks of the training rows' two views against them, straight from
// the cached float32 rows (no copy of the features), K_mm, and the validation blocks and
// labels when there are validation rows.
func fitProblem(sy *synced, snap *job, tr, va []int, lm *mat.Dense) *fit.Problem {
	mm, _ := lm.Dims()
	against := func(rows []int, v int) *mat.Dense {
		g := make([][]float32, len(rows))
		for i, r := range rows {
			g[i] = sy.G[v][r]
		}
		k := mat.NewDense(len(rows), mm, nil)
		pipeline.KernelTo(k, g, lm)
		return k
	}
	trIDs, _ := pick(snap.IDs, snap.Entries, tr)
	prob := &fit.Problem{KA: against(tr, 0), KB: against(tr, 1), IDs: trIDs, Kmm: mat.NewDense(mm, mm, nil)}
	prob.Kmm.Mul(lm, lm.T())
	if va != nil {
		prob.Val.K, prob.Val.KB = against(va, 0), against(va, 1)
		prob.Val.Labels = labelsOf(snap.Entries, va)
	}
	return prob
}

// splitVal splits the snapshot's rows into training and validation rows by the seeded
// id hash (isVal): fewer than two validation rows join the training rows; fewer than two
// training rows is an error.
func splitVal(seed uint64, ids []string, frac float64) (tr, va []int, err error) {
	for i, id := range ids {
		if isVal(seed, id, frac) {
			va = append(va, i)
		} else {
			tr = append(tr, i)
		}
	}
	if len(va) < 2 {
		tr, va = append(tr, va...), nil
		sort.Ints(tr)
	}
	if len(tr) < 2 {
		return nil, nil, fmt.Errorf("daemon: refit: %d training points, need at least 2", len(tr))
	}
	return tr, va, nil
}

// landmarkViewsTo writes the augmented input of every landmark (lids, views in model row
// order) into dst (M×D), from the snapshot's entries (index: id → snapshot row).
func (d *Daemon) landmarkViewsTo(dst []float64, snap *job, index map[string]int, lids []string, views []byte) {
	in := d.feat.InputDim()
	for l, id := range lids {
		v := 0
		if views[l] == 'B' {
			v = 1
		}
		d.feat.ViewTo(dst[l*in:(l+1)*in], snap.Entries[index[id]].X, id, v)
	}
}

// measureReseed measures the pool part of the answers' stability for a model fitted on
// snap with selection sy (ingest.MeasureReseed with query.reseed_queries queries and
// the top query.k), or returns nil when it is off or could not be measured.
func (d *Daemon) measureReseed(ctx context.Context, snap *job, sy *synced) (*serving.ReseedMeta, error) {
	q := d.cfg.Query
	if q.ReseedQueries == 0 {
		return nil, nil
	}
	rs, err := ingest.MeasureReseed(ctx, d.feat, d.pcfg, d.cfg.Model.Seed, snap.Snapshot, sy.Selection, q.K, q.ReseedQueries, q.ExactMemoryBytes)
	if err != nil || !rs.Measured {
		return nil, err
	}
	d.log.Info().Float64("jaccard", rs.Jaccard).Float64("pool_jaccard", rs.PoolJaccard).Int("queries", rs.Queries).Msg("reseed stability")
	return &serving.ReseedMeta{Jaccard: rs.Jaccard, PoolJaccard: rs.PoolJaccard, Seed: rs.Seed, Queries: rs.Queries, K: q.K}, nil
}

// pick returns the ids and entries of the given rows.
func pick(ids []string, entries []*ingest.Entry, rows []int) ([]string, []*ingest.Entry) {
	oi := make([]string, len(rows))
	oe := make([]*ingest.Entry, len(rows))
	for r, i := range rows {
		oi[r], oe[r] = ids[i], entries[i]
	}
	return oi, oe
}

// labelsOf returns the labels of the rows, or nil unless every one has a non-negative
// label (k-NN needs classes).
func labelsOf(entries []*ingest.Entry, rows []int) []int {
	out := make([]int, len(rows))
	for r, i := range rows {
		e := entries[i]
		if !e.HasLabel || e.Label < 0 {
			return nil
		}
		out[r] = int(e.Label)
	}
	return out
}

// auditRows picks up to n labelled rows of candidates, first by the seeded key
// "daemon/audit/<role>/<id>", returned in increasing row order.
func auditRows(seed uint64, role string, snap *ingest.Snapshot, candidates []int, n int) []int {
	var c []int
	for _, i := range candidates {
		if e := snap.Entries[i]; e.HasLabel && e.Label >= 0 {
			c = append(c, i)
		}
	}
	key := func(i int) uint64 { return rng.Seed(seed, "daemon/audit/"+role+"/"+snap.IDs[i]) }
	sort.Slice(c, func(a, b int) bool { return key(c[a]) < key(c[b]) })
	c = c[:min(n, len(c))]
	sort.Ints(c)
	return c
}

// rowsOf returns the rows of k (whose row r is point rows[r]) for the points want.
func rowsOf(k *mat.Dense, rows, want []int) *mat.Dense {
	_, c := k.Dims()
	out := mat.NewDense(len(want), c, nil)
	for r, i := range want {
		j := sort.SearchInts(rows, i)
		out.SetRow(r, k.RawRowView(j))
	}
	return out
}

func dense(a *mat.Dense) storage.Matrix {
	r, c := a.Dims()
	m := storage.Matrix{Rows: r, Cols: c, Data: make([]float64, 0, r*c)}
	for i := range r {
		m.Data = append(m.Data, a.RawRowView(i)...)
	}
	return m
}

// newServing builds the serving form of in under the configured serving settings; a
// sketched model's evaluation draw is named by the version, the daemon's draw nonce and
// a counter, so every draw is fresh.
func (d *Daemon) newServing(in serving.Input) (*serving.Model, error) {
	return serving.New(in, serving.Settings{
		Backbone: d.feat.Backbone(), H: d.cfg.Sketch.H, S: d.cfg.Sketch.S, Seed: d.cfg.Model.Seed,
		DrawName:         fmt.Sprintf("daemon/eval/%d/%d/%d", in.Version, d.serve.drawNonce, d.serve.drawCount.Add(1)),
		ExactMemoryBytes: d.cfg.Query.ExactMemoryBytes, Fits: d.cfg.Fit.Fits, ExactRowsCap: d.cfg.Query.ExactRowsCap,
		StableJaccard: d.cfg.Query.StableJaccard,
	})
}

// refit runs one refit from snap: fit, effects of the pending deletions, one
// transaction (model, fit statistics, audits, pending records removed, a status event),
// then the new serving model is installed with the landmarks removed since the
// snapshot masked.
func (d *Daemon) refit(ctx context.Context, snap *job) error {
	if len(snap.IDs) < d.cfg.Refit.MinPoints {
		return d.auditWithoutModel(snap)
	}
	start := time.Now()
	var latest uint64
	err := d.store.View(func(tx *storage.ReadTx) error {
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
	sy, err := d.syncSnapshot(ctx, snap)
	if err != nil {
		return err
	}
	syncSecs := time.Since(start).Seconds()
	ft, err := d.fitSnapshot(ctx, snap, sy, version)
	if err != nil {
		return err
	}
	d.deletionEffects(snap)
	done := time.Now()
	secs := done.Sub(start).Seconds()
	sval, err := refitStatus(version, ft, snap, secs, done)
	if err != nil {
		return err
	}
	var (
		audits  []stream.Audit
		audited []*ingest.Deletion
	)
	// Only the leader audits, serves and announces; a standby's refit stores the model
	// (its state stays the leader's) and leaves the deletions pending until it adopts
	// the leader's audits of them (adopt.go).
	leading := d.leading.Load()
	err = d.store.Apply(func(tx *storage.Tx) error {
		audits, audited = audits[:0], audited[:0]
		m, ok, err := tx.LatestModel()
		if err != nil {
			return err
		}
		if ok && m.Version != latest {
			return fmt.Errorf("daemon: model version %d appeared during the refit", m.Version)
		}
		if err := tx.PutModel(ft.model); err != nil {
			return err
		}
		if ft.stats != nil {
			if err := tx.PutFitStats(*ft.stats); err != nil {
				return err
			}
		}
		leading = leading && d.leading.Load() // as late as possible: a leader may have stepped down
		for _, rec := range snap.Pending {
			if !leading {
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
			a, err := ingest.AppendAudit(tx, d.cfg.Kafka.Topics.Audits, audit, ft.serv, done, d.signer)
			if err != nil {
				return err
			}
			audits, audited = append(audits, a), append(audited, rec)
		}
		if len(audits) > 0 {
			if err := d.checkpoint(tx, audits[len(audits)-1]); err != nil {
				return err
			}
		}
		if !leading {
			return nil
		}
		_, err = tx.Enqueue(d.cfg.Kafka.Topics.Status, []byte("model"), sval)
		return err
	})
	if err != nil {
		return fmt.Errorf("daemon: commit model %d: %w", version, err)
	}
	d.finishRefit(snap, ft, version, leading, audits, audited, secs, syncSecs)
	return nil
}

// deletionEffects computes the deletion effect of every pending deletion of snap, before
// the refit's write transaction: on the model each deletion was applied to, or, after a
// restart, on the model serving now.
func (d *Daemon) deletionEffects(snap *job) {
	cur := d.serve.model.Load()
	for _, rec := range snap.Pending {
		base := rec.Before
		if base == nil {
			base = cur
		}
		if base != nil && rec.Known {
			rec.Effect = base.DeletionEffect(rec.ID, rec.Request, d.cfg.Audit.Random, d.cfg.Model.Seed)
		}
	}
}

// refitStatus is the encoded "model" status event of a refit.
func refitStatus(version uint64, ft *fitted, snap *job, secs float64, done time.Time) ([]byte, error) {
	status := map[string]any{
		"version": version, "id": ft.meta.ID, "points": ft.meta.Points, "train": ft.meta.Train,
		"val": ft.meta.Val, "reason": snap.reason, "seconds": secs, "selected_by": ft.meta.SelectedBy,
		"best_epoch": ft.meta.BestEpoch, "residual": ft.meta.Residual, "audits": len(snap.Pending),
	}
	sdata, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	return stream.Status{Kind: "model", Time: done.UTC(), Data: sdata}.Encode()
}

// finishRefit follows a committed refit: the leader installs the new serving model with
// the deletions still pending masked and announces it; every role drops the audited
// deletions, publishes the pool and records the fit's baseline, counters and log line.
func (d *Daemon) finishRefit(snap *job, ft *fitted, version uint64, leading bool, audits []stream.Audit, audited []*ingest.Deletion, secs, syncSecs float64) {
	if leading {
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
		d.install(ft.serv.WithMask(still), snap.mark)
		d.kickModels()
	}
	d.train.mu.Lock()
	d.train.ingest.DropPending(audited)
	d.publishPool()
	d.train.lastFit = fitBaseline{points: len(snap.IDs), landmarks: ft.model.Landmarks}
	if k := ft.meta.Residual[0].TraceK + ft.meta.Residual[1].TraceK; k > 0 {
		d.train.lastFit.ratio = (ft.meta.Residual[0].TraceR + ft.meta.Residual[1].TraceR) / k
	}
	d.train.mu.Unlock()
	d.refits.count.Add(1)
	d.refits.secs.Store(math.Float64bits(secs))
	d.metrics.ObserveRefit(secs, nil)
	for _, rec := range audited {
		d.metrics.ObserveAudit(time.Since(rec.Applied).Seconds())
	}
	d.log.Info().Uint64("model", version).Str("model_id", ft.meta.ID).Int("points", ft.meta.Points).
		Int("landmarks", len(ft.model.Landmarks)).Str("reason", snap.reason).Float64("seconds", secs).
		Int("audits", len(audits)).Str("selected_by", ft.meta.SelectedBy).Float64("sync_seconds", syncSecs).
		Float64("blocks_seconds", ft.seconds["blocks"]).Float64("init_seconds", ft.seconds["kernel"]+ft.seconds["init"]).
		Int("epochs", ft.meta.Epochs).Int("best_epoch", ft.meta.BestEpoch).Float64("fit_seconds", ft.seconds["fit"]).
		Float64("reseed_seconds", ft.seconds["reseed"]).Float64("serving_seconds", ft.seconds["serving"]).Msg("model installed")
}

// ratioOf is Σ tr R / Σ tr K over both views (0 for an empty pool).
func ratioOf(c [2]coreset.ResidualCertificate) float64 {
	k := c[0].TraceK + c[1].TraceK
	if k <= 0 {
		return 0
	}
	return (c[0].Trace + c[1].Trace) / k
}
