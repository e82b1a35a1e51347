package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// pipelineFlags are the data → backbone → sketch → features flags shared by the select,
// fit and explain commands. Register them with register, then call prepare.
type pipelineFlags struct {
	data      string // --data: mnist | fashion-mnist | adult:DIR | csv:FILE
	arch      string // --arch; "" picks the default for the data set (defaultArch)
	weights   string // --weights: backbone parameter file or shipped:NAME; "" = the shipped weights for the data set
	untrained bool   // --untrained: the seeded initialization (a test fixture)
	h, s      int    // --h heads, --s SRHT width
	m         int    // --m landmarks per view
	n         int    // --n first rows (0 = all)
	seed      uint64 // --seed: backbone init, sketch, views, selectors
	// normalize is --normalize: pc-ntk pivots on normalized residuals δ_j/K_jj, as the
	// daemon's pool does under pool.normalize (its default). Literals leave it false,
	// the paper's raw rule, which reproduce keeps.
	normalize bool
	// tolerance is --tolerance: pc-ntk's tolerant pivoting, as the daemon's pool under
	// pool.tolerance (its default, 0.6). Literals leave it 0, the paper's exact argmax,
	// which reproduce keeps.
	tolerance float64
}

// pivotRule is pc-ntk's pivoting rule (coreset.SelectInput's Normalize and Tolerance).
type pivotRule struct {
	normalize bool
	tolerance float64
}

// rule returns the pivoting rule of the flags.
func (p *pipelineFlags) rule() pivotRule { return pivotRule{p.normalize, p.tolerance} }

// checkRule refuses a --tolerance outside [0, 1).
func (p *pipelineFlags) checkRule() error {
	if !(p.tolerance >= 0 && p.tolerance < 1) {
		return fmt.Errorf("--tolerance: %v must be in [0, 1)", p.tolerance)
	}
	return nil
}

// register adds the pipeline flags to fs.
func (p *pipelineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.data, "data", "", "data set: mnist | fashion-mnist | adult:DIR | csv:FILE")
	fs.StringVar(&p.arch, "arch", "", "backbone spec (default convnet:1x28x28-16-32-10 for images, resmlp:<D>-128x3-8 otherwise)")
	fs.StringVar(&p.weights, "weights", "", "backbone weights: a safetensors file or shipped:NAME (default: the shipped trained weights for --data and --arch)")
	fs.BoolVar(&p.untrained, "untrained", false, "use the seeded untrained network (PyTorch-default init under --seed) instead of trained weights")
	fs.IntVar(&p.h, "h", 4, "number of Gaussian output heads")
	fs.IntVar(&p.s, "s", 1024, "SRHT sketch width")
	fs.IntVar(&p.m, "m", 256, "landmarks per view (pool M = 2m)")
	fs.IntVar(&p.n, "n", 0, "use the first n training rows (0 = all)")
	fs.Uint64Var(&p.seed, "seed", 0, "seed of every random draw")
	fs.BoolVar(&p.normalize, "normalize", config.Default().Pool.Normalize,
		"pc-ntk pivots on the normalized residual δ_j/K_jj, as the daemon's pool.normalize (covers inputs of small eNTK norm; tr R stays the raw kernel's); false: the paper's raw δ_j")
	fs.Float64Var(&p.tolerance, "tolerance", config.Default().Pool.Tolerance,
		"pc-ntk's tolerant pivoting τ in [0, 1), as the daemon's pool.tolerance: each step takes, among the candidates within 1−τ of the largest key, the one of smallest seed-free key of its row (a reseed keeps the landmarks); 0: the paper's exact argmax")
}

// defaultArch is the backbone used when --arch is empty: the paper's small ConvNet for
// 28×28 images and a ResMLP with 3 residual blocks (appendix "Data and kernels") otherwise.
func defaultArch(set *dataset.Set) string {
	if set.IsImage() {
		return fmt.Sprintf("convnet:%dx%dx%d-16-32-10", set.Shape[0], set.Shape[1], set.Shape[2])
	}
	return fmt.Sprintf("resmlp:%d-128x3-8", set.D)
}

// prepared is the output of prepare. All slices are row-major and owned by it.
type prepared struct {
	set *dataset.Set
	// features is the daemon's fit-draw pipeline for the flags: backbone, the sketch
	// named pipeline.FitSketch, and the seeded augmenter.
	features *pipeline.Features
	q        int // feature dimension h·s
	// viewA, viewB are the two augmented views of every point (N×D).
	viewA, viewB []float64
	// featA, featB are ψ of the two views, one float32 row of length q per point (nil
	// until featurize). The pipeline rounds every ψ to float32 (pipeline.FeaturesTo), so
	// the rows hold its values exactly, in half the memory of float64, as the daemon's
	// point cache does.
	featA, featB [][]float32
	// seconds is wall time by phase: load, backbone, views, features.
	seconds map[string]float64
}

