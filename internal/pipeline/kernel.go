package pipeline

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/par"
)

// kernelBytes is the size of the float64 block KernelTo widens per product: 8 MiB
// (1,024 rows of q = 1,024), large enough for the blocked GEMM to run at speed and small
// against the n×q features it never copies whole.
const kernelBytes = 8 << 20

// kernelRows is the number of rows of length q in one widened block.
func kernelRows(q int) int { return max(1, kernelBytes/(8*max(q, 1))) }

// KernelTo writes the kernel block dst[i][l] = ⟨g_i, z_l⟩ of the float32 rows g (each of
// length q, widened exactly) against the rows of z (M×q) into dst (len(g)×M), with the
// installed BLAS (blas64.Gemm, which splits its rows over the cores) on blocks of
// kernelRows rows: the rows are read where they are, so nothing of size len(g)×q is
// allocated. Each block's rows are widened in chunks side by side (internal/base/par; on
// one goroutine the copy ran while the other cores waited for the product). The result is a
// function of the arguments alone (each block's product is). g and z are not modified;
// wrong shapes panic.
func KernelTo(dst *mat.Dense, g [][]float32, z *mat.Dense) {
	m, q := z.Dims()
	if r, c := dst.Dims(); r != len(g) || c != m {
		panic(fmt.Sprintf("pipeline: KernelTo: dst %d×%d for %d rows against %d", r, c, len(g), m))
	}
	for i := range g {
		if len(g[i]) != q {
			panic(fmt.Sprintf("pipeline: KernelTo: row %d has length %d, want %d", i, len(g[i]), q))
		}
	}
	// zᵀ (q×M) once, so every block's product reads it row by row (the GEMM packs a
	// transposed operand column by column, once per block); the products' bits are the
	// same either way.
	zt := mat.DenseCopyOf(z.T()).RawMatrix()
	dr := dst.RawMatrix()
	rows := kernelRows(q)
	buf := make([]float64, min(rows, len(g))*q)
	for lo := 0; lo < len(g); lo += rows {
		hi := min(lo+rows, len(g))
		par.For(hi-lo, widenRows, par.Workers(hi-lo, widenRows), func(_, a, b int) {
			for i := lo + a; i < lo+b; i++ {
				w := buf[(i-lo)*q : (i-lo+1)*q]
				for j, v := range g[i] {
					w[j] = float64(v)
				}
			}
		})
		a := blas64.General{Rows: hi - lo, Cols: q, Stride: q, Data: buf[:(hi-lo)*q]}
		c := blas64.General{Rows: hi - lo, Cols: m, Stride: dr.Stride, Data: dr.Data[lo*dr.Stride:]}
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, zt, 0, c)
	}
}

// widenRows is the row count of one chunk of KernelTo's widening.
const widenRows = 16
