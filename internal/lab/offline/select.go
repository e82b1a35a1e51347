package offline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/cairnhq/cairn/coreset"
)

// exactDeffMax is the largest n for which select also reports the dense d_eff (an
// eigendecomposition of the min(n, q)-sized Gram matrix).
const exactDeffMax = 5000

// SelectView is the result of selection on one view.
type SelectView struct {
	Landmarks     any            `json:"landmarks"` // []string ids, or []int rows for csv/features input
	ResidualTrace []float64      `json:"residual_trace"`
	Trace         float64        `json:"trace"`
	Greedy        int            `json:"greedy"`
	ResidualFit   *ResidualFit   `json:"residual_fit,omitempty"`
	Deff          *Deff          `json:"deff,omitempty"`
	Coverage      *ClassCoverage `json:"coverage,omitempty"`
	// Classes is each label's count among the landmarks beside its count among the
	// stored points (data sets with labels).
	Classes   *ClassCounts `json:"class_counts,omitempty"`
	Bandwidth float64      `json:"rbf_bandwidth,omitempty"`
	// Leverage summarizes the ridge leverage scores the leverage selector sampled by.
	Leverage *Leverage `json:"leverage,omitempty"`
}

// Leverage summarizes the ridge leverage scores τ_i of the leverage selector.
type Leverage struct {
	Lambda float64 `json:"lambda"`
	Method string  `json:"method"` // "exact" or "rls"
	Sum    float64 `json:"sum"`    // Σ τ_i: d_eff(λ), estimated under rls
	Max    float64 `json:"max"`
}

// ResidualFit is the power law c·m^(−β) fitted to the residual-trace curve.
type ResidualFit struct {
	C    float64 `json:"c"`
	Beta float64 `json:"beta"`
	R2   float64 `json:"r2"`
}

// Deff is d_eff(λ), exact and by SLQ (coreset.DeffSLQ), with the SLQ estimate's two
// error terms: SLQError its standard error (Monte-Carlo, over the probes) and SLQQuadErr
// a bound on its quadrature error (a bias), and the probes and Lanczos steps it took
// (Steps the limit per form, StepsUsed the most any form took).
type Deff struct {
	Lambda     float64  `json:"lambda"`
	Exact      *float64 `json:"exact,omitempty"`
	SLQ        float64  `json:"slq"`
	SLQError   float64  `json:"slq_error"`
	SLQQuadErr float64  `json:"slq_quadrature_error"`
	Probes     int      `json:"slq_probes"`
	Steps      int      `json:"slq_steps"`
	StepsUsed  int      `json:"slq_steps_used"`
	Deflate    int      `json:"slq_deflate"`
}

// ClassCoverage is κ_C of a selection (coreset.Coverage).
type ClassCoverage struct {
	Kappa   int `json:"kappa"` // −1 when some class is never selected
	Seen    int `json:"classes_seen"`
	Classes int `json:"classes"`
}

// SelectResult is the output of cairnctl select: the first view's selection, and the
// second view's with two views.
type SelectResult struct {
	Selector string `json:"selector"`
	Input    string `json:"input"`
	N        int    `json:"n"`
	Q        int    `json:"q"`
	M        int    `json:"m"`
	Budget   string `json:"budget"`
	// Normalize is --normalize: pc-ntk pivoted on δ_j/K_jj (the other selectors ignore it).
	Normalize bool `json:"normalize"`
	// Tolerance is --tolerance: pc-ntk's tolerant pivoting (the other selectors ignore it).
	Tolerance float64 `json:"tolerance"`
	SelectView
	ViewB   *SelectView        `json:"view_b,omitempty"`
	Seconds map[string]float64 `json:"seconds"`
}

// SelectOptions are the settings of cairnctl select, each named by its flag.
type SelectOptions struct {
	Pipeline Pipeline
	Features string  // --features: CSV of feature vectors (linear kernel); replaces --data
	Budget   string  // --budget: an integer m, or deff:λ
	Selector string  // --selector
	Lambda   float64 // --lambda: ridge of the reported d_eff and of the leverage selector
	Views    int     // --views: 1 or 2
	// SLQ is --slq-probes, --slq-steps and --slq-deflate.
	SLQ coreset.SLQOptions
}

// Select is cairnctl select: landmark selection on the sketched eNTK of a data set (both
// augmented views, one pool each) or on given feature vectors (linear kernel), with the
// residual-trace budget curve, d_eff(λ) (exact and SLQ) and class coverage κ_C.
func Select(ctx context.Context, o *SelectOptions) (*SelectResult, error) {
	bud, err := o.validate()
	if err != nil {
		return nil, err
	}
	res := &SelectResult{Selector: o.Selector, Normalize: o.Pipeline.Normalize, Tolerance: o.Pipeline.Tolerance, Seconds: map[string]float64{}}
	in, err := o.load(res)
	if err != nil {
		return nil, err
	}
	var out []SelectView
	for _, vd := range in.views {
		sv, m, err := o.selectView(ctx, in, vd, bud, res.Seconds)
		if err != nil {
			return nil, err
		}
		res.M, res.Budget = m, bud.String()
		out = append(out, sv)
	}
	res.SelectView = out[0]
	if len(out) > 1 {
		res.ViewB = &out[1]
	}
	return res, nil
}

