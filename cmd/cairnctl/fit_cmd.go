package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/rng"
)

// fitCmd is paper Alg. cairn-stage2 (and the KREPES baseline) end to end: data → eNTK
// sketch → two-view landmark pool → kernel blocks → initializer → solver → k-NN
// evaluation, printing one JSON object.
//
// Splits (our documented choice): the first --n rows of the data set's train split are
// loaded; a seeded fraction --val-frac of them, chosen by a hash of (seed, id) so the
// choice depends on ids only, is held out as the labelled validation split (checkpoint
// selection and k-NN reference); the rest are the training points of the fit (both views,
// landmark selection). The test split is the first --test-n rows of the data set's own
// test split. Validation and test points enter unaugmented. Accuracy is the test k-NN
// accuracy against the validation embeddings (balanced accuracy on Adult).
func fitCmd(fs *flag.FlagSet) cli.Func {
	var f fitFlags
	f.register(fs)
	return func(ctx context.Context, stdio cli.Stdio) error {
		r, err := f.recipe()
		if err != nil {
			return err
		}
		t0 := time.Now()
		prob, info, err := fitBlocks(ctx, &f.pf, f.selector, f.valFrac, f.testN, nil)
		if err != nil {
			return err
		}
		blocks := time.Since(t0).Seconds()
		r.Options.Balanced = info.balanced
		out, err := f.run(ctx, &r, prob, info)
		if err != nil {
			return err
		}
		secs := out["seconds"].(map[string]float64)
		secs["kernel"] += blocks
		secs["total"] = secs["kernel"] + secs["init"] + secs["fit"]
		for name, s := range info.phases {
			secs["kernel_"+name] = s
		}
		return writeJSON(stdio.Out, out)
	}
}

// fitFlags are the flags of cairnctl fit.
type fitFlags struct {
	pf                 pipelineFlags
	loss, init, solver string
	fits, k, epochs    int
	initScale, kscale  string
	lr, wd             float64
	decay              string
	knn                int
	probe              bool
	traceEvery         int
	selector           string
	valFrac            float64
	testN              int
	damping            float64
	cgIters            int
	precision          string
	// skipIterateEval leaves out KREPES's per-iterate test evaluations (reproduce sets
	// it; the fit command reports them).
	skipIterateEval bool
}

func (f *fitFlags) register(fs *flag.FlagSet) {
	d := fit.DefaultOptions(fit.SimCLR)
	f.pf.register(fs)
	fs.StringVar(&f.loss, "loss", "simclr", "objective: bt | simclr | vicreg | byol")
	fs.StringVar(&f.init, "init", "pci", "initializer: kaiming | pci | pci-lanczos | csi | aui | krepes-pci")
	fs.StringVar(&f.solver, "solver", "adam", "solver: adam | krepes (not with --loss byol)")
	fs.IntVar(&f.fits, "fits", 1, "number R of repeated Adam fits differing only in the fit seed")
	fs.IntVar(&f.k, "k", 256, "output dimension of the encoder")
	fs.IntVar(&f.epochs, "epochs", 20, "Adam epochs")
	fs.StringVar(&f.initScale, "init-scale", fit.DefaultInitScale, "multiply Ã₀ by this factor; unit (default): by the factor giving the training latents K_A Ã₀ unit mean per-dimension variance; auto: unit for the PCI initializers, 1 for the others")
	fs.Float64Var(&f.lr, "lr", d.LR, "Adam peak learning rate (paper Table hparams; in units of Ã, see fit.DefaultInitScale)")
	fs.Float64Var(&f.wd, "weight-decay", d.WeightDecay, "Adam weight decay (paper Table hparams)")
	fs.StringVar(&f.decay, "decay", "l2", "how Adam applies --weight-decay: l2 (added to the gradient, torch.optim.Adam) | decoupled (AdamW)")
	fs.IntVar(&f.knn, "knn", d.KNN, "neighbours of the majority-vote k-NN accuracy (checkpoint selection and the reported accuracy)")
	fs.BoolVar(&f.probe, "probe", true, "also score the initialization and the reported point with the paper's linear-SVM probe (probe_accuracy, init_probe_accuracy)")
	fs.IntVar(&f.traceEvery, "trace-every", 0, "Adam: also score the test split every N optimizer steps (trace; the Adam side of the paper's accuracy-vs-time figure; 0 = off)")
	fs.StringVar(&f.selector, "selector", coreset.SelPCNTK, "landmark selector")
	fs.Float64Var(&f.valFrac, "val-frac", 0.2, "fraction of the loaded train rows held out for validation")
	fs.IntVar(&f.testN, "test-n", 2000, "rows of the test split to evaluate on (0 = no test evaluation)")
	fs.Float64Var(&f.damping, "damping", 1e-3, "KREPES Gauss–Newton damping λ")
	fs.IntVar(&f.cgIters, "cg-iters", 150, "KREPES maximum CG iterations")
	fs.StringVar(&f.precision, "precision", config.Default().Fit.Precision, "Adam batch products: float32 (about half the time of a step) | float64 (parameters, optimizer and loss are float64 either way; byol always float64)")
	fs.StringVar(&f.kscale, "kernel-scale", fit.ScaleDiag, "kernel normalization: diag (divide every block by the mean of diag K_mm) | none")
}

