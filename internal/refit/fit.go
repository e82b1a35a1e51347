package refit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
)

// Fitter fits model versions under one configuration. Its fields are set once, before
// the first call; its methods are then safe for concurrent use.
type Fitter struct {
	Config   config.Config
	Features *pipeline.Features
	Pool     coreset.Config // the pool's greedy settings (ingest.PoolConfig)
	Log      zerolog.Logger
	// Serve builds the serving form of a version (the daemon names its evaluation
	// draws, so it owns this step).
	Serve func(serving.Input) (*serving.Model, error)
	// Disk holds exact rows past query.exact_memory_bytes for the reseed measurement
	// (the serving model's Disk; nil: memory only).
	Disk *serving.Disk

	// grad is the last gradient rows a fit, a restore or WithStored built, so that the
	// next reuses the rows of the points it still holds unchanged (serving.NewGradRows).
	// A pointer swap, not a lock: the ingest's WithStored must not wait for a refit's rows.
	grad atomic.Pointer[serving.GradRows]
	// reseed is the last reseed measurement's outcome, so that the next reuses its
	// features of the points and its exact rows of the landmarks that are unchanged
	// (ingest.MeasureReseed): the rows are the served model's own.
	reseed atomic.Pointer[ingest.Reseed]
}

// gradPoints are the GradPoints of the labelled entries (entry(i) is ids[i]'s; nil: not
// stored).
func gradPoints(ids []string, entry func(i int) *ingest.Entry) []serving.GradPoint {
	pts := make([]serving.GradPoint, 0, len(ids))
	for i, id := range ids {
		if e := entry(i); e != nil && e.HasLabel && e.Label >= 0 && e.Label <= math.MaxInt32 {
			pts = append(pts, serving.GradPoint{ID: id, Version: e.Version, X: e.X, Label: int(e.Label)})
		}
	}
	return pts
}

// gradRows builds the gradient rows of the labelled entries (query.gradient_memory_bytes),
// reusing the last ones built; nil and the reason when there are none.
func (f *Fitter) gradRows(ids []string, entries []*ingest.Entry) (*serving.GradRows, error) {
	pts := gradPoints(ids, func(i int) *ingest.Entry { return entries[i] })
	g, err := serving.NewGradRows(f.Features.Backbone(), pts, f.Config.Query.GradientMemoryBytes, f.grad.Load())
	if g != nil {
		f.grad.Store(g)
	}
	return g, err
}

// WithStored is s with gradient rows for the labelled points of cache named by ids that
// s's rows do not cover at their version and label (serving.Model.WithGradPoints within
// query.gradient_memory_bytes): the gradient ranking ranks the points stored since the
// last refit too. The extended rows are kept for the next refit to reuse.
func (f *Fitter) WithStored(s *serving.Model, cache *ingest.Points, ids []string) *serving.Model {
	if s == nil || s.Grad == nil || cache == nil || len(ids) == 0 {
		return s
	}
	pts := gradPoints(ids, func(i int) *ingest.Entry { return cache.Get(ids[i]) })
	ns := s.WithGradPoints(pts, f.Config.Query.GradientMemoryBytes)
	if ns.Grad != nil && ns.Grad != s.Grad {
		f.grad.Store(ns.Grad)
	}
	return ns
}

// Fitted is a refit's outcome before it is committed.
type Fitted struct {
	Model   storage.Model
	Stats   *storage.FitStats // nil with one fit
	Serving *serving.Model
	Meta    serving.Meta
	// Seconds is the wall time of Fit's phases: "blocks" (the kernel blocks), "kernel"
	// and "init" (pipeline.Started), "fit" (the Adam fits), "reseed", "serving". The
	// reseed measurement runs beside the fits ("fit" includes its share of the cores):
	// "reseed" is how long Fit then still waited for it, "reseed_beside" its own wall
	// time.
	Seconds map[string]float64
}

