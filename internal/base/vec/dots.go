package vec

import (
	"fmt"
	"math"
	"sync"
)

// Dot returns Σ_i a[i]·b[i] (len(b) ≥ len(a)) in four lanes, lane l summing the terms
// i ≡ l (mod 4) by fused multiply-adds, the tail into lane 0, then (s0+s1)+(s2+s3).
// math.FMA rounds once on every machine (in hardware where there is FMA, exactly in
// software otherwise), so Dot gives the same bits everywhere, and the blocked kernels of
// DotsTo, which run the same lane chains in vector registers, give Dot's bits too.
func Dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 = math.FMA(a[i], b[i], s0)
		s1 = math.FMA(a[i+1], b[i+1], s1)
		s2 = math.FMA(a[i+2], b[i+2], s2)
		s3 = math.FMA(a[i+3], b[i+3], s3)
	}
	return dotTail(a[i:], b[i:], s0, s1, s2, s3)
}

// dotTail finishes Dot from its four lane sums: the terms past the last multiple of 4
// into lane 0, then (s0+s1)+(s2+s3).
func dotTail(a, b []float64, s0, s1, s2, s3 float64) float64 {
	b = b[:len(a)]
	for i, v := range a {
		s0 = math.FMA(v, b[i], s0)
	}
	return (s0 + s1) + (s2 + s3)
}

// DotsTo writes dst[i*ldd+j] = Dot(z[j*ldz:j*ldz+n], f[i*ldf:i*ldf+n]) for i < nf, j < nz:
// the cross products of nf vectors f_i with nz vectors z_j, all of length n, equal to
// Dot's bit for bit. With AVX2/FMA, blocks of 4×3 pairs (or 1×4 when nf = 1) run their
// lane chains in registers, each f and z vector loaded once per block instead of once per
// pair, so a batch of f against a landmark matrix reads the matrix nf/4 times instead of nf;
// from two chunks of length on, dotsBlocked carries the chains chunk by chunk (8×4 blocks
// with AVX-512), so each chunk of the matrix is read from cache by dotsRows rows of f.
func DotsTo(dst []float64, ldd int, f []float64, ldf, nf int, z []float64, ldz, nz, n int) {
	if nf == 0 || nz == 0 {
		return
	}
	if (nf > 1 && (ldd < nz || ldf < n)) || (nz > 1 && ldz < n) || len(dst) < (nf-1)*ldd+nz || len(f) < (nf-1)*ldf+n || len(z) < (nz-1)*ldz+n {
		panic(fmt.Sprintf("vec: DotsTo lengths dst %d, f %d, z %d for %d×%d pairs of length %d (strides %d, %d, %d)",
			len(dst), len(f), len(z), nf, nz, n, ldd, ldf, ldz))
	}
	i := 0
	if hasAVX2FMA && n >= 4 {
		n4 := n &^ 3
		var lanes [48]float64
		if dotsBlocking && nf >= 4 && nz >= 3 && n4 >= 2*dotsChunk {
			i = dotsBlocked(dst, ldd, f, ldf, nf, z, ldz, nz, n)
		}
		if nf-i >= 4 {
			for ; i+4 <= nf; i += 4 {
				j := 0
				for ; j+3 <= nz; j += 3 {
					clear(lanes[:])
					dotLanes4x3Acc(lanes[:], f[i*ldf:], ldf, z[j*ldz:], ldz, n4)
					for a := 0; a < 4; a++ {
						fa := f[(i+a)*ldf+n4 : (i+a)*ldf+n]
						for b := 0; b < 3; b++ {
							s := lanes[(a*3+b)*4 : (a*3+b)*4+4]
							dst[(i+a)*ldd+j+b] = dotTail(z[(j+b)*ldz+n4:(j+b)*ldz+n], fa, s[0], s[1], s[2], s[3])
						}
					}
				}
				for ; j < nz; j++ {
					for a := 0; a < 4; a++ {
						dst[(i+a)*ldd+j] = Dot(z[j*ldz:j*ldz+n], f[(i+a)*ldf:(i+a)*ldf+n])
					}
				}
			}
		}
		for ; i < nf; i++ {
			fi := f[i*ldf : i*ldf+n]
			j := 0
			for ; j+4 <= nz; j += 4 {
				dotLanes1x4(lanes[:16], fi, z[j*ldz:], ldz, n4)
				for b := 0; b < 4; b++ {
					s := lanes[b*4 : b*4+4]
					dst[i*ldd+j+b] = dotTail(z[(j+b)*ldz+n4:(j+b)*ldz+n], fi[n4:], s[0], s[1], s[2], s[3])
				}
			}
			for ; j < nz; j++ {
				dst[i*ldd+j] = Dot(z[j*ldz:j*ldz+n], fi)
			}
		}
		return
	}
	for ; i < nf; i++ {
		fi := f[i*ldf : i*ldf+n]
		for j := 0; j < nz; j++ {
			dst[i*ldd+j] = Dot(z[j*ldz:j*ldz+n], fi)
		}
	}
}

