package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/base/par"
)

// FitSketch is the name of the feature draw the pool is selected on (entk streams
// "entk/heads/fit" and "entk/srht/fit"); the certificate's evaluation draw is another.
const FitSketch = "fit"

// Features is the fit-draw feature pipeline of the configured model: the frozen
// backbone, the sketch named FitSketch, and the augmenter that makes a point's two
// views. It is immutable and safe for concurrent use; callers bring their own buffers.
//
// Its features are stored in single precision: every ψ it returns is fl32(ψ), the
// float64 ψ of the sketch rounded to the nearest float32 (and held in float64, where
// the widening is exact). The pool, its certificate, the fit and the point cache all
// work on these ψ̃ = fl32(ψ), so the cache keeps them in float32 at half the memory and
// every path that reads them, from the cache or recomputed, sees the same numbers. The
// kernel of the stored features, K̃ = ⟨ψ̃_i, ψ̃_j⟩, is what the pool selects on and the
// residual certificate is exact for; it differs from the float64 kernel by
// |K̃_ij − K_ij| ≤ (2u + u²)‖ψ_i‖‖ψ_j‖ with u = 2⁻²⁴ (each entry of ψ̃ is within u of
// the entry's magnitude), so tr K̃ is within 2⁻²³ of tr K, relatively.
//
// An ONNX backbone's input positions that the model reads as table indices
// (IndexInputs: embedding codes) keep their value in both views: the augmentation
// leaves categories alone, since noise would change one under the model's truncating
// Cast.
type Features struct {
	backbone    entk.Backbone
	source      weights.Source
	cov         *onnx.Coverage
	index       []onnx.IndexInput
	sel         string // the ONNX kernel's tensor names, "" for a built-in backbone
	sketch      *entk.Sketch
	aug         *dataset.Augmenter
	shape       [3]int
	sk          config.Sketch
	seed        uint64
	viewSeed    uint64
	fingerprint string
}

// NewFeatures builds the pipeline: the backbone as weights.Load resolves m (the shipped
// trained weights for m.Arch and the data set named data by default, "" meaning the
// default data set of the architecture; a file; or the seeded initialization when
// m.Untrained), or the ONNX model of m.File with the kernel parameters m.Params select
// (entk.OpenBackbone; a folded-BatchNorm export is refused with ErrFoldedBatchNorm
// unless m.AllowFoldedBatchNorm); the sketch of sk.H heads and SRHT width sk.S drawn
// under (m.Seed, FitSketch); and the augmenter seeded by ViewSeed(m). A convnet's input,
// and an ONNX model's whose per-example input has three dimensions, is an image of its
// (C, H, W); any other input is tabular (config has no data-shape setting; this follows
// the model). Errors wrap ErrConfig and name the setting.
func NewFeatures(m config.Backbone, sk config.Sketch, data string) (*Features, error) {
	bb, err := openBackbone(m, data)
	if err != nil {
		return nil, err
	}
	b := bb.b
	s, err := entk.NewSketch(b, sk.H, sk.S, m.Seed, FitSketch)
	if err != nil {
		return nil, fmt.Errorf("%w: sketch h=%d s=%d: %w", ErrConfig, sk.H, sk.S, err)
	}
	vs := ViewSeed(m)
	f := &Features{backbone: b, source: bb.src, cov: bb.cov, index: bb.index, sel: bb.sel, sketch: s,
		aug: dataset.NewAugmenter(b.InDim(), bb.shape, vs), shape: bb.shape, sk: sk, seed: m.Seed, viewSeed: vs}
	f.fingerprint = f.seal(fingerprint(b, sk, m.Seed, bb.shape))
	return f, nil
}

// seal folds into a fingerprint of the features what the backbone's spec and parameters
// leave out: an ONNX kernel's selection (selectionFingerprint) and a view seed that
// differs from the model seed (viewFingerprint). A built-in backbone under equal seeds
// keeps the fingerprint it always had.
func (f *Features) seal(fp string) string {
	if f.sel != "" {
		fp = selectionFingerprint(fp, f.sel)
	}
	if f.viewSeed != f.seed {
		fp = viewFingerprint(fp, f.viewSeed)
	}
	return fp
}