// recipe checks the flags that are the command's own (solver, splits, decay form) and
// returns the daemon's fit recipe (pipeline.RecipeOf of the daemon's defaults) with the
// flags' settings, checked by Recipe.Validate, all before any data is loaded.
func (f *fitFlags) recipe() (pipeline.Recipe, error) {
	if f.solver != "adam" && f.solver != "krepes" {
		return pipeline.Recipe{}, fmt.Errorf("--solver: %q (want adam or krepes)", f.solver)
	}
	if f.solver == "krepes" && f.fits != 1 {
		return pipeline.Recipe{}, fmt.Errorf("--fits: %d (1 for the deterministic krepes solver)", f.fits)
	}
	if f.solver == "krepes" && f.loss == "byol" {
		return pipeline.Recipe{}, fmt.Errorf("--solver krepes --loss byol: %w (BYOL's step has no loss Hessian to solve with)", fit.ErrUnsupported)
	}
	if !(f.valFrac > 0 && f.valFrac < 1) {
		return pipeline.Recipe{}, fmt.Errorf("--val-frac: %v must be in (0, 1)", f.valFrac)
	}
	if math.IsInf(f.wd, 0) {
		// fit.Options.Validate accepts +Inf (it checks only ≥ 0).
		return pipeline.Recipe{}, fmt.Errorf("--weight-decay: %v must be non-negative and finite", f.wd)
	}
	if f.decay != "l2" && f.decay != "decoupled" {
		return pipeline.Recipe{}, fmt.Errorf("--decay: %q (want l2 or decoupled)", f.decay)
	}
	if f.traceEvery > 0 && f.solver != "adam" {
		return pipeline.Recipe{}, fmt.Errorf("--trace-every: %d (only with --solver adam: krepes scores every CG iterate)", f.traceEvery)
	}
	if f.testN < 0 {
		return pipeline.Recipe{}, fmt.Errorf("--test-n: %d must be ≥ 0", f.testN)
	}
	if f.precision != "float32" && f.precision != "float64" {
		return pipeline.Recipe{}, fmt.Errorf("--precision: %q (want float32 or float64)", f.precision)
	}
	c := config.Default().Fit
	c.Precision = f.precision
	c.Loss, c.Init, c.K, c.Epochs, c.Fits = f.loss, f.init, f.k, f.epochs, f.fits
	c.LearningRate, c.WeightDecay = f.lr, f.wd
	r, err := pipeline.RecipeOf(c)
	if err != nil {
		return r, fmt.Errorf("--loss %q, --init %q: %w", f.loss, f.init, err)
	}
	r.KernelScale, r.InitScale = f.kscale, f.initScale
	r.Options.DecoupledDecay, r.Options.Probe = f.decay == "decoupled", f.probe
	r.Options.KNN, r.Options.TraceEvery = f.knn, f.traceEvery
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%s: %w", recipeFlagsOf(err), err)
	}
	return r, nil
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
func (f *fitFlags) run(ctx context.Context, r *pipeline.Recipe, prob *fit.Problem, info *blockInfo) (map[string]any, error) {
	seed := f.pf.seed
	var st *pipeline.Started
	var adam *fit.Repeated
	if f.solver == "adam" {
		fitted, err := r.Run(ctx, prob, seed)
		if err != nil {
			return nil, fmt.Errorf("fit (--kernel-scale %q, --init %s, --init-scale %q): %w", f.kscale, r.Init, f.initScale, err)
		}
		st, adam = fitted.Started, fitted.Fits
	} else {
		var err error
		if st, err = r.Start(prob, seed); err != nil {
			return nil, fmt.Errorf("fit (--kernel-scale %q, --init %s, --init-scale %q): %w", f.kscale, r.Init, f.initScale, err)
		}
	}
	init, balanced := st.Init, info.balanced
	out := map[string]any{
		"data": f.pf.data, "loss": r.Loss.String(), "init": r.Init.String(), "solver": f.solver,
		"seed": seed, "selector": f.selector, "k": f.k, "M": info.m,
		"n_train": info.nTrain, "n_val": info.nVal, "n_test": info.nTest,
		"init_retained": init.Retained, "k_used": init.A0.RawMatrix().Cols, "seconds": st.Seconds,
		"kernel_scale": st.KernelScale, "init_scale": st.InitScale,
		"accuracy_metric": "accuracy", "knn": f.knn,
	}
	if balanced {
		out["accuracy_metric"] = "balanced_accuracy"
	}
	if r.Init == fit.PCILanczos {
		// Dense PCI on the same scaled blocks, the reference of the Lanczos error.
		dense, err := fit.Initialize(fit.PCI, prob, f.k, seed)
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
		kr, err := f.krepes(prob, init, r.Loss, balanced, st.Seconds)
		if err != nil {
			return nil, err
		}
		res = &kr.Result
		reportKrepes(out, kr, f.damping, balanced)
	}
	reportResult(out, res, f.probe, f.solver == "adam", balanced)
	return out, nil
}

