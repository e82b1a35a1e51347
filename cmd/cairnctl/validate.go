package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/knn"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/rng"
	"github.com/cairnhq/cairn/internal/serving"
)

// validateCmd is `cairnctl validate`: cairn's rankings against retraining (the study
// DESIGN.md section 5 picks the default ranking by).
//
//  1. The stored points are the first --n rows of the training split. A backbone of the
//     data set's default arch is trained on them from its seeded initialization with
//     cairnctl train's trainer (train: entk.Train, Workers 2, --train-epochs, --train-batch,
//     --train-lr; defaults those of cairnctl train) and written as a safetensors file, the
//     weights the served model is built on.
//  2. The served model is built as cairnctl fit and explain build theirs (fitModel: fit-draw
//     features of both views, the two-view PC-NTK pool on the training rows after the
//     --val-frac split, the daemon's fit recipe with one fit), then served (serving.New
//     with the daemon's default query settings: exact eNTK rows when they fit
//     query.exact_memory_bytes).
//  3. Every query (the first --queries rows of the test split) gets a score per stored
//     point from each ranking (validate.DisplacementTo, RepresenterTo, the eNTK row; on the
//     model's exact rows when it has them, else on the fit draw's kernel; every ranking's
//     top-K is checked against serving.Model.AnswerRanked) and each baseline (random; TRAK
//     on the fit draw's ψ of the plain, unaugmented inputs, ridge --trak-ridge times the
//     mean ‖ψ‖²; class, 1 for the points of the query's class: what the class composition
//     of a half alone predicts). As a diagnostic, each ranking is also scored signed by
//     the class the served backbone predicts for the query (validate.SignedTo), reported
//     under "signed".
//  4. --halves seeded halves of the stored points (validate.Halves). On each, --retrains
//     networks are trained again with the same options, the first from the served
//     backbone's seeded initialization (so with one retrain the halves differ only in
//     their data), and cairn's encoder is refitted (selection and fit, as in 2, on the
//     frozen served backbone). The network's target is the query's correct-class margin
//     (correct logit minus the largest other one), averaged over the half's networks; the
//     encoder's is the query's correct-class 50-NN cosine confidence against the half's
//     stored points, all embedded from their plain inputs (validate.CorrectConfidenceTo).
//     LDS is the Spearman correlation, across halves, of Σ_{i∈half} score_i with the
//     target, averaged over queries (validate.Score).
//  5. Deletion: for each query the top-1 (and top-10) landmark points of a ranking lose
//     their terms in the served encoder; the drop of the query's correct-class confidence
//     against the stored points' plain-input latents is ranked among the drops of --random
//     random landmark-point sets of the same size (shared by every ranking and query),
//     strictly (certify.Percentile, the paper's π) and with ties counted half
//     (validate.MidrankPercentile); the medians over queries are reported.
func validateCmd(fs *flag.FlagSet) cli.Func {
	var f validateFlags
	f.register(fs)
	return func(ctx context.Context, stdio cli.Stdio) error {
		if err := f.check(); err != nil {
			return err
		}
		var rep *validate.Report
		var err error
		if f.from != "" {
			rep, err = readValidation(f.from)
		} else {
			rep, err = f.run(ctx, stdio.Err)
		}
		if err != nil {
			return err
		}
		if f.format == "markdown" {
			return rep.WriteMarkdown(stdio.Out)
		}
		return writeJSON(stdio.Out, rep)
	}
}

// validateFlags are the flags of cairnctl validate: the model flags of fit and explain
// (--n defaulting to 2000 stored points) and the study's own.
type validateFlags struct {
	model       modelFlags
	queries     int
	halves      int
	retrains    int
	trainEpochs int
	trainBatch  int
	trainLR     float64
	random      int
	trakRidge   float64
	format      string
	from        string
}

// signedPrefix marks a ranking signed by class among the scores (validate.SignedTo).
const signedPrefix = "signed/"

// validateTopK is the set size of the second deletion test (paper appendix D's K).
const validateTopK = 10

