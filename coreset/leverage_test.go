package coreset

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// refLeverage is diag(K (K + λI)⁻¹) from a dense inverse of the n×n system (gonum).
func refLeverage(g []float64, n, q int, lambda float64) []float64 {
	G := mat.NewDense(n, q, g)
	var k, a, inv, p mat.Dense
	k.Mul(G, G.T())
	a.CloneFrom(&k)
	for i := range n {
		a.Set(i, i, a.At(i, i)+lambda)
	}
	if err := inv.Inverse(&a); err != nil {
		panic(err)
	}
	p.Mul(&k, &inv)
	out := make([]float64, n)
	for i := range n {
		out[i] = p.At(i, i)
	}
	return out
}

// decaying is n rows of q features with a decaying spectrum (column i scaled by 0.8^i),
// like sketched eNTK features.
func decaying(r *rand.Rand, n, q int) []float64 {
	g := make([]float64, n*q)
	for j := range n {
		for i := range q {
			g[j*q+i] = r.NormFloat64() * math.Pow(0.8, float64(i))
		}
	}
	return g
}

// TestRidgeLeverage: the exact scores equal diag(K(K+λI)⁻¹) of a dense inverse through
// both systems (q < n and q > n), and sum to d_eff(λ) from K's eigenvalues. Tolerance
// 1e-9: the systems are well conditioned at these λ (κ ≤ ~10⁴).
func TestRidgeLeverage(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 7))
	for _, sz := range []struct{ n, q int }{{60, 12}, {25, 40}} {
		g := decaying(r, sz.n, sz.q)
		for _, lambda := range []float64{0.01, 1} {
			got, err := RidgeLeverage(g, sz.n, sz.q, lambda)
			if err != nil {
				t.Fatal(err)
			}
			want := refLeverage(g, sz.n, sz.q, lambda)
			var sum float64
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Fatalf("n=%d q=%d λ=%v: τ_%d = %.15g, want %.15g", sz.n, sz.q, lambda, i, got[i], want[i])
				}
				sum += got[i]
			}
			G := mat.NewDense(sz.n, sz.q, g)
			k := mat.NewSymDense(sz.n, nil)
			k.SymOuterK(1, G)
			var es mat.EigenSym
			es.Factorize(k, false)
			var deff float64
			for _, mu := range es.Values(nil) {
				if mu > 0 {
					deff += mu / (mu + lambda)
				}
			}
			if math.Abs(sum-deff) > 1e-8*deff {
				t.Errorf("n=%d q=%d λ=%v: Σ τ = %.12g, d_eff = %.12g", sz.n, sz.q, lambda, sum, deff)
			}
		}
	}
	if _, err := RidgeLeverage(make([]float64, 4), 2, 2, 0); err == nil {
		t.Error("λ = 0 accepted")
	}
}

// TestRidgeLeverageRLS: at or below Base points the recursive estimate is the exact one;
// on 1,500 points (three levels of halving) it is a constant-factor approximation: the
// ratio to the exact score is in [0.5, 2] for at least 95% of the points and its
// median within [0.9, 1.5] (Musco & Musco Thm. 7 promise a constant factor with high
// probability; these are the factors this seeded run must meet).
func TestRidgeLeverageRLS(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	small := decaying(r, 100, 10)
	exact, _ := RidgeLeverage(small, 100, 10, 0.1)
	got, err := RidgeLeverageRLS(small, 100, 10, 0.1, 1, "test", RLSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range exact {
		if math.Abs(got[i]-exact[i]) > 1e-9 {
			t.Fatalf("n ≤ Base: τ̃_%d = %v, exact %v", i, got[i], exact[i])
		}
	}
	const n, q = 1500, 30
	g := decaying(r, n, q)
	for _, lambda := range []float64{0.05, 1} {
		exact, err := RidgeLeverage(g, n, q, lambda)
		if err != nil {
			t.Fatal(err)
		}
		est, err := RidgeLeverageRLS(g, n, q, lambda, 9, "test", RLSOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ratios := make([]float64, n)
		out := 0
		for i := range n {
			ratios[i] = est[i] / exact[i]
			if !(ratios[i] >= 0.5 && ratios[i] <= 2) {
				out++
			}
		}
		sort.Float64s(ratios)
		med := ratios[n/2]
		t.Logf("λ=%v: ratio min %.3g median %.3g max %.3g, %d of %d outside [0.5, 2]", lambda, ratios[0], med, ratios[n-1], out, n)
		if out > n/20 || med < 0.9 || med > 1.5 {
			t.Errorf("λ=%v: %d points outside [0.5, 2], median ratio %.3g", lambda, out, med)
		}
	}
}

// TestLeverageSample: first draws follow the weights (Monte Carlo over 20,000 seeds, each
// frequency within 4 standard deviations of w_i/Σw), a zero weight is never drawn
// before the positive ones, and m = n returns every index once.
func TestLeverageSample(t *testing.T) {
	w := []float64{1, 2, 3, 4, 0}
	const trials = 20000
	count := make([]int, len(w))
	for s := range trials {
		got := LeverageSample(w, 4, uint64(s))
		count[got[0]]++
		if slices.Contains(got, 4) {
			t.Fatalf("seed %d: the zero-weight index drawn among the first 4: %v", s, got)
		}
	}
	for i, wi := range w {
		p := wi / 10
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(count[i])-trials*p) > 4*sd+1 {
			t.Errorf("index %d first in %d of %d draws, want about %.0f", i, count[i], trials, trials*p)
		}
	}
	all := LeverageSample(w, 9, 3)
	sorted := slices.Sorted(slices.Values(all))
	if !slices.Equal(sorted, []int{0, 1, 2, 3, 4}) || all[4] != 4 {
		t.Errorf("m ≥ n: %v", all)
	}
}

// TestLeverageSelector: the leverage selector draws m distinct rows by the exact ridge
// leverage scores at the default ridge (tr K/m, so d_eff ≤ m) and reports them; a given
// λ is used as given.
func TestLeverageSelector(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const n, q, m = 80, 10, 12
	g := decaying(r, n, q)
	sel, err := Select(SelLeverage, SelectInput{N: n, G: g, Q: q, Seed: 4}, m)
	if err != nil {
		t.Fatal(err)
	}
	var tr float64
	for _, v := range g {
		tr += v * v
	}
	lambda := tr / m
	tau, _ := RidgeLeverage(g, n, q, lambda)
	var deff float64
	for _, v := range tau {
		deff += v
	}
	if deff > m {
		t.Errorf("d_eff at the default ridge %v exceeds m = %d", deff, m)
	}
	if sel.Lambda != lambda || !slices.Equal(sel.Leverage, tau) || !slices.Equal(sel.Indices, LeverageSample(tau, m, 4)) {
		t.Fatalf("selection %v (λ %v), want LeverageSample of the exact scores at λ %v", sel.Indices, sel.Lambda, lambda)
	}
	if len(sel.Indices) != m || len(slices.Compact(slices.Sorted(slices.Values(sel.Indices)))) != m {
		t.Fatalf("indices %v: want %d distinct", sel.Indices, m)
	}
	given, err := Select(SelLeverage, SelectInput{N: n, G: g, Q: q, Seed: 4, Lambda: 0.5}, m)
	if err != nil || given.Lambda != 0.5 {
		t.Fatalf("given λ: %v, %v", given.Lambda, err)
	}
}
