package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestKernelTo: the blocked product of float32 rows against z equals a plain triple loop
// over the widened rows, within the error bound of a sum of q products (γ_q·Σ|g||z| with
// γ_q ≈ q·2⁻⁵³), for row counts that straddle the widened block (kernelRows(q) = 510
// rows at q = 2,053).
func TestKernelTo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const q, m = 2053, 11
	br := kernelRows(q)
	for _, n := range []int{1, br - 1, br, 2*br + 3} {
		g := make([][]float32, n)
		for i := range g {
			g[i] = make([]float32, q)
			for j := range g[i] {
				g[i][j] = float32(r.NormFloat64())
			}
		}
		z := mat.NewDense(m, q, nil)
		for i := range m {
			for j := range q {
				z.Set(i, j, r.NormFloat64())
			}
		}
		dst := mat.NewDense(n, m, nil)
		KernelTo(dst, g, z)
		for i := range n {
			for l := range m {
				var want, mag float64
				for j := range q {
					want += float64(g[i][j]) * z.At(l, j)
					mag += math.Abs(float64(g[i][j]) * z.At(l, j))
				}
				if got := dst.At(i, l); math.Abs(got-want) > 2*q*0x1p-53*mag {
					t.Fatalf("n=%d: K[%d][%d] = %v, want %v", n, i, l, got, want)
				}
			}
		}
	}
}
