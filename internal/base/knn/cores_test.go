package knn

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// serialVote is vote as it was before its queries ran side by side: one workspace, the
// queries of each product chunk in order. The parallel vote must give its outcome
// exactly.
func serialVote(c *Classifier, u *mat.Dense, q, k int, self bool) Predictions {
	n := len(c.labels)
	kk := min(k, n)
	if self {
		kk = min(k, n-1)
	}
	p := Predictions{Label: make([]int, q), Share: make([]float64, q)}
	sims := mat.NewDense(max(1, min(chunk, q)), n, nil)
	v := voter{best: make([]int, 0, kk+1), counts: make([]int, c.classes), first: make([]int, c.classes)}
	for lo := 0; lo < q; lo += chunk {
		hi := min(lo+chunk, q)
		s := sims.Slice(0, hi-lo, 0, n).(*mat.Dense)
		s.Mul(u.Slice(lo, hi, 0, u.RawMatrix().Cols), c.ref.T())
		for i := lo; i < hi; i++ {
			p.Label[i], p.Share[i] = v.vote(c.labels, s.RawRowView(i-lo), i, kk, self)
		}
	}
	return p
}

// serialNormalize is NormalizeRowsTo's plain loop: copy, then each row scaled in place.
func serialNormalize(dst *mat.Dense, src mat.Matrix) {
	dst.Copy(src)
	r, _ := dst.Dims()
	for i := range r {
		row := dst.RawRowView(i)
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		if ss == 0 {
			continue
		}
		inv := 1 / math.Sqrt(ss)
		for j := range row {
			row[j] *= inv
		}
	}
}

// TestVoteCores: at GOMAXPROCS 1, 2 and 3, Predict and LeaveOneOut give the serial
// vote's labels and shares exactly, and NormalizeRowsTo the serial loop's bits, on
// sizes that straddle the product chunk (256 queries) and the selection chunks (tied
// and Gaussian data; a row of tiny entries whose squares underflow stays as it is).
func TestVoteCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rnd := rand.New(rand.NewPCG(5, 5))
	for _, gauss := range []bool{false, true} {
		ref, lab := randData(rnd, 601, 12, 7, gauss)
		ref.Set(3, 0, 1e-200) // ss underflows to 0: the row is copied, not scaled
		query, _ := randData(rnd, 517, 12, 7, gauss)
		c, err := New(ref, lab)
		if err != nil {
			t.Fatal(err)
		}
		uq := mat.NewDense(517, 12, nil)
		serialNormalize(uq, query)
		wantLOO := serialVote(c, c.ref, len(lab), 50, true)
		wantPred := serialVote(c, uq, 517, 50, false)
		wantRef := mat.NewDense(601, 12, nil)
		serialNormalize(wantRef, ref)
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			gotRef := mat.NewDense(601, 12, nil)
			NormalizeRowsTo(gotRef, ref)
			if !slices.Equal(gotRef.RawMatrix().Data, wantRef.RawMatrix().Data) {
				t.Errorf("gauss %v GOMAXPROCS %d: NormalizeRowsTo differs from the serial loop", gauss, procs)
			}
			loo, err := c.LeaveOneOut(50)
			if err != nil {
				t.Fatal(err)
			}
			pred, err := c.Predict(query, 50)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct {
				name      string
				got, want Predictions
			}{{"LeaveOneOut", loo, wantLOO}, {"Predict", pred, wantPred}} {
				if !slices.Equal(x.got.Label, x.want.Label) || !slices.Equal(x.got.Share, x.want.Share) {
					t.Errorf("gauss %v GOMAXPROCS %d: %s differs from the serial vote", gauss, procs, x.name)
				}
			}
		}
	}
}
