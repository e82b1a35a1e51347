package serving

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// ErrRanking reports a query that names a ranking the serving model cannot answer: the
// gradient ranking on a model without gradient rows (no labelled points, over
// query.gradient_memory_bytes, or a replica that has not read the primary's points).
var ErrRanking = errors.New("ranking not served by this model")

// GradPoint is one stored point as the gradient rows take it: its id, value version,
// raw input and label.
type GradPoint struct {
	ID      string
	Version int64
	X       []float64
	Label   int
}

// GradRows are the gradient ranking's rows (certify.Gradient): for every labelled stored
// point i of a model, r_i = J_iᵀ g_i with g_i = entk.PointCotangentTo(f(x_i), y_i), the
// point's negative loss gradient pulled back to the backbone's parameters, stored in
// float32: P numbers a point, or on a dense backbone (entk.NewFactored) its factored
// gradient row, Σ(in + out) numbers over the Linear layers (entk.FactoredQuery.GradTo;
// 1,208 instead of 114,056 for resmlp:108-128x3-8). A query's scores are ⟨J_tᵀu_t, r_i⟩
// for every row. The
// rows depend on the backbone, the point's input and its label only, never on a seed,
// the pool or the fit, so a refit reuses every row whose point it still holds at the
// same version. Read only once built; shared by every serving value of the models that
// hold them.
type GradRows struct {
	IDs      []string
	versions []int64
	labels   []int
	// xs are the points' raw inputs (the callers' slices, read only: the ingest cache's
	// entries are immutable), kept so that the primary can publish the points a replica
	// builds the same rows from (Model.GradPoints).
	xs [][]float64
	// blocks hold the rows, gradBlock rows of dim floats a block (the last one's room
	// unused until WithGradPoints appends): appending rows never moves the rows before.
	blocks  [][]float32
	norms   []float64 // ‖r_i‖₂ of the float64 row before its float32 rounding
	p       int
	dim     int            // a row's length: p, or fac.GradDim()
	fac     *entk.Factored // nil: full rows
	classes int            // the query's predicted class is the largest of the first classes outputs
	b       entk.Backbone
	// tail is the length of the longest header over these arrays (WithGradPoints appends
	// in place only from it).
	tail *atomic.Int64
}

// gradBlock is the rows of one block of GradRows, and of one chunk of their scores.
const gradBlock = 256

// row is row i.
func (g *GradRows) row(i int) []float32 {
	o := (i % gradBlock) * g.dim
	return g.blocks[i/gradBlock][o : o+g.dim]
}

// grow adds blocks until g holds room for n rows.
func (g *GradRows) grow(n int) {
	for len(g.blocks)*gradBlock < n {
		g.blocks = append(g.blocks, make([]float32, gradBlock*g.dim))
	}
}

// GradBytes is the memory n gradient rows of dim floats take.
func GradBytes(n, dim int) int64 { return int64(n) * int64(dim) * 4 }

// GradRowDim is the length of backbone b's gradient rows: its factored gradient rows' on
// a dense backbone, else its parameter count.
func GradRowDim(b entk.Backbone) int {
	if f, ok := entk.NewFactored(b); ok {
		return f.GradDim()
	}
	return b.NumParams()
}