// dotsChunk and dotsRows size dotsBlocked's passes: the lane sums of dotsRows rows of f
// against every z are carried through chunks of dotsChunk entries of the length, so one
// chunk of z (nz·dotsChunk·8 bytes: 1 MiB for 256 landmarks) is read from cache once
// per dotsRows rows of f instead of from memory once per 4.
const (
	dotsChunk = 512
	dotsRows  = 32
)

// dotsBlocking says whether DotsTo may take dotsBlocked: a variable so that
// BenchmarkDotsTo can time both paths in one run.
var dotsBlocking = true

// dotsLanes holds dotsBlocked's lane sums between calls.
var dotsLanes = sync.Pool{New: func() any { return new([]float64) }}

// dotsBlock is a register block of dotsBlocked: rows×cols pairs whose lane chains acc
// carries through a chunk, the four lanes of pair (a, b) at lane(a, b) of its lanes.
type dotsBlock struct {
	rows, cols int
	acc        func(lanes, f []float64, ldf int, z []float64, ldz, n int)
	lane       func(a, b int) int
}

var (
	block4x3 = dotsBlock{4, 3, dotLanes4x3Acc, func(a, b int) int { return (a*3 + b) * 4 }}
	block8x4 = dotsBlock{8, 4, dotLanes8x4Acc, func(a, b int) int { return ((a/2)*4+b)*8 + (a%2)*4 }}
)

// dotsBlocked writes DotsTo's rows i < nf − nf mod rows by the blocks of 8×4 pairs
// (AVX-512) or 4×3 (AVX2), their lane chains carried through chunks of the length, and
// returns how many rows it wrote. Each pair's lanes run the same fused multiply-adds in
// the same order as in one pass, so the bits are Dot's. Needs AVX2/FMA, nf ≥ 4, nz ≥ 3.
func dotsBlocked(dst []float64, ldd int, f []float64, ldf, nf int, z []float64, ldz, nz, n int) int {
	bk := block4x3
	if hasDots512 && nf >= 8 && nz >= 4 {
		bk = block8x4
	}
	n4, nfb, nzb := n&^3, nf-nf%bk.rows, nz-nz%bk.cols
	per := bk.rows * bk.cols * 4 // lanes of a block
	bp := dotsLanes.Get().(*[]float64)
	defer dotsLanes.Put(bp)
	size := min(dotsRows, nfb) / bk.rows * nzb / bk.cols * per
	if cap(*bp) < size {
		*bp = make([]float64, size)
	}
	acc := (*bp)[:size]
	for i0 := 0; i0 < nfb; i0 += dotsRows {
		i1 := min(i0+dotsRows, nfb)
		clear(acc)
		for k0 := 0; k0 < n4; k0 += dotsChunk {
			kc := min(dotsChunk, n4-k0)
			for i := i0; i < i1; i += bk.rows {
				row := acc[(i-i0)/bk.rows*(nzb/bk.cols)*per:]
				for j := 0; j < nzb; j += bk.cols {
					bk.acc(row[j/bk.cols*per:(j/bk.cols+1)*per], f[i*ldf+k0:], ldf, z[j*ldz+k0:], ldz, kc)
				}
			}
		}
		for i := i0; i < i1; i += bk.rows {
			row := acc[(i-i0)/bk.rows*(nzb/bk.cols)*per:]
			for a := range bk.rows {
				fa := f[(i+a)*ldf : (i+a)*ldf+n]
				for j := 0; j < nzb; j += bk.cols {
					for b := range bk.cols {
						s := row[j/bk.cols*per+bk.lane(a, b):]
						dst[(i+a)*ldd+j+b] = dotTail(z[(j+b)*ldz+n4:(j+b)*ldz+n], fa[n4:], s[0], s[1], s[2], s[3])
					}
				}
				for j := nzb; j < nz; j++ {
					dst[(i+a)*ldd+j] = Dot(z[j*ldz:j*ldz+n], fa)
				}
			}
		}
	}
	return nfb
}