// prepare loads the training split (first --n rows) and runs it through the daemon's
// feature pipeline (load, then featurize): both views of every point and their
// features. Memory: 2·N·q float32 for the features.
func prepare(p *pipelineFlags) (*prepared, error) {
	out, err := load(p)
	if err != nil {
		return nil, err
	}
	out.featurize()
	return out, nil
}

// load loads the training split (first --n rows), builds the daemon's feature pipeline
// for the flags (pipeline.NewFeatures: the backbone weights.Load resolves, the sketch
// drawn under pipeline.FitSketch, the augmenter seeded by --seed) and both augmented
// views of every point, timing each phase; the features are left to featurize.
func load(p *pipelineFlags) (*prepared, error) {
	if p.data == "" {
		return nil, fmt.Errorf("--data is required")
	}
	if p.n < 0 {
		return nil, fmt.Errorf("--n: %d must be ≥ 0", p.n)
	}
	if err := p.checkRule(); err != nil {
		return nil, err
	}
	out := &prepared{seconds: map[string]float64{}}
	t0 := time.Now()
	set, err := dataset.Open(p.data, "train", p.n)
	if err != nil {
		return nil, fmt.Errorf("--data %q: %w", p.data, err)
	}
	out.set = set
	out.seconds["load"] = time.Since(t0).Seconds()

	t0 = time.Now()
	f, err := p.features(set)
	if err != nil {
		return nil, err
	}
	out.features, out.q = f, f.Dim()
	out.seconds["backbone"] = time.Since(t0).Seconds()

	t0 = time.Now()
	n, d := set.N, set.D
	out.viewA = make([]float64, n*d)
	out.viewB = make([]float64, n*d)
	f.ViewsTo(out.viewA, out.viewB, set.X, set.IDs)
	out.seconds["views"] = time.Since(t0).Seconds()
	return out, nil
}

// featureChunk is the number of rows featureChunks computes per call of the pipeline:
// its float64 scratch is featureChunk·q values (128 MiB at q = 16,384).
const featureChunk = 1024

// featurize computes featA and featB, ψ of both views of every point (featureRows).
func (p *prepared) featurize() {
	t0 := time.Now()
	p.featA = featureRows(p.features, p.viewA, p.set.N)
	p.featB = featureRows(p.features, p.viewB, p.set.N)
	p.seconds["features"] = time.Since(t0).Seconds()
}

// featureRows returns ψ of the n rows of x (n×D) as float32 rows backed by one
// allocation (featureChunks; pipeline.FeaturesTo rounds to float32, so the conversion
// is exact).
func featureRows(f *pipeline.Features, x []float64, n int) [][]float32 {
	q := f.Dim()
	flat := make([]float32, n*q)
	out := make([][]float32, n)
	featureChunks(f, x, n, func(lo, hi int, feat []float64) {
		for i := lo; i < hi; i++ {
			row := flat[i*q : (i+1)*q : (i+1)*q]
			for j, v := range feat[(i-lo)*q : (i-lo+1)*q] {
				row[j] = float32(v)
			}
			out[i] = row
		}
	})
	return out
}

// kernelAgainst returns the kernel block K[i][l] = ⟨ψ(x_i), z_l⟩ (n×M) of the n rows of x
// (n×D, unaugmented) against the landmark features z (M×q), a chunk of features at a
// time (featureChunks), so that nothing of size n×q is held.
func kernelAgainst(f *pipeline.Features, x []float64, n int, z *mat.Dense) *mat.Dense {
	q := f.Dim()
	mm, _ := z.Dims()
	k := mat.NewDense(n, mm, nil)
	featureChunks(f, x, n, func(lo, hi int, feat []float64) {
		k.Slice(lo, hi, 0, mm).(*mat.Dense).Mul(mat.NewDense(hi-lo, q, feat), z.T())
	})
	return k
}

// featureChunks computes ψ of the n rows of x (n×D) featureChunk rows at a time on all
// cores (pipeline.FeaturesTo) and calls use with each chunk's rows [lo, hi) and their
// features ((hi−lo)×q, scratch reused by the next chunk).
func featureChunks(f *pipeline.Features, x []float64, n int, use func(lo, hi int, feat []float64)) {
	q, d := f.Dim(), f.InputDim()
	buf := make([]float64, min(n, featureChunk)*q)
	for lo := 0; lo < n; lo += featureChunk {
		hi := min(lo+featureChunk, n)
		feat := buf[:(hi-lo)*q]
		f.FeaturesTo(feat, x[lo*d:hi*d], hi-lo)
		use(lo, hi, feat)
	}
}

