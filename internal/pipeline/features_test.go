package pipeline

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
)

// testConfig is a small seeded pipeline: an untrained MLP and a narrow sketch.
func testConfig() config.Config {
	c := config.Default()
	c.Model = config.Backbone{Arch: "mlp:6-8-4", Seed: 7, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 16}
	return c
}

func id(i int) string { return fmt.Sprintf("p%04d", i) }

func randPoints(r *rand.Rand, n, d int) ([]string, []float64) {
	ids := make([]string, n)
	xs := make([]float64, n*d)
	for i := range ids {
		ids[i] = id(i)
	}
	for i := range xs {
		xs[i] = r.NormFloat64()
	}
	return ids, xs
}

// TestBothViewsToMatchesSequential: the parallel batch path must give, bit for bit, the
// features of a plain sequential computation straight from dataset and entk rounded to
// float32, for any batch size (so a point's features do not depend on the batch it
// arrives in), and FeaturesTo the same, at GOMAXPROCS 1, 2 and 3 (the views, ψ and the
// rounding run in chunks side by side).
func TestBothViewsToMatchesSequential(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		bothViewsAgainstSequential(t)
	}
}

func bothViewsAgainstSequential(t *testing.T) {
	for _, arch := range []string{"mlp:6-8-4", "convnet:1x6x6-2-3"} {
		cfg := testConfig()
		cfg.Model.Arch = arch
		f, err := NewFeatures(cfg.Model, cfg.Sketch, "")
		if err != nil {
			t.Fatal(err)
		}
		d, q := f.InputDim(), f.Dim()
		b, _ := entk.NewBackbone(arch, cfg.Model.Seed)
		sk, _ := entk.NewSketch(b, cfg.Sketch.H, cfg.Sketch.S, cfg.Model.Seed, "fit")
		var shape [3]int
		if a, _ := entk.ParseArch(arch); a.Kind == "convnet" {
			shape = [3]int{a.C, a.H, a.W}
		}
		aug := dataset.NewAugmenter(d, shape, cfg.Model.Seed)
		ws := sk.NewWorkspace()
		for _, n := range []int{0, 1, 5, 33} {
			ids, xs := randPoints(rand.New(rand.NewPCG(uint64(n), 2)), n, d)
			got := make([]float64, 2*n*q)
			f.BothViewsTo(got, make([]float64, 2*n*d), xs, ids)
			v, want := make([]float64, d), make([]float64, q)
			for i := range n {
				for view := range 2 {
					aug.ViewTo(v, xs[i*d:(i+1)*d], ids[i], view)
					sk.FeaturesTo(want, v, ws)
					for j, w := range want {
						want[j] = float64(float32(w))
					}
					row := got[(2*i+view)*q : (2*i+view+1)*q]
					one := make([]float64, q)
					f.FeaturesTo(one, v, 1)
					if !slices.Equal(one, row) {
						t.Fatalf("%s n=%d point %d view %d: FeaturesTo differs from BothViewsTo", arch, n, i, view)
					}
					for j := range want {
						if math.Float64bits(row[j]) != math.Float64bits(want[j]) {
							t.Fatalf("%s n=%d point %d view %d feature %d: got %v, want %v", arch, n, i, view, j, row[j], want[j])
						}
					}
				}
			}
		}
	}
}

