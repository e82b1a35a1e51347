package ingest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/internal/pipeline"
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

// TestCacheSource: the pool's feature source and a refit's FeatureRows give exactly the
// features BothViewsTo computes, whether they come from the cache (even rows) or are
// recomputed from the Entry input (odd rows, as after a restart); an unknown id is
// ErrSyncSource. n straddles the recompute chunk.
func TestCacheSource(t *testing.T) {
	cfg := testConfig()
	f, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	d, q := f.InputDim(), f.Dim()
	n := syncChunk + 7
	ids, xs := randPoints(rand.New(rand.NewPCG(3, 3)), n, d)
	want := make([]float64, 2*n*q)
	f.BothViewsTo(want, make([]float64, 2*n*d), xs, ids)
	c := newPoints()
	entries := make([]*Entry, n)
	for i, id := range ids {
		e := &Entry{X: xs[i*d : (i+1)*d]}
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
		rows, err := FeatureRows(t.Context(), f, ids, entries, view)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			same(fmt.Sprintf("FeatureRows view %d row %d", view, i), rows[i*q:(i+1)*q], want[(2*i+view)*q:(2*i+view+1)*q])
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
