package entk

import (
	"fmt"
	"math"
)

// fwhtBlock is the length, in float64s, of the blocks whose low stages run while they sit
// in L1: 2^11 values are 16 KiB, half of a typical 32 KiB L1d, so a block and the stack
// stay resident through all eleven low stages.
const fwhtBlock = 1 << 11

// FWHT overwrites v with H v, where H = H_n/sqrt(n) is the normalized Walsh–Hadamard
// matrix of order n = len(v) in Sylvester (natural) order: H_1 = [1], H_2n = [[H_n, H_n],
// [H_n, −H_n]], so (H_n)_{jk} = (−1)^{popcount(j AND k)}. H is symmetric and orthogonal,
// hence FWHT is an involution and preserves norms and inner products (the rotation of the
// SRHT, paper eq. composed).
//
// It is the plain loop
//
//	for h := 1; h < n; h *= 2 {
//		for i := 0; i < n; i += 2 * h {
//			for j := i; j < i+h; j++ {
//				v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
//			}
//		}
//	}
//	for j := range v { v[j] /= math.Sqrt(float64(n)) }
//
// reordered for the cache: the stages act on different index bits and commute, so the low
// stages run block by block in L1 (three at a time in registers, six with AVX-512), and
// the high stages in radix-8 passes that read and write the whole slice once per three
// stages. It allocates nothing. It panics unless len(v) is a power of two (len 1 is the identity).
func FWHT(v []float64) {
	n := len(v)
	if n == 0 || n&(n-1) != 0 {
		panic(fmt.Sprintf("entk: FWHT length %d is not a power of two", n))
	}
	fwht(v, 1/math.Sqrt(float64(n)))
}

// fwht overwrites v with scale·H_n v, H_n the unnormalized ±1 Hadamard matrix. len(v) is a
// power of two. A scale of exactly 1 costs nothing.
func fwht(v []float64, scale float64) {
	n := len(v)
	if n < 8 {
		fwhtTiny(v)
		scaleTo(v, scale)
		return
	}
	if avx512() && n >= 64 {
		fwhtZ(v, v, nil, scale)
		return
	}
	blk := min(n, fwhtBlock)
	for i := 0; i < n; i += blk {
		b := v[i : i+blk]
		if hasAVX2FMA {
			fwhtContig8AVX(b)
		} else {
			fwhtRadix8Contig(b)
		}
		if len(b) >= 64 {
			if hasAVX2FMA {
				fwhtRadix8AVX(b, 8)
			} else {
				fwhtRadix8By8(b)
			}
			fwhtStages(b, 64)
		} else {
			fwhtStages(b, 8)
		}
		scaleTo(b, scale) // while b is still in L1
	}
	fwhtStages(v, blk)
}

// scaleTo multiplies v by c in place unless c == 1.
func scaleTo(v []float64, c float64) {
	if c == 1 {
		return
	}
	if hasAVX2FMA {
		scaleAVX(v, c)
		return
	}
	for i := range v {
		v[i] *= c
	}
}

// fwhtTiny applies H_n (unnormalized) for n < 8 by the plain loop.
func fwhtTiny(v []float64) {
	n := len(v)
	for h := 1; h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
			}
		}
	}
}

// fwhtStages applies the stages of strides h, 2h, …, len(v)/2: radix-8 passes (three
// stages per sweep over v) while they fit, then one radix-4 or radix-2 pass. With AVX2
// and h a multiple of 4 (always, from fwht), the passes run four columns at a time in
// simd_amd64.s, with the same butterflies.
func fwhtStages(v []float64, h int) {
	n := len(v)
	avx := hasAVX2FMA && h%4 == 0
	if avx512() && h%8 == 0 {
		fwhtStagesZ(v, h)
		return
	}
	for h < n {
		switch {
		case 8*h <= n:
			if avx {
				fwhtRadix8AVX(v, h)
			} else {
				fwhtRadix8(v, h)
			}
			h *= 8
		case 4*h <= n:
			if avx {
				fwhtRadix4AVX(v, h)
			} else {
				fwhtRadix4(v, h)
			}
			h *= 4
		default:
			if avx {
				fwhtRadix2AVX(v, h)
			} else {
				fwhtRadix2(v, h)
			}
			h *= 2
		}
	}
}

// fwhtStagesZ is fwhtStages with the AVX-512 passes, eight columns at a time (h a
// multiple of 8).
func fwhtStagesZ(v []float64, h int) {
	for n := len(v); h < n; {
		switch {
		case 8*h <= n:
			fwhtRadix8Z(v, h)
			h *= 8
		case 4*h <= n:
			fwhtRadix4Z(v, h)
			h *= 4
		default:
			fwhtRadix2Z(v, h)
			h *= 2
		}
	}
}

// avx512 says whether the AVX-512 passes run: hasAVX512, and hasAVX2FMA (which tests turn
// off to run the portable loops).
func avx512() bool { return hasAVX512 && hasAVX2FMA }

// fwhtSigned writes H_n (D v ⊕ 0) into u (n = len(u) a power of two ≥ len(v), D =
// diag(signs[:len(v)])): mulTo, the zero tail and fwht(u, 1), with the same bits. With
// AVX-512 and v filling u (n ≥ 64), the signs are applied in fwhtZ's first sweep of each
// L1 block instead of a pass of their own.
func fwhtSigned(u, v, signs []float64) {
	if n := len(u); avx512() && len(v) == n && n >= 64 {
		fwhtZ(u, v, signs[:n], 1)
		return
	}
	mulTo(u, signs[:len(v)], v)
	clear(u[len(v):])
	fwht(u, 1)
}