// TestNewFeaturesWeights: model.weights empty means the shipped trained weights for the
// arch (MNIST's for the default convnet, with their SHA-256), shipped:NAME picks a file by
// name, model.untrained the seeded initialization, and an arch with no shipped weights is
// a configuration error rather than a silent fall-back to the untrained network.
func TestNewFeaturesWeights(t *testing.T) {
	def := config.Default()
	mnist, _ := weights.ByName("mnist")
	fashion, _ := weights.ByName("fashion-mnist")
	seeded, _ := entk.NewBackbone(def.Model.Arch, 9)
	for _, tc := range []struct {
		name    string
		m       config.Backbone
		source  string
		sha     string
		param0  float64 // the backbone's first parameter, 0 = not checked
		wantErr bool
	}{
		{"default", config.Backbone{Arch: def.Model.Arch, Seed: 9}, "shipped:mnist", mnist.SHA256, 0, false},
		{"by name", config.Backbone{Arch: def.Model.Arch, Weights: "shipped:fashion-mnist", Seed: 9}, "shipped:fashion-mnist", fashion.SHA256, 0, false},
		{"untrained", config.Backbone{Arch: def.Model.Arch, Untrained: true, Seed: 9}, "seeded:9", "", seeded.Params()[0], false},
		{"nothing shipped", config.Backbone{Arch: "mlp:6-8-4", Seed: 9}, "", "", 0, true},
		{"wrong arch for the name", config.Backbone{Arch: "mlp:6-8-4", Weights: "shipped:mnist", Seed: 9}, "", "", 0, true},
	} {
		f, err := NewFeatures(tc.m, config.Sketch{H: 2, S: 64}, "")
		if tc.wantErr {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%s: %v, want ErrConfig", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		src := f.Source()
		if src.Weights != tc.source || (tc.sha != "" && src.SHA256 != tc.sha) {
			t.Errorf("%s: source %+v, want %s %s", tc.name, src, tc.source, tc.sha)
		}
		if p0 := f.Backbone().Params()[0]; tc.param0 != 0 && p0 != tc.param0 {
			t.Errorf("%s: first parameter %v, want %v", tc.name, p0, tc.param0)
		} else if tc.param0 == 0 && p0 == seeded.Params()[0] {
			t.Errorf("%s: the seeded initialization's first parameter", tc.name)
		}
	}
}

// TestPreviousFingerprint: the v2 fingerprint of the same model is the previous one (a
// stored pool needs only a new selection); the current one, another seed's v2 and
// garbage are not.
func TestPreviousFingerprint(t *testing.T) {
	cfg := testConfig()
	f, err := NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	v2 := fingerprintVersion(2, f.backbone, cfg.Sketch, cfg.Model.Seed, f.shape)
	other := fingerprintVersion(2, f.backbone, cfg.Sketch, cfg.Model.Seed+1, f.shape)
	for _, tc := range []struct {
		fp   string
		want bool
	}{{v2, true}, {f.Fingerprint(), false}, {other, false}, {"", false}} {
		if got := f.PreviousFingerprint() == tc.fp; got != tc.want {
			t.Errorf("PreviousFingerprint() == %.12s: got %v, want %v", tc.fp, got, tc.want)
		}
	}
	if v2 == f.Fingerprint() {
		t.Fatal("v2 and v3 fingerprints are equal")
	}
}

// TestViewSeed: the views follow model.view_seed, not model.seed (two seeds, one view
// seed: the same views, other features); view_seed equal to seed (or 0, a configuration
// from before the setting) keeps the fingerprint it always had, and another view seed
// changes it, so a store never mixes views of two seeds.
func TestViewSeed(t *testing.T) {
	mk := func(seed, view uint64) *Features {
		t.Helper()
		f, err := NewFeatures(config.Backbone{Arch: "mlp:6-8-4", Seed: seed, ViewSeed: view, Untrained: true}, config.Sketch{H: 2, S: 16}, "")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	x := []float64{0.5, -1, 2, 0.25, 1, -0.5}
	a, b := mk(1, 5), mk(2, 5)
	va, vb := make([]float64, 6), make([]float64, 6)
	a.ViewTo(va, x, "p1", 0)
	b.ViewTo(vb, x, "p1", 0)
	if !slices.Equal(va, vb) {
		t.Errorf("views under seeds 1 and 2 with one view seed differ: %v, %v", va, vb)
	}
	fa, fb := make([]float64, a.Dim()), make([]float64, b.Dim())
	a.FeaturesTo(fa, va, 1)
	b.FeaturesTo(fb, vb, 1)
	if slices.Equal(fa, fb) {
		t.Error("two model seeds gave the same features: the sketch ignores model.seed")
	}
	if mk(1, 1).Fingerprint() != mk(1, 0).Fingerprint() {
		t.Error("view_seed = seed changed the fingerprint")
	}
	if mk(1, 2).Fingerprint() == mk(1, 1).Fingerprint() || mk(1, 2).PreviousFingerprint() == mk(1, 1).PreviousFingerprint() {
		t.Error("another view seed kept the fingerprint")
	}
	c := mk(1, 0)
	vc := make([]float64, 6)
	c.ViewTo(vc, x, "p1", 0)
	d := mk(1, 1)
	vd := make([]float64, 6)
	d.ViewTo(vd, x, "p1", 0)
	if !slices.Equal(vc, vd) {
		t.Error("view_seed 0 does not follow model.seed")
	}
}