// NewGradRows computes the gradient rows of the labelled points pts on backbone b (one
// forward and one backward pass a point, on every core; each row is its point's alone,
// so the split changes no bit), copying the rows of prev whose id and version match. A
// point without a label in [0, d) has no row. It returns nil and an error saying why
// when fewer than two points have rows or their rows exceed budget bytes (0: off).
func NewGradRows(b entk.Backbone, pts []GradPoint, budget int64, prev *GradRows) (*GradRows, error) {
	d, p := b.OutDim(), b.NumParams()
	g := &GradRows{p: p, dim: p, b: b}
	if f, ok := entk.NewFactored(b); ok {
		g.fac, g.dim = f, f.GradDim()
	}
	dim := g.dim
	keep := make([]int, 0, len(pts))
	for i, pt := range pts {
		if pt.Label >= 0 && pt.Label < d {
			keep = append(keep, i)
			g.classes = max(g.classes, pt.Label+1)
		}
	}
	n := len(keep)
	switch {
	case budget <= 0:
		return nil, fmt.Errorf("%w: query.gradient_memory_bytes is 0", ErrRanking)
	case n < 2:
		return nil, fmt.Errorf("%w: %d of %d stored points carry a label in [0, %d)", ErrRanking, n, len(pts), d)
	case GradBytes(n, dim) > budget:
		return nil, fmt.Errorf("%w: %d gradient rows of %d floats take %d bytes, over query.gradient_memory_bytes %d",
			ErrRanking, n, dim, GradBytes(n, dim), budget)
	}
	g.IDs, g.versions, g.labels, g.xs = make([]string, n), make([]int64, n), make([]int, n), make([][]float64, n)
	g.norms = make([]float64, n)
	g.grow(n)
	g.tail = new(atomic.Int64)
	g.tail.Store(int64(n))
	var old map[string]int
	if prev != nil && prev.b == b && prev.dim == dim {
		old = make(map[string]int, len(prev.IDs))
		for i, id := range prev.IDs {
			old[id] = i
		}
	}
	const chunk = 8
	workers := par.Workers(n, chunk)
	par.For(n, chunk, workers, func(_, lo, hi int) {
		var w Workspace
		r := make([]float64, dim)
		for j := lo; j < hi; j++ {
			pt := pts[keep[j]]
			g.IDs[j], g.versions[j], g.labels[j], g.xs[j] = pt.ID, pt.Version, pt.Label, pt.X
			dst := g.row(j)
			if i, ok := old[pt.ID]; ok && prev.versions[i] == pt.Version && prev.labels[i] == pt.Label {
				copy(dst, prev.row(i))
				g.norms[j] = prev.norms[i]
				continue
			}
			g.norms[j] = g.rowTo(&w, r, pt.X, func(c, out []float64) { entk.PointCotangentTo(c, out, pt.Label, true) })
			for k, v := range r {
				dst[k] = float32(v)
			}
		}
	})
	for j, v := range g.norms {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: point %q has a non-finite gradient row", ErrModel, g.IDs[j])
		}
	}
	return g, nil
}

// rowTo writes into dst (len g.dim) the gradient row of x for the cotangent cot writes
// from f(x) (J_xᵀc, full or factored) and returns its norm: one forward and one backward
// pass (d backward columns, contracted, when factored).
func (g *GradRows) rowTo(w *Workspace, dst, x []float64, cot func(c, out []float64)) float64 {
	if w.gb != g.b {
		w.gb, w.gws, w.gfq = g.b, g.b.NewWorkspace(), nil
	}
	if g.fac != nil {
		if w.gfq == nil {
			w.gfq = g.fac.NewQuery()
		}
		w.gphi = grow(w.gphi, g.fac.Dim())
		w.gfq.GradTo(dst, w.gphi, x, cot)
		return math.Sqrt(g.fac.GradNorm2(dst))
	}
	d := g.b.OutDim()
	w.gout, w.gu = grow(w.gout, d), grow(w.gu, d)
	g.b.Forward(w.gout, x, w.gws)
	cot(w.gu, w.gout)
	g.b.Backward(dst, w.gu, w.gws)
	return math.Sqrt(vec.Dot(dst, dst))
}

// Bytes is the memory the rows take.
func (g *GradRows) Bytes() int64 { return GradBytes(len(g.IDs), g.dim) }

// Factored reports whether the rows are factored gradient rows (a dense backbone).
func (g *GradRows) Factored() bool { return g.fac != nil }

// Classes is how many leading outputs are classes: one more than the largest label.
func (g *GradRows) Classes() int { return g.classes }

// queryTo writes J_tᵀu_t (full or factored) for the input x into w.gv and returns its
// norm.
func (g *GradRows) queryTo(w *Workspace, x []float64) float64 {
	w.gv = grow(w.gv, g.dim)
	return g.rowTo(w, w.gv, x, func(c, out []float64) { entk.MarginCotangentTo(c, out, g.classes) })
}

// scoresTo writes ⟨w.gv, r_i⟩ for every row into dst: Dots32To over full rows, else
// Factored.GradDot32 row by row, in chunks of rows on every core (each score is its
// row's alone, so the split changes no bit).
func (g *GradRows) scoresTo(dst []float64, w *Workspace) {
	par.For(len(dst), gradBlock, par.Workers(len(dst), gradBlock), func(_, lo, hi int) {
		if g.fac == nil {
			vec.Dots32To(dst[lo:hi], w.gv, g.blocks[lo/gradBlock][:(hi-lo)*g.dim], g.dim, g.dim)
			return
		}
		for i := lo; i < hi; i++ {
			dst[i] = g.fac.GradDot32(g.row(i), w.gv)
		}
	})
}

// radius bounds |score_i − ⟨v, r_i⟩| for row i and a query row of norm vn, r_i the
// float64 row before its float32 rounding. Full rows: the rounding of the stored row
// (2⁻²⁴ relative a coordinate) and of the four-lane FMA dot product (γ of p terms, taken
// as (p+8)·2⁻⁵³), each times Σ|v_j r_ij| ≤ ‖v‖·‖r_i‖, plus ρ = 1e-11 relative for the
// float64 computation of the two gradients themselves (as entk.ExactRowError), inflated
// by 2⁻²⁰ for the norms' own rounding. Factored rows: Factored.GradError.
func (g *GradRows) radius(i int, vn float64) float64 {
	if g.fac != nil {
		return g.fac.GradError(g.norms[i]*g.norms[i], vn*vn) * (1 + 0x1p-20)
	}
	rel := 0x1p-24 + float64(g.p+8)*0x1p-53 + 1e-11
	return rel * vn * g.norms[i] * (1 + 0x1p-20)
}

