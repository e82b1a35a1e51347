package daemon

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
)

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
// features of a plain sequential computation straight from dataset and entk, for any
// batch size (so a point's features do not depend on the batch it arrives in).
func TestBothViewsToMatchesSequential(t *testing.T) {
	for _, arch := range []string{"mlp:6-8-4", "convnet:1x6x6-2-3"} {
		cfg := testConfig()
		cfg.Model.Arch = arch
		f, err := NewFeatures(cfg.Model, cfg.Sketch)
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
					row := got[(2*i+view)*q : (2*i+view+1)*q]
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

// TestCacheSource: the pool's feature source and a refit's featureRows give exactly the
// features BothViewsTo computes, whether they come from the cache (even rows) or are
// recomputed from the cached input (odd rows, as after a restart); an unknown id is
// ErrSyncSource. n straddles the recompute chunk.
func TestCacheSource(t *testing.T) {
	cfg := testConfig()
	f, err := NewFeatures(cfg.Model, cfg.Sketch)
	if err != nil {
		t.Fatal(err)
	}
	d, q := f.InputDim(), f.Dim()
	n := syncChunk + 7
	ids, xs := randPoints(rand.New(rand.NewPCG(3, 3)), n, d)
	want := make([]float64, 2*n*q)
	f.BothViewsTo(want, make([]float64, 2*n*d), xs, ids)
	c := newPointCache()
	entries := make([]*cached, n)
	for i, id := range ids {
		e := &cached{x: xs[i*d : (i+1)*d]}
		if i%2 == 0 {
			e.fa, e.fb = want[2*i*q:(2*i+1)*q], want[(2*i+1)*q:(2*i+2)*q]
		}
		c.put(id, e)
		entries[i] = e
	}
	same := func(what string, got, w []float64) {
		t.Helper()
		for j := range got {
			if math.Float64bits(got[j]) != math.Float64bits(w[j]) {
				t.Fatalf("%s feature %d: got %v, want %v", what, j, got[j], w[j])
			}
		}
	}
	for view := range 2 {
		src := newCacheSource(f, c, view)
		got := make([]float64, q)
		for _, i := range []int{0, 1, n - 1, syncChunk, 3, 3} {
			if err := src.FeaturesTo(got, ids[i]); err != nil {
				t.Fatal(err)
			}
			same(fmt.Sprintf("source view %d id %s", view, ids[i]), got, want[(2*i+view)*q:(2*i+view+1)*q])
		}
		if err := src.FeaturesTo(got, "zzz"); !errors.Is(err, ErrSyncSource) {
			t.Errorf("unknown id: %v, want ErrSyncSource", err)
		}
		rows, err := f.featureRows(t.Context(), ids, entries, view)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			same(fmt.Sprintf("featureRows view %d row %d", view, i), rows[i*q:(i+1)*q], want[(2*i+view)*q:(2*i+view+1)*q])
		}
	}
}

// TestBadFeatures checks the acceptance bound of features at its edges.
func TestBadFeatures(t *testing.T) {
	edge := math.Sqrt(maxFeatureNorm2)
	for _, tc := range []struct {
		name string
		f    []float64
		bad  bool
	}{
		{"ordinary", []float64{1, 2, 3, 4}, false},
		{"at the bound", []float64{edge, 0, 0, 0}, false},
		{"above the bound in view 1", []float64{0, 0, edge * 1.01, 0}, true},
		{"NaN", []float64{0, math.NaN(), 0, 0}, true},
		{"Inf", []float64{0, 0, 0, math.Inf(-1)}, true},
		{"overflowing norm", []float64{1e200, 0, 0, 0}, true},
	} {
		if got := badFeatures(tc.f) != ""; got != tc.bad {
			t.Errorf("%s: bad = %v (%q), want %v", tc.name, got, badFeatures(tc.f), tc.bad)
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
		m       config.Model
		source  string
		sha     string
		param0  float64 // the backbone's first parameter, 0 = not checked
		wantErr bool
	}{
		{"default", config.Model{Arch: def.Model.Arch, Seed: 9}, "shipped:mnist", mnist.SHA256, 0, false},
		{"by name", config.Model{Arch: def.Model.Arch, Weights: "shipped:fashion-mnist", Seed: 9}, "shipped:fashion-mnist", fashion.SHA256, 0, false},
		{"untrained", config.Model{Arch: def.Model.Arch, Untrained: true, Seed: 9}, "seeded:9", "", seeded.Params()[0], false},
		{"nothing shipped", config.Model{Arch: "mlp:6-8-4", Seed: 9}, "", "", 0, true},
		{"wrong arch for the name", config.Model{Arch: "mlp:6-8-4", Weights: "shipped:mnist", Seed: 9}, "", "", 0, true},
	} {
		f, err := NewFeatures(tc.m, config.Sketch{H: 2, S: 64})
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
