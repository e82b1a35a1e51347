package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestHessVec checks the exact Hessian-vector products in z against central differences
// of the analytic gradient (itself checked in TestLossGradients). With h = 1e-5 the
// difference quotient has error h²/6·|∂⁴L·d³| + ε_mach·|∇L|/h ≲ 1e-9 at these sizes, so
// 1e-6·max(1, |Hd|) leaves a wide margin while a wrong term (O(1) relative) fails.
func TestHessVec(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 9))
	p := DefaultLossParams()
	for _, tc := range []struct {
		loss  Loss
		b, k  int
		scale float64
	}{
		{BarlowTwins, 7, 5, 1}, {BarlowTwins, 4, 1, 2},
		{SimCLR, 5, 4, 1}, {SimCLR, 3, 3, 0.3},
		{VICReg, 6, 4, 0.4}, {VICReg, 5, 3, 2},
	} {
		za, zb := randDense(rnd, tc.b, tc.k, tc.scale, 0.1), randDense(rnd, tc.b, tc.k, tc.scale, 0.1)
		da, db := randDense(rnd, tc.b, tc.k, 1, 0), randDense(rnd, tc.b, tc.k, 1, 0)
		ha, hb := mat.NewDense(tc.b, tc.k, nil), mat.NewDense(tc.b, tc.k, nil)
		var ws hvpWS
		ws.hessVecTo(ha, hb, tc.loss, p, za, zb, da, db)
		const h = 1e-5
		grad := func(s float64) (*mat.Dense, *mat.Dense) {
			pa, pb := mat.DenseCopyOf(za), mat.DenseCopyOf(zb)
			addScaled(pa, s, da)
			addScaled(pb, s, db)
			ga, gb := mat.NewDense(tc.b, tc.k, nil), mat.NewDense(tc.b, tc.k, nil)
			LossGradTo(ga, gb, tc.loss, p, pa, pb)
			return ga, gb
		}
		pa, pb := grad(h)
		ma, mb := grad(-h)
		for _, v := range []struct {
			name       string
			got, p, mm *mat.Dense
		}{{"A", ha, pa, ma}, {"B", hb, pb, mb}} {
			for i := range tc.b {
				for j := range tc.k {
					want := (v.p.At(i, j) - v.mm.At(i, j)) / (2 * h)
					if got := v.got.At(i, j); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
						t.Errorf("%v B=%d k=%d (Hd)_%s[%d,%d] = %.10g, want %.10g", tc.loss, tc.b, tc.k, v.name, i, j, got, want)
					}
				}
			}
		}
	}
}
