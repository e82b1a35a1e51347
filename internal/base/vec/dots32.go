package vec

import (
	"fmt"
	"math"
)

// Dot32 returns Σ_i float64(a[i])·b[i] (len(b) ≥ len(a)): Dot with the first factor
// stored in float32 and widened exactly, in the same four FMA lanes, tail into lane 0,
// then (s0+s1)+(s2+s3). Widening float32 to float64 is exact, so the only rounding is
// Dot's; Dots32To's AVX2 blocks give Dot32's bits.
func Dot32(a []float32, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 = math.FMA(float64(a[i]), b[i], s0)
		s1 = math.FMA(float64(a[i+1]), b[i+1], s1)
		s2 = math.FMA(float64(a[i+2]), b[i+2], s2)
		s3 = math.FMA(float64(a[i+3]), b[i+3], s3)
	}
	return dot32Tail(a[i:], b[i:], s0, s1, s2, s3)
}

func dot32Tail(a []float32, b []float64, s0, s1, s2, s3 float64) float64 {
	b = b[:len(a)]
	for i, v := range a {
		s0 = math.FMA(float64(v), b[i], s0)
	}
	return (s0 + s1) + (s2 + s3)
}

// Dots32To writes dst[j] = Dot32(z[j*ldz : j*ldz+n], f) for j < len(dst): one float64
// vector f (len ≥ n) against the rows of a float32 matrix z, bit for bit Dot32. With
// AVX2/FMA four rows run their lane chains in registers and f is read once per four
// rows. The product is bound by reading z, half the bytes of a float64 matrix.
func Dots32To(dst []float64, f []float64, z []float32, ldz, n int) {
	nz := len(dst)
	if nz == 0 {
		return
	}
	if len(f) < n || (nz > 1 && ldz < n) || len(z) < (nz-1)*ldz+n {
		panic(fmt.Sprintf("vec: Dots32To lengths dst %d, f %d, z %d for rows of length %d (stride %d)",
			nz, len(f), len(z), n, ldz))
	}
	f = f[:n]
	j := 0
	if hasAVX2FMA && n >= 4 {
		var lanes [16]float64
		n4 := n &^ 3
		for ; j+4 <= nz; j += 4 {
			clear(lanes[:])
			dot32Lanes1x4Acc(lanes[:], f, z[j*ldz:], ldz, n4)
			for b := 0; b < 4; b++ {
				s := lanes[b*4 : b*4+4]
				dst[j+b] = dot32Tail(z[(j+b)*ldz+n4:(j+b)*ldz+n], f[n4:], s[0], s[1], s[2], s[3])
			}
		}
	}
	for ; j < nz; j++ {
		dst[j] = Dot32(z[j*ldz:j*ldz+n], f)
	}
}

// Dots32BatchChunk is the column chunk of Dots32BatchTo: 512 columns of four float32 rows
// (8 KiB) stay in L1 while every vector of the batch passes, and the vectors' chunks
// (4 KiB each, 256 KiB for 64) in L2 (measured: 512 is the fastest of 256 to 2048).
const Dots32BatchChunk = 512

// Dots32BatchTo writes dst[q·nz+j] = Dot32(z[j*ldz : j*ldz+n], fs[q]) for q < len(fs)
// and j < nz, bit for bit Dots32To's, into dst (len ≥ len(fs)·nz); lanes is scratch of
// at least len(fs)·nz·4 (nil: allocated). With AVX2/FMA it walks z in chunks of
// Dots32BatchChunk columns and runs every vector against each chunk while it is in
// cache, carrying each lane chain from chunk to chunk (dot32Lanes1x4Acc), so z is read
// from memory once for the batch instead of once per vector: the product turns from
// bound by memory bandwidth into bound by arithmetic. It returns lanes for reuse.
func Dots32BatchTo(dst []float64, fs [][]float64, z []float32, ldz, n, nz int, lanes []float64) []float64 {
	nq := len(fs)
	if nq == 0 || nz == 0 {
		return lanes
	}
	if len(dst) < nq*nz || (nz > 1 && ldz < n) || len(z) < (nz-1)*ldz+n {
		panic(fmt.Sprintf("vec: Dots32BatchTo lengths dst %d, z %d for %d×%d rows of length %d (stride %d)",
			len(dst), len(z), nq, nz, n, ldz))
	}
	for q, f := range fs {
		if len(f) < n {
			panic(fmt.Sprintf("vec: Dots32BatchTo: vector %d has %d entries, want %d", q, len(f), n))
		}
	}
	nz4 := 0
	if hasAVX2FMA && n >= 4 {
		nz4 = nz &^ 3
	}
	if nz4 > 0 {
		if cap(lanes) < nq*nz4*4 {
			lanes = make([]float64, nq*nz4*4)
		}
		lanes = lanes[:nq*nz4*4]
		clear(lanes)
		n4 := n &^ 3
		for c0 := 0; c0 < n4; c0 += Dots32BatchChunk {
			cl := min(Dots32BatchChunk, n4-c0)
			for j := 0; j < nz4; j += 4 {
				zc := z[j*ldz+c0:]
				for q, f := range fs {
					dot32Lanes1x4Acc(lanes[(q*nz4+j)*4:], f[c0:], zc, ldz, cl)
				}
			}
		}
		for q, f := range fs {
			for j := 0; j < nz4; j++ {
				s := lanes[(q*nz4+j)*4:]
				dst[q*nz+j] = dot32Tail(z[j*ldz+n4:j*ldz+n], f[n4:n], s[0], s[1], s[2], s[3])
			}
		}
	}
	for q, f := range fs {
		for j := nz4; j < nz; j++ {
			dst[q*nz+j] = Dot32(z[j*ldz:j*ldz+n], f)
		}
	}
	return lanes
}
