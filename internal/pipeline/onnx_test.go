package pipeline

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/onnxtest"
)

// writeModel writes an ONNX model into a temporary file and returns its path.
func writeModel(t testing.TB, raw []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestONNXConvNetFeatures: the built-in convnet exported to ONNX gives the built-in
// pipeline's features (both views of every point) up to the float32 rounding of the
// stored ψ: the two engines agree to about 1e-12 relative before rounding, so a rounded
// entry differs by at most one float32 ulp, 2⁻²³ relative. The fingerprints differ (the
// architecture names the file) and the source names the file and its SHA-256.
func TestONNXConvNetFeatures(t *testing.T) {
	m := config.Backbone{Arch: "convnet:1x8x8-3-4-5", Seed: 4, ViewSeed: 4, Untrained: true}
	sk := config.Sketch{H: 2, S: 64}
	builtin, err := NewFeatures(m, sk, "")
	if err != nil {
		t.Fatal(err)
	}
	path := writeModel(t, onnxtest.Export(builtin.Backbone()))
	on, err := NewFeatures(config.Backbone{File: path, Arch: m.Arch, Seed: 4, ViewSeed: 4}, sk, "")
	if err != nil {
		t.Fatal(err)
	}
	if on.Shape() != builtin.Shape() || on.Dim() != builtin.Dim() || on.Fingerprint() == builtin.Fingerprint() {
		t.Fatalf("shape %v dim %d fingerprint %s, want %v %d and another fingerprint than %s",
			on.Shape(), on.Dim(), on.Fingerprint(), builtin.Shape(), builtin.Dim(), builtin.Fingerprint())
	}
	if src := on.Source(); src.Weights != path || len(src.SHA256) != 64 || "onnx:"+src.SHA256 != on.Backbone().Arch() {
		t.Errorf("source %+v, arch %s", src, on.Backbone().Arch())
	}
	if c := on.Coverage(); c.Share() != 1 || c.KernelParams != builtin.Backbone().NumParams() {
		t.Errorf("coverage %d of %d", c.KernelParams, c.ModelParams)
	}
	n, d, q := 9, on.InputDim(), on.Dim()
	ids, xs := randPoints(rand.New(rand.NewPCG(2, 2)), n, d)
	got, want := make([]float64, 2*n*q), make([]float64, 2*n*q)
	on.BothViewsTo(got, make([]float64, 2*n*d), xs, ids)
	builtin.BothViewsTo(want, make([]float64, 2*n*d), xs, ids)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 0x1p-23*math.Abs(want[i])+1e-300 {
			t.Fatalf("feature %d: onnx %v, built-in %v", i, got[i], want[i])
		}
	}
}

