package study

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/serving"
)

// SignedPrefix marks a ranking signed by class among the scores (validate.SignedTo).
const SignedPrefix = "signed/"

// TopK is the set size of the second deletion test (paper appendix D's K).
const TopK = 10

// Options are the settings of cairnctl validate, each named by its flag: the model
// settings of fit and explain (the stored points are the first Model.Pipeline.N rows of
// the training split) and the study's own.
type Options struct {
	Model       offline.ModelOptions
	Queries     int     // --queries: test queries, the first rows of the test split
	Halves      int     // --halves: seeded random halves of the stored points
	Retrains    int     // --retrains: networks trained per half
	TrainEpochs int     // --train-epochs
	TrainBatch  int     // --train-batch
	TrainLR     float64 // --train-lr
	Random      int     // --random: random landmark-point removals per deletion test
	TrakRidge   float64 // --trak-ridge: TRAK ridge as a multiple of the mean ‖ψ‖²
	// The deletion test against retraining (retrainDeletion).
	RetrainDeletionQueries  int      // --retrain-deletion-queries: the first queries tested (0: off)
	RetrainDeletionK        int      // --retrain-deletion-k: points left out per test
	RetrainDeletionRandom   int      // --retrain-deletion-random: random sets of as many points
	RetrainDeletionRetrains int      // --retrain-deletion-retrains: networks averaged per set
	RetrainDeletionRankings []string // --retrain-deletion-rankings
}

// Check reports every invalid setting at once, before any data is loaded.
func (o *Options) Check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	p := &o.Model.Pipeline
	if p.Data == "" {
		bad("--data is required")
	}
	if p.Weights != "" || p.Untrained {
		bad("--weights %q, --untrained=%v: validate trains its own backbone on the stored points", p.Weights, p.Untrained)
	}
	if p.N < 8 {
		bad("--n %d: must be ≥ 8 (each half is split into training and validation rows)", p.N)
	}
	if p.M < 1 {
		bad("--m %d: must be ≥ 1", p.M)
	}
	if err := p.CheckRule(); err != nil {
		errs = append(errs, err)
	}
	if o.Queries < 1 {
		bad("--queries %d: must be ≥ 1", o.Queries)
	}
	if o.Halves < 2 {
		bad("--halves %d: must be ≥ 2 (a correlation across halves)", o.Halves)
	}
	if o.Retrains < 1 {
		bad("--retrains %d: must be ≥ 1", o.Retrains)
	}
	if o.TrainEpochs < 1 {
		bad("--train-epochs %d: must be ≥ 1", o.TrainEpochs)
	}
	if o.TrainBatch < 1 {
		bad("--train-batch %d: must be ≥ 1", o.TrainBatch)
	}
	if !(o.TrainLR > 0) || math.IsInf(o.TrainLR, 1) {
		bad("--train-lr %v: must be positive and finite", o.TrainLR)
	}
	if o.Random < 1 {
		bad("--random %d: must be ≥ 1", o.Random)
	}
	if !(o.TrakRidge > 0) || math.IsInf(o.TrakRidge, 1) {
		bad("--trak-ridge %v: must be positive and finite", o.TrakRidge)
	}
	if o.RetrainDeletionQueries < 0 {
		bad("--retrain-deletion-queries %d: must be ≥ 0", o.RetrainDeletionQueries)
	}
	if o.RetrainDeletionQueries > 0 && (o.RetrainDeletionK < 1 || o.RetrainDeletionK >= p.N) {
		bad("--retrain-deletion-k %d: must be in [1, --n)", o.RetrainDeletionK)
	}
	if o.RetrainDeletionQueries > 0 && o.RetrainDeletionRetrains < 1 {
		bad("--retrain-deletion-retrains %d: must be ≥ 1", o.RetrainDeletionRetrains)
	}
	if o.RetrainDeletionQueries > 0 && o.RetrainDeletionRandom < 1 {
		bad("--retrain-deletion-random %d: must be ≥ 1", o.RetrainDeletionRandom)
	}
	if !(o.Model.ValFrac > 0 && o.Model.ValFrac < 1) {
		bad("--val-frac %v: must be in (0, 1)", o.Model.ValFrac)
	}
	return errors.Join(errs...)
}

// trainOptions are the backbone's training options, those of cairnctl train, with the
// seed of its initialization and shuffling.
func (o *Options) trainOptions(seed uint64) entk.TrainOptions {
	return entk.TrainOptions{Epochs: o.TrainEpochs, Batch: o.TrainBatch, LR: o.TrainLR, Seed: seed, Workers: 2}
}

// retrainSeed is the seed of network r of a half: --seed for the first (the served
// backbone's), then the named streams cairnctl/validate/retrain/<r>.
func (o *Options) retrainSeed(r int) uint64 {
	if r == 0 {
		return o.Model.Pipeline.Seed
	}
	return rng.Seed(o.Model.Pipeline.Seed, rng.Sub("cairnctl/validate/retrain", r))
}

