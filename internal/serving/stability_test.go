package serving

import (
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/entk"
)

// serialReseedJaccard is ReseedJaccardExcept's query loop as it was before the queries
// ran side by side, kept as the reference for its bits: one workspace, the queries one
// after another, the indices summed as they come.
func serialReseedJaccard(b entk.Backbone, a, c Landmarks, qs [][]float64, skip []string, k int, budget int64) float64 {
	ra := NewExactRows(b, a.X, len(a.IDs), budget)
	rc := NewExactRows(b, c.X, len(c.IDs), budget)
	wa := new(Workspace)
	ra.ready(wa, b)
	wc := wa
	if ra.Factored() != rc.Factored() {
		wc = new(Workspace)
		rc.ready(wc, b)
	}
	rowA, rowC := make([]float64, len(a.IDs)), make([]float64, len(c.IDs))
	var sum float64
	for i, x := range qs {
		ra.queryTo(wa, wa.phi, x)
		if wc != wa {
			rc.queryTo(wc, wc.phi, x)
		}
		ra.kernelRowTo(wa, rowA, wa.phi)
		rc.kernelRowTo(wc, rowC, wc.phi)
		ta, tc := topIDs(rowA, a.IDs, k, skip[i]), topIDs(rowC, c.IDs, k, skip[i])
		in := 0
		for _, id := range ta {
			if slices.Contains(tc, id) {
				in++
			}
		}
		sum += float64(in) / float64(2*k-in)
	}
	return sum / float64(len(qs))
}

// TestReseedJaccardCores: ReseedJaccardExcept gives the serial loop's bits at
// GOMAXPROCS 1, 2 and 3, with full rows, factored rows and one pool of each, over 37
// queries (more than the goroutines, not a multiple of them), some of them landmarks
// that are skipped. The pools share most ids, so the indices vary and their sum's
// rounding depends on its order.
func TestReseedJaccardCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	s, b := testModel(t, 40, 1<<30)
	d := b.InDim()
	a := Landmarks{IDs: s.LandmarkIDs, X: s.LandmarkX}
	c := Landmarks{IDs: slices.Clone(s.LandmarkIDs), X: slices.Clone(s.LandmarkX)}
	for l := 24; l < 40; l++ {
		c.IDs[l] = "n" + c.IDs[l]
		for j := range d {
			c.X[l*d+j] = math.Sin(float64(7*l + j))
		}
	}
	var qs [][]float64
	var skip []string
	for i := range 37 {
		x := make([]float64, d)
		for j := range x {
			x[j] = math.Cos(float64(3*i+j)) + 0.3*math.Sin(float64(i*j))
		}
		id := ""
		if i%5 == 0 { // a stored landmark asked as a query
			copy(x, a.X[i*d:(i+1)*d])
			id = a.IDs[i]
		}
		qs, skip = append(qs, x), append(skip, id)
	}
	// A landmark's full row is 233 float32s (932 bytes), its factored row 46 (184): 12 KiB
	// holds neither pool's 40 full rows, 24 KiB holds c20's 20 full rows and not a's.
	c20 := Landmarks{IDs: c.IDs[20:], X: c.X[20*d:]}
	for _, m := range []struct {
		name   string
		c      Landmarks
		budget int64
	}{{"full", c, 1 << 30}, {"factored", c, 12 << 10}, {"factored against full", c20, 24 << 10}} {
		want := serialReseedJaccard(b, a, m.c, qs, skip, 3, m.budget)
		if want == 0 || want == 1 {
			t.Fatalf("%s: the reference index is %v; the pools should differ in part", m.name, want)
		}
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			got, ok := ReseedJaccardExcept(b, a, m.c, qs, skip, 3, m.budget)
			if !ok || math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("%s GOMAXPROCS %d: %v %v, serial loop %v", m.name, procs, got, ok, want)
			}
		}
	}
	if ra, rc := NewExactRows(b, a.X, 40, 24<<10), NewExactRows(b, c20.X, 20, 24<<10); !ra.Factored() || rc.Factored() {
		t.Errorf("at 24 KiB: 40 landmarks factored %v, 20 factored %v; want true, false", ra.Factored(), rc.Factored())
	}
}
