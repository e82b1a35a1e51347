package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/cli"
)

// exactDeffMax is the largest n for which select also reports the dense d_eff (an
// eigendecomposition of the min(n, q)-sized Gram matrix).
const exactDeffMax = 5000

// selectView is the JSON result of selection on one view.
type selectView struct {
	Landmarks     any              `json:"landmarks"` // []string ids, or []int rows for csv/features input
	ResidualTrace []float64        `json:"residual_trace"`
	Trace         float64          `json:"trace"`
	Greedy        int              `json:"greedy"`
	ResidualFit   *residualFitJSON `json:"residual_fit,omitempty"`
	Deff          *deffJSON        `json:"deff,omitempty"`
	Coverage      *coverageJSON    `json:"coverage,omitempty"`
	// Classes is each label's count among the landmarks beside its count among the
	// stored points (data sets with labels).
	Classes   *classesJSON `json:"class_counts,omitempty"`
	Bandwidth float64      `json:"rbf_bandwidth,omitempty"`
	// Leverage summarizes the ridge leverage scores the leverage selector sampled by.
	Leverage *leverageJSON `json:"leverage,omitempty"`
}

type leverageJSON struct {
	Lambda float64 `json:"lambda"`
	Method string  `json:"method"` // "exact" or "rls"
	Sum    float64 `json:"sum"`    // Σ τ_i: d_eff(λ), estimated under rls
	Max    float64 `json:"max"`
}

type residualFitJSON struct {
	C    float64 `json:"c"`
	Beta float64 `json:"beta"`
	R2   float64 `json:"r2"`
}