// ViewSeed is the root of the views' augmentations under m: model.view_seed, or
// model.seed when view_seed is 0 (a configuration written before view_seed existed).
func ViewSeed(m config.Backbone) uint64 {
	if m.ViewSeed == 0 {
		return m.Seed
	}
	return m.ViewSeed
}

// viewFingerprint folds a view seed that differs from the model seed into a
// fingerprint: equal seeds keep the fingerprint they always had, so a stored pool of the
// default deployment (view_seed = seed = 1) stays valid.
func viewFingerprint(fp string, viewSeed uint64) string {
	h := sha256.New()
	var w [8]byte
	binary.BigEndian.PutUint64(w[:], viewSeed)
	h.Write([]byte("cairn/daemon/features/view-seed\x00" + fp))
	h.Write(w[:])
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprint identifies everything the features depend on: architecture, parameters
// (so a changed weights file is noticed), sketch budget, seed and view shape. A stored
// pool carries it, and a daemon restarted with another model refuses that pool instead
// of mixing features of two models. The version names the feature algorithm: v2 is ψ
// from the ConvNet's multi-head backward and the pruned SRHT, equal to v1 to rounding
// but not bit for bit; v3 is v2 rounded to float32 (fl32(ψ), see Features).
func fingerprint(b entk.Backbone, sk config.Sketch, seed uint64, shape [3]int) string {
	return fingerprintVersion(featuresVersion, b, sk, seed, shape)
}

// featuresVersion is the current feature algorithm's version (see fingerprint).
const featuresVersion = 3

func fingerprintVersion(version int, b entk.Backbone, sk config.Sketch, seed uint64, shape [3]int) string {
	h := sha256.New()
	var w [8]byte
	u := func(v uint64) { binary.BigEndian.PutUint64(w[:], v); h.Write(w[:]) }
	fmt.Fprintf(h, "cairn/daemon/features/v%d\x00", version)
	h.Write([]byte(b.Arch()))
	h.Write([]byte{0})
	u(uint64(sk.H))
	u(uint64(sk.S))
	u(seed)
	for _, v := range shape {
		u(uint64(v))
	}
	for _, p := range b.Params() {
		u(math.Float64bits(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// InputDim is D, the length of every point's x.
func (f *Features) InputDim() int { return f.backbone.InDim() }

// Dim is the feature dimension h·q of one view.
func (f *Features) Dim() int { return f.sketch.Dim() }

// Fingerprint is the hex SHA-256 identity of the pipeline (see fingerprint).
func (f *Features) Fingerprint() string { return f.fingerprint }

// PreviousFingerprint is the fingerprint this pipeline had under the previous feature
// algorithm (v2: ψ in float64) with everything else the same. A pool stored under it
// holds the same points and only needs its selection redone on the current features;
// any other fingerprint means another model.
func (f *Features) PreviousFingerprint() string {
	return f.seal(fingerprintVersion(2, f.backbone, f.sk, f.seed, f.shape))
}

// Backbone returns the frozen network.
func (f *Features) Backbone() entk.Backbone { return f.backbone }

// Source says where the backbone's parameters came from (shipped file, path or seed) and
// their SHA-256.
func (f *Features) Source() weights.Source { return f.source }

// Shape is the (C, H, W) of image inputs, or zeros for tabular inputs.
func (f *Features) Shape() [3]int { return f.shape }

// Sketch returns the fit draw.
func (f *Features) Sketch() *entk.Sketch { return f.sketch }

// BothViewsTo writes the fit-draw features of both views of the n points xs (n×D
// row-major, point i named ids[i]) into dst (2n×Dim): row 2i is ψ(view 0 of x_i), row
// 2i+1 is ψ(view 1 of x_i). views (2n×D) is scratch and is overwritten. The rows are
// spread over GOMAXPROCS goroutines by entk (joined before it returns); each row is
// bit-identical to a sequential computation, so the result does not depend on n or on
// the batch a point arrives in. xs is not modified. Wrong lengths panic.
func (f *Features) BothViewsTo(dst, views, xs []float64, ids []string) {
	n, d := len(ids), f.InputDim()
	if len(xs) != n*d || len(views) != 2*n*d || len(dst) != 2*n*f.Dim() {
		panic(fmt.Sprintf("pipeline: BothViewsTo lengths dst %d views %d xs %d for n=%d D=%d q=%d",
			len(dst), len(views), len(xs), n, d, f.Dim()))
	}
	// The views, each a function of (seed, id, view, x), in chunks side by side: on one
	// goroutine they and the rounding took 4–5 ms of a 256-point batch whose ψ takes
	// 120 ms on two cores, a share that grows with the cores ψ spreads over.
	par.For(n, viewPoints, par.Workers(n, viewPoints), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := xs[i*d : (i+1)*d]
			f.ViewTo(views[2*i*d:(2*i+1)*d], x, ids[i], 0)
			f.ViewTo(views[(2*i+1)*d:(2*i+2)*d], x, ids[i], 1)
		}
	})
	if n > 0 {
		f.sketch.FeaturesBatchTo(dst, views, 2*n)
		roundRowsTo32(dst, 2*n, f.Dim())
	}
}

// viewPoints is the point count of one chunk of BothViewsTo's views; roundRows the row
// count of one chunk of roundRowsTo32.
const (
	viewPoints = 8
	roundRows  = 16
)

// roundRowsTo32 is RoundTo32 on the rows×q matrix x, rows in chunks side by side.
func roundRowsTo32(x []float64, rows, q int) {
	par.For(rows, roundRows, par.Workers(rows, roundRows), func(_, lo, hi int) {
		RoundTo32(x[lo*q : hi*q])
	})
}

// RoundTo32 rounds every entry of x to the nearest float32 in place: the stored
// precision of the fit-draw features (see Features). A value beyond float32's range
// becomes ±Inf, which the callers' finiteness checks reject.
func RoundTo32(x []float64) {
	for i, v := range x {
		x[i] = float64(float32(v))
	}
}

// ViewTo writes view v (0 or 1) of the point id with input x into dst (len D): the
// seeded augmentation of docs/architecture.md, "Views", a function of (seed, id, v, x)
// only, with the input positions read as table indices left as in x (see Features).
func (f *Features) ViewTo(dst, x []float64, id string, v int) {
	f.aug.ViewTo(dst, x, id, v)
	f.keepIndices(dst, x)
}

// ViewsTo writes both views of the n points xs (n×D, point i named ids[i]) into a (view
// 0, n×D) and b (view 1, n×D). xs is not modified. Wrong lengths panic.
func (f *Features) ViewsTo(a, b, xs []float64, ids []string) {
	n, d := len(ids), f.InputDim()
	if len(xs) != n*d || len(a) != n*d || len(b) != n*d {
		panic(fmt.Sprintf("pipeline: ViewsTo lengths a %d b %d xs %d for n=%d D=%d", len(a), len(b), len(xs), n, d))
	}
	for i, id := range ids {
		f.ViewTo(a[i*d:(i+1)*d], xs[i*d:(i+1)*d], id, 0)
		f.ViewTo(b[i*d:(i+1)*d], xs[i*d:(i+1)*d], id, 1)
	}
}

// FeaturesTo writes ψ of the n rows of views (n×D) into dst (n×Dim), spread over
// GOMAXPROCS goroutines by entk (joined before it returns), each row bit-identical to a
// sequential computation. views is not modified.
func (f *Features) FeaturesTo(dst, views []float64, n int) {
	if n > 0 {
		f.sketch.FeaturesBatchTo(dst, views, n)
		roundRowsTo32(dst, n, f.Dim())
	}
}

// Reseeded returns the pipeline with the same backbone and views and the sketch drawn
// anew under seed (entk streams "entk/heads/fit" and "entk/srht/fit" of seed): what a
// deployment with another model.seed and the same model.view_seed featurizes. Its
// fingerprint names the new seed.
func (f *Features) Reseeded(seed uint64) (*Features, error) {
	s, err := entk.NewSketch(f.backbone, f.sk.H, f.sk.S, seed, FitSketch)
	if err != nil {
		return nil, fmt.Errorf("%w: sketch h=%d s=%d: %w", ErrConfig, f.sk.H, f.sk.S, err)
	}
	g := *f
	g.sketch, g.seed = s, seed
	g.fingerprint = g.seal(fingerprint(f.backbone, f.sk, seed, f.shape))
	return &g, nil
}
