package offline

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// FitOptions are the settings of cairnctl fit, each named by its flag.
type FitOptions struct {
	Pipeline               Pipeline
	Loss, Init, Solver     string // --loss, --init, --solver (adam | krepes)
	Fits, K, Epochs        int    // --fits, --k, --epochs
	InitScale, KernelScale string // --init-scale, --kernel-scale
	LR, WeightDecay        float64
	Decay                  string // --decay: l2 | decoupled
	KNN                    int
	Probe                  bool
	TraceEvery             int
	Selector               string
	ValFrac                float64
	TestN                  int
	Damping                float64 // --damping: KREPES Gauss–Newton damping λ
	CGIters                int     // --cg-iters
	Precision              string  // --precision: float32 | float64
	// SkipIterateEval leaves out KREPES's per-iterate test evaluations (reproduce sets
	// it; the fit command reports them).
	SkipIterateEval bool
}

// Fit is cairnctl fit, paper Alg. cairn-stage2 (and the KREPES baseline) end to end:
// data → eNTK sketch → two-view landmark pool → kernel blocks → initializer → solver →
// k-NN evaluation. It returns the report cairnctl fit prints as JSON.
//
// Splits (our documented choice): the first --n rows of the data set's train split are
// loaded; a seeded fraction --val-frac of them, chosen by a hash of (seed, id) so the
// choice depends on ids only, is held out as the labelled validation split (checkpoint
// selection and k-NN reference); the rest are the training points of the fit (both views,
// landmark selection). The test split is the first --test-n rows of the data set's own
// test split. Validation and test points enter unaugmented. Accuracy is the test k-NN
// accuracy against the validation embeddings (balanced accuracy on Adult).
func Fit(ctx context.Context, o *FitOptions) (map[string]any, error) {
	r, err := o.Recipe()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	prob, info, err := Blocks(ctx, &o.Pipeline, o.Selector, o.ValFrac, o.TestN, nil)
	if err != nil {
		return nil, err
	}
	blocks := time.Since(t0).Seconds()
	r.Options.Balanced = info.Balanced
	out, err := o.run(ctx, &r, prob, info)
	if err != nil {
		return nil, err
	}
	secs := out["seconds"].(map[string]float64)
	secs["kernel"] += blocks
	secs["total"] = secs["kernel"] + secs["init"] + secs["fit"]
	for name, s := range info.Phases {
		secs["kernel_"+name] = s
	}
	return out, nil
}

// Recipe checks the settings that are the command's own (solver, splits, decay form) and
// returns the daemon's fit recipe (pipeline.RecipeOf of the daemon's defaults) with the
// settings, checked by Recipe.Validate, all before any data is loaded.
func (o *FitOptions) Recipe() (pipeline.Recipe, error) {
	if err := o.check(); err != nil {
		return pipeline.Recipe{}, err
	}
	c := config.Default().Fit
	c.Precision = o.Precision
	c.Loss, c.Init, c.K, c.Epochs, c.Fits = o.Loss, o.Init, o.K, o.Epochs, o.Fits
	c.LearningRate, c.WeightDecay = o.LR, o.WeightDecay
	r, err := pipeline.RecipeOf(c)
	if err != nil {
		return r, fmt.Errorf("--loss %q, --init %q: %w", o.Loss, o.Init, err)
	}
	r.KernelScale, r.InitScale = o.KernelScale, o.InitScale
	r.Options.DecoupledDecay, r.Options.Probe = o.Decay == "decoupled", o.Probe
	r.Options.KNN, r.Options.TraceEvery = o.KNN, o.TraceEvery
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%s: %w", recipeFlagsOf(err), err)
	}
	return r, nil
}

// check reports the first setting of the command's own that is out of range.
func (o *FitOptions) check() error {
	switch {
	case o.Solver != "adam" && o.Solver != "krepes":
		return fmt.Errorf("--solver: %q (want adam or krepes)", o.Solver)
	case o.Solver == "krepes" && o.Fits != 1:
		return fmt.Errorf("--fits: %d (1 for the deterministic krepes solver)", o.Fits)
	case o.Solver == "krepes" && o.Loss == "byol":
		return fmt.Errorf("--solver krepes --loss byol: %w (BYOL's step has no loss Hessian to solve with)", fit.ErrUnsupported)
	case !(o.ValFrac > 0 && o.ValFrac < 1):
		return fmt.Errorf("--val-frac: %v must be in (0, 1)", o.ValFrac)
	case math.IsInf(o.WeightDecay, 0):
		// fit.Options.Validate accepts +Inf (it checks only ≥ 0).
		return fmt.Errorf("--weight-decay: %v must be non-negative and finite", o.WeightDecay)
	case o.Decay != "l2" && o.Decay != "decoupled":
		return fmt.Errorf("--decay: %q (want l2 or decoupled)", o.Decay)
	case o.TraceEvery > 0 && o.Solver != "adam":
		return fmt.Errorf("--trace-every: %d (only with --solver adam: krepes scores every CG iterate)", o.TraceEvery)
	case o.TestN < 0:
		return fmt.Errorf("--test-n: %d must be ≥ 0", o.TestN)
	case o.Precision != "float32" && o.Precision != "float64":
		return fmt.Errorf("--precision: %q (want float32 or float64)", o.Precision)
	}
	return nil
}