func (f *validateFlags) register(fs *flag.FlagSet) {
	f.model.register(fs)
	f.model.pipeline.n = 2000
	n := fs.Lookup("n")
	n.DefValue, n.Usage = "2000", "stored points: the first n rows of the training split"
	fs.IntVar(&f.queries, "queries", 100, "test queries: the first rows of the test split")
	fs.IntVar(&f.halves, "halves", 50, "seeded random halves of the stored points to retrain and refit on")
	fs.IntVar(&f.retrains, "retrains", 1, "networks trained per half, from seeds --seed and then streams cairnctl/validate/retrain/<r>; the network target is their mean margin")
	fs.IntVar(&f.trainEpochs, "train-epochs", 15, "backbone training epochs (cairnctl train's default)")
	fs.IntVar(&f.trainBatch, "train-batch", 64, "backbone training minibatch (cairnctl train's default)")
	fs.Float64Var(&f.trainLR, "train-lr", 2e-3, "backbone training Adam step size (cairnctl train's default)")
	fs.IntVar(&f.random, "random", 30, "random landmark-point removals per deletion test (paper appendix D's N)")
	fs.Float64Var(&f.trakRidge, "trak-ridge", 1e-3, "TRAK ridge λ as a multiple of the mean squared norm of a feature row")
	fs.StringVar(&f.format, "format", "json", "output: json | markdown")
	fs.StringVar(&f.from, "from", "", "print the report of an earlier run (its JSON output) in --format instead of running")
}

// readValidation reads a report that cairnctl validate wrote as JSON.
func readValidation(file string) (*validate.Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	var rep validate.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("--from %s: %w", file, err)
	}
	return &rep, nil
}

// check reports every invalid flag at once, before any data is loaded.
func (f *validateFlags) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if f.format != "json" && f.format != "markdown" {
		bad("--format %q: want json or markdown", f.format)
	}
	if f.from != "" {
		return errors.Join(errs...)
	}
	p := &f.model.pipeline
	if p.data == "" {
		bad("--data is required")
	}
	if p.weights != "" || p.untrained {
		bad("--weights %q, --untrained=%v: validate trains its own backbone on the stored points", p.weights, p.untrained)
	}
	if p.n < 8 {
		bad("--n %d: must be ≥ 8 (each half is split into training and validation rows)", p.n)
	}
	if p.m < 1 {
		bad("--m %d: must be ≥ 1", p.m)
	}
	pipe := f.model.pipeline.options()
	if err := pipe.CheckRule(); err != nil {
		errs = append(errs, err)
	}
	if f.queries < 1 {
		bad("--queries %d: must be ≥ 1", f.queries)
	}
	if f.halves < 2 {
		bad("--halves %d: must be ≥ 2 (a correlation across halves)", f.halves)
	}
	if f.retrains < 1 {
		bad("--retrains %d: must be ≥ 1", f.retrains)
	}
	if f.trainEpochs < 1 {
		bad("--train-epochs %d: must be ≥ 1", f.trainEpochs)
	}
	if f.trainBatch < 1 {
		bad("--train-batch %d: must be ≥ 1", f.trainBatch)
	}
	if !(f.trainLR > 0) || math.IsInf(f.trainLR, 1) {
		bad("--train-lr %v: must be positive and finite", f.trainLR)
	}
	if f.random < 1 {
		bad("--random %d: must be ≥ 1", f.random)
	}
	if !(f.trakRidge > 0) || math.IsInf(f.trakRidge, 1) {
		bad("--trak-ridge %v: must be positive and finite", f.trakRidge)
	}
	if !(f.model.valFrac > 0 && f.model.valFrac < 1) {
		bad("--val-frac %v: must be in (0, 1)", f.model.valFrac)
	}
	return errors.Join(errs...)
}

// trainOptions are the backbone's training options, those of cairnctl train, with the
// seed of its initialization and shuffling.
func (f *validateFlags) trainOptions(seed uint64) entk.TrainOptions {
	return entk.TrainOptions{Epochs: f.trainEpochs, Batch: f.trainBatch, LR: f.trainLR, Seed: seed, Workers: 2}
}

