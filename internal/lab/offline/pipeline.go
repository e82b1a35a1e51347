package offline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// Pipeline is the data → backbone → sketch → features settings shared by the select,
// fit, explain, audit and validate commands (their pipeline flags, named beside each
// field). DefaultPipeline holds the flags' defaults.
type Pipeline struct {
	Data      string // --data: mnist | fashion-mnist | adult:DIR | csv:FILE
	Arch      string // --arch; "" picks the default for the data set (DefaultArch)
	Weights   string // --weights: backbone parameter file or shipped:NAME; "" = the shipped weights for the data set
	Untrained bool   // --untrained: the seeded initialization (a test fixture)
	// Model is --model: an ONNX export as the backbone (the daemon's model.file), with the
	// kernel's parameters selected by Params, comma-separated initializer-name globs
	// (--params, model.params; "": all). Weights and Untrained are then unset, and Arch
	// empty or pinning the file's digest. (A string, so that Pipeline stays comparable:
	// BlockCache keys on it.)
	Model  string
	Params string
	H, S   int    // --h heads, --s SRHT width
	M      int    // --m landmarks per view
	N      int    // --n first rows (0 = all)
	Seed   uint64 // --seed: backbone init, sketch, views, selectors
	// Normalize is --normalize: pc-ntk pivots on normalized residuals δ_j/K_jj, as the
	// daemon's pool does under pool.normalize (its default). Literals leave it false,
	// the paper's raw rule, which reproduce keeps.
	Normalize bool
	// Tolerance is --tolerance: pc-ntk's tolerant pivoting, as the daemon's pool under
	// pool.tolerance (its default, 0.6). Literals leave it 0, the paper's exact argmax,
	// which reproduce keeps.
	Tolerance float64
}

// DefaultPipeline returns the pipeline flags' defaults: 4 heads, s = 1024, 256
// landmarks per view, every row, seed 0 and the daemon's pool.normalize and
// pool.tolerance.
func DefaultPipeline() Pipeline {
	pool := config.Default().Pool
	return Pipeline{H: 4, S: 1024, M: 256, Normalize: pool.Normalize, Tolerance: pool.Tolerance}
}

// PivotRule is pc-ntk's pivoting rule (coreset.SelectInput's Normalize and Tolerance).
type PivotRule struct {
	Normalize bool
	Tolerance float64
}

// Rule returns the pivoting rule of the settings.
func (p *Pipeline) Rule() PivotRule { return PivotRule{p.Normalize, p.Tolerance} }

// CheckRule refuses a --tolerance outside [0, 1).
func (p *Pipeline) CheckRule() error {
	if !(p.Tolerance >= 0 && p.Tolerance < 1) {
		return fmt.Errorf("--tolerance: %v must be in [0, 1)", p.Tolerance)
	}
	return nil
}

// DefaultArch is the backbone used when --arch is empty: the paper's small ConvNet for
// 28×28 images and a ResMLP with 3 residual blocks (appendix "Data and kernels") otherwise.
func DefaultArch(set *dataset.Set) string {
	if set.IsImage() {
		return fmt.Sprintf("convnet:%dx%dx%d-16-32-10", set.Shape[0], set.Shape[1], set.Shape[2])
	}
	return fmt.Sprintf("resmlp:%d-128x3-8", set.D)
}

// Prepared is the output of Prepare. All slices are row-major and owned by it.
type Prepared struct {
	Set *dataset.Set
	// Features is the daemon's fit-draw pipeline for the settings: backbone, the sketch
	// named pipeline.FitSketch, and the seeded augmenter.
	Features *pipeline.Features
	Q        int // feature dimension h·s
	// ViewA, ViewB are the two augmented views of every point (N×D).
	ViewA, ViewB []float64
	// FeatA, FeatB are ψ of the two views, one float32 row of length Q per point (nil
	// until Featurize). The pipeline rounds every ψ to float32 (pipeline.FeaturesTo), so
	// the rows hold its values exactly, in half the memory of float64, as the daemon's
	// point cache does.
	FeatA, FeatB [][]float32
	// Seconds is wall time by phase: load, backbone, views, features.
	Seconds map[string]float64
}