// ReadReport reads a report that cairnctl validate wrote as JSON (its --from).
func ReadReport(file string) (*validate.Report, error) {
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

// validation is what the study keeps between its steps.
type validation struct {
	o      *Options
	mo     offline.ModelOptions // the model settings with the trained weights
	all    *offline.Prepared    // the stored points with both views' features
	plain  [][]float32
	qs     *dataset.Set
	qplain [][]float32
	index  map[string]int // stored point id → row of all
	secs   map[string]float64
	logf   func(format string, a ...any)
}

// Run runs the study (the steps of the package doc) and returns its report; progress
// lines go to progress. It checks nothing Check checks; o is not modified.
func Run(ctx context.Context, o *Options, progress io.Writer) (*validate.Report, error) {
	start := time.Now()
	v := &validation{o: o, mo: o.Model, secs: map[string]float64{}}
	v.logf = func(format string, a ...any) {
		fmt.Fprintf(progress, "cairnctl validate: %6.1fs "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	dir, err := os.MkdirTemp("", "cairnctl-validate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tr, err := v.trainServed(ctx, dir)
	if err != nil {
		return nil, err
	}
	fm, model, err := v.serve(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	sc, err := v.scores(fm, model)
	if err != nil {
		return nil, err
	}
	if err := v.marginScores(model.Backbone, fm, model, sc); err != nil {
		return nil, err
	}
	v.secs["scores"] = time.Since(t0).Seconds()
	halves := validate.Halves(v.mo.Pipeline.Seed, v.all.Set.N, o.Halves)
	margins, err := v.retrain(ctx, halves)
	if err != nil {
		return nil, err
	}
	conf, err := v.refit(ctx, halves)
	if err != nil {
		return nil, err
	}
	t0 = time.Now()
	del, err := v.deletion(fm, sc)
	if err != nil {
		return nil, err
	}
	v.secs["deletion"] = time.Since(t0).Seconds()
	rdel, err := v.retrainDeletion(ctx, sc)
	if err != nil {
		return nil, err
	}
	rep := report(sc, halves, margins, conf, del, rdel)
	rep.Seconds = v.secs
	rep.Settings = v.settings(tr, fm, model, sc)
	v.secs["total"] = time.Since(start).Seconds()
	return rep, nil
}

// trainServed is step 1: it opens the stored points and the queries, and trains the
// served backbone on the stored points into dir; the model settings then name its file.
func (v *validation) trainServed(ctx context.Context, dir string) (offline.TrainReport, error) {
	pf := &v.mo.Pipeline
	set, err := dataset.Open(pf.Data, "train", pf.N)
	if err != nil {
		return offline.TrainReport{}, fmt.Errorf("--data %q --n %d: %w", pf.Data, pf.N, err)
	}
	if set.Labels == nil {
		return offline.TrainReport{}, fmt.Errorf("--data %q: no labels (the targets are correct-class margins and confidences)", pf.Data)
	}
	if v.qs, err = dataset.Open(pf.Data, "test", v.o.Queries); err != nil {
		return offline.TrainReport{}, fmt.Errorf("--queries %d: %w", v.o.Queries, err)
	}
	if pf.Arch == "" {
		pf.Arch = offline.DefaultArch(set)
	}
	tr, err := offline.Train(ctx, pf.Data, pf.Arch, pf.N, v.o.trainOptions(pf.Seed), filepath.Join(dir, "backbone.safetensors"))
	if err != nil {
		return tr, fmt.Errorf("training the backbone: %w", err)
	}
	v.secs["train"] = tr.Seconds
	v.logf("backbone %s trained on %d points: train accuracy %.4f, test accuracy %.4f", tr.Arch, tr.N, tr.TrainAccuracy, tr.TestAccuracy)
	pf.Weights = tr.Out
	return tr, nil
}

// serve is step 2: the stored points' and queries' features, and the served model
// fitted on every stored point.
func (v *validation) serve(ctx context.Context) (*offline.Model, *serving.Model, error) {
	pf := &v.mo.Pipeline
	t0 := time.Now()
	var err error
	if v.all, err = offline.Prepare(pf); err != nil {
		return nil, nil, err
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
		return nil, nil, fmt.Errorf("the served model: %w", err)
	}
	v.secs["fit"] = time.Since(t0).Seconds()
	t0 = time.Now()
	pts := make([]serving.GradPoint, v.all.Set.N)
	for i, id := range v.all.Set.IDs {
		pts[i] = serving.GradPoint{ID: id, Version: 1, X: v.all.Set.Row(i), Label: v.all.Set.Labels[i]}
	}
	model, err := servedModel(fm, pf, pts)
	if err != nil {
		return nil, nil, err
	}
	v.secs["serving"] = time.Since(t0).Seconds()
	v.logf("served model: %d landmarks, exact rows %v", len(model.LandmarkIDs), model.Exact != nil)
	return fm, model, nil
}

// report scores every ranking and baseline of sc against the halves' targets (LDS
// against the retrained networks' margins and the refitted encoders' confidences) and
// adds the deletion percentiles del and, where it ran, the retraining deletion test's
// rdel.
func report(sc *scores, halves [][]int, margins, conf [][]float64, del map[string][4]float64, rdel map[string][2]float64) *validate.Report {
	rep := &validate.Report{Rankings: map[string]validate.Stats{}, Baselines: map[string]validate.Stats{}, Signed: map[string]validate.Stats{}}
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
			RetrainDeletionPercentile: math.NaN(), RetrainDeletionPercentileMidrank: math.NaN(), // not tested unless in rdel
		}
		if r, ok := rdel[name]; ok {
			st.RetrainDeletionPercentile, st.RetrainDeletionPercentileMidrank = r[0], r[1]
		}
		switch {
		case slices.Contains(validate.Baselines, name):
			rep.Baselines[name] = st
		case strings.HasPrefix(name, SignedPrefix):
			rep.Signed[strings.TrimPrefix(name, SignedPrefix)] = st
		default:
			rep.Rankings[name] = st
		}
	}
	return rep
}
