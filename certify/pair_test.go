package certify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// pairJacobians returns correlated Jacobians J_x, J_y (d×p) so that tr M is far from 0 and
// a few columns dominate (coordinate concentration makes the diagonal correction matter).
func pairJacobians(r *rand.Rand, d, p int) (jx, jy []float64) {
	jx, jy = make([]float64, d*p), make([]float64, d*p)
	for i := range jx {
		scale := 1.0
		if i%p < 3 {
			scale = 4
		}
		jx[i] = scale * r.NormFloat64()
		jy[i] = 0.7*jx[i] + 0.5*scale*r.NormFloat64()
	}
	return jx, jy
}

// denseCBar returns C̄_1 = J_yᵀ J_x / d as a p×p matrix, the reference the fast path avoids.
func denseCBar(jx, jy []float64, d, p int) []float64 {
	c := make([]float64, p*p)
	for a := 0; a < p; a++ {
		for b := 0; b < p; b++ {
			var s float64
			for i := 0; i < d; i++ {
				s += jy[i*p+a] * jx[i*p+b]
			}
			c[a*p+b] = s / float64(d)
		}
	}
	return c
}

func TestPairTermsAgainstDense(t *testing.T) {
	r := rng.New(1, "certify/test/pair-dense")
	var ws Workspace
	for _, tc := range []struct{ d, p int }{{1, 5}, {3, 20}, {4, 33}} {
		jx, jy := pairJacobians(r, tc.d, tc.p)
		terms := ComputePairTerms(NewJacobian(jx, tc.d, tc.p), NewJacobian(jy, tc.d, tc.p), NextPow2(tc.p), &ws)
		wantPhi := PhiDense(denseCBar(jx, jy, tc.d, tc.p), tc.p)
		if math.Abs(terms.PhiMean-wantPhi) > 1e-10*(1+wantPhi) {
			t.Errorf("d=%d p=%d: Φ(C̄_1) fast = %v, dense = %v", tc.d, tc.p, terms.PhiMean, wantPhi)
		}
		// M = J_x J_yᵀ by plain loops.
		var trM, mbar2 float64
		for i := 0; i < tc.d; i++ {
			for k := 0; k < tc.d; k++ {
				mik := dot(jx[i*tc.p:(i+1)*tc.p], jy[k*tc.p:(k+1)*tc.p])
				mki := dot(jx[k*tc.p:(k+1)*tc.p], jy[i*tc.p:(i+1)*tc.p])
				b := 0.5 * (mik + mki)
				mbar2 += b * b
				if i == k {
					trM += mik
				}
			}
		}
		if math.Abs(terms.TraceM-trM) > 1e-10*(1+math.Abs(trM)) || math.Abs(terms.MBarNorm2-mbar2) > 1e-10*(1+mbar2) {
			t.Errorf("d=%d p=%d: tr M, ‖M̄‖² = %v, %v; want %v, %v", tc.d, tc.p, terms.TraceM, terms.MBarNorm2, trM, mbar2)
		}
		if terms.EPhi < terms.PhiMean || terms.PhiMean < 0 {
			t.Errorf("d=%d p=%d: want E Φ(C_1) = %v ≥ Φ(C̄_1) = %v ≥ 0 (Jensen, Prop. two-axis)", tc.d, tc.p, terms.EPhi, terms.PhiMean)
		}
	}
}

// TestEPhiMonteCarlo checks the Isserlis closed form of E Φ(C_1) against the average of
// Φ(v uᵀ) over draws of w ~ N(0, I/d). Tolerance: 5 standard errors of a sample mean,
// 5·sd/√n with the sample sd.
func TestEPhiMonteCarlo(t *testing.T) {
	r := rng.New(1, "certify/test/ephi")
	const d, p, draws = 5, 24, 40000
	jx, jy := pairJacobians(r, d, p)
	terms := ComputePairTerms(NewJacobian(jx, d, p), NewJacobian(jy, d, p), 32, &Workspace{})
	xs := make([]float64, draws)
	w, u, v := make([]float64, d), make([]float64, p), make([]float64, p)
	for n := range xs {
		for i := range w {
			w[i] = r.NormFloat64() / math.Sqrt(d)
		}
		for k := 0; k < p; k++ {
			u[k], v[k] = 0, 0
			for i := 0; i < d; i++ {
				u[k] += jx[i*p+k] * w[i]
				v[k] += jy[i*p+k] * w[i]
			}
		}
		xs[n] = PhiRankOne(v, u)
	}
	mean, variance, _ := moments(xs)
	if tol := 5 * math.Sqrt(variance/draws); math.Abs(mean-terms.EPhi) > tol {
		t.Errorf("E Φ(C_1): Monte-Carlo %v, closed form %v (tolerance %v)", mean, terms.EPhi, tol)
	}
}