// retrainSeed is the seed of network r of a half: --seed for the first (the served
// backbone's), then the named streams cairnctl/validate/retrain/<r>.
func (f *validateFlags) retrainSeed(r int) uint64 {
	if r == 0 {
		return f.model.pipeline.seed
	}
	return rng.Seed(f.model.pipeline.seed, rng.Sub("cairnctl/validate/retrain", r))
}

// validationRun is what the study keeps between its steps.
type validationRun struct {
	f      *validateFlags
	mo     offline.ModelOptions // the model settings with the trained weights
	all    *offline.Prepared    // the stored points with both views' features
	plain  [][]float32
	qs     *dataset.Set
	qplain [][]float32
	index  map[string]int // stored point id → row of all
	secs   map[string]float64
	logf   func(format string, a ...any)
}

// run runs the study and returns its report; progress lines go to progress.
func (f *validateFlags) run(ctx context.Context, progress io.Writer) (*validate.Report, error) {
	start := time.Now()
	v := &validationRun{f: f, mo: f.model.options(), secs: map[string]float64{}}
	v.logf = func(format string, a ...any) {
		fmt.Fprintf(progress, "cairnctl validate: %6.1fs "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	pf := &v.mo.Pipeline
	set, err := dataset.Open(pf.Data, "train", pf.N)
	if err != nil {
		return nil, fmt.Errorf("--data %q --n %d: %w", pf.Data, pf.N, err)
	}
	if set.Labels == nil {
		return nil, fmt.Errorf("--data %q: no labels (the targets are correct-class margins and confidences)", pf.Data)
	}
	if v.qs, err = dataset.Open(pf.Data, "test", f.queries); err != nil {
		return nil, fmt.Errorf("--queries %d: %w", f.queries, err)
	}
	if pf.Arch == "" {
		pf.Arch = offline.DefaultArch(set)
	}

	// 1. The served backbone.
	dir, err := os.MkdirTemp("", "cairnctl-validate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tr, err := offline.Train(ctx, pf.Data, pf.Arch, pf.N, f.trainOptions(pf.Seed), filepath.Join(dir, "backbone.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("training the backbone: %w", err)
	}
	v.secs["train"] = tr.Seconds
	v.logf("backbone %s trained on %d points: train accuracy %.4f, test accuracy %.4f", tr.Arch, tr.N, tr.TrainAccuracy, tr.TestAccuracy)
	pf.Weights = tr.Out

	// 2. Features and the served model.
	t0 := time.Now()
	if v.all, err = offline.Prepare(pf); err != nil {
		return nil, err
	}
	v.plain = offline.FeatureRows(v.all.Features, v.all.Set.X, v.all.Set.N)
	v.qplain = offline.FeatureRows(v.all.Features, v.qs.X, v.qs.N)
	v.index = make(map[string]int, v.all.Set.N)
	for i, id := range v.all.Set.IDs {
		v.index[id] = i
	}
	v.secs["features"] = time.Since(t0).Seconds()
	t0 = time.Now()
	rows := make([]int, v.all.Set.N)
	for i := range rows {
		rows[i] = i
	}
	fm, err := v.fitOn(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("the served model: %w", err)
	}
	v.secs["fit"] = time.Since(t0).Seconds()
	t0 = time.Now()
	model, err := servedModel(fm, pf)
	if err != nil {
		return nil, err
	}
	v.secs["serving"] = time.Since(t0).Seconds()
	v.logf("served model: %d landmarks, exact rows %v", len(model.LandmarkIDs), model.Exact != nil)

	// 3. Scores.
	t0 = time.Now()
	sc, err := v.scores(fm, model)
	if err != nil {
		return nil, err
	}
	v.secs["scores"] = time.Since(t0).Seconds()

	// 4. Halves: retrained networks and refitted encoders.
	halves := validate.Halves(pf.Seed, v.all.Set.N, f.halves)
	margins, err := v.retrain(ctx, halves)
	if err != nil {
		return nil, err
	}
	conf, err := v.refit(ctx, halves)
	if err != nil {
		return nil, err
	}

	// 5. Deletion.
	t0 = time.Now()
	del, err := v.deletion(fm, sc)
	if err != nil {
		return nil, err
	}
	v.secs["deletion"] = time.Since(t0).Seconds()

	rep := &validate.Report{Rankings: map[string]validate.Stats{}, Baselines: map[string]validate.Stats{}, Signed: map[string]validate.Stats{}, Seconds: v.secs}
	for name, s := range sc.points {
		pred := make([][]float64, len(s))
		for t, row := range s {
			pred[t] = make([]float64, len(halves))
			validate.PredictTo(pred[t], row, halves)
		}
		net, enc := validate.Score(pred, margins), validate.Score(pred, conf)
		st := validate.Stats{
			LDS: net.Mean, LDSSE: net.SE, LDSQueries: net.Queries,
			LDSEncoder: enc.Mean, LDSEncoderSE: enc.SE, LDSEncoderQueries: enc.Queries,
			DeletionPercentile: del[name][0], DeletionPercentileTop10: del[name][1],
			DeletionPercentileMidrank: del[name][2], DeletionPercentileTop10Midrank: del[name][3],
		}
		switch {
		case slices.Contains(validate.Baselines, name):
			rep.Baselines[name] = st
		case strings.HasPrefix(name, signedPrefix):
			rep.Signed[strings.TrimPrefix(name, signedPrefix)] = st
		default:
			rep.Rankings[name] = st
		}
	}
	rep.Settings = v.settings(tr, fm, model, sc)
	v.secs["total"] = time.Since(start).Seconds()
	return rep, nil
}

// fitOn builds cairn's model on the stored points rows of v.all (fitModel with one fit,
// no test rows) from a blockCache that already holds their split: their features are
// v.all's, computed once, and the split is the one blockCache.split makes (valSplit of
// their ids, the training rows' features shared).
func (v *validationRun) fitOn(ctx context.Context, rows []int) (*offline.Model, error) {
	mo := v.mo
	cache, err := offline.SplitCache(&mo.Pipeline, mo.ValFrac, offline.SubsetPrepared(v.all, rows))
	if err != nil {
		return nil, err
	}
	mo.Cache = cache
	return offline.FitModel(ctx, &mo, 1, 0)
}

// servedModel is the serving form of fm's fit, as the daemon builds it after a refit
// (plain ids with their views, ω in raw kernel units) under the daemon's default query
// settings: exact eNTK rows when they fit query.exact_memory_bytes.
func servedModel(fm *offline.Model, pf *offline.Pipeline) (*serving.Model, error) {
	f0 := fm.Fits.Fits[0]
	ids, views := make([]string, len(fm.Info.LandmarkIDs)), make([]byte, len(fm.Info.LandmarkIDs))
	for l, lid := range fm.Info.LandmarkIDs {
		id, view, _ := strings.Cut(lid, "#")
		ids[l], views[l] = id, view[0]
	}
	omega := serving.Scaled(f0.Omega, fm.Scale)
	in := serving.Input{
		Version: 1, ID: serving.ModelID(ids, views, f0.A, f0.B), Points: fm.Info.NTrain + fm.Info.NVal,
		LandmarkIDs: ids, Views: views, LandmarkX: fm.Info.LandmarkX, A: f0.A, B: f0.B, Scale: fm.Scale,
		Omega: omega, OmegaMean: omega,
	}
	q := config.Default().Query
	return serving.New(in, serving.Settings{
		Backbone: fm.Info.Backbone, H: pf.H, S: pf.S, Seed: pf.Seed, DrawName: "cairnctl/validate/eval",
		ExactMemoryBytes: q.ExactMemoryBytes, Fits: 1, ExactRowsCap: q.ExactRowsCap, StableJaccard: q.StableJaccard,
	})
}

// landmarkPoints returns the stored row of each landmark of fm (model row order) and the
// landmarks' fit-draw features (M×q: view A's ψ for "#A", view B's for "#B").
func (v *validationRun) landmarkPoints(fm *offline.Model) ([]int, *mat.Dense) {
	q := v.all.Q
	point := make([]int, len(fm.Info.LandmarkIDs))
	z := mat.NewDense(len(point), q, nil)
	for l, lid := range fm.Info.LandmarkIDs {
		id, view, _ := strings.Cut(lid, "#")
		i := v.index[id]
		point[l] = i
		g := v.all.FeatA[i]
		if view == "B" {
			g = v.all.FeatB[i]
		}
		row := z.RawRowView(l)
		for j, x := range g {
			row[j] = float64(x)
		}
	}
	return point, z
}

// scaledKernel is the fit-draw kernel of the float32 feature rows g against the landmark
// features z, times the fit's kernel scale: the kernel rows the fitted encoder reads.
func scaledKernel(g [][]float32, z *mat.Dense, scale float64) *mat.Dense {
	m, _ := z.Dims()
	k := mat.NewDense(len(g), m, nil)
	pipeline.KernelTo(k, g, z)
	k.Scale(scale, k)
	return k
}

// validationScores are every ranking's and baseline's scores per query and stored point.
type validationScores struct {
	points      map[string][][]float64 // name → [query][stored point]
	point       []int                  // stored row of each landmark
	kernel      string                 // "exact", "exact_factored" or "fit_sketch"
	agreement   map[string]float64     // ranking → share of queries whose served top-K set is the ranking's
	trakLambda  float64
	servingTopK int
}

// scores computes every ranking's point scores on the served model (kernel rows exact
// when the model has exact rows) and the baselines', and checks each ranking's top-K
// against what model.AnswerRanked certifies under it.
func (v *validationRun) scores(fm *offline.Model, model *serving.Model) (*validationScores, error) {
	n, nq := v.all.Set.N, v.qs.N
	point, z := v.landmarkPoints(fm)
	mm := len(point)
	sc := &validationScores{points: map[string][][]float64{}, point: point, servingTopK: min(validateTopK, mm-1)}
	var signed []string
	for _, name := range validate.Rankings {
		signed = append(signed, signedPrefix+name)
	}
	for _, name := range slices.Concat(validate.Rankings, validate.Baselines, signed) {
		sc.points[name] = make([][]float64, nq)
		for t := range nq {
			sc.points[name][t] = make([]float64, n)
		}
	}
	rows := mat.NewDense(nq, mm, nil) // raw kernel rows of the queries
	b := model.Backbone
	switch {
	case model.Exact == nil:
		sc.kernel = "fit_sketch"
		pipeline.KernelTo(rows, v.qplain, z)
	case model.Exact.Factored():
		sc.kernel = "exact_factored"
		exactKernelRows(rows, model, v.qs)
	default:
		sc.kernel = "exact"
		exactKernelRows(rows, model, v.qs)
	}
	// The class the served backbone predicts for each query signs the rankings.
	pred := make([]int, nq)
	out, ws := make([]float64, b.OutDim()), b.NewWorkspace()
	for t := range nq {
		b.Forward(out, v.qs.Row(t), ws)
		pred[t] = 0
		for c := 1; c < min(len(out), v.all.Set.Classes); c++ {
			if out[c] > out[pred[t]] {
				pred[t] = c
			}
		}
	}
	f0 := fm.Fits.Fits[0]
	omega := serving.Scaled(f0.Omega, fm.Scale)
	lrow := make([]float64, mm)
	var w serving.Workspace
	agree := map[string]int{}
	for t := range nq {
		k := rows.RawRowView(t)
		for _, name := range validate.Rankings {
			switch name {
			case validate.Displacement:
				validate.DisplacementTo(lrow, k, omega)
			case validate.Representer:
				validate.RepresenterTo(lrow, k, f0.A, f0.B, fm.Scale)
			case validate.ENTK:
				copy(lrow, k)
			}
			validate.PointSumTo(sc.points[name][t], lrow, point)
			validate.SignedTo(sc.points[signedPrefix+name][t], sc.points[name][t], v.all.Set.Labels, pred[t])
			ok, err := sameTopK(model, &w, v.qs.Row(t), lrow, sc.servingTopK, name)
			if err != nil {
				return nil, fmt.Errorf("query %d: %w", t, err)
			}
			if ok {
				agree[name]++
			}
		}
		validate.RandomScoresTo(sc.points[validate.Random][t], v.mo.Pipeline.Seed, t)
		validate.ClassScoresTo(sc.points[validate.Class][t], v.all.Set.Labels, v.qs.Labels[t])
	}
	sc.agreement = map[string]float64{}
	for _, name := range validate.Rankings {
		sc.agreement[name] = float64(agree[name]) / float64(nq)
	}

	t0 := time.Now()
	phi := mat.NewDense(n, v.all.Q, offline.Widen(v.plain, v.all.Q))
	tk, err := validate.NewTRAK(phi, v.f.trakRidge)
	if err != nil {
		return nil, err
	}
	s := mat.NewDense(nq, n, nil)
	if err := tk.ScoresTo(s, mat.NewDense(nq, v.all.Q, offline.Widen(v.qplain, v.all.Q))); err != nil {
		return nil, err
	}
	for t := range nq {
		copy(sc.points[validate.TRAKName][t], s.RawRowView(t))
	}
	sc.trakLambda = tk.Lambda()
	v.secs["trak"] = time.Since(t0).Seconds()
	return sc, nil
}

// exactKernelRows writes the exact eNTK rows k*(x_t, x_ℓ) of the queries against the
// served model's landmarks into dst (queries×M), in the representation the model's
// exact rows have (serving.ExactRows): full rows (entk.ExactBatch32To, a query's φ by
// entk.Query.ExactTo, the row by entk.ExactRowTo), or factored rows (entk.Factored) when
// the full ones exceed the memory budget. Each entry has the bits the model's answers use.
func exactKernelRows(dst *mat.Dense, model *serving.Model, qs *dataset.Set) {
	b, mm := model.Backbone, len(model.LandmarkIDs)
	if model.Exact.Factored() {
		f, _ := entk.NewFactored(b)
		lf, diag := make([]float32, mm*f.Dim()), make([]float64, mm)
		f.Batch32To(lf, diag, model.LandmarkX, mm)
		fq, phi := f.NewQuery(), make([]float64, f.Dim())
		for t := range qs.N {
			fq.RowTo(phi, qs.Row(t))
			fq.KernelRowTo(dst.RawRowView(t), lf, phi)
		}
		return
	}
	e := entk.ExactDim(b)
	lf, diag := make([]float32, mm*e), make([]float64, mm)
	entk.ExactBatch32To(lf, diag, b, model.LandmarkX, mm)
	eq, phi := entk.NewExactQuery(b), make([]float64, e)
	for t := range qs.N {
		eq.ExactTo(phi, qs.Row(t))
		entk.ExactRowTo(dst.RawRowView(t), lf, phi)
	}
}

// sameTopK reports whether the top-k landmark rows of scores (model row order) are the
// set model.AnswerRanked returns for x under the ranking name.
func sameTopK(model *serving.Model, w *serving.Workspace, x, scores []float64, k int, name string) (bool, error) {
	c, err := model.AnswerRanked(w, x, k, config.Default().Query.Delta, certify.Ranking(name))
	if err != nil {
		return false, fmt.Errorf("serving answer (%s): %w", name, err)
	}
	var got []int
	for _, e := range c.TopK {
		got = append(got, e.Index)
	}
	want := certify.TopKIndices(scores, k)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want), nil
}

// retrain trains --retrains networks on each half, from the seeded initializations of
// retrainSeed (the first that of the served backbone), and returns every query's
// correct-class margin averaged over them: margins[t][j] for query t and half j.
func (v *validationRun) retrain(ctx context.Context, halves [][]int) ([][]float64, error) {
	t0 := time.Now()
	set, arch := v.all.Set, v.mo.Pipeline.Arch
	margins := make([][]float64, v.qs.N)
	for t := range margins {
		margins[t] = make([]float64, len(halves))
	}
	for j, h := range halves {
		t1 := time.Now()
		xs := make([]float64, 0, len(h)*set.D)
		ys := make([]int, 0, len(h))
		for _, i := range h {
			xs = append(xs, set.Row(i)...)
			ys = append(ys, set.Labels[i])
		}
		for r := range v.f.retrains {
			seed := v.f.retrainSeed(r)
			b0, err := entk.NewBackbone(arch, seed)
			if err != nil {
				return nil, err
			}
			params, err := entk.Train(ctx, b0, xs, ys, v.f.trainOptions(seed))
			if err != nil {
				return nil, fmt.Errorf("half %d, network %d: %w", j, r, err)
			}
			net, err := entk.FromParams(arch, params)
			if err != nil {
				return nil, err
			}
			out, ws := make([]float64, net.OutDim()), net.NewWorkspace()
			for t := range v.qs.N {
				net.Forward(out, v.qs.Row(t), ws)
				margins[t][j] += margin(out, v.qs.Labels[t]) / float64(v.f.retrains)
			}
		}
		v.logf("half %d/%d: %d network(s) retrained on %d points in %.1fs", j+1, len(halves), v.f.retrains, len(h), time.Since(t1).Seconds())
	}
	v.secs["retrain"] = time.Since(t0).Seconds()
	v.secs["retrain_per_network"] = v.secs["retrain"] / float64(len(halves)*v.f.retrains)
	return margins, nil
}

// margin is the correct-class margin of the logits out for label y: out[y] minus the
// largest other logit (every other output, used as a class or not).
func margin(out []float64, y int) float64 {
	best := math.Inf(-1)
	for c, o := range out {
		if c != y {
			best = max(best, o)
		}
	}
	return out[y] - best
}

// refit fits cairn's encoder on each half (selection and fit, on the served backbone's
// features) and returns every query's correct-class 50-NN cosine confidence against
// the half's stored points: conf[t][j] for query t and half j. Points and queries are
// embedded from their plain inputs' fit-draw features.
func (v *validationRun) refit(ctx context.Context, halves [][]int) ([][]float64, error) {
	t0 := time.Now()
	conf := make([][]float64, v.qs.N)
	for t := range conf {
		conf[t] = make([]float64, len(halves))
	}
	col := make([]float64, v.qs.N)
	for j, h := range halves {
		t1 := time.Now()
		fm, err := v.fitOn(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("half %d: %w", j, err)
		}
		_, z := v.landmarkPoints(fm)
		g := make([][]float32, len(h))
		labels := make([]int, len(h))
		for r, i := range h {
			g[r], labels[r] = v.plain[i], v.all.Set.Labels[i]
		}
		f0 := fm.Fits.Fits[0]
		enc := certify.Encoder{A: f0.A, B: f0.B}
		_, c := f0.A.Dims()
		zr, zq := mat.NewDense(len(h), c, nil), mat.NewDense(v.qs.N, c, nil)
		enc.EmbedTo(zr, scaledKernel(g, z, fm.Scale), nil)
		enc.EmbedTo(zq, scaledKernel(v.qplain, z, fm.Scale), nil)
		if err := validate.CorrectConfidenceTo(col, zr, labels, zq, v.qs.Labels, knn.ConfidenceK); err != nil {
			return nil, fmt.Errorf("half %d: %w", j, err)
		}
		for t, x := range col {
			conf[t][j] = x
		}
		v.logf("half %d/%d: encoder refitted (%d landmarks) in %.1fs", j+1, len(halves), len(fm.Info.LandmarkIDs), time.Since(t1).Seconds())
	}
	v.secs["refit"] = time.Since(t0).Seconds()
	v.secs["refit_per_half"] = v.secs["refit"] / float64(len(halves))
	return conf, nil
}

// deletion runs the top-1 and top-validateTopK deletion tests on the served encoder and
// returns, per ranking and baseline, the median percentile over queries of each, then the
// same medians of the mid-rank percentiles (NaN where the pool has too few landmark
// points for the random sets).
func (v *validationRun) deletion(fm *offline.Model, sc *validationScores) (map[string][4]float64, error) {
	point, z := v.landmarkPoints(fm)
	rowsOf := map[int][]int{}
	for l, i := range point {
		rowsOf[i] = append(rowsOf[i], l)
	}
	var cands []int
	for i := range rowsOf {
		cands = append(cands, i)
	}
	slices.Sort(cands)
	setRows := func(pts []int) []int {
		var r []int
		for _, i := range pts {
			r = append(r, rowsOf[i]...)
		}
		slices.Sort(r)
		return r
	}
	f0 := fm.Fits.Fits[0]
	d, err := validate.NewDeletion(certify.Encoder{A: f0.A, B: f0.B}, scaledKernel(v.plain, z, fm.Scale), v.all.Set.Labels,
		scaledKernel(v.qplain, z, fm.Scale), v.qs.Labels)
	if err != nil {
		return nil, err
	}
	nq := v.qs.N
	all := make([]int, nq)
	for t := range all {
		all[t] = t
	}
	out := map[string][4]float64{}
	for name := range sc.points {
		out[name] = [4]float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	}
	for slot, size := range []int{1, validateTopK} {
		sets, err := validate.RandomSets(v.mo.Pipeline.Seed, cands, size, v.f.random)
		if err != nil {
			v.logf("deletion top-%d: %v; not computed", size, err)
			continue
		}
		random := make([][]float64, nq) // random[t][s]
		for t := range random {
			random[t] = make([]float64, len(sets))
		}
		drops := make([]float64, nq)
		for s, set := range sets {
			if err := d.DropsTo(drops, all, setRows(set)); err != nil {
				return nil, err
			}
			for t, x := range drops {
				random[t][s] = x
			}
		}
		seen := map[string]float64{} // (query, rows) → drop: rankings often share a top set
		one := make([]float64, 1)
		for name, pts := range sc.points {
			per, mid := make([]float64, nq), make([]float64, nq)
			for t := range nq {
				rows := setRows(validate.TopCandidates(pts[t], cands, size))
				key := fmt.Sprint(t, rows)
				drop, ok := seen[key]
				if !ok {
					if err := d.DropsTo(one, []int{t}, rows); err != nil {
						return nil, err
					}
					drop, seen[key] = one[0], one[0]
				}
				if per[t], err = certify.Percentile(drop, random[t]); err != nil {
					return nil, fmt.Errorf("%s, query %d: %w", name, t, err)
				}
				mid[t] = validate.MidrankPercentile(drop, random[t])
			}
			o := out[name]
			o[slot], o[2+slot] = validate.Median(per), validate.Median(mid)
			out[name] = o
		}
		v.logf("deletion top-%d: %d random sets of %d landmark points", size, len(sets), len(cands))
	}
	return out, nil
}

// settings are the report's settings: the run's flags and what they resolved to.
func (v *validationRun) settings(tr offline.TrainReport, fm *offline.Model, model *serving.Model, sc *validationScores) map[string]any {
	pf := &v.mo.Pipeline
	distinct := map[int]bool{}
	for _, i := range sc.point {
		distinct[i] = true
	}
	return map[string]any{
		"data": pf.Data, "n": v.all.Set.N, "queries": v.qs.N, "halves": v.f.halves, "half_size": v.all.Set.N / 2, "seed": pf.Seed,
		"arch": pf.Arch, "h": pf.H, "s": pf.S, "m": pf.M, "landmarks": len(model.LandmarkIDs), "landmark_points": len(distinct),
		"loss": v.mo.Loss, "init": v.mo.Init, "dim": v.mo.Dim, "epochs": v.mo.Epochs, "selector": v.mo.Selector, "val_frac": v.mo.ValFrac,
		"normalize": pf.Normalize, "tolerance": pf.Tolerance,
		"kernel_scale": fm.Scale, "kernel": sc.kernel,
		"backbone": map[string]any{
			"trainer": "entk.Train (cairnctl train)", "epochs": tr.Epochs, "batch": tr.Batch, "lr": tr.LR, "seed": tr.Seed,
			"train_accuracy": tr.TrainAccuracy, "test_accuracy": tr.TestAccuracy, "sha256": tr.SHA256,
		},
		"retrains":              v.f.retrains,
		"network_target":        "correct-class margin (correct logit minus the largest other logit), mean over the half's retrained networks",
		"encoder_target":        fmt.Sprintf("correct-class %d-NN cosine confidence against the half's stored points (plain inputs)", knn.ConfidenceK),
		"trak_features":         "fit-draw ψ of the plain inputs",
		"signed_by":             "the class the served backbone predicts for the query (argmax over the data set's classes)",
		"trak_ridge":            v.f.trakRidge,
		"trak_lambda":           sc.trakLambda,
		"deletion_random":       v.f.random,
		"deletion_top_k":        validateTopK,
		"serving_top_k":         sc.servingTopK,
		"serving_top_agreement": sc.agreement,
	}
}