// widen returns rows as one row-major float64 matrix (len(rows)×q), for the commands
// that read the features as a matrix (select's d_eff and residual curves).
func widen(rows [][]float32, q int) []float64 {
	out := make([]float64, 0, len(rows)*q)
	for _, r := range rows {
		for _, v := range r {
			out = append(out, float64(v))
		}
	}
	return out
}

// features builds the daemon's feature pipeline for the flags and the data set set
// (--arch defaulting to defaultArch(set)), and checks the backbone takes set's rows.
func (p *pipelineFlags) features(set *dataset.Set) (*pipeline.Features, error) {
	spec := p.arch
	if spec == "" {
		spec = defaultArch(set)
	}
	m := config.Backbone{Arch: spec, Weights: p.weights, Untrained: p.untrained, Seed: p.seed}
	f, err := pipeline.NewFeatures(m, config.Sketch{H: p.h, S: p.s}, set.Name)
	if err != nil {
		return nil, fmt.Errorf("--arch %q --weights %q --untrained=%v --h %d --s %d: %w", spec, p.weights, p.untrained, p.h, p.s, err)
	}
	if f.InputDim() != set.D {
		return nil, fmt.Errorf("--arch %q: input size %d, data has %d features", spec, f.InputDim(), set.D)
	}
	return f, nil
}

// viewSelection is the two-view landmark pool of paper Alg. cairn-stage1: m landmarks
// chosen on view A's features and m on view B's, M = 2m in all.
type viewSelection struct {
	// A, B are the selections (row indices in selection order) on each view.
	A, B *coreset.Selection
	// Landmarks (M×q) are the landmark feature vectors: view-A features of A's rows, then
	// view-B features of B's rows. Column l of the kernel blocks is landmark l.
	Landmarks []float64
	M, Q      int
}

// selectViews runs the named selector (coreset.Selectors) with budget m on each view:
// sketch-based selectors on featA / featB, input-space selectors on viewA / viewB. All
// draws come from seed; pc-ntk pivots by rule. The two views' selections are
// independent and run side by side (joined here), as the daemon's do (ingest.Select).
// They give up when ctx ends.
func selectViews(ctx context.Context, p *prepared, selector string, m int, seed uint64, rule pivotRule) (*viewSelection, error) {
	n, q := p.set.N, p.q
	var (
		sel  [2]*coreset.Selection
		errs [2]error
		wg   sync.WaitGroup
	)
	for v, view := range []struct {
		x []float64
		g [][]float32
	}{{p.viewA, p.featA}, {p.viewB, p.featB}} {
		wg.Go(func() {
			in := coreset.SelectInput{N: n, X: view.x, D: p.set.D, G32: view.g, Q: q, Seed: seed, Normalize: rule.normalize, Tolerance: rule.tolerance}
			sel[v], errs[v] = coreset.SelectContext(ctx, selector, in, m)
		})
	}
	wg.Wait()
	for v, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("view %c: %w", 'A'+v, err)
		}
	}
	return viewLandmarks(p, sel[0], sel[1]), nil
}

// viewLandmarks returns the pool of the selections a (on view A) and b (on view B) of
// p's rows, with the landmarks' features widened to float64.
func viewLandmarks(p *prepared, a, b *coreset.Selection) *viewSelection {
	q := p.q
	vs := &viewSelection{A: a, B: b, Q: q, M: len(a.Indices) + len(b.Indices)}
	vs.Landmarks = make([]float64, 0, vs.M*q)
	for _, i := range a.Indices {
		vs.Landmarks = append(vs.Landmarks, widen(p.featA[i:i+1], q)...)
	}
	for _, i := range b.Indices {
		vs.Landmarks = append(vs.Landmarks, widen(p.featB[i:i+1], q)...)
	}
	return vs
}

// kernelBlocks returns K_A and K_B (N×M, row-major) of paper Alg. cairn-stage2:
// K_A[i][l] = <ψ(view A of point i), landmark l>, K_B likewise with view B, landmark l
// being row l of vs.Landmarks: the daemon's pipeline.KernelTo on the float32 rows, O(N q M),
// with nothing of size N×q allocated.
func kernelBlocks(p *prepared, vs *viewSelection) (ka, kb []float64) {
	n, q := p.set.N, p.q
	z := mat.NewDense(vs.M, q, vs.Landmarks)
	ka = make([]float64, n*vs.M)
	kb = make([]float64, n*vs.M)
	pipeline.KernelTo(mat.NewDense(n, vs.M, ka), p.featA, z)
	pipeline.KernelTo(mat.NewDense(n, vs.M, kb), p.featB, z)
	return ka, kb
}
