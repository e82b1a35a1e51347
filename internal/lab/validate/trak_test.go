package validate

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestTRAKAgainstInverse: the scores equal φ_tᵀ(ΦᵀΦ + λI)⁻¹φ_i from an explicit inverse of
// the q×q matrix, on both sides of n = q (the dual n×n system when n ≤ q, the primal
// otherwise), with λ = rel·tr(ΦᵀΦ)/n. Tolerance: the systems' condition numbers are below
// 1/rel = 1e3 relative to their largest eigenvalue, so 1e-9 relative to the largest score
// leaves a wide margin over the ~1e3·u·n error of either solve.
func TestTRAKAgainstInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const rel = 1e-3
	for _, sz := range []struct{ n, q, nq int }{{5, 9, 3}, {9, 9, 2}, {12, 5, 4}, {40, 16, 1}} {
		phi := mat.NewDense(sz.n, sz.q, nil)
		qs := mat.NewDense(sz.nq, sz.q, nil)
		for i := range sz.n {
			for j := range sz.q {
				phi.Set(i, j, r.NormFloat64())
			}
		}
		for i := range sz.nq {
			for j := range sz.q {
				qs.Set(i, j, r.NormFloat64())
			}
		}
		tk, err := NewTRAK(phi, rel)
		if err != nil {
			t.Fatal(err)
		}
		got := mat.NewDense(sz.nq, sz.n, nil)
		if err := tk.ScoresTo(got, qs); err != nil {
			t.Fatal(err)
		}
		var tr float64
		for i := range sz.n {
			for j := range sz.q {
				tr += phi.At(i, j) * phi.At(i, j)
			}
		}
		lambda := rel * tr / float64(sz.n)
		if math.Abs(tk.Lambda()-lambda) > 1e-12*lambda {
			t.Errorf("%+v: λ = %v, want %v", sz, tk.Lambda(), lambda)
		}
		var sys, inv mat.Dense
		sys.Mul(phi.T(), phi)
		for j := range sz.q {
			sys.Set(j, j, sys.At(j, j)+lambda)
		}
		if err := inv.Inverse(&sys); err != nil {
			t.Fatal(err)
		}
		var want, tmp mat.Dense
		tmp.Mul(qs, &inv)
		want.Mul(&tmp, phi.T())
		scale := mat.Norm(&want, math.Inf(1))
		for i := range sz.nq {
			for j := range sz.n {
				if d := math.Abs(got.At(i, j) - want.At(i, j)); d > 1e-9*scale {
					t.Errorf("%+v: score[%d][%d] = %v, want %v", sz, i, j, got.At(i, j), want.At(i, j))
				}
			}
		}
	}
	if _, err := NewTRAK(mat.NewDense(2, 3, nil), rel); !errors.Is(err, ErrNotFinite) {
		t.Errorf("zero features: %v, want ErrNotFinite (λ = 0)", err)
	}
}

// TestInfluenceAgainstInverse: Influence's scores equal qᵀ(GᵀG + λI)⁻¹r_i from an explicit
// inverse of the P×P primal system, from the gradient scores a_i = ⟨q, r_i⟩ alone, for
// n < P and n > P and two ridges (λ = rel·tr(GGᵀ)/n). Tolerance as TestTRAKAgainstInverse's.
func TestInfluenceAgainstInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, sz := range []struct{ n, p, nq int }{{6, 11, 3}, {14, 5, 2}} {
		g, q := mat.NewDense(sz.n, sz.p, nil), mat.NewDense(sz.nq, sz.p, nil)
		for _, m := range []*mat.Dense{g, q} {
			rr, cc := m.Dims()
			for i := range rr {
				for j := range cc {
					m.Set(i, j, r.NormFloat64())
				}
			}
		}
		var a mat.Dense
		a.Mul(q, g.T())
		as := make([][]float64, sz.nq)
		for t0 := range as {
			as[t0] = mat.Row(nil, t0, &a)
		}
		f := NewInfluence(g)
		for _, rel := range []float64{1e-3, 1e-1} {
			got := make([][]float64, sz.nq)
			for t0 := range got {
				got[t0] = make([]float64, sz.n)
			}
			if err := f.ScoresTo(got, as, rel); err != nil {
				t.Fatal(err)
			}
			lambda := rel * mat.Sum(mulElem(g, g)) / float64(sz.n)
			var sys, inv, tmp, want mat.Dense
			sys.Mul(g.T(), g)
			for j := range sz.p {
				sys.Set(j, j, sys.At(j, j)+lambda)
			}
			if err := inv.Inverse(&sys); err != nil {
				t.Fatal(err)
			}
			tmp.Mul(q, &inv)
			want.Mul(&tmp, g.T())
			scale := mat.Norm(&want, math.Inf(1))
			for t0 := range sz.nq {
				for i := range sz.n {
					if d := math.Abs(got[t0][i] - want.At(t0, i)); d > 1e-9*scale {
						t.Errorf("%+v rel %v: score[%d][%d] = %v, want %v", sz, rel, t0, i, got[t0][i], want.At(t0, i))
					}
				}
			}
		}
	}
	if err := NewInfluence(mat.NewDense(2, 3, nil)).ScoresTo([][]float64{{0, 0}}, [][]float64{{0, 0}}, 1e-3); !errors.Is(err, ErrNotFinite) {
		t.Errorf("zero rows: %v, want ErrNotFinite (λ = 0)", err)
	}
}

func mulElem(a, b *mat.Dense) *mat.Dense {
	var c mat.Dense
	c.MulElem(a, b)
	return &c
}