// run is one Fit's intermediate values, handed from phase to phase.
type run struct {
	snap    *ingest.Snapshot
	index   map[string]int // id → snapshot row
	lms     landmarkSet
	tr, va  []int
	prob    *fit.Problem
	rec     pipeline.Recipe
	ft      *pipeline.Fitted
	res     [2]certify.Residual
	reseed  *serving.ReseedMeta
	exact   ingest.Reseed // the measurement, for the served pool's exact rows (Rows)
	version uint64
}

// landmarkSet is the synced pivots of both views in model row order (view A's, then
// view B's): their ids, views ('A' or 'B'), snapshot rows per view and fit-draw
// features (M×q).
type landmarkSet struct {
	ids   []string
	views []byte
	rows  [2][]int
	feats *mat.Dense
}

// isVal reports whether the point id is held out for checkpoint selection: a seeded
// hash of the id below frac, so a point's role never depends on arrival order. (The
// stream's name keeps the "daemon/" prefix of where this code was first: stored models
// depend on it.)
func isVal(seed uint64, id string, frac float64) bool {
	return float64(rng.Seed(seed, "daemon/val/"+id)>>11)/(1<<53) < frac
}

// Fit fits model version on snap (paper Alg. cairn-stage2, as cairnctl fit does): the
// greedy landmarks of sel (view A's pivots, then view B's), kernel blocks of the
// training points' two views against them, validation blocks of the held-out points,
// and the fit recipe (pipeline.RecipeOf, the same as cairnctl fit's) on all cores. It
// then builds the serving form: the evaluation draw and the audit blocks. sel is
// batch greedy over snap (ingest.Select); neither is modified.
func (f *Fitter) Fit(ctx context.Context, snap *ingest.Snapshot, sel *ingest.Selection, version uint64) (*Fitted, error) {
	cfg := f.Config
	r := &run{snap: snap, version: version, index: make(map[string]int, len(snap.IDs))}
	for i, id := range snap.IDs {
		r.index[id] = i
	}
	t0 := time.Now()
	r.lms = landmarksOf(sel, snap.IDs, f.Features.Dim())
	if mm := len(r.lms.ids); mm < 2 {
		return nil, fmt.Errorf("daemon: refit: %d landmarks, need at least 2", mm)
	}
	// The reseed measurement needs only snap and sel: it runs beside the fits, on the
	// cores their serial parts leave idle, and is joined after them (reseedBeside).
	rctx, cancel := context.WithCancel(ctx)
	reseed := &pendingReseed{}
	defer reseed.wait() // after cancel: a failed Fit stops the measurement, then joins it
	defer cancel()
	var err error
	if r.tr, r.va, err = splitVal(cfg.Model.Seed, snap.IDs, cfg.Fit.ValFraction); err != nil {
		return nil, err
	}
	r.prob = problemOf(sel, snap, r.tr, r.va, r.lms.feats)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := &Fitted{Seconds: map[string]float64{"blocks": time.Since(t0).Seconds()}}
	if r.rec, err = pipeline.RecipeOf(cfg.Fit); err != nil {
		return nil, err
	}
	if r.ft, err = r.rec.RunThen(ctx, r.prob, cfg.Model.Seed, func() { f.reseedBeside(rctx, reseed, snap, sel) }); err != nil {
		return nil, err
	}
	for v := range r.res {
		if r.res[v], err = residual(sel, v); err != nil {
			return nil, err
		}
	}
	for _, ph := range []string{"kernel", "init", "fit"} {
		out.Seconds[ph] = r.ft.Seconds[ph]
	}
	t1 := time.Now()
	if r.reseed, err = reseed.wait(); err != nil {
		return nil, err
	}
	r.exact = reseed.rows
	out.Seconds["reseed"] = time.Since(t1).Seconds()
	out.Seconds["reseed_beside"] = reseed.secs
	t1 = time.Now()
	if err := f.build(out, r); err != nil {
		return nil, err
	}
	out.Seconds["serving"] = time.Since(t1).Seconds()
	return out, nil
}

