package study

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/knn"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
)

// fitOn builds cairn's model on the stored points rows of v.all (offline.FitModel with
// one fit, no test rows) from a cache that already holds their split
// (offline.SplitCache): their features are v.all's, computed once, and the split is the
// one offline.Blocks makes (offline.ValSplit of their ids, the training rows' features
// shared).
func (v *validation) fitOn(ctx context.Context, rows []int) (*offline.Model, error) {
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
// settings: exact eNTK rows when they fit query.exact_memory_bytes, and the gradient
// rows of the stored points pts (in stored-point order, so a row's index is its point's)
// when they fit query.gradient_memory_bytes.
func servedModel(fm *offline.Model, pf *offline.Pipeline, pts []serving.GradPoint) (*serving.Model, error) {
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
	in.Grad, in.GradErr = serving.NewGradRows(fm.Info.Backbone, pts, q.GradientMemoryBytes, nil)
	return serving.New(in, serving.Settings{
		Backbone: fm.Info.Backbone, H: pf.H, S: pf.S, Seed: pf.Seed, DrawName: "cairnctl/validate/eval",
		ExactMemoryBytes: q.ExactMemoryBytes, Fits: 1, ExactRowsCap: q.ExactRowsCap, StableJaccard: q.StableJaccard,
	})
}

// landmarkPoints returns the stored row of each landmark of fm (model row order) and the
// landmarks' fit-draw features (M×q: view A's ψ for "#A", view B's for "#B").
func (v *validation) landmarkPoints(fm *offline.Model) ([]int, *mat.Dense) {
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

// scores are every ranking's and baseline's scores per query and stored point.
type scores struct {
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
func (v *validation) scores(fm *offline.Model, model *serving.Model) (*scores, error) {
	n, nq := v.all.Set.N, v.qs.N
	point, z := v.landmarkPoints(fm)
	mm := len(point)
	sc := &scores{points: map[string][][]float64{}, point: point, servingTopK: min(TopK, mm-1)}
	var signed []string
	for _, name := range validate.Rankings {
		signed = append(signed, SignedPrefix+name)
	}
	for _, name := range slices.Concat(validate.Rankings, validate.Baselines, signed) {
		sc.points[name] = make([][]float64, nq)
		for t := range nq {
			sc.points[name][t] = make([]float64, n)
		}
	}
	rows, self := v.queryRows(sc, model, z)
	b := model.Backbone
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
			case validate.ENTKCosine:
				validate.CosineTo(lrow, k, self)
			}
			validate.PointSumTo(sc.points[name][t], lrow, point)
			validate.SignedTo(sc.points[SignedPrefix+name][t], sc.points[name][t], v.all.Set.Labels, pred[t])
			if !served(name) {
				continue // nothing to agree with
			}
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
		if served(name) {
			sc.agreement[name] = float64(agree[name]) / float64(nq)
		}
	}

	t0 := time.Now()
	phi := mat.NewDense(n, v.all.Q, offline.Widen(v.plain, v.all.Q))
	tk, err := validate.NewTRAK(phi, v.o.TrakRidge)
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

// served reports whether answers serve the ranking name (certify.Rankings), so that
// its top-K can be checked against serving's.
func served(name string) bool {
	_, err := certify.ParseRanking(name)
	return err == nil
}

// queryRows returns the queries' raw kernel rows against the served model's landmarks
// (queries×M), exact when the model has exact rows, else on the fit draw's features z
// (M×q), and the landmarks' k(x_ℓ, x_ℓ) in the same kernel; it names the kernel in
// sc.kernel.
func (v *validation) queryRows(sc *scores, model *serving.Model, z *mat.Dense) (*mat.Dense, []float64) {
	mm := len(model.LandmarkIDs)
	rows, self := mat.NewDense(v.qs.N, mm, nil), make([]float64, mm)
	switch {
	case model.Exact == nil:
		sc.kernel = "fit_sketch"
		pipeline.KernelTo(rows, v.qplain, z)
		for l := range mm {
			zl := z.RawRowView(l)
			self[l] = floats.Dot(zl, zl)
		}
	case model.Exact.Factored():
		sc.kernel = "exact_factored"
		exactKernelRows(rows, self, model, v.qs)
	default:
		sc.kernel = "exact"
		exactKernelRows(rows, self, model, v.qs)
	}
	return rows, self
}

// exactKernelRows writes the exact eNTK rows k*(x_t, x_ℓ) of the queries against the
// served model's landmarks into dst (queries×M), and the landmarks' k*(x_ℓ, x_ℓ) into
// self (len M), in the representation the model's
// exact rows have (serving.ExactRows): full rows (entk.ExactBatch32To, a query's φ by
// entk.Query.ExactTo, the row by entk.ExactRowTo), or factored rows (entk.Factored) when
// the full ones exceed the memory budget. Each entry has the bits the model's answers use.
func exactKernelRows(dst *mat.Dense, self []float64, model *serving.Model, qs *dataset.Set) {
	b, mm := model.Backbone, len(model.LandmarkIDs)
	if model.Exact.Factored() {
		f, _ := entk.NewFactored(b)
		lf := make([]float32, mm*f.Dim())
		f.Batch32To(lf, self, model.LandmarkX, mm)
		fq, phi := f.NewQuery(), make([]float64, f.Dim())
		for t := range qs.N {
			fq.RowTo(phi, qs.Row(t))
			fq.KernelRowTo(dst.RawRowView(t), lf, phi)
		}
		return
	}
	e := entk.ExactDim(b)
	lf := make([]float32, mm*e)
	entk.ExactBatch32To(lf, self, b, model.LandmarkX, mm)
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
func (v *validation) retrain(ctx context.Context, halves [][]int) ([][]float64, error) {
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
		for r := range v.o.Retrains {
			seed := v.o.retrainSeed(r)
			b0, err := entk.NewBackbone(arch, seed)
			if err != nil {
				return nil, err
			}
			params, err := entk.Train(ctx, b0, xs, ys, v.o.trainOptions(seed))
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
				margins[t][j] += margin(out, v.qs.Labels[t]) / float64(v.o.Retrains)
			}
		}
		v.logf("half %d/%d: %d network(s) retrained on %d points in %.1fs", j+1, len(halves), v.o.Retrains, len(h), time.Since(t1).Seconds())
	}
	v.secs["retrain"] = time.Since(t0).Seconds()
	v.secs["retrain_per_network"] = v.secs["retrain"] / float64(len(halves)*v.o.Retrains)
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
func (v *validation) refit(ctx context.Context, halves [][]int) ([][]float64, error) {
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

// deletion runs the top-1 and top-TopK deletion tests on the served encoder and
// returns, per ranking and baseline, the median percentile over queries of each, then the
// same medians of the mid-rank percentiles (NaN where the pool has too few landmark
// points for the random sets).
func (v *validation) deletion(fm *offline.Model, sc *scores) (map[string][4]float64, error) {
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
	for slot, size := range []int{1, TopK} {
		sets, err := validate.RandomSets(v.mo.Pipeline.Seed, cands, size, v.o.Random)
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
func (v *validation) settings(tr offline.TrainReport, fm *offline.Model, model *serving.Model, sc *scores) map[string]any {
	pf := &v.mo.Pipeline
	distinct := map[int]bool{}
	for _, i := range sc.point {
		distinct[i] = true
	}
	return map[string]any{
		"data": pf.Data, "n": v.all.Set.N, "queries": v.qs.N, "halves": v.o.Halves, "half_size": v.all.Set.N / 2, "seed": pf.Seed,
		"arch": pf.Arch, "h": pf.H, "s": pf.S, "m": pf.M, "landmarks": len(model.LandmarkIDs), "landmark_points": len(distinct),
		"loss": v.mo.Loss, "init": v.mo.Init, "dim": v.mo.Dim, "epochs": v.mo.Epochs, "selector": v.mo.Selector, "val_frac": v.mo.ValFrac,
		"normalize": pf.Normalize, "tolerance": pf.Tolerance,
		"kernel_scale": fm.Scale, "kernel": sc.kernel,
		"backbone": map[string]any{
			"trainer": "entk.Train (cairnctl train)", "epochs": tr.Epochs, "batch": tr.Batch, "lr": tr.LR, "seed": tr.Seed,
			"train_accuracy": tr.TrainAccuracy, "test_accuracy": tr.TestAccuracy, "sha256": tr.SHA256,
		},
		"retrains":        v.o.Retrains,
		"network_target":  "correct-class margin (correct logit minus the largest other logit), mean over the half's retrained networks",
		"encoder_target":  fmt.Sprintf("correct-class %d-NN cosine confidence against the half's stored points (plain inputs)", knn.ConfidenceK),
		"trak_features":   "fit-draw ψ of the plain inputs",
		"signed_by":       "the class the served backbone predicts for the query (argmax over the data set's classes)",
		"trak_ridge":      v.o.TrakRidge,
		"trak_lambda":     sc.trakLambda,
		"deletion_random": v.o.Random,
		"retrain_deletion": map[string]any{
			"queries": min(v.o.RetrainDeletionQueries, v.qs.N), "k": v.o.RetrainDeletionK, "random": v.o.RetrainDeletionRandom,
			"retrains": v.o.RetrainDeletionRetrains,
			"rankings": v.o.RetrainDeletionRankings, "stream": RetrainDeletionStream,
			"target": "drop of the correct-class margin when the points are left out of the network's training (each network's seed as retrains; the other points keep their minibatches and steps), mean over the networks",
		},
		"deletion_top_k":        TopK,
		"serving_top_k":         sc.servingTopK,
		"serving_top_agreement": sc.agreement,
	}
}
