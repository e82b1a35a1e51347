package daemon

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
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

// TestSyncSource: in-order, out-of-order and repeated requests give the same features
// as BothViewsTo; an unknown id is ErrSyncSource. n straddles the prefetch chunk.
func TestSyncSource(t *testing.T) {
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
	pts := &storedPoints{ids: ids, xs: xs}
	order := make([]int, 0, 2*n)
	for i := range n {
		order = append(order, i)
	}
	order = append(order, n-1, 0, syncChunk, syncChunk-1, 3, 3)
	for view := range 2 {
		src := newSyncSource(f, pts, view)
		got := make([]float64, q)
		for _, i := range order {
			if err := src.FeaturesTo(got, ids[i]); err != nil {
				t.Fatal(err)
			}
			w := want[(2*i+view)*q : (2*i+view+1)*q]
			for j := range got {
				if math.Float64bits(got[j]) != math.Float64bits(w[j]) {
					t.Fatalf("view %d id %s feature %d: got %v, want %v", view, ids[i], j, got[j], w[j])
				}
			}
		}
		if err := src.FeaturesTo(got, "zzz"); !errors.Is(err, ErrSyncSource) {
			t.Errorf("unknown id: %v, want ErrSyncSource", err)
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
