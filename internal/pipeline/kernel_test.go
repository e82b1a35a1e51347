package pipeline

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/gemm"
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
		g, z := randKernelInputs(r, n, m, q)
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

// TestKernelToCores: with internal/base/gemm installed (as cairnd installs it), KernelTo
// gives the bits of the serial loop it replaced (each block of kernelRows rows widened
// on one goroutine, then one blas64.Gemm) at GOMAXPROCS 1, 2 and 3: blocks on gemm's
// blocked path and a last block of one row below its size threshold (gonum's routine).
func TestKernelToCores(t *testing.T) {
	defer blas64.Use(blas64.Implementation())
	blas64.Use(gemm.Implementation{})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(6, 6))
	const q, m = 2053, 64
	br := kernelRows(q)
	for _, n := range []int{br - 1, 2*br + 1, 3*br + 7} {
		g, z := randKernelInputs(r, n, m, q)
		want := mat.NewDense(n, m, nil)
		zt := mat.DenseCopyOf(z.T()).RawMatrix()
		for lo := 0; lo < n; lo += br {
			hi := min(lo+br, n)
			buf := make([]float64, (hi-lo)*q)
			for i := lo; i < hi; i++ {
				for j, v := range g[i] {
					buf[(i-lo)*q+j] = float64(v)
				}
			}
			w := want.RawMatrix()
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, blas64.General{Rows: hi - lo, Cols: q, Stride: q, Data: buf}, zt, 0,
				blas64.General{Rows: hi - lo, Cols: m, Stride: w.Stride, Data: w.Data[lo*w.Stride:]})
		}
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			got := mat.NewDense(n, m, nil)
			KernelTo(got, g, z)
			for i, v := range got.RawMatrix().Data {
				if w := want.RawMatrix().Data[i]; math.Float64bits(v) != math.Float64bits(w) {
					t.Fatalf("n=%d GOMAXPROCS %d: entry %d = %v, the serial blocks give %v", n, procs, i, v, w)
				}
			}
		}
	}
}

// randKernelInputs draws n float32 rows of length q and an m×q matrix, standard normal.
func randKernelInputs(r *rand.Rand, n, m, q int) ([][]float32, *mat.Dense) {
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
	return g, z
}
