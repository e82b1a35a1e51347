package entk

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// This file holds the small dense kernels of the ConvNet and the SRHT behind one portable
// entry point each: the AVX2/FMA assembly of simd_amd64.s when hasAVX2FMA, the plain loop
// of the doc comment otherwise. The FWHT, scaling and sign kernels compute the same
// roundings either way (the same additions and products in vector lanes), so their
// results do not depend on the CPU. The fused multiply-add kernels (convAccRowsTo, axpyTo)
// round once per term where the loops round twice, so on machines without FMA those
// results differ in the last bits; a replay on the same machine is still bit for bit.

// convAccRowsTo adds the convolution terms to the rows p0 ≤ p < p1 of z (position-major,
// row stride ldz = cout):
//
//	for p, c { for k := 0; k < K; k++ { z[p*ldz+c] += cols[p*K+k] * wT[k*ldz+c] } }
//
// with wT the K×cout transposed weights. Each z entry sees its K terms in order k = 0, 1,
// …, so a row's result does not depend on the rows beside it (Query splits a forward by
// rows).
func convAccRowsTo(z, cols, wT []float64, K, ldz, p0, p1 int) {
	if len(z) < p1*ldz || len(cols) < p1*K || len(wT) != K*ldz {
		panic(fmt.Sprintf("entk: convAccRowsTo lengths z %d, cols %d, wT %d for K %d, cout %d, rows %d", len(z), len(cols), len(wT), K, ldz, p1))
	}
	c16 := 0
	if hasAVX2FMA {
		c16 = ldz &^ 15
		for c0 := 0; c0 < c16; c0 += 16 {
			w := wT[c0 : (K-1)*ldz+c0+16]
			p := p0
			for ; p+2 <= p1; p += 2 {
				fmaRows2x16(z[p*ldz+c0:p*ldz+c0+16], z[(p+1)*ldz+c0:(p+1)*ldz+c0+16],
					cols[p*K:(p+1)*K], cols[(p+1)*K:(p+2)*K], w, ldz)
			}
			if p < p1 {
				fmaRows1x16(z[p*ldz+c0:p*ldz+c0+16], cols[p*K:(p+1)*K], w, ldz)
			}
		}
	}
	if c16 == ldz {
		return
	}
	for p := p0; p < p1; p++ {
		row := cols[p*K : (p+1)*K]
		zr := z[p*ldz : (p+1)*ldz]
		for k, v := range row {
			wr := wT[k*ldz : (k+1)*ldz]
			for c := c16; c < ldz; c++ {
				zr[c] = fmaIf(v, wr[c], zr[c])
			}
		}
	}
}

// fmaIf is x·y + z, fused when the assembly kernels are (so that a convolution's channels
// beyond the last block of 16 round as the block's do).
func fmaIf(x, y, z float64) float64 {
	if hasAVX2FMA {
		return math.FMA(x, y, z)
	}
	return x*y + z
}

// axpyTo is dst[i] += a·x[i] for i < len(x): the FMA kernel, or gonum's (len(dst) ≥
// len(x)).
func axpyTo(dst []float64, a float64, x []float64) {
	if len(dst) < len(x) {
		panic(fmt.Sprintf("entk: axpyTo len(dst)=%d < len(x)=%d", len(dst), len(x)))
	}
	if hasAVX2FMA {
		ax := [1]float64{a}
		gerFMA(dst, len(x), ax[:], 1, 1, x) // one row of the rank-one kernel
		return
	}
	if len(x) < 16 {
		dst = dst[:len(x)]
		for i, v := range x {
			dst[i] += a * v
		}
		return
	}
	floats.AddScaled(dst[:len(x)], a, x)
}

