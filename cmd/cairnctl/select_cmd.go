package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
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
	Bandwidth     float64          `json:"rbf_bandwidth,omitempty"`
}

type residualFitJSON struct {
	C    float64 `json:"c"`
	Beta float64 `json:"beta"`
	R2   float64 `json:"r2"`
}

type deffJSON struct {
	Lambda   float64  `json:"lambda"`
	Exact    *float64 `json:"exact,omitempty"`
	SLQ      float64  `json:"slq"`
	SLQError float64  `json:"slq_error"`
	Probes   int      `json:"slq_probes"`
	Steps    int      `json:"slq_steps"`
	Deflate  int      `json:"slq_deflate"`
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
	selectView
	ViewB   *selectView        `json:"view_b,omitempty"`
	Seconds map[string]float64 `json:"seconds"`
}

// selectCmd implements `cairnctl select`: landmark selection on the sketched eNTK of a data
// set (both augmented views, one pool each) or on given feature vectors (linear kernel), with
// the residual-trace budget curve, d_eff(λ) (exact and SLQ) and class coverage κ_C.
func selectCmd(fs *flag.FlagSet) cli.Func {
	var pf pipelineFlags
	pf.register(fs)
	features := fs.String("features", "", "CSV of feature vectors, one per row (linear kernel); replaces --data")
	budget := fs.String("budget", "", "budget rule: an integer m, or deff:λ for m = ⌈d_eff(λ)⌉ (overrides --m)")
	selector := fs.String("selector", coreset.SelPCNTK, fmt.Sprintf("selector: one of %v", coreset.Selectors))
	lambda := fs.Float64("lambda", 0, "ridge λ > 0: report d_eff(λ) (exact when n ≤ 5000, and SLQ)")
	views := fs.Int("views", 2, "number of augmented views to select on (1 or 2; --features has 1)")
	probes := fs.Int("slq-probes", 64, "SLQ probe vectors")
	steps := fs.Int("slq-steps", 40, "Lanczos steps per SLQ probe")
	deflate := fs.Int("slq-deflate", 64, "SLQ deflation rank (negative: none)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		switch {
		case (*features == "") == (pf.data == ""):
			return errors.New("give exactly one of --data and --features")
		case *lambda < 0 || math.IsNaN(*lambda) || math.IsInf(*lambda, 0):
			return fmt.Errorf("--lambda: %v must be a positive number", *lambda)
		case *views != 1 && *views != 2:
			return fmt.Errorf("--views: %d, want 1 or 2", *views)
		case pf.m < 1:
			return fmt.Errorf("--m: %d must be ≥ 1", pf.m)
		case *probes < 2:
			return fmt.Errorf("--slq-probes: %d must be ≥ 2", *probes)
		case *steps < 1:
			return fmt.Errorf("--slq-steps: %d must be ≥ 1", *steps)
		}
		knownSel := false
		for _, s := range coreset.Selectors {
			knownSel = knownSel || s == *selector
		}
		if !knownSel {
			return fmt.Errorf("--selector: %q, want one of %v", *selector, coreset.Selectors)
		}
		bud := coreset.LandmarkBudget{M: pf.m}
		if *budget != "" {
			b, err := coreset.ParseLandmarkBudget(*budget)
			if err != nil {
				return fmt.Errorf("--budget: %w", err)
			}
			bud = b
		}
		slqOpt := coreset.SLQOptions{Probes: *probes, Steps: *steps, Deflate: *deflate}

		res := selectResult{Selector: *selector, Seconds: map[string]float64{}}
		type viewData struct {
			x    []float64 // input space rows (selectors kmeans++, pc)
			d    int
			g    []float64 // sketch features
			name string
		}
		var vds []viewData
		var n, q int
		var labels []int
		var ids []string
		if *features != "" {
			t0 := time.Now()
			g, rows, cols, err := readMatrixCSV(*features)
			if err != nil {
				return fmt.Errorf("--features: %w", err)
			}
			if pf.n > 0 && pf.n < rows {
				rows, g = pf.n, g[:pf.n*cols]
			}
			n, q = rows, cols
			vds = []viewData{{x: g, d: q, g: g, name: "a"}}
			res.Input = "features:" + *features
			res.Seconds["load"] = time.Since(t0).Seconds()
		} else {
			p, err := prepare(&pf)
			if err != nil {
				return err
			}
			for k, v := range p.seconds {
				res.Seconds[k] = v
			}
			n, q = p.set.N, p.q
			labels = p.set.Labels
			if p.set.Name != "csv" {
				ids = p.set.IDs
			}
			vds = []viewData{{x: p.viewA, d: p.set.D, g: p.featA, name: "a"}}
			if *views == 2 {
				vds = append(vds, viewData{x: p.viewB, d: p.set.D, g: p.featB, name: "b"})
			}
			res.Input = pf.data
		}
		res.N, res.Q = n, q

		var out []selectView
		for _, vd := range vds {
			var sv selectView
			phase := func(name string) string { return name + "_" + vd.name }
			// Budget and d_eff first: the deff rule needs the estimate to size the pool.
			lam := *lambda
			if bud.Lambda > 0 && lam == 0 {
				lam = bud.Lambda
			}
			if lam > 0 {
				dj := &deffJSON{Lambda: lam}
				if n <= exactDeffMax {
					t0 := time.Now()
					ex, err := coreset.DeffExact(vd.g, n, q, lam)
					if err != nil {
						return fmt.Errorf("view %s: exact d_eff: %w", vd.name, err)
					}
					dj.Exact = &ex
					res.Seconds[phase("deff_exact")] = time.Since(t0).Seconds()
				}
				t0 := time.Now()
				est, err := coreset.DeffSLQ(vd.g, n, q, lam, pf.seed, "cairnctl/select/slq/"+vd.name, slqOpt)
				if err != nil {
					return fmt.Errorf("view %s: SLQ d_eff: %w", vd.name, err)
				}
				dj.SLQ, dj.SLQError, dj.Probes, dj.Steps, dj.Deflate = est.Value, est.StdErr, est.Probes, est.Steps, est.Deflate
				res.Seconds[phase("deff_slq")] = time.Since(t0).Seconds()
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
			res.M, res.Budget = m, bud.String()

			t0 := time.Now()
			sel, err := coreset.Select(*selector, coreset.SelectInput{N: n, X: vd.x, D: vd.d, G: vd.g, Q: q, Seed: pf.seed}, m)
			if err != nil {
				return fmt.Errorf("view %s: %w", vd.name, err)
			}
			res.Seconds[phase("select")] = time.Since(t0).Seconds()
			sv.Greedy, sv.Bandwidth = sel.Greedy, sel.Bandwidth

			t0 = time.Now()
			if sel.ResidualTrace != nil {
				sv.ResidualTrace, sv.Trace = sel.ResidualTrace, sel.Trace
			} else {
				sv.ResidualTrace = make([]float64, len(sel.Indices))
				coreset.ResidualCurveTo(sv.ResidualTrace, vd.g, n, q, sel.Indices)
				for j := 0; j < n; j++ {
					r := vd.g[j*q : (j+1)*q]
					for _, v := range r {
						sv.Trace += v * v
					}
				}
			}
			res.Seconds[phase("residual_curve")] = time.Since(t0).Seconds()
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
			if labels != nil {
				k, seen, classes := coreset.Coverage(labels, sel.Indices)
				sv.Coverage = &coverageJSON{Kappa: k, Seen: seen, Classes: classes}
			}
			if ids != nil {
				l := make([]string, len(sel.Indices))
				for i, r := range sel.Indices {
					l[i] = ids[r]
				}
				sv.Landmarks = l
			} else {
				sv.Landmarks = sel.Indices
			}
			out = append(out, sv)
		}
		res.selectView = out[0]
		if len(out) > 1 {
			res.ViewB = &out[1]
		}
		return writeJSON(stdio.Out, res)
	}
}
