package coreset

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestNystromDeff: on landmarks spanning every row (k = rank) the Nyström approximation
// is K itself, so NystromDeff equals the exact d_eff(λ) = tr K(K+λI)⁻¹ (computed from
// the eigenvalues of the n×n kernel by gonum); with fewer landmarks it is below it and
// never above k.
func TestNystromDeff(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	const n, q = 40, 6
	g := randMatrix(r, n, q, q)
	kk := mat.NewSymDense(n, nil)
	for i := range n {
		for j := range n {
			kk.SetSym(i, j, dot(g[i*q:(i+1)*q], g[j*q:(j+1)*q]))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(kk, false) {
		t.Fatal("eigendecomposition failed")
	}
	for _, lambda := range []float64{0.1, 1, 10} {
		var want float64
		for _, mu := range es.Values(nil) {
			if mu > 0 {
				want += mu / (mu + lambda)
			}
		}
		full, _ := Greedy(g, n, q, q, GreedyOptions{KeepGram: true})
		got, err := NystromDeff(full.Gram, full.Greedy, lambda)
		if err != nil {
			t.Fatal(err)
		}
		// Tolerance: eigenvalues of two different factorizations of the same kernel
		// agree to ~1e-12 relative to its largest eigenvalue.
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("λ=%v: full rank NystromDeff %.15g, exact d_eff %.15g", lambda, got, want)
		}
		part, _ := Greedy(g, n, q, 3, GreedyOptions{KeepGram: true})
		less, err := NystromDeff(part.Gram, part.Greedy, lambda)
		if err != nil {
			t.Fatal(err)
		}
		if less > want+1e-12 || less > 3 {
			t.Errorf("λ=%v: 3 landmarks give %.15g, above the exact %.15g or above k", lambda, less, want)
		}
	}
	if _, err := NystromDeff(nil, 0, 0); err == nil {
		t.Error("λ = 0 accepted")
	}
}