// normRel bounds the relative error of a computed gradient norm (the query's vn and a
// row's norms[i], both from the float64 vectors): ρ = 1e-11 for the gradient itself, as
// in radius, and the rounding of the sum of squares and the square root, taken as
// (p+16)·2⁻⁵³ (a factored norm sums fewer terms).
func (g *GradRows) normRel() float64 { return 1e-11 + float64(g.p+16)*0x1p-53 }

// answerGradient certifies the top-k of the gradient ranking r (certify.Gradient, or
// certify.GradientCosine: each score divided by the two gradients' norms,
// certify.GradientCosineRadius) over the model's unmasked gradient rows: deterministic
// intervals (radius), so the verdict is certified exactly when the top-k is separated.
// Its stability is 1: no seed, pool or fit enters the scores. Indices of the
// certificate are rows of s.Grad. The residual fraction is the landmarks'
// (landmarkResidual), as every answer reports it.
func (s *Model) answerGradient(w *Workspace, x []float64, k int, delta float64, r certify.Ranking) (certify.Certificate, error) {
	var c certify.Certificate
	g := s.Grad
	if g == nil {
		why := s.GradErr
		if why == nil {
			why = fmt.Errorf("%w: model %d has no gradient rows", ErrRanking, s.Version)
		}
		return c, why
	}
	m := len(s.gactive)
	if m < 2 {
		return c, fmt.Errorf("%w: %d unmasked gradient rows", ErrNoModel, m)
	}
	k = min(k, m-1)
	// The landmarks' residual fraction reads none of the gradient path's scratch: it runs
	// beside it (joined below), which halves the answer's wall time on two cores.
	var rf certify.Certificate
	var wg sync.WaitGroup
	wg.Go(func() { s.landmarkResidual(w, &rf, x) })
	defer func() { wg.Wait() }()
	vn := g.queryTo(w, x)
	w.gall = grow(w.gall, len(g.IDs))
	g.scoresTo(w.gall, w)
	c, err := s.gradCertify(w, w.gall, vn, k, delta, r)
	if err != nil {
		return c, err
	}
	wg.Wait()
	c.ResidualFraction = rf.ResidualFraction
	return c, nil
}

// gradCertify certifies the top-k of ranking r from gall, the scores ⟨J_tᵀu_t, r_i⟩ of
// every row of s.Grad for a query row of norm vn (answerGradient's rule; k below the
// unmasked rows). It uses w.sc, w.rad and w.rk, not w.gall.
func (s *Model) gradCertify(w *Workspace, gall []float64, vn float64, k int, delta float64, r certify.Ranking) (certify.Certificate, error) {
	var c certify.Certificate
	g, m := s.Grad, len(s.gactive)
	w.sc, w.rad = grow(w.sc, m), grow(w.rad, m)
	if r == certify.GradientCosine {
		rel := g.normRel()
		for j, i := range s.gactive {
			w.sc[j], w.rad[j] = certify.GradientCosineRadius(gall[i], g.radius(i, vn), vn, g.norms[i], rel)
		}
	} else {
		for j, i := range s.gactive {
			w.sc[j], w.rad[j] = gall[i], g.radius(i, vn)
		}
	}
	if err := w.rk.CertifyIntervalsTo(&c, w.sc, w.rad, k); err != nil {
		return c, err
	}
	c.Allocation = certify.Allocation{Delta: delta, Queries: 1, Landmarks: m, Scheme: "deterministic"}
	c.VarianceModel = certify.VarianceExactKernel
	c.Budget = certify.Budget{M: m, Pool: len(g.IDs)}
	c.Ranking = r
	one := 1.0
	c.Stability, c.Stable = &one, true
	cos := func(e *certify.Entry) {
		e.Index = s.gactive[e.Index]
		if den := vn * g.norms[e.Index]; den > 0 {
			e.Cosine = max(-1, min(1, gall[e.Index]/den))
		}
	}
	for i := range c.TopK {
		cos(&c.TopK[i])
	}
	cos(&c.RunnerUp)
	c.ModelVersion = s.Version
	return c, nil
}

