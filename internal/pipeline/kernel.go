package pipeline

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// kernelRows is how many float32 rows KernelTo widens per product: 256 rows of
// q = 4096 are an 8 MiB float64 block, large enough for the blocked GEMM to run at
// speed and small against the n×q features it never copies whole.
const kernelRows = 256

// KernelTo writes the kernel block dst[i][l] = ⟨g_i, z_l⟩ of the float32 rows g (each of
// length q, widened exactly) against the rows of z (M×q) into dst (len(g)×M), with the
// installed BLAS (blas64.Gemm) on blocks of kernelRows rows: the rows are read where
// they are, so nothing of size len(g)×q is allocated. The result is a function of the
// arguments alone (each block's product is). g and z are not modified; wrong shapes
// panic.
func KernelTo(dst *mat.Dense, g [][]float32, z *mat.Dense) {
	m, q := z.Dims()
	if r, c := dst.Dims(); r != len(g) || c != m {
		panic(fmt.Sprintf("pipeline: KernelTo: dst %d×%d for %d rows against %d", r, c, len(g), m))
	}
	zr := z.RawMatrix()
	dr := dst.RawMatrix()
	buf := make([]float64, min(kernelRows, len(g))*q)
	for lo := 0; lo < len(g); lo += kernelRows {
		hi := min(lo+kernelRows, len(g))
		for i := lo; i < hi; i++ {
			if len(g[i]) != q {
				panic(fmt.Sprintf("pipeline: KernelTo: row %d has length %d, want %d", i, len(g[i]), q))
			}
			w := buf[(i-lo)*q : (i-lo+1)*q]
			for j, v := range g[i] {
				w[j] = float64(v)
			}
		}
		a := blas64.General{Rows: hi - lo, Cols: q, Stride: q, Data: buf[:(hi-lo)*q]}
		c := blas64.General{Rows: hi - lo, Cols: m, Stride: dr.Stride, Data: dr.Data[lo*dr.Stride:]}
		blas64.Gemm(blas.NoTrans, blas.Trans, 1, a, zr, 0, c)
	}
}
