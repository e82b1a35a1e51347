package reproduce

import (
	"context"
	"fmt"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/verify"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// tableSRHT runs cairnctl verify srht (verify.SRHT) at the paper's P = 256, s = 32 (fig:theory(a)).
func tableSRHT(ctx context.Context, r *runner, t *Table) error {
	args := []string{"verify", "srht", "--P", "256", "--s", "32", "--draws", strconv.Itoa(r.size.SRHTDraws), "--seed", strconv.FormatUint(r.seed, 10)}
	t.Settings["command"] = "cairnctl " + strings.Join(args, " ")
	r.logf("srht: %s", strings.Join(args, " "))
	rep, err := verify.SRHT(verify.SRHTOptions{P: 256, S: 32, Draws: r.size.SRHTDraws, Seed: r.seed})
	if err != nil {
		return err
	}
	jl := math.Inf(-1)
	for _, c := range rep.Cases {
		if c.Ratio == nil || c.RatioSE == nil {
			note := fmt.Sprintf("predicted variance is 0 (Φ = 0: the estimate is exact); measured %.2g", c.Measured)
			t.set(c.Name, "measured/predicted", math.NaN(), math.NaN(), 0, note)
			if c.Measured < 1e-20 {
				// The paper's own example: u = v = e_j gives Φ = 0 and an exact estimate.
				t.cell(c.Name, "measured/predicted").Match = true
			}
			continue
		}
		t.set(c.Name, "measured/predicted", *c.Ratio, *c.RatioSE, 0, "noise: standard error of the ratio from the empirical fourth moment")
		if c.JLRatio != nil && *c.JLRatio > 0 {
			jl = math.Max(jl, 1 / *c.JLRatio)
		}
	}
	// "Up to 2.5×" is a maximum over inputs the paper does not list; cairn's eight inputs
	// differ, so the allowance is 20% of the paper's value.
	t.set("max over inputs", "JL predicted/measured", jl, math.NaN(), 0.5,
		"the maximum over cairn's eight inputs of jl_predicted/measured; the paper's inputs are not listed (allowance 0.5)")
	return nil
}

// tableTwoAxis runs cairnctl verify two-axis (verify.TwoAxis) on the paper's d = 8, 1864-parameter
// backbone with h = 1, 4, 16 and s = 20 and ∞, 96 draws per cell (fig:2b).
func tableTwoAxis(ctx context.Context, r *runner, t *Table) error {
	args := []string{"verify", "two-axis", "--arch", "mlp:16-32-32-8", "--h", "1,4,16", "--s", "20,0",
		"--draws", strconv.Itoa(r.size.TwoAxisDraws), "--seed", strconv.FormatUint(r.seed, 10)}
	t.Settings["command"] = "cairnctl " + strings.Join(args, " ")
	r.logf("two-axis: %s", strings.Join(args, " "))
	rep, err := verify.TwoAxis(verify.TwoAxisOptions{Arch: "mlp:16-32-32-8", H: []int{1, 4, 16}, S: []int{20, 0}, Draws: r.size.TwoAxisDraws, Seed: r.seed})
	if err != nil {
		return err
	}
	const pair = "cairn's pair is two seeded Gaussian inputs of the seeded mlp:16-32-32-8 network; the paper's is a pair of a real eNTK block"
	k2 := rep.KStar * rep.KStar
	for _, c := range rep.Cells {
		switch {
		case c.S == 0 && c.Ratio != nil && c.RatioSE != nil:
			// Both the paper's ratio and cairn's are 96-draw estimates: the allowance is two
			// standard errors of their difference, 2·√2·se.
			row := fmt.Sprintf("h=%d, s=∞", c.H)
			t.set(row, "measured/predicted", *c.Ratio, *c.RatioSE*math.Sqrt2, 0,
				"noise: √2 × the ratio's standard error (the paper's ratio is a 96-draw estimate too)")
		case c.S == 20:
			row := fmt.Sprintf("h=%d, s=20", c.H)
			se := math.NaN()
			if c.RatioSE != nil {
				se = *c.RatioSE * c.Predicted / k2 * math.Sqrt2
			}
			t.set(row, "relative excess over output term", (c.Measured-c.Output)/k2, se, 0, pair)
		}
	}
	rtr := math.NaN()
	if rep.RTrace != nil {
		rtr = *rep.RTrace
	}
	t.set("pair", "r_tr(M̄)", rtr, math.NaN(), 0, pair)
	return nil
}

// tableDeff compares SLQ with the exact d_eff (select's deff: the same estimator options
// as cairnctl select) on the landmark kernel K_mm of each selector's two-view pool, at two
// ridges: the fit's, the paper's 10⁻³ (tab:hparams) relative to the mean of diag K_mm
// (the fit's diagonal kernel scaling; d_eff is scale-invariant, Lemma deff (iii)), and
// deffPaperLambda on the kernel's own scale.
func tableDeff(ctx context.Context, r *runner, t *Table) error {
	const ridge = 1e-3
	t.Settings["ridge"] = fmt.Sprintf("rows Adult, MNIST: 1e-3 × mean diag K_mm (the fit's); rows %q: λ = %g (the paper's)", deffPaperRow("…"), float64(deffPaperLambda))
	t.Settings["cell"] = "100·|SLQ − exact|/exact on the pool kernel (M = 2m); noise: SLQ's standard error in %"
	for _, d := range datasets {
		pf := r.pipeline(d.flag)
		if pf.Data == "" {
			t.skip(d.name, r.notRun(d.flag))
			t.skip(deffPaperRow(d.name), r.notRun(d.flag))
			continue
		}
		rows := []string{d.name, deffPaperRow(d.name)}
		if r.keep(t, d.name, func(c *Cell) bool { return slices.Contains(rows, c.Row) }) {
			continue
		}
		r.logf("deff: %s: features", d.name)
		r.cache.Drop() // one data set's features in memory at a time
		prep, err := offline.Prepare(&pf)
		if err != nil {
			return err
		}
		for _, s := range selectors {
			if err := ctx.Err(); err != nil {
				return err
			}
			if r.keep(t, d.name+" "+s.name, func(c *Cell) bool { return slices.Contains(rows, c.Row) && c.Column == s.name }) {
				continue
			}
			vs, err := offline.SelectViews(ctx, prep, s.flag, pf.M, pf.Seed, pf.Rule()) // the paper's rule (runner.pipeline)
			if err != nil {
				return fmt.Errorf("%s %s: %w", d.name, s.name, err)
			}
			var diag float64
			for l := 0; l < vs.M; l++ {
				row := vs.Landmarks[l*vs.Q : (l+1)*vs.Q]
				for _, v := range row {
					diag += v * v
				}
			}
			diag /= float64(vs.M)
			for _, c := range []struct {
				row, what string
				lam       float64
			}{
				{d.name, "the fit's ridge 1e-3 × mean diag", ridge * diag},
				{deffPaperRow(d.name), "the paper's λ", deffPaperLambda},
			} {
				dj, err := offline.DeffOf(vs.Landmarks, vs.M, vs.Q, c.lam, pf.Seed, "pool", deffSLQ, map[string]float64{})
				if err != nil {
					return fmt.Errorf("%s %s: %w", c.row, s.name, err)
				}
				rel := 100 * math.Abs(dj.SLQ-*dj.Exact) / *dj.Exact
				r.logf("deff: %s %s: λ %.6g (mean diag %.6g): exact %.3f slq %.3f ± %.3f", c.row, s.name, c.lam, diag, *dj.Exact, dj.SLQ, dj.SLQError)
				t.set(c.row, s.name, rel, 100*dj.SLQError / *dj.Exact, 0,
					fmt.Sprintf("%s %s: exact d_eff %.1f of M = %d, SLQ %.1f ± %.1f (%s; mean diag K_mm %.4g)",
						c.row, s.name, *dj.Exact, vs.M, dj.SLQ, dj.SLQError, c.what, diag))
			}
		}
	}
	return nil
}

// deffSLQ are the SLQ options of the deff table: 64 probes, 40 Lanczos steps, deflation
// rank 64.
var deffSLQ = coreset.SLQOptions{Probes: 64, Steps: 40, Deflate: 64}

// deffPaperLambda is the ridge the paper gives next to its 0.72 % (Sec. 4: "For λ ≥ 1,
// d_eff recovers our hand-chosen budgets, with λ = 10 giving m = 496 on MNIST"), on the
// kernel's own scale.
const deffPaperLambda = 10

// deffPaperRow is the deff row of data set name at the paper's λ.
func deffPaperRow(name string) string {
	return fmt.Sprintf("%s, λ = %g", name, float64(deffPaperLambda))
}

// model fits a model the way cairnctl audit and explain do (offline.FitModel: the daemon's
// recipe at the run's size) with the given loss, initializer, selector and fits.
func (r *runner) model(ctx context.Context, data, loss, init, selector string, fits int, withTest bool) (*offline.Model, error) {
	mo := offline.ModelOptions{Pipeline: r.pipeline(data), Loss: loss, Init: init, Dim: r.size.K, Epochs: r.size.Epochs,
		Selector: selector, ValFrac: 0.2, Cache: r.cache}
	testN := 0
	if withTest {
		testN = r.size.TestN[data]
	}
	t0 := time.Now()
	fm, err := offline.FitModel(ctx, &mo, fits, testN)
	if err != nil {
		return nil, fmt.Errorf("%s --loss %s --init %s --selector %s: %w", data, loss, init, selector, err)
	}
	r.logf("fit %s %s %s %s: %d fit(s) in %.1f s", data, loss, init, selector, fits, time.Since(t0).Seconds())
	return fm, nil
}

// kappaTolerance is the allowance of a κ_C cell: κ_C counts landmarks in a pool of a
// different size than the paper's in quick runs and jumps with one landmark's rank, so a
// cell matches within a quarter of the paper's value or 2 landmarks, whichever is larger.
func kappaTolerance(paper float64) float64 { return math.Max(2, 0.25*paper) }

// accuracyTolerance is the allowance of an accuracy cell in points: the paper's own
// allowance for Adam against KREPES is 0.3 points; its seed s.d. are 0.01–0.03, so
// 0.5 points is generous for a same-size run.
const accuracyTolerance = 0.5

// kappa returns κ_C of fit f's ω ranking over fm's landmarks, and the classes the pool
// holds.
func kappa(fm *offline.Model, f *fit.Result) (certify.Coverage, int, error) {
	cov, err := certify.CoverageNumber(f.Omega, fm.Info.LandmarkLab, fm.Info.Classes)
	return cov, fm.Info.Classes - len(cov.Missing), err
}

// tableCoverage is tab:kappa-matched: κ_C of the ω ranking by selector and loss, with
// the PCI-Lanczos initializer (fig:acc-del(a): "across selectors (PCI-Lanczos fixed)").
func tableCoverage(ctx context.Context, r *runner, t *Table) error {
	t.Settings["init"] = "pci-lanczos"
	err := eachRow(r, t, datasetsMNISTFirst, func(d, l item, row string) error {
		flag := d.flag
		for _, s := range selectors {
			if r.keepCell(t, row, s.name) {
				continue
			}
			fm, err := r.model(ctx, flag, l.flag, "pci-lanczos", s.flag, 1, false)
			if err != nil {
				return err
			}
			cov, _, err := kappa(fm, fm.Fits.Fits[0])
			if err != nil {
				return err
			}
			p := t.cell(row, s.name).PaperRange[0]
			if !cov.Covered {
				t.set(row, s.name, math.NaN(), math.NaN(), 0, fmt.Sprintf("cairn: classes %v absent from the pool", cov.Missing))
				continue
			}
			t.set(row, s.name, float64(cov.Kappa), math.NaN(), kappaTolerance(p), "κ_C allowance: max(2, 25% of the paper's value)")
		}
		return nil
	})
	if err != nil {
		return err
	}
	setSummary(t, tableRows(datasetsMNISTFirst), selectors, true, true)
	return nil
}

// tableInit is tab:d3-merged: test k-NN accuracy (%) by initializer, k-means++ landmarks
// (fig:acc-del(a): "initializers (k-means++ fixed)").
func tableInit(ctx context.Context, r *runner, t *Table) error {
	t.Settings["selector"] = "kmeans++"
	err := eachRow(r, t, datasetsMNISTFirst, func(d, l item, row string) error {
		flag := d.flag
		for _, in := range inits {
			if r.keepCell(t, row, in.name) {
				continue
			}
			fm, err := r.model(ctx, flag, l.flag, in.flag, "kmeans++", 1, true)
			if err != nil {
				return err
			}
			acc := 100 * fm.Fits.Fits[0].TestEval.Accuracy
			t.set(row, in.name, acc, math.NaN(), accuracyTolerance, accuracyNote)
		}
		return nil
	})
	if err != nil {
		return err
	}
	setSummary(t, tableRows(datasetsMNISTFirst), inits, false, false)
	return nil
}

const accuracyNote = "cairn: plain k-NN test accuracy of the selected checkpoint (50 neighbours; validation-selected, balanced on Adult)"

// tableAll is tab:table1-all: Kaiming initializer, k-means++ landmarks: accuracy, κ_C
// and the classes the pool holds.
func tableAll(ctx context.Context, r *runner, t *Table) error {
	t.Settings["init"], t.Settings["selector"] = "kaiming", "kmeans++"
	return eachRow(r, t, datasets, func(d, l item, row string) error {
		fm, err := r.model(ctx, d.flag, l.flag, "kaiming", "kmeans++", 1, true)
		if err != nil {
			return err
		}
		f := fm.Fits.Fits[0]
		t.set(row, "Acc (%)", 100*f.TestEval.Accuracy, math.NaN(), accuracyTolerance, accuracyNote)
		cov, seen, err := kappa(fm, f)
		if err != nil {
			return err
		}
		if cov.Covered {
			p := t.cell(row, "κ_C").PaperRange[0]
			t.set(row, "κ_C", float64(cov.Kappa), math.NaN(), kappaTolerance(p), "κ_C allowance: max(2, 25% of the paper's value)")
		} else {
			t.set(row, "κ_C", math.NaN(), math.NaN(), 0, fmt.Sprintf("cairn: classes %v absent from the pool", cov.Missing))
		}
		t.set(row, "classes seen", float64(seen), math.NaN(), 0, "")
		return nil
	})
}

// tableKrepes is tab:cairn-vs-krepes: Adam (r.size.Seeds fits) and the KREPES final CG
// iterate from the same PCI start on the same blocks (cairnctl fit --solver krepes's
// code), their k-NN accuracy, the speed-up (KREPES solve time including its setup over
// Adam's time to its selected checkpoint), and identifiability: the best of the three
// rankings' median percentiles (cairnctl audit's code) for the Adam fits and for the
// KREPES solution against the same random deletions.
func tableKrepes(ctx context.Context, r *runner, t *Table) error {
	t.Settings["init"], t.Settings["selector"] = "pci", "pc-ntk"
	t.Settings["krepes"] = map[string]any{"damping": 1e-3, "cg_iters": 150}
	return eachRow(r, t, datasets, func(d, l item, row string) error {
		fm, err := r.model(ctx, d.flag, l.flag, "pci", "pc-ntk", r.size.Seeds, true)
		if err != nil {
			return err
		}
		var accs, toBest []float64
		for _, f := range fm.Fits.Fits {
			accs = append(accs, 100*f.TestEval.Accuracy)
			if f.BestEpoch >= 1 {
				toBest = append(toBest, f.History[f.BestEpoch-1].Seconds)
			}
		}
		mean, sd := meanSD(accs)
		t.set(row, "CAIRN acc (%)", mean, sd, accuracyTolerance, fmt.Sprintf("cairn: mean ± s.d. over %d Adam fits; %s", len(accs), accuracyNote))
		// KREPES from the same started problem: offline.FitModel scaled the blocks and
		// initialized; the fit command's krepes path runs on exactly these.
		c := config.Default().Fit
		c.Loss = l.flag
		rec, err := pipeline.RecipeOf(c)
		if err != nil {
			return err
		}
		ff := offline.FitOptions{Pipeline: r.pipeline(d.flag), Damping: 1e-3, CGIters: 150, KNN: fit.DefaultOptions(rec.Loss).KNN, SkipIterateEval: true}
		secs := map[string]float64{}
		kr, err := ff.Krepes(fm.Prob, fm.Init, rec.Loss, fm.Info.Balanced, secs)
		if err != nil {
			return fmt.Errorf("%s krepes: %w", row, err)
		}
		// KREPES's time is its setup and CG iterations, without the evaluation of the
		// final iterate (IterateSeconds; Adam's time to its checkpoint likewise has no
		// test evaluation in it).
		solve := kr.SetupSeconds // no CG iteration ran: a zero gradient
		if n := len(kr.IterateSeconds); n > 0 {
			solve = kr.IterateSeconds[n-1]
		}
		kacc := 100 * kr.TestEval.Accuracy
		r.logf("krepes %s: %.2f%% in %.1f s (%.1f s with the final evaluation)", row, kacc, solve, secs["fit"])
		t.set(row, "KREPES acc (%)", kacc, math.NaN(), accuracyTolerance, "cairn: KREPES final CG iterate, same blocks and PCI start")
		t.set(row, "Δ (points)", mean-kacc, sd, accuracyTolerance, "")
		speed := math.NaN()
		if len(toBest) > 0 {
			speed = solve / verify.Median(toBest)
		}
		t.set(row, "speed-up", speed, math.NaN(), 0,
			fmt.Sprintf("%s speed-up: KREPES %.2f s (setup and %d CG iterations, no evaluation) over Adam's median %.2f s to its checkpoint, on 2 CPU cores (the paper: one GPU, float32); matches when ≥ the paper's", row, solve, len(kr.IterateSeconds), verify.Median(toBest)))
		if c := t.cell(row, "speed-up"); c.Cairn != nil {
			c.Match = *c.Cairn >= c.PaperRange[0]
		}
		rep, err := r.identifiability(fm, d.flag, 10, r.size.Random)
		if err != nil {
			return fmt.Errorf("%s audit: %w", row, err)
		}
		t.set(row, "identifiability CAIRN", bestRanking(rep), math.NaN(), 100.0/float64(r.size.Random),
			fmt.Sprintf("best of the three rankings' percentiles (median over %d seeds) against %d random top-10 deletions; allowance one random set", len(fm.Fits.Fits), r.size.Random))
		kfm := *fm
		kfm.Fits = &fit.Repeated{Fits: []*fit.Result{&kr.Result}}
		kfm.Seconds = maps.Clone(fm.Seconds)
		krep, err := r.identifiability(&kfm, d.flag, 10, r.size.Random)
		if err != nil {
			return fmt.Errorf("%s audit krepes: %w", row, err)
		}
		t.set(row, "identifiability KREPES", bestRanking(krep), math.NaN(), 100.0/float64(r.size.Random),
			"the same audit of the KREPES solution (deterministic: one fit), same random sets")
		return nil
	})
}

// bestRanking is the best of the displacement, contribution and leave-one-out median
// percentiles of rep, in %.
func bestRanking(rep *Audit) float64 {
	best := math.Inf(-1)
	for _, name := range []string{"displacement", "contribution", "leave_one_out"} {
		if row := rep.Rankings[name]; row != nil {
			best = math.Max(best, row.PercentileMedian)
		}
	}
	return 100 * best
}

// tableDeletion is fig:acc-del(b): the top-10 landmarks by ω and by Latent-Space
// Reselection pass when deleting them lowers the 50-NN confidence more than every one
// of 20 random deletions of 10 landmarks (cairnctl audit's code, one fit).
func tableDeletion(ctx context.Context, r *runner, t *Table) error {
	const random = 20
	t.Settings["random"], t.Settings["k"], t.Settings["init"], t.Settings["selector"] = random, 10, "pci", "pc-ntk"
	return eachRow(r, t, datasets, func(d, l item, row string) error {
		fm, err := r.model(ctx, d.flag, l.flag, "pci", "pc-ntk", 1, true)
		if err != nil {
			return err
		}
		rep, err := r.identifiability(fm, d.flag, 10, random)
		if err != nil {
			return fmt.Errorf("%s audit: %w", row, err)
		}
		worst := slices.Max(rep.RandomEffects[0])
		for _, rk := range []struct{ name, col string }{{"displacement", "top-10 by ω"}, {"reselection", "Latent-Space Reselection"}} {
			row2 := rep.Rankings[rk.name]
			pass := float64(failValue)
			if row2.Percentiles[0] == 1 {
				pass = passValue
			}
			t.set(row, rk.col, pass, math.NaN(), 0, "")
			note := fmt.Sprintf("%s, %s: deletion effect %.4g vs the most harmful random deletion's %.4g", row, rk.col, row2.Effects[0], worst)
			if worst > 0 {
				note += fmt.Sprintf(" (%.2f×)", row2.Effects[0]/worst)
			}
			t.cell(row, rk.col).Note = note + fmt.Sprintf("; percentile %.2f", row2.Percentiles[0])
		}
		return nil
	})
}

// eachRow calls row for every data set of ds and every loss, in that order, with the
// row's name ("MNIST SimCLR"); a data set that was not given (Adult without --adult)
// has its rows marked as not run instead.
func eachRow(r *runner, t *Table, ds []item, row func(d, l item, name string) error) error {
	for _, d := range ds {
		for _, l := range losses {
			name := d.name + " " + l.name
			if r.dataSpec(d.flag) == "" {
				t.skip(name, r.notRun(d.flag))
				continue
			}
			if r.keepRow(t, name) {
				continue
			}
			if err := row(d, l, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// meanSD returns the mean and the sample standard deviation of xs (NaN s.d. for fewer
// than two values).
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// The summary rows of tab:kappa-matched and tab:d3-merged, derived from a table's cells
// by summaryOf.
const (
	summaryMeanRank   = "Mean rank"
	summaryMeanRatio  = "Mean ratio"
	summaryWorstRatio = "Worst ratio"
)

// summaryOf computes the paper's summary rows of a grid vals[row][column]: each row's
// values ranked (1 = best: the lowest when lowerBetter, else the highest; tied values
// share the mean of their ranks), then per column the mean rank over rows, the mean
// ratio to the row's best value and the worst (largest) such ratio. A +Inf value (a pool
// that never covers every class) ranks last and makes its column's ratios +Inf.
func summaryOf(vals [][]float64, lowerBetter bool) (meanRank, meanRatio, worstRatio []float64) {
	if len(vals) == 0 {
		return nil, nil, nil
	}
	cols := len(vals[0])
	meanRank, meanRatio, worstRatio = make([]float64, cols), make([]float64, cols), make([]float64, cols)
	for _, row := range vals {
		better := func(a, b float64) bool { return a < b }
		if !lowerBetter {
			better = func(a, b float64) bool { return a > b }
		}
		best := row[0]
		for _, v := range row {
			if better(v, best) {
				best = v
			}
		}
		for j, v := range row {
			// rank = 1 + #better + (#ties − 1)/2, ties counting v itself.
			var nb, nt float64
			for _, w := range row {
				switch {
				case better(w, v):
					nb++
				case w == v:
					nt++
				}
			}
			meanRank[j] += 1 + nb + (nt-1)/2
			ratio := v / best
			if !lowerBetter {
				ratio = best / v
			}
			meanRatio[j] += ratio
			worstRatio[j] = math.Max(worstRatio[j], ratio)
		}
	}
	for j := range cols {
		meanRank[j] /= float64(len(vals))
		meanRatio[j] /= float64(len(vals))
	}
	return meanRank, meanRatio, worstRatio
}

// setSummary fills t's summary rows from its cells in rows × cols (summaryOf; rows
// without any computed cell, such as Adult without --adult, are left out; a missing
// cell of a computed row counts as the worst value, ±Inf). ratios also fills
// the mean and worst ratio rows. Allowances: half a rank; a quarter of the paper's ratio.
func setSummary(t *Table, rows []string, cols []item, lowerBetter, ratios bool) {
	var vals [][]float64
	var used []string
	for _, r := range rows {
		row := make([]float64, len(cols))
		computed := false
		for j, c := range cols {
			if v := t.cell(r, c.name).Cairn; v != nil {
				row[j], computed = *v, true
			} else if lowerBetter {
				row[j] = math.Inf(1)
			} else {
				row[j] = math.Inf(-1)
			}
		}
		if computed {
			vals, used = append(vals, row), append(used, r)
		}
	}
	if len(vals) == 0 {
		return
	}
	rank, ratio, worst := summaryOf(vals, lowerBetter)
	note := fmt.Sprintf("derived from cairn's rows %s as the paper derives its own", strings.Join(used, ", "))
	for j, c := range cols {
		t.set(summaryMeanRank, c.name, rank[j], math.NaN(), 0.5, note+" (allowance half a rank)")
		if ratios {
			p := t.cell(summaryMeanRatio, c.name).PaperRange[0]
			t.set(summaryMeanRatio, c.name, ratio[j], math.NaN(), 0.25*p, note+" (allowance a quarter of the paper's ratio)")
			p = t.cell(summaryWorstRatio, c.name).PaperRange[0]
			t.set(summaryWorstRatio, c.name, worst[j], math.NaN(), 0.25*p, note+" (allowance a quarter of the paper's ratio)")
		}
	}
}

// tableRows returns the row names of ds × losses ("MNIST BT", ...).
func tableRows(ds []item) []string {
	var rows []string
	for _, d := range ds {
		for _, l := range losses {
			rows = append(rows, d.name+" "+l.name)
		}
	}
	return rows
}