// landmarkResidual sets c.ResidualFraction for x as a landmark answer reports it: how much
// of the query the served landmarks leave unexplained, from its kernel row over the
// active landmarks (exact rows, else the evaluation draw's features).
func (s *Model) landmarkResidual(w *Workspace, c *certify.Certificate, x []float64) {
	m := len(s.active)
	if m == 0 {
		return
	}
	w.row = grow(w.row, m)
	if s.Exact != nil {
		ktt := s.exactRowTo(w, x)
		for i, l := range s.active {
			w.row[i] = w.full[l]
		}
		s.residualFraction(w, c, ktt)
		return
	}
	s.drawRowTo(w, x)
	s.residualFraction(w, c, vec.Dot(w.qf, w.qf))
}

// gradActive returns the rows of g that masked leaves, or nil when g is nil.
func gradActive(g *GradRows, masked func(id string) bool) []int {
	if g == nil {
		return nil
	}
	act := make([]int, 0, len(g.IDs))
	for i, id := range g.IDs {
		if !masked(id) {
			act = append(act, i)
		}
	}
	return slices.Clip(act)
}

// EntryID is the id and view of a certificate entry of s: a landmark's (its view "A" or
// "B") or, for the gradient ranking, a stored point's (no view).
func (s *Model) EntryID(r certify.Ranking, e certify.Entry) (id, view string) {
	if r.AllPoints() {
		return s.Grad.IDs[e.Index], ""
	}
	return s.LandmarkIDs[e.Index], string(s.Views[e.Index])
}

// GradRowOf is the value version and label of id's unmasked gradient row in s, if it
// has one.
func (s *Model) GradRowOf(id string) (version int64, label int, ok bool) {
	if s.Grad == nil {
		return 0, 0, false
	}
	for _, i := range s.gactive {
		if s.Grad.IDs[i] == id {
			return s.Grad.versions[i], s.Grad.labels[i], true
		}
	}
	return 0, 0, false
}

// GradPoints returns the points of s's unmasked gradient rows in row order (their
// inputs shared, read only), nil without rows: what a replica needs to build the same
// rows (NewGradRows, then WithClasses(Grad.Classes())).
func (s *Model) GradPoints() []GradPoint {
	if s.Grad == nil {
		return nil
	}
	g := s.Grad
	pts := make([]GradPoint, len(s.gactive))
	for j, i := range s.gactive {
		pts[j] = GradPoint{ID: g.IDs[i], Version: g.versions[i], X: g.xs[i], Label: g.labels[i]}
	}
	return pts
}

// GradInput is the raw input of id's unmasked gradient row in s (shared: do not
// modify), or false when it has none: a deleted point's is never handed out.
func (s *Model) GradInput(id string) ([]float64, bool) {
	if s.Grad == nil {
		return nil, false
	}
	for _, i := range s.gactive {
		if s.Grad.IDs[i] == id {
			return s.Grad.xs[i], true
		}
	}
	return nil, false
}

// WithClasses is g with c classes (the query's predicted class is the largest of the
// first c outputs), or g itself when c is not in [Classes(), the backbone's outputs]:
// a replica takes the primary's count, which also counts the labels of rows masked
// since its last refit.
func (g *GradRows) WithClasses(c int) *GradRows {
	if g == nil || c <= g.classes || c > g.b.OutDim() {
		return g
	}
	ng := *g
	ng.classes = c
	return &ng
}

// WithGradClasses is s with its gradient rows counting c classes (GradRows.WithClasses),
// or s itself when that changes nothing.
func (s *Model) WithGradClasses(c int) *Model {
	g := s.Grad.WithClasses(c)
	if g == s.Grad {
		return s
	}
	ns := *s
	ns.Grad = g
	return &ns
}

// WithGradOf is s with the gradient rows of o and their masks (a model rebuilt from
// o.Input() for a new evaluation draw, which carries no rows).
func (s *Model) WithGradOf(o *Model) *Model {
	c := *s
	c.Grad, c.GradErr, c.gactive = o.Grad, o.GradErr, o.gactive
	return &c
}

// WithGrad is a copy of s with the gradient rows g (every row unmasked) or, with g
// nil, none and err saying why.
func (s *Model) WithGrad(g *GradRows, err error) *Model {
	c := *s
	c.Grad, c.GradErr, c.gactive = g, err, gradActive(g, func(string) bool { return false })
	if g != nil {
		c.GradErr = nil
	}
	return &c
}

// GradientRows is how many unmasked gradient rows s ranks, and why it has none (""
// with rows).
func (s *Model) GradientRows() (int, string) {
	switch {
	case s.Grad != nil:
		return len(s.gactive), ""
	case s.GradErr != nil:
		return 0, s.GradErr.Error()
	}
	return 0, "no gradient rows: the model holds the landmarks only (built without the stored points, or a replica that has not read the primary's points on the models topic)"
}