// gerTo is the rank-one update dst[i*ld+k] += x[i*inc]·y[k] for i < m, k < len(y)
// (BLAS Dger with α = 1), each row as axpyTo computes it.
func gerTo(dst []float64, ld int, x []float64, inc, m int, y []float64) {
	if m <= 0 {
		return
	}
	if len(dst) < (m-1)*ld+len(y) || len(x) < (m-1)*inc+1 || ld < len(y) || inc < 1 {
		panic(fmt.Sprintf("entk: gerTo lengths dst %d, x %d for m %d, ld %d, inc %d, len(y) %d", len(dst), len(x), m, ld, inc, len(y)))
	}
	if hasAVX2FMA {
		gerFMA(dst, ld, x, inc, m, y)
		return
	}
	for i := 0; i < m; i++ {
		axpyTo(dst[i*ld:i*ld+len(y)], x[i*inc], y)
	}
}

// mulTo is dst[i] = a[i]·b[i] for i < len(b) (len(a), len(dst) ≥ len(b)).
func mulTo(dst, a, b []float64) {
	if len(a) < len(b) || len(dst) < len(b) {
		panic(fmt.Sprintf("entk: mulTo lengths dst %d, a %d, b %d", len(dst), len(a), len(b)))
	}
	if hasAVX2FMA {
		mulAVX(dst, a, b)
		return
	}
	a, dst = a[:len(b)], dst[:len(b)]
	for i, v := range b {
		dst[i] = a[i] * v
	}
}

// accGatherTo adds the rank-one terms r = 0, 1, …, len(offs)−1, in that order,
//
//	for i < m, c < K: dst[i*ld+c] += src[offs[r]+i*inc] · mat[rows[r]*K+c]
//
// i.e. gerTo(dst, ld, src[offs[r]:], inc, m, mat[rows[r]*K:(rows[r]+1)*K]) for each r:
// the result is that sequence's bit for bit (every entry sees the same operations in
// the same order). With AVX2 the sums of blocks of 4 rows × 12 columns stay in
// registers across all terms instead of being loaded and stored per term. It panics
// when an offset or row index points outside src or mat.
func accGatherTo(dst []float64, ld, m int, src []float64, inc int, offs, rows []int32, mat []float64, K int) {
	n := len(offs)
	if m <= 0 || n == 0 {
		return
	}
	if len(rows) != n || ld < K || inc < 1 || len(dst) < (m-1)*ld+K {
		panic(fmt.Sprintf("entk: accGatherTo lengths dst %d, offs %d, rows %d for m %d, ld %d, inc %d, K %d", len(dst), n, len(rows), m, ld, inc, K))
	}
	for r, a := range offs {
		if a < 0 || int(a)+(m-1)*inc >= len(src) || rows[r] < 0 || (int(rows[r])+1)*K > len(mat) {
			panic(fmt.Sprintf("entk: accGatherTo term %d: offset %d, row %d outside src %d, mat %d", r, a, rows[r], len(src), len(mat)))
		}
	}
	if !hasAVX2FMA {
		for r, a := range offs {
			ro := int(rows[r])
			gerTo(dst, ld, src[a:], inc, m, mat[ro*K:(ro+1)*K])
		}
		return
	}
	c12 := K - K%12
	i := 0
	for ; i+4 <= m; i += 4 {
		for c0 := 0; c0 < c12; c0 += 12 {
			acc4x12(dst[i*ld+c0:], ld, src[i*inc:], inc, offs, rows, mat[c0:], K)
		}
	}
	for ; i < m; i++ {
		for c0 := 0; c0 < c12; c0 += 12 {
			acc1x12(dst[i*ld+c0:], src[i*inc:], offs, rows, mat[c0:], K)
		}
	}
	if c12 == K {
		return
	}
	for r, a := range offs {
		y := mat[int(rows[r])*K+c12 : (int(rows[r])+1)*K]
		for i := 0; i < m; i++ {
			x := src[int(a)+i*inc]
			d := dst[i*ld+c12 : i*ld+K]
			for c, v := range y {
				d[c] = math.FMA(x, v, d[c])
			}
		}
	}
}