// Prepare loads the training split (first --n rows) and runs it through the daemon's
// feature pipeline (Load, then Featurize): both views of every point and their
// features. Memory: 2·N·q float32 for the features.
func Prepare(p *Pipeline) (*Prepared, error) {
	out, err := Load(p)
	if err != nil {
		return nil, err
	}
	out.Featurize()
	return out, nil
}

// Load loads the training split (first --n rows), builds the daemon's feature pipeline
// for the settings (pipeline.NewFeatures: the backbone weights.Load resolves, the sketch
// drawn under pipeline.FitSketch, the augmenter seeded by --seed) and both augmented
// views of every point, timing each phase; the features are left to Featurize.
func Load(p *Pipeline) (*Prepared, error) {
	if p.Data == "" {
		return nil, fmt.Errorf("--data is required")
	}
	if p.N < 0 {
		return nil, fmt.Errorf("--n: %d must be ≥ 0", p.N)
	}
	if err := p.CheckRule(); err != nil {
		return nil, err
	}
	out := &Prepared{Seconds: map[string]float64{}}
	t0 := time.Now()
	set, err := dataset.Open(p.Data, "train", p.N)
	if err != nil {
		return nil, fmt.Errorf("--data %q: %w", p.Data, err)
	}
	out.Set = set
	out.Seconds["load"] = time.Since(t0).Seconds()

	t0 = time.Now()
	f, err := p.features(set)
	if err != nil {
		return nil, err
	}
	out.Features, out.Q = f, f.Dim()
	out.Seconds["backbone"] = time.Since(t0).Seconds()

	t0 = time.Now()
	n, d := set.N, set.D
	out.ViewA = make([]float64, n*d)
	out.ViewB = make([]float64, n*d)
	f.ViewsTo(out.ViewA, out.ViewB, set.X, set.IDs)
	out.Seconds["views"] = time.Since(t0).Seconds()
	return out, nil
}

// featureChunk is the number of rows featureChunks computes per call of the pipeline:
// its float64 scratch is featureChunk·q values (128 MiB at q = 16,384).
const featureChunk = 1024

// Featurize computes FeatA and FeatB, ψ of both views of every point (FeatureRows).
func (p *Prepared) Featurize() {
	t0 := time.Now()
	p.FeatA = FeatureRows(p.Features, p.ViewA, p.Set.N)
	p.FeatB = FeatureRows(p.Features, p.ViewB, p.Set.N)
	p.Seconds["features"] = time.Since(t0).Seconds()
}