// TestONNXFingerprint: the selection is part of the fingerprint (by the tensors it
// selects, so equivalent globs agree), and the file's digest through the architecture;
// PreviousFingerprint and Reseeded fold the selection in too.
func TestONNXFingerprint(t *testing.T) {
	b, err := entk.NewBackbone("mlp:5-4-3", 1)
	if err != nil {
		t.Fatal(err)
	}
	path := writeModel(t, onnxtest.Export(b))
	sk := config.Sketch{H: 2, S: 16}
	fp := func(params ...string) *Features {
		f, err := NewFeatures(config.Backbone{File: path, Params: params, Seed: 1, ViewSeed: 1}, sk, "")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	all, last, lastToo := fp(), fp("2.*"), fp("2.weight", "2.b*")
	if all.Fingerprint() == last.Fingerprint() || last.Fingerprint() != lastToo.Fingerprint() {
		t.Errorf("fingerprints all %s, 2.* %s, 2.weight+2.b* %s: want the last two equal, the first different",
			all.Fingerprint(), last.Fingerprint(), lastToo.Fingerprint())
	}
	if last.Coverage().KernelParams != 3*4+3 || last.Backbone().NumParams() != 15 {
		t.Errorf("2.*: %d kernel parameters", last.Coverage().KernelParams)
	}
	r, err := last.Reseeded(1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fingerprint() != last.Fingerprint() || last.PreviousFingerprint() == all.PreviousFingerprint() {
		t.Errorf("Reseeded(same seed) %s, want %s; previous fingerprints must differ by selection", r.Fingerprint(), last.Fingerprint())
	}
	pinned, err := NewFeatures(config.Backbone{File: path, Arch: "onnx:" + all.Source().SHA256, Seed: 1, ViewSeed: 1}, sk, "")
	if err != nil || pinned.Fingerprint() != all.Fingerprint() {
		t.Errorf("pinned digest: %v, fingerprint %v", err, pinned)
	}
	_, err = NewFeatures(config.Backbone{File: path, Arch: "onnx:" + strings.Repeat("0", 64), Seed: 1}, sk, "")
	if !errors.Is(err, ErrConfig) || !errors.Is(err, entk.ErrONNXDigest) {
		t.Errorf("wrong pinned digest: %v, want ErrConfig and entk.ErrONNXDigest", err)
	}
}

// TestONNXIndexViews: embedding codes keep their value in both views, every other input
// is augmented.
func TestONNXIndexViews(t *testing.T) {
	path := writeModel(t, onnxtest.EmbeddingMLP(3, []int{5, 4}, 6, 2, 1))
	f, err := NewFeatures(config.Backbone{File: path, Seed: 2, ViewSeed: 2}, config.Sketch{H: 2, S: 32}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ix := f.IndexInputs(); len(ix) != 2 || ix[0].Pos != 3 || ix[1].Pos != 4 {
		t.Fatalf("IndexInputs %+v", ix)
	}
	x := []float64{0.5, -1, 2, 4, 1}
	a, b := make([]float64, 5), make([]float64, 5)
	f.ViewsTo(a, b, x, []string{"p1"})
	for j := range x {
		augmented := a[j] != x[j] || b[j] != x[j]
		if augmented != (j < 3) {
			t.Errorf("input %d: views %v %v of %v (augmented %v, want %v)", j, a[j], b[j], x[j], augmented, j < 3)
		}
	}
	if s := f.InputShape(); len(s) != 1 || s[0] != 5 || f.Shape() != [3]int{} {
		t.Errorf("input shape %v, view shape %v", s, f.Shape())
	}
}

// TestONNXRefusals: a folded-BatchNorm export is refused unless allowed, an unsupported
// operator is named with what to do, and built-in settings beside a file are refused.
func TestONNXRefusals(t *testing.T) {
	sk := config.Sketch{H: 1, S: 8}
	folded := writeModel(t, onnxtest.FoldedBatchNorm())
	_, err := NewFeatures(config.Backbone{File: folded, Seed: 1}, sk, "")
	if !errors.Is(err, ErrFoldedBatchNorm) || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "allow_folded_batchnorm") ||
		!strings.Contains(err.Error(), "do_constant_folding=False") {
		t.Errorf("folded: %v", err)
	}
	if _, err := NewFeatures(config.Backbone{File: folded, Seed: 1, AllowFoldedBatchNorm: true}, sk, ""); err != nil {
		t.Errorf("folded, allowed: %v", err)
	}
	b := onnxtest.NewBuilder()
	unsupported := writeModel(t, b.Bytes(b.Node("HardSwish", []string{b.Input(-1, 3)})))
	_, err = NewFeatures(config.Backbone{File: unsupported, Seed: 1}, sk, "")
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "HardSwish") || !strings.Contains(err.Error(), "export has no HardSwish") {
		t.Errorf("unsupported op: %v", err)
	}
	b = onnxtest.NewBuilder()
	_, err = NewFeatures(config.Backbone{File: writeModel(t, b.Bytes(b.Node("Relu", []string{b.Input(-1, -1)}))), Seed: 1}, sk, "")
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "dynamic axis only for the batch") {
		t.Errorf("symbolic input dimension: %v", err)
	}
	for _, m := range []config.Backbone{
		{File: folded, Weights: "w.safetensors"},
		{File: folded, Untrained: true},
		{Arch: "mlp:4-2", Untrained: true, Params: []string{"fc.*"}},
		{File: folded, AllowFoldedBatchNorm: true, Params: []string{"nothing.*"}},
	} {
		if _, err := NewFeatures(m, sk, ""); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", m, err)
		}
	}
}