// refKernel returns one draw of K_{h,s}(x,y) of eq. composed with one reference SRHT shared
// by all heads (s == 0: no sketch).
func refKernel(r *rand.Rand, jx, jy []float64, d, p, pad, h, s int) float64 {
	var sk *refSRHT
	if s > 0 {
		sk = newRefSRHT(r, pad, s)
	}
	w, u, v := make([]float64, d), make([]float64, p), make([]float64, p)
	var k float64
	for j := 0; j < h; j++ {
		for i := range w {
			w[i] = r.NormFloat64() / math.Sqrt(float64(d))
		}
		for c := 0; c < p; c++ {
			u[c], v[c] = 0, 0
			for i := 0; i < d; i++ {
				u[c] += jx[i*p+c] * w[i]
				v[c] += jy[i*p+c] * w[i]
			}
		}
		if sk != nil {
			k += dot(sk.apply(u), sk.apply(v))
		} else {
			k += dot(u, v)
		}
	}
	return k / float64(h)
}

// TestTwoAxisMonteCarlo checks Prop. two-axis (variance and mean) against independent draws
// of heads and one shared SRHT, on a parameter count that needs padding (28 → 32).
func TestTwoAxisMonteCarlo(t *testing.T) {
	r := rng.New(1, "certify/test/two-axis")
	const d, p, pad, draws = 3, 28, 32, 3000
	jx, jy := pairJacobians(r, d, p)
	terms := ComputePairTerms(NewJacobian(jx, d, p), NewJacobian(jy, d, p), pad, &Workspace{})
	for _, b := range []struct{ h, s int }{{1, 4}, {4, 4}, {1, 0}, {4, 16}, {2, 32}} {
		xs := make([]float64, draws)
		for i := range xs {
			xs[i] = refKernel(r, jx, jy, d, p, pad, b.h, b.s)
		}
		mean, got, m4 := moments(xs)
		pred := terms.Variance(b.h, b.s)
		if tol := varianceTolerance(got, m4, draws); math.Abs(got-pred.Total) > tol {
			t.Errorf("h=%d s=%d: measured Var = %v, predicted %v (output %v, shared %v, heads %v; tolerance %v)",
				b.h, b.s, got, pred.Total, pred.Output, pred.Shared, pred.Heads, tol)
		}
		if tol := 5 * math.Sqrt(got/draws); math.Abs(mean-terms.Mean()) > tol {
			t.Errorf("h=%d s=%d: mean = %v, want k* = %v (tolerance %v)", b.h, b.s, mean, terms.Mean(), tol)
		}
		if c := terms.Conservative(b.h, b.s); pred.Total > c*(1+1e-12) {
			t.Errorf("h=%d s=%d: exact Var %v exceeds conservative bound %v", b.h, b.s, pred.Total, c)
		}
	}
}

// TestConservativeDominates checks eq. conservative-variance ≥ eq. two-axis over many random
// pairs and budgets, including anti-correlated and rank-deficient Jacobians.
func TestConservativeDominates(t *testing.T) {
	r := rng.New(1, "certify/test/conservative")
	var ws Workspace
	for n := 0; n < 200; n++ {
		d, p := 1+r.IntN(6), 1+r.IntN(40)
		jx, jy := pairJacobians(r, d, p)
		if n%3 == 0 {
			for i := range jy {
				jy[i] = -jy[i]
			}
		}
		pad := NextPow2(p)
		terms := ComputePairTerms(NewJacobian(jx, d, p), NewJacobian(jy, d, p), pad, &ws)
		h, s := 1+r.IntN(16), r.IntN(pad+1)
		if v, c := terms.Variance(h, s).Total, terms.Conservative(h, s); v > c*(1+1e-12) {
			t.Fatalf("d=%d p=%d h=%d s=%d: Var %v > conservative %v", d, p, h, s, v, c)
		}
	}
}

func BenchmarkPairTerms(b *testing.B) {
	r := rng.New(1, "certify/bench/pair")
	const d, p = 10, 4096
	jx, jy := pairJacobians(r, d, p)
	x, y := NewJacobian(jx, d, p), NewJacobian(jy, d, p)
	var ws Workspace
	b.ReportAllocs()
	for b.Loop() {
		_ = ComputePairTerms(x, y, p, &ws)
	}
}

func TestComputePairTermsAllocatesNothing(t *testing.T) {
	r := rng.New(1, "certify/test/pair-allocs")
	jx, jy := pairJacobians(r, 4, 50)
	x, y := NewJacobian(jx, 4, 50), NewJacobian(jy, 4, 50)
	var ws Workspace
	_ = ComputePairTerms(x, y, 64, &ws)
	if n := testing.AllocsPerRun(20, func() { _ = ComputePairTerms(x, y, 64, &ws) }); n != 0 {
		t.Errorf("ComputePairTerms allocates %v times per call, want 0", n)
	}
}
