package ingest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
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
// features BothViewsTo computes (FeatureRows sharing the cached rows, not copying them), whether they come from the cache (even rows) or are
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
			e.fa, e.fb = to32(want[2*i*q:(2*i+1)*q]), to32(want[(2*i+1)*q:(2*i+2)*q])
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
			row := make([]float64, q)
			for j, v := range rows[i] {
				row[j] = float64(v)
			}
			same(fmt.Sprintf("FeatureRows view %d row %d", view, i), row, want[(2*i+view)*q:(2*i+view+1)*q])
			if i%2 == 0 && &rows[i][0] != &entries[i].View(view)[0] {
				t.Fatalf("FeatureRows view %d row %d: a cached row was copied", view, i)
			}
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
		{"opposite infinities", []float64{math.Inf(1), math.Inf(-1), 0, 0}, true},
	} {
		if got := badFeatures(tc.f) != ""; got != tc.bad {
			t.Errorf("%s: bad = %v (%q), want %v", tc.name, got, badFeatures(tc.f), tc.bad)
		}
	}
	// A non-finite value is named with its view and index, not as a norm.
	if got, want := badFeatures([]float64{0, 1, 2, math.NaN()}), "view 1 feature 1 is NaN"; got != want {
		t.Errorf("NaN in view 1: %q, want %q", got, want)
	}
}

// TestSelectKeepsRecomputed: a Select over entries without features (as after a
// restart) keeps the recomputed features in the cache, bit for bit BothViewsTo's, for
// the entries still current; a point deleted or replaced meanwhile is not brought back
// or overwritten. Its result equals a Select over the fully cached entries.
func TestSelectKeepsRecomputed(t *testing.T) {
	cfg := testConfig()
	f, pcfg := testFeatures(t, cfg)
	d, q := f.InputDim(), f.Dim()
	n := 40
	ids, xs := randPoints(rand.New(rand.NewPCG(4, 4)), n, d)
	want := make([]float64, 2*n*q)
	f.BothViewsTo(want, make([]float64, 2*n*d), xs, ids)
	bare, full := newPoints(), newPoints()
	for i, id := range ids {
		bare.put(id, &Entry{X: xs[i*d : (i+1)*d]})
		full.put(id, &Entry{X: xs[i*d : (i+1)*d], fa: to32(want[2*i*q : (2*i+1)*q]), fb: to32(want[(2*i+1)*q : (2*i+2)*q])})
	}
	snap := SnapshotOf(bare)
	bare.del(ids[3])                     // deleted after the snapshot
	bare.put(ids[5], &Entry{X: xs[0:d]}) // replaced after the snapshot
	replaced := bare.Get(ids[5])
	got, err := Select(t.Context(), f, pcfg, snap.IDs, snap.Entries, bare)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Select(t.Context(), f, pcfg, ids, SnapshotOf(full).Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := range 2 {
		if !reflect.DeepEqual(got.Res[v], ref.Res[v]) || got.M[v] != ref.M[v] {
			t.Fatalf("view %d: Select over recomputed features differs from Select over cached ones", v)
		}
	}
	if bare.Get(ids[3]) != nil {
		t.Fatal("a point deleted after the snapshot came back")
	}
	if bare.Get(ids[5]) != replaced {
		t.Fatal("a point replaced after the snapshot was overwritten")
	}
	for i, id := range ids {
		if i == 3 || i == 5 {
			continue
		}
		e := bare.Get(id)
		for v := range 2 {
			row := e.View(v)
			if row == nil {
				t.Fatalf("%s view %d: recomputed features not kept", id, v)
			}
			for j, x := range row {
				if w := want[(2*i+v)*q+j]; float64(x) != w {
					t.Fatalf("%s view %d feature %d: kept %v, want %v", id, v, j, x, w)
				}
			}
		}
	}
}