// deffJSON is d_eff(λ), exact and by SLQ (coreset.DeffSLQ), with the SLQ estimate's
// two error terms: SLQError its standard error (Monte-Carlo, over the probes) and
// SLQQuadErr a bound on its quadrature error (a bias), and the probes and Lanczos steps
// it took (Steps the limit per form, StepsUsed the most any form took).
type deffJSON struct {
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

type coverageJSON struct {
	Kappa   int `json:"kappa"` // −1 when some class is never selected
	Seen    int `json:"classes_seen"`
	Classes int `json:"classes"`
}

type selectResult struct {
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
	selectView
	ViewB   *selectView        `json:"view_b,omitempty"`
	Seconds map[string]float64 `json:"seconds"`
}

// selectCmd implements `cairnctl select`: landmark selection on the sketched eNTK of a data
// set (both augmented views, one pool each) or on given feature vectors (linear kernel), with
// the residual-trace budget curve, d_eff(λ) (exact and SLQ) and class coverage κ_C.
func selectCmd(fs *flag.FlagSet) cli.Func {
	var f selectFlags
	f.register(fs)
	return func(ctx context.Context, stdio cli.Stdio) error {
		bud, err := f.validate()
		if err != nil {
			return err
		}
		res := selectResult{Selector: f.selector, Normalize: f.pf.normalize, Tolerance: f.pf.tolerance, Seconds: map[string]float64{}}
		in, err := f.load(&res)
		if err != nil {
			return err
		}
		var out []selectView
		for _, vd := range in.views {
			sv, m, err := f.selectView(ctx, in, vd, bud, res.Seconds)
			if err != nil {
				return err
			}
			res.M, res.Budget = m, bud.String()
			out = append(out, sv)
		}
		res.selectView = out[0]
		if len(out) > 1 {
			res.ViewB = &out[1]
		}
		return writeJSON(stdio.Out, res)
	}
}

// selectFlags are the flags of cairnctl select.
type selectFlags struct {
	pf                     pipelineFlags
	features, budget       string
	selector               string
	lambda                 float64
	views                  int
	probes, steps, deflate int
}

func (f *selectFlags) register(fs *flag.FlagSet) {
	f.pf.register(fs)
	fs.StringVar(&f.features, "features", "", "CSV of feature vectors, one per row (linear kernel); replaces --data")
	fs.StringVar(&f.budget, "budget", "", "budget rule: an integer m, or deff:λ for m = ⌈d_eff(λ)⌉ (overrides --m)")
	fs.StringVar(&f.selector, "selector", coreset.SelPCNTK, fmt.Sprintf("selector: one of %v", coreset.Selectors))
	fs.Float64Var(&f.lambda, "lambda", 0, "ridge λ > 0: report d_eff(λ) (exact when n ≤ 5000, and SLQ); also the leverage selector's ridge (default tr K/m)")
	fs.IntVar(&f.views, "views", 2, "number of augmented views to select on (1 or 2; --features has 1)")
	slq := coreset.SLQOptions{}.WithDefaults()
	fs.IntVar(&f.probes, "slq-probes", slq.Probes, "most SLQ probe vectors (SLQ stops earlier once its standard error is 0.2% of d_eff)")
	fs.IntVar(&f.steps, "slq-steps", slq.Steps, "most Lanczos steps per SLQ quadratic form (each stops earlier once its Gauss–Radau bracket closes)")
	fs.IntVar(&f.deflate, "slq-deflate", slq.Deflate, "SLQ deflation rank (negative: none)")
}

// validate checks the flags and returns the landmark budget (--m, or --budget).
func (f *selectFlags) validate() (coreset.LandmarkBudget, error) {
	switch {
	case (f.features == "") == (f.pf.data == ""):
		return coreset.LandmarkBudget{}, errors.New("give exactly one of --data and --features")
	case f.lambda < 0 || math.IsNaN(f.lambda) || math.IsInf(f.lambda, 0):
		return coreset.LandmarkBudget{}, fmt.Errorf("--lambda: %v must be a positive number", f.lambda)
	case f.views != 1 && f.views != 2:
		return coreset.LandmarkBudget{}, fmt.Errorf("--views: %d, want 1 or 2", f.views)
	case f.pf.m < 1:
		return coreset.LandmarkBudget{}, fmt.Errorf("--m: %d must be ≥ 1", f.pf.m)
	case f.probes < 2:
		return coreset.LandmarkBudget{}, fmt.Errorf("--slq-probes: %d must be ≥ 2", f.probes)
	case f.steps < 1:
		return coreset.LandmarkBudget{}, fmt.Errorf("--slq-steps: %d must be ≥ 1", f.steps)
	case !slices.Contains(coreset.Selectors, f.selector):
		return coreset.LandmarkBudget{}, fmt.Errorf("--selector: %q, want one of %v", f.selector, coreset.Selectors)
	}
	if err := f.pf.checkRule(); err != nil {
		return coreset.LandmarkBudget{}, err
	}
	if f.budget == "" {
		return coreset.LandmarkBudget{M: f.pf.m}, nil
	}
	b, err := coreset.ParseLandmarkBudget(f.budget)
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

// load reads --features, or runs --data through the feature pipeline (prepare), and
// records the input and the load times in res.
func (f *selectFlags) load(res *selectResult) (*selectInput, error) {
	in := &selectInput{}
	if f.features != "" {
		t0 := time.Now()
		g, rows, cols, err := readMatrixCSV(f.features)
		if err != nil {
			return nil, fmt.Errorf("--features: %w", err)
		}
		if f.pf.n > 0 && f.pf.n < rows {
			rows, g = f.pf.n, g[:f.pf.n*cols]
		}
		in.n, in.q = rows, cols
		in.views = []selectViewData{{x: g, d: cols, g: g, name: "a"}}
		res.Input = "features:" + f.features
		res.Seconds["load"] = time.Since(t0).Seconds()
	} else {
		p, err := prepare(&f.pf)
		if err != nil {
			return nil, err
		}
		maps.Copy(res.Seconds, p.seconds)
		in.n, in.q = p.set.N, p.q
		in.labels = p.set.Labels
		if p.set.Name != "csv" {
			in.ids = p.set.IDs
		}
		// select reads the features as float64 matrices (d_eff, residual curves): each view
		// is widened and its float32 rows dropped.
		in.views = []selectViewData{{x: p.viewA, d: p.set.D, g: widen(p.featA, p.q), name: "a"}}
		p.featA = nil
		if f.views == 2 {
			in.views = append(in.views, selectViewData{x: p.viewB, d: p.set.D, g: widen(p.featB, p.q), name: "b"})
		}
		p.featB = nil
		res.Input = f.pf.data
	}
	res.N, res.Q = in.n, in.q
	return in, nil
}

// selectView selects the landmarks of one view under bud and returns its report and
// the budget m used, timing each phase in secs.
func (f *selectFlags) selectView(ctx context.Context, in *selectInput, vd selectViewData, bud coreset.LandmarkBudget, secs map[string]float64) (selectView, int, error) {
	var sv selectView
	n, q := in.n, in.q
	phase := func(name string) string { return name + "_" + vd.name }
	// Budget and d_eff first: the deff rule needs the estimate to size the pool.
	lam := f.lambda
	if bud.Lambda > 0 && lam == 0 {
		lam = bud.Lambda
	}
	if lam > 0 {
		dj, err := f.deff(vd, n, q, lam, secs)
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
	sel, err := coreset.SelectContext(ctx, f.selector, coreset.SelectInput{N: n, X: vd.x, D: vd.d, G: vd.g, Q: q, Seed: f.pf.seed, Lambda: f.lambda, Normalize: f.pf.normalize, Tolerance: f.pf.tolerance}, m)
	if err != nil {
		return sv, m, fmt.Errorf("view %s: %w", vd.name, err)
	}
	secs[phase("select")] = time.Since(t0).Seconds()
	sv.Greedy, sv.Bandwidth = sel.Greedy, sel.Bandwidth
	if sel.Leverage != nil {
		lj := &leverageJSON{Lambda: sel.Lambda, Method: "exact"}
		if n > coreset.LeverageExactMax {
			lj.Method = "rls"
		}
		for _, v := range sel.Leverage {
			lj.Sum += v
			lj.Max = math.Max(lj.Max, v)
		}
		sv.Leverage = lj
	}

	t0 = time.Now()
	if sel.ResidualTrace != nil {
		sv.ResidualTrace, sv.Trace = sel.ResidualTrace, sel.Trace
	} else {
		sv.ResidualTrace = make([]float64, len(sel.Indices))
		coreset.ResidualCurveTo(sv.ResidualTrace, vd.g, n, q, sel.Indices)
		for _, v := range vd.g[:n*q] {
			sv.Trace += v * v
		}
	}
	secs[phase("residual_curve")] = time.Since(t0).Seconds()
	// Fit the curve where it carries mass: past the numerical rank it is rounding noise.
	var ms, ys []float64
	for i, r := range sv.ResidualTrace {
		if r > 1e-10*sv.Trace {
			ms, ys = append(ms, float64(i+1)), append(ys, r)
		}
	}
	if pl, err := coreset.FitPowerLaw(ms, ys); err == nil {
		sv.ResidualFit = &residualFitJSON{C: pl.C, Beta: pl.Beta, R2: pl.R2}
	}
	if in.labels != nil {
		k, seen, classes := coreset.Coverage(in.labels, sel.Indices)
		sv.Coverage = &coverageJSON{Kappa: k, Seen: seen, Classes: classes}
		sv.Classes = classCounts(in.labels, sel.Indices)
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

// deff is d_eff(λ) of one view's features: exact when n ≤ exactDeffMax, and by SLQ.
func (f *selectFlags) deff(vd selectViewData, n, q int, lam float64, secs map[string]float64) (*deffJSON, error) {
	dj := &deffJSON{Lambda: lam}
	if n <= exactDeffMax {
		t0 := time.Now()
		ex, err := coreset.DeffExact(vd.g, n, q, lam)
		if err != nil {
			return nil, fmt.Errorf("view %s: exact d_eff: %w", vd.name, err)
		}
		dj.Exact = &ex
		secs["deff_exact_"+vd.name] = time.Since(t0).Seconds()
	}
	t0 := time.Now()
	opt := coreset.SLQOptions{Probes: f.probes, Steps: f.steps, Deflate: f.deflate}
	est, err := coreset.DeffSLQ(vd.g, n, q, lam, f.pf.seed, "cairnctl/select/slq/"+vd.name, opt)
	if err != nil {
		return nil, fmt.Errorf("view %s: SLQ d_eff: %w", vd.name, err)
	}
	dj.SLQ, dj.SLQError, dj.SLQQuadErr = est.Value, est.StdErr, est.QuadErr
	dj.Probes, dj.Steps, dj.StepsUsed, dj.Deflate = est.Probes, est.Steps, est.StepsUsed, est.Deflate
	secs["deff_slq_"+vd.name] = time.Since(t0).Seconds()
	return dj, nil
}
