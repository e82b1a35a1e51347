package onnx

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDgemm checks every path of dgemm (rank-one, matrix–vector, blocked gonum and
// internal/base/gemm sizes) and every transpose against the plain triple loop, on operands
// with padded leading dimensions: C += α·op(A)·op(B) to 1e-13 relative to Σ|terms|.
func TestDgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	sizes := [][3]int{{1, 5, 3}, {4, 1, 3}, {4, 5, 1}, {1, 1, 7}, {3, 4, 5}, {70, 66, 9}, {40, 80, 90}}
	for _, sz := range sizes {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				ra, ca := m, k
				if tA {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tB {
					rb, cb = n, k
				}
				lda, ldb, ldc := ca+2, cb+1, n+3
				a, b := randVals(r, ra*lda, 1), randVals(r, rb*ldb, 1)
				c := randVals(r, m*ldc, 1)
				want, bound := append([]float64(nil), c...), make([]float64, len(c))
				const alpha = -0.75
				for i := range m {
					for j := range n {
						for p := range k {
							var av, bv float64
							if tA {
								av = a[p*lda+i]
							} else {
								av = a[i*lda+p]
							}
							if tB {
								bv = b[j*ldb+p]
							} else {
								bv = b[p*ldb+j]
							}
							want[i*ldc+j] += alpha * av * bv
							bound[i*ldc+j] += math.Abs(alpha * av * bv)
						}
					}
				}
				dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
				for i := range c {
					if math.Abs(c[i]-want[i]) > 1e-13*(bound[i]+math.Abs(want[i])) {
						t.Fatalf("m,n,k = %d,%d,%d tA %v tB %v: c[%d] = %v, want %v", m, n, k, tA, tB, i, c[i], want[i])
					}
				}
			}
		}
	}
}
