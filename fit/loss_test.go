package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func randDense(rnd *rand.Rand, r, c int, scale, shift float64) *mat.Dense {
	m := mat.NewDense(r, c, nil)
	for i := range r {
		for j := range c {
			m.Set(i, j, shift+scale*rnd.NormFloat64())
		}
	}
	return m
}

func lossValue(loss Loss, p LossParams, za, zb *mat.Dense) float64 {
	r, c := za.Dims()
	return LossGradTo(mat.NewDense(r, c, nil), mat.NewDense(r, c, nil), loss, p, za, zb)
}

// TestLossGradients checks the analytic gradient in z of every loss against central
// differences. With step h the central difference has truncation error h²/6·|∂³L| and
// rounding error about ε_mach·|L|/h; with h = 1e-5 and |L|, |∂³L| = O(1..100) at these
// sizes both are below 1e-8, so 1e-6·max(1, |g|) leaves two orders of margin.
func TestLossGradients(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	p := DefaultLossParams()
	for _, tc := range []struct {
		loss  Loss
		b, k  int
		scale float64
	}{
		{BarlowTwins, 7, 5, 1}, {BarlowTwins, 3, 1, 2},
		{SimCLR, 5, 4, 1}, {SimCLR, 2, 3, 0.3},
		{VICReg, 6, 4, 0.4}, {VICReg, 5, 3, 2}, // σ below and above 1: both hinge branches
	} {
		za := randDense(rnd, tc.b, tc.k, tc.scale, 0.1)
		zb := randDense(rnd, tc.b, tc.k, tc.scale, 0.1)
		ga, gb := mat.NewDense(tc.b, tc.k, nil), mat.NewDense(tc.b, tc.k, nil)
		LossGradTo(ga, gb, tc.loss, p, za, zb)
		const h = 1e-5
		for _, v := range []struct {
			z, g *mat.Dense
			name string
		}{{za, ga, "z_A"}, {zb, gb, "z_B"}} {
			for i := range tc.b {
				for j := range tc.k {
					x := v.z.At(i, j)
					v.z.Set(i, j, x+h)
					fp := lossValue(tc.loss, p, za, zb)
					v.z.Set(i, j, x-h)
					fm := lossValue(tc.loss, p, za, zb)
					v.z.Set(i, j, x)
					want := (fp - fm) / (2 * h)
					got := v.g.At(i, j)
					if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
						t.Errorf("%v B=%d k=%d ∂L/∂%s[%d,%d]: got %.10g, want %.10g", tc.loss, tc.b, tc.k, v.name, i, j, got, want)
					}
				}
			}
		}
	}
}

// TestLossClosedForms checks values against hand-computed cases.
func TestLossClosedForms(t *testing.T) {
	p := DefaultLossParams()
	// Identical views, columns ±1 over a batch of two, k = 1: BN gives x = ±1/sqrt(1+1e-5),
	// C = 1/(1+1e-5), L = (1 − C)² (no off-diagonal terms).
	za := mat.NewDense(2, 1, []float64{1, -1})
	c := 1 / (1 + bnEps)
	if got, want := lossValue(BarlowTwins, p, za, za), (1-c)*(1-c); math.Abs(got-want) > 1e-15 {
		t.Errorf("BT: got %g, want %g", got, want)
	}
	// SimCLR with B = 1: rows u_A, u_B; each row's only other row is its positive, so
	// every ℓ_i = −s + log e^s = 0.
	zb := mat.NewDense(1, 2, []float64{3, 4})
	if got := lossValue(SimCLR, p, mat.NewDense(1, 2, []float64{1, 0}), zb); math.Abs(got) > 1e-12 {
		t.Errorf("SimCLR B=1: got %g, want 0", got)
	}
	// VICReg, identical views z = [[0],[2]]: invariance 0; unbiased var 2, σ = sqrt(2+1e-4) > 1,
	// no variance term; k = 1, no covariance term.
	z := mat.NewDense(2, 1, []float64{0, 2})
	if got := lossValue(VICReg, p, z, z); got != 0 {
		t.Errorf("VICReg: got %g, want 0", got)
	}
	// z = [[0],[0.2]]: σ = sqrt(0.02 + 1e-4), term μ·2·(1−σ)/(2k) for the two views.
	z = mat.NewDense(2, 1, []float64{0, 0.2})
	sd := math.Sqrt(0.02 + 1e-4)
	if got, want := lossValue(VICReg, p, z, z), p.VICMu*(1-sd); math.Abs(got-want) > 1e-15 {
		t.Errorf("VICReg small: got %g, want %g", got, want)
	}
}