// validate checks the settings and returns the landmark budget (--m, or --budget).
func (o *SelectOptions) validate() (coreset.LandmarkBudget, error) {
	switch {
	case (o.Features == "") == (o.Pipeline.Data == ""):
		return coreset.LandmarkBudget{}, errors.New("give exactly one of --data and --features")
	case o.Lambda < 0 || math.IsNaN(o.Lambda) || math.IsInf(o.Lambda, 0):
		return coreset.LandmarkBudget{}, fmt.Errorf("--lambda: %v must be a positive number", o.Lambda)
	case o.Views != 1 && o.Views != 2:
		return coreset.LandmarkBudget{}, fmt.Errorf("--views: %d, want 1 or 2", o.Views)
	case o.Pipeline.M < 1:
		return coreset.LandmarkBudget{}, fmt.Errorf("--m: %d must be ≥ 1", o.Pipeline.M)
	case o.SLQ.Probes < 2:
		return coreset.LandmarkBudget{}, fmt.Errorf("--slq-probes: %d must be ≥ 2", o.SLQ.Probes)
	case o.SLQ.Steps < 1:
		return coreset.LandmarkBudget{}, fmt.Errorf("--slq-steps: %d must be ≥ 1", o.SLQ.Steps)
	case !slices.Contains(coreset.Selectors, o.Selector):
		return coreset.LandmarkBudget{}, fmt.Errorf("--selector: %q, want one of %v", o.Selector, coreset.Selectors)
	}
	if err := o.Pipeline.CheckRule(); err != nil {
		return coreset.LandmarkBudget{}, err
	}
	if o.Budget == "" {
		return coreset.LandmarkBudget{M: o.Pipeline.M}, nil
	}
	b, err := coreset.ParseLandmarkBudget(o.Budget)
	if err != nil {
		return b, fmt.Errorf("--budget: %w", err)
	}
	return b, nil
}

// selectInput is what select runs on: the views, and the labels and ids of the rows
// (nil for feature vectors; ids nil for a CSV data set, whose landmarks are rows).
type selectInput struct {
	n, q   int
	labels []int
	ids    []string
	views  []selectViewData
}

type selectViewData struct {
	x    []float64 // input space rows (selectors kmeans++, pc)
	d    int
	g    []float64 // sketch features
	name string
}

// load reads --features, or runs --data through the feature pipeline (Prepare), and
// records the input and the load times in res.
func (o *SelectOptions) load(res *SelectResult) (*selectInput, error) {
	in := &selectInput{}
	pf := &o.Pipeline
	if o.Features != "" {
		t0 := time.Now()
		g, rows, cols, err := ReadMatrixCSV(o.Features)
		if err != nil {
			return nil, fmt.Errorf("--features: %w", err)
		}
		if pf.N > 0 && pf.N < rows {
			rows, g = pf.N, g[:pf.N*cols]
		}
		in.n, in.q = rows, cols
		in.views = []selectViewData{{x: g, d: cols, g: g, name: "a"}}
		res.Input = "features:" + o.Features
		res.Seconds["load"] = time.Since(t0).Seconds()
	} else {
		p, err := Prepare(pf)
		if err != nil {
			return nil, err
		}
		maps.Copy(res.Seconds, p.Seconds)
		in.n, in.q = p.Set.N, p.Q
		in.labels = p.Set.Labels
		if p.Set.Name != "csv" {
			in.ids = p.Set.IDs
		}
		// select reads the features as float64 matrices (d_eff, residual curves): each view
		// is widened and its float32 rows dropped.
		in.views = []selectViewData{{x: p.ViewA, d: p.Set.D, g: Widen(p.FeatA, p.Q), name: "a"}}
		p.FeatA = nil
		if o.Views == 2 {
			in.views = append(in.views, selectViewData{x: p.ViewB, d: p.Set.D, g: Widen(p.FeatB, p.Q), name: "b"})
		}
		p.FeatB = nil
		res.Input = pf.Data
	}
	res.N, res.Q = in.n, in.q
	return in, nil
}