// fwhtZ is fwht's loop with the AVX-512 passes (n = len(u) ≥ 64, len(v) = n): u =
// scale·H_n (D v), D = diag(signs), or the identity when signs is nil; u may be v. Each
// L1 block gets strides 1 to 32 (and the signs) in one sweep (fwhtContig64Z), its other
// low stages and the scale while it sits in L1; then the high stages over u.
func fwhtZ(u, v, signs []float64, scale float64) {
	n := len(u)
	blk := min(n, fwhtBlock)
	for i := 0; i < n; i += blk {
		b, sg := u[i:i+blk], []float64(nil)
		if signs != nil {
			sg = signs[i : i+blk]
		}
		fwhtContig64Z(b, v[i:i+blk], sg)
		fwhtStagesZ(b, 64)
		scaleTo(b, scale)
	}
	fwhtStagesZ(u, blk)
}

// fwhtRadix8Contig applies the stages of strides 1, 2, 4: H_8 on each contiguous group of 8.
func fwhtRadix8Contig(v []float64) {
	for i := 0; i+8 <= len(v); i += 8 {
		x := (*[8]float64)(v[i : i+8])
		a0, a1 := x[0]+x[1], x[0]-x[1]
		a2, a3 := x[2]+x[3], x[2]-x[3]
		a4, a5 := x[4]+x[5], x[4]-x[5]
		a6, a7 := x[6]+x[7], x[6]-x[7]
		b0, b2 := a0+a2, a0-a2
		b1, b3 := a1+a3, a1-a3
		b4, b6 := a4+a6, a4-a6
		b5, b7 := a5+a7, a5-a7
		x[0], x[4] = b0+b4, b0-b4
		x[1], x[5] = b1+b5, b1-b5
		x[2], x[6] = b2+b6, b2-b6
		x[3], x[7] = b3+b7, b3-b7
	}
}

// fwhtRadix8By8 is fwhtRadix8(v, 8) on fixed-size groups of 64, where the compiler can
// drop the per-group slicing that costs ~10% at this small stride.
func fwhtRadix8By8(v []float64) {
	for i := 0; i+64 <= len(v); i += 64 {
		x := (*[64]float64)(v[i : i+64])
		for j := 0; j < 8; j++ {
			a0, a1 := x[j]+x[8+j], x[j]-x[8+j]
			a2, a3 := x[16+j]+x[24+j], x[16+j]-x[24+j]
			a4, a5 := x[32+j]+x[40+j], x[32+j]-x[40+j]
			a6, a7 := x[48+j]+x[56+j], x[48+j]-x[56+j]
			b0, b2 := a0+a2, a0-a2
			b1, b3 := a1+a3, a1-a3
			b4, b6 := a4+a6, a4-a6
			b5, b7 := a5+a7, a5-a7
			x[j], x[32+j] = b0+b4, b0-b4
			x[8+j], x[40+j] = b1+b5, b1-b5
			x[16+j], x[48+j] = b2+b6, b2-b6
			x[24+j], x[56+j] = b3+b7, b3-b7
		}
	}
}

// fwhtRadix8 applies the stages of strides h, 2h, 4h: for each group of 8h values, H_8
// across the eight strided rows x_r = v[i+r·h : i+(r+1)·h].
func fwhtRadix8(v []float64, h int) {
	for i := 0; i < len(v); i += 8 * h {
		x0 := v[i : i+h]
		x1 := v[i+h : i+2*h][:len(x0)]
		x2 := v[i+2*h : i+3*h][:len(x0)]
		x3 := v[i+3*h : i+4*h][:len(x0)]
		x4 := v[i+4*h : i+5*h][:len(x0)]
		x5 := v[i+5*h : i+6*h][:len(x0)]
		x6 := v[i+6*h : i+7*h][:len(x0)]
		x7 := v[i+7*h : i+8*h][:len(x0)]
		for j := range x0 {
			a0, a1 := x0[j]+x1[j], x0[j]-x1[j]
			a2, a3 := x2[j]+x3[j], x2[j]-x3[j]
			a4, a5 := x4[j]+x5[j], x4[j]-x5[j]
			a6, a7 := x6[j]+x7[j], x6[j]-x7[j]
			b0, b2 := a0+a2, a0-a2
			b1, b3 := a1+a3, a1-a3
			b4, b6 := a4+a6, a4-a6
			b5, b7 := a5+a7, a5-a7
			x0[j], x4[j] = b0+b4, b0-b4
			x1[j], x5[j] = b1+b5, b1-b5
			x2[j], x6[j] = b2+b6, b2-b6
			x3[j], x7[j] = b3+b7, b3-b7
		}
	}
}

// fwhtRadix4 applies the stages of strides h and 2h.
func fwhtRadix4(v []float64, h int) {
	for i := 0; i < len(v); i += 4 * h {
		x0 := v[i : i+h]
		x1 := v[i+h : i+2*h][:len(x0)]
		x2 := v[i+2*h : i+3*h][:len(x0)]
		x3 := v[i+3*h : i+4*h][:len(x0)]
		for j := range x0 {
			a0, a1 := x0[j]+x1[j], x0[j]-x1[j]
			a2, a3 := x2[j]+x3[j], x2[j]-x3[j]
			x0[j], x2[j] = a0+a2, a0-a2
			x1[j], x3[j] = a1+a3, a1-a3
		}
	}
}

// fwhtRadix2 applies the stage of stride h.
func fwhtRadix2(v []float64, h int) {
	for i := 0; i < len(v); i += 2 * h {
		x0 := v[i : i+h]
		x1 := v[i+h : i+2*h][:len(x0)]
		for j := range x0 {
			x0[j], x1[j] = x0[j]+x1[j], x0[j]-x1[j]
		}
	}
}
