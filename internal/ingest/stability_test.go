package ingest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMeasureReseedReusesFeatures: a reseed measurement given the last one's rows
// (Reseed.Fresh) reuses the reseeded features of exactly the points whose id and input
// are unchanged, bit for bit: not a deleted point's, not a point upserted with another
// input, not one whose input differs from before only by −0 for 0, and not any under
// another seed's pipeline. A point upserted again with the same input (a new slice of
// the same bits) keeps its rows. Its outcome and every row equal a measurement that
// featurized every point afresh.
func TestMeasureReseedReusesFeatures(t *testing.T) {
	cfg := testConfig()
	f, pcfg := testFeatures(t, cfg)
	d, n := f.InputDim(), 300 // over syncChunk: the misses are computed in two chunks
	ids, xs := randPoints(rand.New(rand.NewPCG(7, 7)), n, d)
	xs[9*d] = 0
	pts := newPoints()
	for i, id := range ids {
		pts.put(id, &Entry{X: xs[i*d : (i+1)*d]})
	}
	measure := func(seed uint64, prev *FreshRows) Reseed {
		t.Helper()
		snap := SnapshotOf(pts)
		sel, err := Select(t.Context(), f, pcfg, snap.IDs, snap.Entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := MeasureReseed(t.Context(), f, pcfg, seed, snap, sel, 3, 16, 64<<20, nil, Reseed{Fresh: prev})
		if err != nil {
			t.Fatal(err)
		}
		if rs.Fresh == nil || !rs.Fresh.Kept || rs.Fresh.Points != len(snap.IDs) {
			t.Fatalf("the measurement kept no rows of its %d points: %+v", len(snap.IDs), rs.Fresh)
		}
		return rs
	}
	first := measure(cfg.Model.Seed, nil)
	if first.Fresh.Reused != 0 {
		t.Fatalf("the first measurement reused %d rows", first.Fresh.Reused)
	}
	pts.del(ids[3])
	changed := slices.Clone(xs[5*d : 6*d])
	changed[d-1] += 1
	pts.put(ids[5], &Entry{X: changed})
	pts.put(ids[7], &Entry{X: slices.Clone(xs[7*d : 8*d])})
	negZero := slices.Clone(xs[9*d : 10*d])
	negZero[0] = math.Copysign(0, -1)
	pts.put(ids[9], &Entry{X: negZero})
	pts.put("new", &Entry{X: slices.Clone(xs[11*d : 12*d])})

	warm := measure(cfg.Model.Seed, first.Fresh)
	cold := measure(cfg.Model.Seed, nil)
	if want := n - 3; warm.Fresh.Reused != want {
		t.Errorf("reused %d rows, want %d (all but the deleted, the changed, the −0 and the new point)", warm.Fresh.Reused, want)
	}
	if !warm.Measured || warm.Jaccard != cold.Jaccard || warm.PoolJaccard != cold.PoolJaccard ||
		warm.Queries != cold.Queries || warm.Seed != cold.Seed {
		t.Errorf("with reused rows the measurement is %+v, afresh %+v", warm, cold)
	}
	for v := range 2 {
		for i := range warm.Fresh.g[v] {
			a, b := warm.Fresh.g[v][i], cold.Fresh.g[v][i]
			if len(a) != len(b) {
				t.Fatalf("view %d row %d: %d and %d features", v, i, len(a), len(b))
			}
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("view %d point %s feature %d: %v reused, %v afresh", v, SnapshotOf(pts).IDs[i], j, a[j], b[j])
				}
			}
		}
	}
	if other := measure(cfg.Model.Seed+1, warm.Fresh); other.Fresh.Reused != 0 {
		t.Errorf("another seed's measurement reused %d rows of this seed's", other.Fresh.Reused)
	}
}