// krepes runs the KREPES baseline from the started initialization, timing it in secs.
func (f *fitFlags) krepes(prob *fit.Problem, init *fit.InitResult, loss fit.Loss, balanced bool, secs map[string]float64) (*fit.KrepesResult, error) {
	opt := fit.DefaultKrepesOptions(loss)
	opt.Seed, opt.Balanced, opt.Damping, opt.MaxIter = f.pf.seed, balanced, f.damping, f.cgIters
	opt.Probe, opt.KNN, opt.SkipIterateEval = f.probe, f.knn, f.skipIterateEval
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

type blockInfo struct {
	m, nTrain, nVal, nTest int
	balanced               bool
	phases                 map[string]float64
	// The landmarks for attribution: the backbone, each landmark's input (the augmented
	// view the pool selected, M×D), its id ("<point id>#A" or "#B"), and the pool's
	// residual certificate (view A then view B summed).
	backbone    entk.Backbone
	landmarkX   []float64
	landmarkIDs []string
	landmarkLab []int // labels of the landmark points (nil without labels)
	classes     int   // number of classes of the data set
	traceR      float64
	traceK      float64
}

// fitBlocks builds the fit's kernel blocks with prepare's pipeline: load loads the rows
// and both views; the validation rows are split off (valSplit); the training rows'
// features are computed (featurize: float32 rows, as the daemon keeps them); the landmark
// pool is selected on the training rows only, so no validation point is a landmark;
// K_A, K_B come from kernelBlocks, K_mm, K_val and K_test from the same landmark features
// (validation and test points unaugmented, through the same sketch, featureChunk rows at
// a time). With a cache, the loaded and featurized training rows are taken from it when
// its flags and validation fraction match, and left in it otherwise.
func fitBlocks(ctx context.Context, pf *pipelineFlags, selector string, valFrac float64, testN int, cache *blockCache) (*fit.Problem, *blockInfo, error) {
	split, phases, err := cache.split(pf, valFrac)
	if err != nil {
		return nil, nil, err
	}
	prep, tr, valRows := split.all, split.train, split.val
	set := prep.set
	t0 := time.Now()
	vs, err := split.selection(ctx, selector, pf.m, pf.seed, pf.rule())
	if err != nil {
		return nil, nil, fmt.Errorf("--selector %q: %w", selector, err)
	}
	ka, kb := kernelBlocks(tr, vs)
	phases["select_and_blocks"] = time.Since(t0).Seconds()
	t0 = time.Now()
	n, mm, q := tr.set.N, vs.M, vs.Q
	lm := mat.NewDense(mm, q, vs.Landmarks)
	kmm := mat.NewDense(mm, mm, nil)
	kmm.Mul(lm, lm.T())
	against := func(x []float64, rows int) *mat.Dense { return kernelAgainst(prep.features, x, rows, lm) }
	d := set.D
	vx := make([]float64, 0, len(valRows)*d)
	vl := make([]int, 0, len(valRows))
	for _, r := range valRows {
		vx = append(vx, set.Row(r)...)
		vl = append(vl, set.Labels[r])
	}
	prob := &fit.Problem{
		KA: mat.NewDense(n, mm, ka), KB: mat.NewDense(n, mm, kb), Kmm: kmm, IDs: tr.set.IDs,
		Val: fit.Split{K: against(vx, len(valRows)), Labels: vl},
	}
	info := &blockInfo{m: mm, nTrain: n, nVal: len(valRows), balanced: set.Name == "adult", phases: phases, backbone: prep.features.Backbone(), classes: set.Classes}
	for v, sel := range []*coreset.Selection{vs.A, vs.B} {
		view, suffix := tr.viewA, "#A"
		if v == 1 {
			view, suffix = tr.viewB, "#B"
		}
		for _, i := range sel.Indices {
			info.landmarkX = append(info.landmarkX, view[i*d:(i+1)*d]...)
			info.landmarkIDs = append(info.landmarkIDs, tr.set.IDs[i]+suffix)
			if tr.set.Labels != nil {
				info.landmarkLab = append(info.landmarkLab, tr.set.Labels[i])
			}
		}
		if len(sel.ResidualTrace) > 0 {
			info.traceR += sel.ResidualTrace[len(sel.ResidualTrace)-1]
			info.traceK += sel.Trace
		}
	}
	if testN > 0 {
		ts, err := dataset.Open(pf.data, "test", testN)
		if err != nil {
			return nil, nil, fmt.Errorf("--test-n %d: %w", testN, err)
		}
		if ts.D != d || ts.Labels == nil {
			return nil, nil, fmt.Errorf("--data %q: test split has %d features (train %d) or no labels", pf.data, ts.D, d)
		}
		prob.Test = fit.Split{K: against(ts.X, ts.N), Labels: ts.Labels}
		info.nTest = ts.N
	}
	phases["val_test_blocks"] = time.Since(t0).Seconds()
	return prob, info, nil
}

// valSplit returns the training and validation row indices (each ascending): the
// validation rows are the round(frac·N) rows whose ids come first under a hash keyed by
// rng.Seed(seed, "cairnctl/fit/val"), so the split depends only on the ids.
func valSplit(ids []string, frac float64, seed uint64) (train, val []int) {
	key := rng.Seed(seed, "cairnctl/fit/val")
	type hk struct {
		h uint64
		i int
	}
	hs := make([]hk, len(ids))
	var kb [8]byte
	binary.BigEndian.PutUint64(kb[:], key)
	for i, id := range ids {
		f := fnv.New64a()
		f.Write(kb[:])
		f.Write([]byte(id))
		hs[i] = hk{f.Sum64(), i}
	}
	slices.SortFunc(hs, func(a, b hk) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(ids[a.i], ids[b.i])
	})
	nv := int(math.Round(frac * float64(len(ids))))
	for j, x := range hs {
		if j < nv {
			val = append(val, x.i)
		} else {
			train = append(train, x.i)
		}
	}
	slices.Sort(train)
	slices.Sort(val)
	return train, val
}