// FeatureRows returns ψ of the n rows of x (n×D) as float32 rows backed by one
// allocation (featureChunks; pipeline.FeaturesTo rounds to float32, so the conversion
// is exact).
func FeatureRows(f *pipeline.Features, x []float64, n int) [][]float32 {
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

// Widen returns rows as one row-major float64 matrix (len(rows)×q), for the commands
// that read the features as a matrix (select's d_eff and residual curves).
func Widen(rows [][]float32, q int) []float64 {
	out := make([]float64, 0, len(rows)*q)
	for _, r := range rows {
		for _, v := range r {
			out = append(out, float64(v))
		}
	}
	return out
}

// features builds the daemon's feature pipeline for the settings and the data set set
// (--arch defaulting to DefaultArch(set), or --model's ONNX file), and checks the
// backbone takes set's rows.
func (p *Pipeline) features(set *dataset.Set) (*pipeline.Features, error) {
	if p.Model != "" {
		m := config.Backbone{Arch: p.Arch, File: p.Model, Params: GlobList(p.Params), Weights: p.Weights, Untrained: p.Untrained, Seed: p.Seed}
		f, err := pipeline.NewFeatures(m, config.Sketch{H: p.H, S: p.S}, set.Name)
		if err != nil {
			return nil, fmt.Errorf("--model %q --params %q --h %d --s %d: %w", p.Model, p.Params, p.H, p.S, err)
		}
		if f.InputDim() != set.D {
			return nil, fmt.Errorf("--model %s takes inputs of shape %v (%d values), but --data %s has %d features per row",
				p.Model, f.InputShape(), f.InputDim(), p.Data, set.D)
		}
		return f, nil
	}
	if p.Params != "" {
		return nil, fmt.Errorf("--params %q selects an ONNX model's parameters: give --model FILE.onnx too", p.Params)
	}
	spec := p.Arch
	if spec == "" {
		spec = DefaultArch(set)
	}
	m := config.Backbone{Arch: spec, Weights: p.Weights, Untrained: p.Untrained, Seed: p.Seed}
	f, err := pipeline.NewFeatures(m, config.Sketch{H: p.H, S: p.S}, set.Name)
	if err != nil {
		return nil, fmt.Errorf("--arch %q --weights %q --untrained=%v --h %d --s %d: %w", spec, p.Weights, p.Untrained, p.H, p.S, err)
	}
	if f.InputDim() != set.D {
		return nil, fmt.Errorf("--arch %q: input size %d, data has %d features", spec, f.InputDim(), set.D)
	}
	return f, nil
}

// ViewSelection is the two-view landmark pool of paper Alg. cairn-stage1: m landmarks
// chosen on view A's features and m on view B's, M = 2m in all.
type ViewSelection struct {
	// A, B are the selections (row indices in selection order) on each view.
	A, B *coreset.Selection
	// Landmarks (M×q) are the landmark feature vectors: view-A features of A's rows, then
	// view-B features of B's rows. Column l of the kernel blocks is landmark l.
	Landmarks []float64
	M, Q      int
}

// SelectViews runs the named selector (coreset.Selectors) with budget m on each view:
// sketch-based selectors on FeatA / FeatB, input-space selectors on ViewA / ViewB. All
// draws come from seed; pc-ntk pivots by rule. The two views' selections are
// independent and run side by side (joined here), as the daemon's do (ingest.Select).
// They give up when ctx ends.
func SelectViews(ctx context.Context, p *Prepared, selector string, m int, seed uint64, rule PivotRule) (*ViewSelection, error) {
	n, q := p.Set.N, p.Q
	var (
		sel  [2]*coreset.Selection
		errs [2]error
		wg   sync.WaitGroup
	)
	for v, view := range []struct {
		x []float64
		g [][]float32
	}{{p.ViewA, p.FeatA}, {p.ViewB, p.FeatB}} {
		wg.Go(func() {
			in := coreset.SelectInput{N: n, X: view.x, D: p.Set.D, G32: view.g, Q: q, Seed: seed, Normalize: rule.Normalize, Tolerance: rule.Tolerance}
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
func viewLandmarks(p *Prepared, a, b *coreset.Selection) *ViewSelection {
	q := p.Q
	vs := &ViewSelection{A: a, B: b, Q: q, M: len(a.Indices) + len(b.Indices)}
	vs.Landmarks = make([]float64, 0, vs.M*q)
	for _, i := range a.Indices {
		vs.Landmarks = append(vs.Landmarks, Widen(p.FeatA[i:i+1], q)...)
	}
	for _, i := range b.Indices {
		vs.Landmarks = append(vs.Landmarks, Widen(p.FeatB[i:i+1], q)...)
	}
	return vs
}

// kernelBlocks returns K_A and K_B (N×M, row-major) of paper Alg. cairn-stage2:
// K_A[i][l] = <ψ(view A of point i), landmark l>, K_B likewise with view B, landmark l
// being row l of vs.Landmarks: the daemon's pipeline.KernelTo on the float32 rows, O(N q M),
// with nothing of size N×q allocated.
func kernelBlocks(p *Prepared, vs *ViewSelection) (ka, kb []float64) {
	n, q := p.Set.N, p.Q
	z := mat.NewDense(vs.M, q, vs.Landmarks)
	ka = make([]float64, n*vs.M)
	kb = make([]float64, n*vs.M)
	pipeline.KernelTo(mat.NewDense(n, vs.M, ka), p.FeatA, z)
	pipeline.KernelTo(mat.NewDense(n, vs.M, kb), p.FeatB, z)
	return ka, kb
}

// GlobList is a comma-separated list of globs (--params) as a list, blanks trimmed and
// empty items dropped; nil for none.
func GlobList(s string) []string {
	var out []string
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}
