package knn

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// refVote is the obviously-correct reference: full cosine similarity by explicit loops,
// a stable sort of all candidates, then counting.
func refVote(ref, q *mat.Dense, labels []int, k int, self bool) ([]int, []float64) {
	nr, d := ref.Dims()
	nq, _ := q.Dims()
	// Rows are normalized exactly as the implementation does (v·(1/||v||)) so that exact
	// ties, which the coarse test data makes common, stay exact ties here too.
	unit := func(a []float64) []float64 {
		var ss float64
		for _, v := range a {
			ss += v * v
		}
		out := make([]float64, len(a))
		if ss == 0 {
			return out
		}
		inv := 1 / math.Sqrt(ss)
		for i, v := range a {
			out[i] = v * inv
		}
		return out
	}
	cos := func(a, b []float64) float64 {
		a, b = unit(a), unit(b)
		var ab float64
		for i := range d {
			ab += a[i] * b[i]
		}
		return ab
	}
	pred := make([]int, nq)
	share := make([]float64, nq)
	for i := range nq {
		var idx []int
		sim := make([]float64, nr)
		for j := range nr {
			if self && i == j {
				continue
			}
			idx = append(idx, j)
			sim[j] = cos(q.RawRowView(i), ref.RawRowView(j))
		}
		sort.SliceStable(idx, func(a, b int) bool { return sim[idx[a]] > sim[idx[b]] })
		if len(idx) > k {
			idx = idx[:k]
		}
		cnt := map[int]int{}
		firstRank := map[int]int{}
		for r, j := range idx {
			if _, ok := firstRank[labels[j]]; !ok {
				firstRank[labels[j]] = r
			}
			cnt[labels[j]]++
		}
		best := -1
		for l, c := range cnt {
			if best < 0 || c > cnt[best] || (c == cnt[best] && firstRank[l] < firstRank[best]) {
				best = l
			}
		}
		pred[i] = best
		share[i] = float64(cnt[best]) / float64(len(idx))
	}
	return pred, share
}

// randData draws rows with exactly two non-zero entries of ±1 (so every row has the same
// norm and every similarity is an exact small multiple of 1/2 whatever the summation
// order: exact ties are common and exercise the tie rules), or, when gauss is set,
// Gaussian rows (no ties). Row 1 duplicates row 0 and row 2 is zero.
func randData(rnd *rand.Rand, n, d, classes int, gauss bool) (*mat.Dense, []int) {
	x := mat.NewDense(n, d, nil)
	lab := make([]int, n)
	for i := range n {
		lab[i] = rnd.IntN(classes)
		if gauss {
			for j := range d {
				x.Set(i, j, rnd.NormFloat64())
			}
			continue
		}
		p := rnd.Perm(d)
		x.Set(i, p[0], float64(2*rnd.IntN(2)-1))
		x.Set(i, p[1], float64(2*rnd.IntN(2)-1))
	}
	x.SetRow(1, x.RawRowView(0))
	x.SetRow(2, make([]float64, d))
	return x, lab
}

func TestPredictMatchesReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		n, q, d, k, classes int
		gauss               bool
	}{
		{5, 3, 2, 1, 2, false}, {40, 17, 3, 7, 3, false}, {300, 260, 4, 50, 4, false},
		{30, 5, 3, 100, 2, false}, {300, 270, 8, 50, 3, true}, {50, 20, 5, 1, 2, true},
	} {
		ref, lab := randData(rnd, tc.n, tc.d, tc.classes, tc.gauss)
		q, _ := randData(rnd, tc.q, tc.d, tc.classes, tc.gauss)
		c, err := New(ref, lab)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Predict(q, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		wantP, wantS := refVote(ref, q, lab, tc.k, false)
		for i := range wantP {
			if got.Label[i] != wantP[i] || got.Share[i] != wantS[i] {
				t.Fatalf("%+v query %d: got (%d, %v), want (%d, %v)", tc, i, got.Label[i], got.Share[i], wantP[i], wantS[i])
			}
		}
		loo, _ := c.LeaveOneOut(tc.k)
		wantP, wantS = refVote(ref, ref, lab, tc.k, true)
		for i := range wantP {
			if loo.Label[i] != wantP[i] || loo.Share[i] != wantS[i] {
				t.Fatalf("%+v LOO row %d: got (%d, %v), want (%d, %v)", tc, i, loo.Label[i], loo.Share[i], wantP[i], wantS[i])
			}
		}
	}
}

func TestAccuracies(t *testing.T) {
	for _, tc := range []struct {
		pred, truth   []int
		acc, balanced float64
	}{
		{[]int{0, 0, 0, 0}, []int{0, 0, 0, 1}, 0.75, 0.5},
		{[]int{0, 1, 1, 1}, []int{0, 0, 1, 1}, 0.75, 0.75},
		{[]int{2, 2, 1}, []int{2, 2, 1}, 1, 1},
	} {
		if got := Accuracy(tc.pred, tc.truth); got != tc.acc {
			t.Errorf("Accuracy(%v, %v) = %v, want %v", tc.pred, tc.truth, got, tc.acc)
		}
		if got := BalancedAccuracy(tc.pred, tc.truth); got != tc.balanced {
			t.Errorf("BalancedAccuracy(%v, %v) = %v, want %v", tc.pred, tc.truth, got, tc.balanced)
		}
	}
	if got := Confidence(Predictions{Share: []float64{1, 0.5}}); got != 0.75 {
		t.Errorf("Confidence = %v, want 0.75", got)
	}
}

func TestErrors(t *testing.T) {
	if _, err := New(mat.NewDense(1, 1, []float64{1}), []int{-1}); err == nil {
		t.Error("negative label accepted")
	}
	c, _ := New(mat.NewDense(1, 1, []float64{1}), []int{0})
	if _, err := c.Predict(mat.NewDense(1, 1, []float64{1}), 0); err == nil {
		t.Error("k = 0 accepted")
	}
}

// TestBalancedAccuracyReproducible: with many classes whose recalls do not sum exactly
// in floating point, repeated calls give bit-identical results (the sum runs in class
// order, not in Go's random map order) equal to the in-order reference sum.
func TestBalancedAccuracyReproducible(t *testing.T) {
	var pred, truth []int
	for cl := range 37 {
		for j := range 3 + cl%5 {
			truth = append(truth, cl)
			p := cl
			if j%3 == 0 {
				p = cl + 1
			}
			pred = append(pred, p)
		}
	}
	var want float64
	for cl := range 37 {
		hit, tot := 0, 0
		for i, tr := range truth {
			if tr == cl {
				tot++
				if pred[i] == cl {
					hit++
				}
			}
		}
		want += float64(hit) / float64(tot)
	}
	want /= 37
	for range 50 {
		if got := BalancedAccuracy(pred, truth); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("BalancedAccuracy = %v, want %v bit for bit", got, want)
		}
	}
}