// recipeFieldFlags names the flag behind each pipeline.Recipe field that Validate
// reports (it names fields: "LR = 0", "(field K)").
var recipeFieldFlags = []struct{ field, flag string }{
	{"K", "--k"}, {"Fits", "--fits"}, {"Epochs", "--epochs"}, {"LR", "--lr"}, {"WeightDecay", "--weight-decay"},
	{"KNN", "--knn"}, {"TraceEvery", "--trace-every"}, {"InitScale", "--init-scale"},
}

// recipeFlagsOf lists the flags whose recipe fields err names, so the user sees the
// flag to change next to Validate's field and value.
func recipeFlagsOf(err error) string {
	var flags []string
	for _, f := range recipeFieldFlags {
		if regexp.MustCompile(`\b` + f.field + `\b`).MatchString(err.Error()) {
			flags = append(flags, f.flag)
		}
	}
	if len(flags) == 0 {
		return "fit settings"
	}
	return strings.Join(flags, ", ")
}

// run fits prob with r (Adam, r.Fits fits) or starts it with r and runs KREPES, and
// returns the report without the kernel-building times.
func (o *FitOptions) run(ctx context.Context, r *pipeline.Recipe, prob *fit.Problem, info *BlockInfo) (map[string]any, error) {
	seed := o.Pipeline.Seed
	var st *pipeline.Started
	var adam *fit.Repeated
	if o.Solver == "adam" {
		fitted, err := r.Run(ctx, prob, seed)
		if err != nil {
			return nil, fmt.Errorf("fit (--kernel-scale %q, --init %s, --init-scale %q): %w", o.KernelScale, r.Init, o.InitScale, err)
		}
		st, adam = fitted.Started, fitted.Fits
	} else {
		var err error
		if st, err = r.Start(prob, seed); err != nil {
			return nil, fmt.Errorf("fit (--kernel-scale %q, --init %s, --init-scale %q): %w", o.KernelScale, r.Init, o.InitScale, err)
		}
	}
	init, balanced := st.Init, info.Balanced
	out := map[string]any{
		"data": o.Pipeline.Data, "loss": r.Loss.String(), "init": r.Init.String(), "solver": o.Solver,
		"seed": seed, "selector": o.Selector, "k": o.K, "M": info.M,
		"n_train": info.NTrain, "n_val": info.NVal, "n_test": info.NTest,
		"init_retained": init.Retained, "k_used": init.A0.RawMatrix().Cols, "seconds": st.Seconds,
		"kernel_scale": st.KernelScale, "init_scale": st.InitScale,
		"accuracy_metric": "accuracy", "knn": o.KNN,
	}
	if balanced {
		out["accuracy_metric"] = "balanced_accuracy"
	}
	if r.Init == fit.PCILanczos {
		// Dense PCI on the same scaled blocks, the reference of the Lanczos error.
		dense, err := fit.Initialize(fit.PCI, prob, o.K, seed)
		if err != nil {
			return nil, fmt.Errorf("dense PCI for the Lanczos check: %w", err)
		}
		out["lanczos_error"] = fit.LanczosError(init, dense)
		out["lanczos_steps"] = init.LanczosSteps
		out["ritz_residuals"] = init.RitzResiduals
		out["ritz_residual_max"] = slices.Max(append([]float64{0}, init.RitzResiduals...))
	}
	var res *fit.Result
	if adam != nil {
		res = adam.Fits[0]
		reportAdam(out, r, adam, balanced)
	} else {
		kr, err := o.Krepes(prob, init, r.Loss, balanced, st.Seconds)
		if err != nil {
			return nil, err
		}
		res = &kr.Result
		reportKrepes(out, kr, o.Damping, balanced)
	}
	reportResult(out, res, o.Probe, o.Solver == "adam", balanced)
	return out, nil
}

