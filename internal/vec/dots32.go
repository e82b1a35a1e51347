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
			dot32Lanes1x4(lanes[:], f, z[j*ldz:], ldz, n4)
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