// selectView selects the landmarks of one view under bud and returns its report and
// the budget m used, timing each phase in secs.
func (o *SelectOptions) selectView(ctx context.Context, in *selectInput, vd selectViewData, bud coreset.LandmarkBudget, secs map[string]float64) (SelectView, int, error) {
	var sv SelectView
	n, q := in.n, in.q
	// Budget and d_eff first: the deff rule needs the estimate to size the pool.
	lam := o.Lambda
	if bud.Lambda > 0 && lam == 0 {
		lam = bud.Lambda
	}
	if lam > 0 {
		dj, err := DeffOf(vd.g, n, q, lam, o.Pipeline.Seed, vd.name, o.SLQ, secs)
		if err != nil {
			return sv, 0, err
		}
		sv.Deff = dj
	}
	m := bud.M
	if bud.Lambda > 0 {
		d := sv.Deff.SLQ
		if sv.Deff.Exact != nil {
			d = *sv.Deff.Exact
		}
		m = max(1, int(math.Ceil(d)))
	}

	t0 := time.Now()
	pf := &o.Pipeline
	sel, err := coreset.SelectContext(ctx, o.Selector, coreset.SelectInput{N: n, X: vd.x, D: vd.d, G: vd.g, Q: q, Seed: pf.Seed, Lambda: o.Lambda, Normalize: pf.Normalize, Tolerance: pf.Tolerance}, m)
	if err != nil {
		return sv, m, fmt.Errorf("view %s: %w", vd.name, err)
	}
	secs["select_"+vd.name] = time.Since(t0).Seconds()
	sv.Greedy, sv.Bandwidth = sel.Greedy, sel.Bandwidth
	sv.Leverage = leverageOf(sel, n)
	t0 = time.Now()
	sv.residualCurve(sel, vd.g, n, q)
	secs["residual_curve_"+vd.name] = time.Since(t0).Seconds()
	sv.fitCurve()
	if in.labels != nil {
		k, seen, classes := coreset.Coverage(in.labels, sel.Indices)
		sv.Coverage = &ClassCoverage{Kappa: k, Seen: seen, Classes: classes}
		sv.Classes = Classes(in.labels, sel.Indices)
	}
	sv.Landmarks = sel.Indices
	if in.ids != nil {
		l := make([]string, len(sel.Indices))
		for i, r := range sel.Indices {
			l[i] = in.ids[r]
		}
		sv.Landmarks = l
	}
	return sv, m, nil
}

// leverageOf summarizes the leverage scores of sel over n rows (nil when the selector
// did not sample by them).
func leverageOf(sel *coreset.Selection, n int) *Leverage {
	if sel.Leverage == nil {
		return nil
	}
	lj := &Leverage{Lambda: sel.Lambda, Method: "exact"}
	if n > coreset.LeverageExactMax {
		lj.Method = "rls"
	}
	for _, v := range sel.Leverage {
		lj.Sum += v
		lj.Max = math.Max(lj.Max, v)
	}
	return lj
}

// residualCurve records the residual-trace curve of sel over the n×q features g: the
// selector's own, else coreset.ResidualCurveTo.
func (sv *SelectView) residualCurve(sel *coreset.Selection, g []float64, n, q int) {
	if sel.ResidualTrace != nil {
		sv.ResidualTrace, sv.Trace = sel.ResidualTrace, sel.Trace
	} else {
		sv.ResidualTrace = make([]float64, len(sel.Indices))
		coreset.ResidualCurveTo(sv.ResidualTrace, g, n, q, sel.Indices)
		for _, v := range g[:n*q] {
			sv.Trace += v * v
		}
	}
}

// fitCurve fits a power law to the residual-trace curve where it carries mass: past the
// numerical rank it is rounding noise.
func (sv *SelectView) fitCurve() {
	var ms, ys []float64
	for i, r := range sv.ResidualTrace {
		if r > 1e-10*sv.Trace {
			ms, ys = append(ms, float64(i+1)), append(ys, r)
		}
	}
	if pl, err := coreset.FitPowerLaw(ms, ys); err == nil {
		sv.ResidualFit = &ResidualFit{C: pl.C, Beta: pl.Beta, R2: pl.R2}
	}
}

// DeffOf is d_eff(λ) of the n×q features g (a view named name): exact when n ≤
// exactDeffMax, and by SLQ (coreset.DeffSLQ with opt, stream
// "cairnctl/select/slq/<name>" under seed). Each estimate's time goes into secs.
func DeffOf(g []float64, n, q int, lam float64, seed uint64, name string, opt coreset.SLQOptions, secs map[string]float64) (*Deff, error) {
	dj := &Deff{Lambda: lam}
	if n <= exactDeffMax {
		t0 := time.Now()
		ex, err := coreset.DeffExact(g, n, q, lam)
		if err != nil {
			return nil, fmt.Errorf("view %s: exact d_eff: %w", name, err)
		}
		dj.Exact = &ex
		secs["deff_exact_"+name] = time.Since(t0).Seconds()
	}
	t0 := time.Now()
	est, err := coreset.DeffSLQ(g, n, q, lam, seed, "cairnctl/select/slq/"+name, opt)
	if err != nil {
		return nil, fmt.Errorf("view %s: SLQ d_eff: %w", name, err)
	}
	dj.SLQ, dj.SLQError, dj.SLQQuadErr = est.Value, est.StdErr, est.QuadErr
	dj.Probes, dj.Steps, dj.StepsUsed, dj.Deflate = est.Probes, est.Steps, est.StepsUsed, est.Deflate
	secs["deff_slq_"+name] = time.Since(t0).Seconds()
	return dj, nil
}