// Krepes runs the KREPES baseline (fit.Krepes with o's seed, damping, CG iterations,
// probe, k-NN and SkipIterateEval) from the started initialization init on prob, and
// records its time in secs["fit"].
func (o *FitOptions) Krepes(prob *fit.Problem, init *fit.InitResult, loss fit.Loss, balanced bool, secs map[string]float64) (*fit.KrepesResult, error) {
	opt := fit.DefaultKrepesOptions(loss)
	opt.Seed, opt.Balanced, opt.Damping, opt.MaxIter = o.Pipeline.Seed, balanced, o.Damping, o.CGIters
	opt.Probe, opt.KNN, opt.SkipIterateEval = o.Probe, o.KNN, o.SkipIterateEval
	t0 := time.Now()
	kr, err := fit.Krepes(prob, init.A0, opt)
	if err != nil {
		return nil, err
	}
	secs["fit"] = time.Since(t0).Seconds()
	return kr, nil
}

// reportAdam adds the Adam fits' keys: lr, omega{mean,tau2}, the per-fit accuracies and
// seeds when R > 1, and the first fit's trace.
func reportAdam(out map[string]any, r *pipeline.Recipe, rep *fit.Repeated, balanced bool) {
	out["lr"] = r.Options.LR
	omega := map[string]any{"mean": rep.OmegaMean}
	if rep.OmegaVar != nil {
		omega["tau2"] = rep.OmegaVar
		var accs []any
		for _, f := range rep.Fits {
			accs = append(accs, jsonNum(f.TestEval.Value(balanced)))
		}
		out["accuracy_per_fit"] = accs
		out["fit_seeds"] = rep.Seeds
	}
	out["omega"] = omega
	if res := rep.Fits[0]; r.Options.TraceEvery > 0 {
		// The first fit's trace (every fit of --fits R traces; they differ only in seed).
		tr := make([]any, len(res.Trace))
		for i, p := range res.Trace {
			tr[i] = map[string]any{"step": p.Step, "epoch": p.Epoch, "seconds": p.Seconds, "accuracy": jsonNum(p.Test.Value(balanced))}
		}
		out["trace"] = tr
	}
}

// reportKrepes adds the KREPES run's keys: omega{mean}, the CG residuals and every
// iterate's accuracy and time.
func reportKrepes(out map[string]any, kr *fit.KrepesResult, damping float64, balanced bool) {
	out["omega"] = map[string]any{"mean": kr.Omega}
	out["cg_residuals"] = kr.CGResiduals
	iter := make([]any, len(kr.IterateEval))
	for i, e := range kr.IterateEval {
		iter[i] = jsonNum(e.Value(balanced))
	}
	out["cg_iterate_accuracy"] = iter
	out["cg_iterate_seconds"] = kr.IterateSeconds
	out["krepes_setup_seconds"] = kr.SetupSeconds
	out["krepes_negative_curvature"] = kr.NegativeCurvature
	out["damping"] = damping
}

// reportResult adds the reported fit's accuracies, probe scores, epochs and history.
func reportResult(out map[string]any, res *fit.Result, probe, adam, balanced bool) {
	out["accuracy"] = jsonNum(res.TestEval.Value(balanced))
	out["plain_accuracy"] = jsonNum(res.TestEval.Accuracy)
	out["balanced_accuracy"] = jsonNum(res.TestEval.BalancedAccuracy)
	out["init_accuracy"] = jsonNum(res.InitEval.Value(balanced))
	out["init_val"] = jsonNum(res.InitVal)
	if probe {
		out["probe_accuracy"] = jsonNum(res.TestProbe.Value(balanced))
		out["probe_plain_accuracy"] = jsonNum(res.TestProbe.Accuracy)
		out["init_probe_accuracy"] = jsonNum(res.InitProbe.Value(balanced))
	}
	out["epochs"] = res.Epochs
	out["best_epoch"] = res.BestEpoch
	out["selected_by"] = res.SelectedBy
	hist := make([]map[string]any, len(res.History))
	for i, h := range res.History {
		hist[i] = map[string]any{"train_loss": jsonNum(h.TrainLoss), "val": jsonNum(h.ValMetric), "seconds": h.Seconds}
	}
	if adam && res.BestEpoch >= 1 {
		// Time to the selected checkpoint (scoring of the epochs up to it included), the
		// quantity to compare with the KREPES final iterate's cg_iterate_seconds.
		out["seconds_to_best"] = res.History[res.BestEpoch-1].Seconds
	}
	out["history"] = hist
}

// jsonNum maps NaN and ±Inf (no test labels, no value) to JSON null.
func jsonNum(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}