// build fills out's metadata, stored model and serving form from the fit r. The
// snapshot's points hash (ingest.PointsHash: one SHA-256 pass over every point's input,
// a tenth of a second on one core at n = 10,000 MNIST points) is computed on a goroutine
// of its own (internal/base/par) while the serving form is built on the others; the
// metadata's JSON waits for both. Neither depends on the other, so the outcome is the
// serial order's.
func (f *Fitter) build(out *Fitted, r *run) error {
	var pointsHash string
	var err error
	jobs := []func(){
		func() { err = f.buildServing(out, r) },
		func() { pointsHash = ingest.PointsHash(r.snap.IDs, r.snap.Entries) },
	}
	par.For(len(jobs), 1, par.Workers(len(jobs), 1), func(_, lo, hi int) {
		for _, job := range jobs[lo:hi] {
			job()
		}
	})
	if err != nil {
		return err
	}
	out.Meta.PointsHash = pointsHash
	meta, err := json.Marshal(out.Meta)
	if err != nil {
		return err
	}
	f0 := r.ft.Fits.Fits[0]
	out.Model = storage.Model{Version: r.version, Landmarks: r.lms.ids, A: dense(f0.A), A0: dense(f0.A0),
		B: storage.Matrix{Rows: 1, Cols: len(f0.B), Data: slices.Clone(f0.B)}, Meta: meta}
	return nil
}

// buildServing fills out's metadata but its points hash, and builds out's serving form
// and statistics from the fit r.
func (f *Fitter) buildServing(out *Fitted, r *run) error {
	cfg, snap, lms := f.Config, r.snap, r.lms
	rep, scale := r.ft.Fits, r.ft.KernelScale
	f0 := rep.Fits[0]
	out.Meta = serving.Meta{
		ViewA: len(lms.rows[0]), KernelScale: scale, Points: len(snap.IDs), Train: len(r.tr), Val: len(r.va),
		Loss: r.rec.Loss.String(), Init: r.rec.Init.String(), Fits: cfg.Fit.Fits, SelectedBy: f0.SelectedBy,
		BestEpoch: f0.BestEpoch, Epochs: f0.Epochs,
		Residual: r.res,
		ID:       serving.ModelID(lms.ids, lms.views, f0.A, f0.B),
		Reseed:   r.reseed, Inputs: make([]string, len(lms.ids)),
	}
	for l, id := range lms.ids {
		out.Meta.Inputs[l] = serving.InputHash(snap.Entries[r.index[id]].X)
	}
	si := serving.Input{
		Version: r.version, Points: len(snap.IDs), LandmarkIDs: lms.ids, Views: lms.views,
		A: f0.A, B: f0.B, Scale: scale, Residual: out.Meta.Residual, ID: out.Meta.ID,
		LandmarkX: make([]float64, len(lms.ids)*f.Features.InputDim()), PoolStability: out.Meta.PoolStability(),
	}
	f.landmarkViewsTo(si.LandmarkX, snap, r.index, lms.ids, lms.views)
	// The reseed measurement computed these landmarks' rows (and their Gram matrix)
	// beside the fits, with the budget New uses (query.exact_memory_bytes): New takes
	// them instead of computing them again, and builds the same model.
	si.Exact = r.exact.RowsOf(si.LandmarkX)
	si.Grad, si.GradErr = f.gradRows(snap.IDs, snap.Entries)
	si.Omega = serving.Scaled(f0.Omega, scale)
	si.OmegaMean = serving.Scaled(rep.OmegaMean, scale)
	if rep.OmegaVar != nil {
		si.Tau2 = serving.Scaled(rep.OmegaVar, scale*scale)
		out.Stats = &storage.FitStats{Version: r.version, Seeds: rep.Seeds, Mean: si.OmegaMean, Var: si.Tau2}
	}
	// Audit blocks: labelled training rows as the reference set, labelled held-out
	// rows as test points, each the first ones in a seeded id order.
	refRows := auditRows(cfg.Model.Seed, "ref", snap, r.tr, cfg.Audit.Reference)
	testRows := auditRows(cfg.Model.Seed, "test", snap, r.va, cfg.Audit.Test)
	if len(refRows) >= 2 && len(testRows) >= 1 {
		si.KRef = rowsOf(r.prob.KA, r.tr, refRows)
		si.KTest = rowsOf(r.prob.Val.K, r.va, testRows)
		si.RefLabels = labelsOf(snap.Entries, refRows)
	}
	var err error
	out.Serving, err = f.Serve(si)
	return err
}