// subsetPrepared returns prep restricted to rows: inputs and views copied (N×D), feature
// rows (where computed) shared, not copied. prep is not modified.
func subsetPrepared(prep *prepared, rows []int) *prepared {
	s, d := prep.set, prep.set.D
	sub := &dataset.Set{Name: s.Name, N: len(rows), D: d, Shape: s.Shape, Classes: s.Classes}
	out := &prepared{set: sub, features: prep.features, q: prep.q, seconds: prep.seconds}
	for _, r := range rows {
		sub.X = append(sub.X, s.X[r*d:(r+1)*d]...)
		sub.IDs = append(sub.IDs, s.IDs[r])
		if s.Labels != nil {
			sub.Labels = append(sub.Labels, s.Labels[r])
		}
		out.viewA = append(out.viewA, prep.viewA[r*d:(r+1)*d]...)
		out.viewB = append(out.viewB, prep.viewB[r*d:(r+1)*d]...)
		if prep.featA != nil {
			out.featA = append(out.featA, prep.featA[r])
			out.featB = append(out.featB, prep.featB[r])
		}
	}
	return out
}

// fitSplit is the part of fitBlocks that does not depend on the selector: the loaded
// rows (all), the training rows with their features (train) and the validation rows'
// indices into all (val).
type fitSplit struct {
	all, train *prepared
	val        []int
	// sels are the selections made on train, by selector, budget and seed: a selection
	// does not depend on the loss or the initializer, so the fits of a table that differ
	// only in those share it. The landmark features are rebuilt from the rows.
	sels map[selKey][2]*coreset.Selection
}