// residual is the exact certificate of view v's greedy landmarks over the snapshot, with
// the bound for the unrounded features (certify.RoundingBound from the greedy factor).
func residual(sel *ingest.Selection, v int) (certify.Residual, error) {
	r := sel.Res[v]
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

// landmarksOf lists the pivots of sel over the snapshot's ids (features of dimension
// q); feats is nil without pivots.
func landmarksOf(sel *ingest.Selection, ids []string, q int) landmarkSet {
	var s landmarkSet
	var lf []float64
	for v := range 2 {
		for _, r := range sel.Res[v].Pivots {
			s.ids = append(s.ids, ids[r])
			s.views = append(s.views, "AB"[v])
			s.rows[v] = append(s.rows[v], r)
			for _, x := range sel.G[v][r] {
				lf = append(lf, float64(x))
			}
		}
	}
	if len(s.ids) > 0 {
		s.feats = mat.NewDense(len(s.ids), q, lf)
	}
	return s
}

// problemOf is the fit's problem for the landmarks lm (M×q, the synced pivots' fit-draw
// features): kernel blocks of the training rows' two views against them, straight from
// the cached float32 rows (no copy of the features), K_mm, and the validation blocks and
// labels when there are validation rows. The blocks are computed side by side
// (internal/base/par: the two training views first, one goroutine each, then the validation
// views, then K_mm), each by one pipeline.KernelTo call, whose products split their
// rows over the cores as well; each block is what a lone call computes, so the bits do
// not depend on GOMAXPROCS. The serial parts of one block (packing the landmarks'
// panels) thus overlap another's products.
func problemOf(sel *ingest.Selection, snap *ingest.Snapshot, tr, va []int, lm *mat.Dense) *fit.Problem {
	mm, _ := lm.Dims()
	against := func(dst **mat.Dense, rows []int, v int) func() {
		return func() {
			g := make([][]float32, len(rows))
			for i, r := range rows {
				g[i] = sel.G[v][r]
			}
			k := mat.NewDense(len(rows), mm, nil)
			pipeline.KernelTo(k, g, lm)
			*dst = k
		}
	}
	trIDs, _ := pick(snap.IDs, snap.Entries, tr)
	prob := &fit.Problem{IDs: trIDs, Kmm: mat.NewDense(mm, mm, nil)}
	jobs := []func(){against(&prob.KA, tr, 0), against(&prob.KB, tr, 1)}
	if va != nil {
		jobs = append(jobs, against(&prob.Val.K, va, 0), against(&prob.Val.KB, va, 1))
		prob.Val.Labels = labelsOf(snap.Entries, va)
	}
	jobs = append(jobs, func() { prob.Kmm.Mul(lm, lm.T()) }) // last: one product, split by rows
	par.For(len(jobs), 1, par.Workers(len(jobs), 1), func(_, lo, hi int) {
		for _, job := range jobs[lo:hi] {
			job()
		}
	})
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
func (f *Fitter) landmarkViewsTo(dst []float64, snap *ingest.Snapshot, index map[string]int, lids []string, views []byte) {
	in := f.Features.InputDim()
	for l, id := range lids {
		v := 0
		if views[l] == 'B' {
			v = 1
		}
		f.Features.ViewTo(dst[l*in:(l+1)*in], snap.Entries[index[id]].X, id, v)
	}
}

// pendingReseed is a reseed measurement running on its own goroutine.
type pendingReseed struct {
	done chan struct{}
	meta *serving.ReseedMeta
	rows ingest.Reseed // for its Rows
	err  error
	secs float64 // its own wall time
}

// reseedBeside starts measureReseed into p on a goroutine of its own. It is
// deterministic whatever runs beside it (every loop in it gives each entry the serial
// loop's bits).
func (f *Fitter) reseedBeside(ctx context.Context, p *pendingReseed, snap *ingest.Snapshot, sel *ingest.Selection) {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		t0 := time.Now()
		p.meta, p.rows, p.err = f.measureReseed(ctx, snap, sel)
		p.secs = time.Since(t0).Seconds()
	}()
}

// wait joins the measurement, if it was started, and returns its outcome; it may be
// called again.
func (p *pendingReseed) wait() (*serving.ReseedMeta, error) {
	if p.done != nil {
		<-p.done
	}
	return p.meta, p.err
}

// measureReseed measures the pool part of the answers' stability for a model fitted on
// snap with selection sel (ingest.MeasureReseed with query.reseed_queries queries and
// the top query.k), or returns nil when it is off or could not be measured; with it the
// served pool's exact rows when the measurement held them in memory.
func (f *Fitter) measureReseed(ctx context.Context, snap *ingest.Snapshot, sel *ingest.Selection) (*serving.ReseedMeta, ingest.Reseed, error) {
	q := f.Config.Query
	if q.ReseedQueries == 0 {
		return nil, ingest.Reseed{}, nil
	}
	var prev ingest.Reseed
	if p := f.reseed.Load(); p != nil {
		prev = *p
	}
	rs, err := ingest.MeasureReseed(ctx, f.Features, f.Pool, f.Config.Model.Seed, snap, sel, q.K, q.ReseedQueries, q.ExactMemoryBytes, f.Disk,
		prev)
	if err == nil && rs.Fresh != nil {
		f.reseed.Store(&rs)
	}
	if err != nil || !rs.Measured {
		return nil, ingest.Reseed{}, err
	}
	f.Log.Info().Float64("jaccard", rs.Jaccard).Float64("pool_jaccard", rs.PoolJaccard).Int("queries", rs.Queries).
		Int("features_reused", rs.Fresh.Reused).Msg("reseed stability")
	return &serving.ReseedMeta{Jaccard: rs.Jaccard, PoolJaccard: rs.PoolJaccard, Seed: rs.Seed, Queries: rs.Queries, K: q.K},
		rs, nil
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
// "daemon/audit/<role>/<id>", returned in increasing row order. The keys (a SHA-256
// each) are computed once per candidate, in chunks side by side (internal/base/par),
// rather than twice per comparison: the sort sees the same comparisons, so it orders
// the rows as the comparison of freshly computed keys does.
func auditRows(seed uint64, role string, snap *ingest.Snapshot, candidates []int, n int) []int {
	type keyed struct {
		row int
		key uint64
	}
	var c []keyed
	for _, i := range candidates {
		if e := snap.Entries[i]; e.HasLabel && e.Label >= 0 {
			c = append(c, keyed{row: i})
		}
	}
	const chunk = 512
	par.For(len(c), chunk, par.Workers(len(c), chunk), func(_, lo, hi int) {
		for k := lo; k < hi; k++ {
			c[k].key = rng.Seed(seed, "daemon/audit/"+role+"/"+snap.IDs[c[k].row])
		}
	})
	sort.Slice(c, func(a, b int) bool { return c[a].key < c[b].key })
	rows := make([]int, min(n, len(c)))
	for k := range rows {
		rows[k] = c[k].row
	}
	sort.Ints(rows)
	return rows
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

// dense is a's storage form (row-major).
func dense(a *mat.Dense) storage.Matrix {
	r, c := a.Dims()
	m := storage.Matrix{Rows: r, Cols: c, Data: make([]float64, 0, r*c)}
	for i := range r {
		m.Data = append(m.Data, a.RawRowView(i)...)
	}
	return m
}