type selKey struct {
	selector string
	m        int
	seed     uint64
	rule     pivotRule
}

// selection returns selectViews(ctx, s.train, selector, m, seed, rule), selecting only
// the first time.
func (s *fitSplit) selection(ctx context.Context, selector string, m int, seed uint64, rule pivotRule) (*viewSelection, error) {
	k := selKey{selector, m, seed, rule}
	if ab, ok := s.sels[k]; ok {
		return viewLandmarks(s.train, ab[0], ab[1]), nil
	}
	vs, err := selectViews(ctx, s.train, selector, m, seed, rule)
	if err != nil {
		return nil, err
	}
	if s.sels == nil {
		s.sels = map[selKey][2]*coreset.Selection{}
	}
	s.sels[k] = [2]*coreset.Selection{vs.A, vs.B}
	return vs, nil
}

// blockCache keeps the last fitSplit, so that a sequence of fits on the same data and
// pipeline flags (cairnctl reproduce's tables) computes the training rows' features
// once. It holds one split at a time: a new key drops the old split before the new one
// is built, bounding the memory to one data set's features. A nil cache keeps nothing.
type blockCache struct {
	key  pipelineFlags
	frac float64
	held *fitSplit
}

// drop forgets the cached split (a nil cache holds none).
func (c *blockCache) drop() {
	if c != nil {
		c.held = nil
	}
}

// split returns the fitSplit of pf and valFrac (from the cache when it holds it) and
// the phase times of building it (none on a cache hit).
func (c *blockCache) split(pf *pipelineFlags, valFrac float64) (*fitSplit, map[string]float64, error) {
	key := *pf
	key.m = 0 // the budget is the selector's, not the split's
	phases := map[string]float64{}
	if c != nil && c.held != nil && c.key == key && c.frac == valFrac {
		return c.held, phases, nil
	}
	c.drop()
	prep, err := load(pf)
	if err != nil {
		return nil, nil, err
	}
	set := prep.set
	if set.Labels == nil {
		return nil, nil, fmt.Errorf("--data %q: no labels; fit selects checkpoints by validation accuracy", pf.data)
	}
	trainRows, valRows := valSplit(set.IDs, valFrac, pf.seed)
	if len(trainRows) < 2 || len(valRows) < 2 {
		return nil, nil, fmt.Errorf("--n %d with --val-frac %v leaves %d training and %d validation rows", set.N, valFrac, len(trainRows), len(valRows))
	}
	tr := subsetPrepared(prep, trainRows)
	prep.viewA, prep.viewB = nil, nil // the training rows' views are tr's; nothing reads the rest
	tr.seconds = map[string]float64{}
	tr.featurize()
	maps.Copy(phases, prep.seconds)
	maps.Copy(phases, tr.seconds)
	s := &fitSplit{all: prep, train: tr, val: valRows}
	if c != nil {
		c.key, c.frac, c.held = key, valFrac, s
	}
	return s, phases, nil
}
