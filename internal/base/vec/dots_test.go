package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotsTo: DotsTo equals dot on every pair, bit for bit, with and without the assembly
// kernels, for counts around the 4×3 and 1×4 blocks and lengths around multiples of 4.
func TestDotsTo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	for _, asm := range []bool{true, false} {
		if asm && !hasAVX2FMA {
			continue
		}
		old := hasAVX2FMA
		hasAVX2FMA = asm
		for _, nf := range []int{1, 2, 4, 5, 9} {
			for _, nz := range []int{1, 3, 4, 7, 13} {
				for _, n := range []int{0, 1, 3, 4, 5, 8, 33, 256} {
					name := fmt.Sprintf("asm=%v/nf=%d/nz=%d/n=%d", asm, nf, nz, n)
					ldf, ldz, ldd := n+2, n+1, nz+3
					f, z := make([]float64, nf*ldf), make([]float64, nz*ldz)
					for i := range f {
						f[i] = r.NormFloat64()
					}
					for i := range z {
						z[i] = r.NormFloat64()
					}
					dst := make([]float64, nf*ldd)
					DotsTo(dst, ldd, f, ldf, nf, z, ldz, nz, n)
					for i := 0; i < nf; i++ {
						for j := 0; j < nz; j++ {
							want := Dot(z[j*ldz:j*ldz+n], f[i*ldf:i*ldf+n])
							if got := dst[i*ldd+j]; math.Float64bits(got) != math.Float64bits(want) {
								t.Fatalf("%s: (%d,%d) = %v, want Dot's %v", name, i, j, got, want)
							}
						}
					}
				}
			}
		}
		hasAVX2FMA = old
	}
}

// TestDotAccuracy: dot against the exactly rounded sum of products (math/big would do;
// here a compensated sum of exact FMA-split products), within its error bound
// γ_{n/4+2}·Σ|a_i b_i| (four lanes of n/4 terms, then two levels of additions).
func TestDotAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 3))
	for _, n := range []int{1, 7, 64, 1001, 4096} {
		a, b := make([]float64, n), make([]float64, n)
		var abs float64
		for i := range a {
			a[i], b[i] = r.NormFloat64(), r.NormFloat64()
			abs += math.Abs(a[i] * b[i])
		}
		// Reference: Neumaier sum of the products' exact parts p and errors e = fma(a,b,−p).
		var s, c float64
		add := func(x float64) {
			tt := s + x
			if math.Abs(s) >= math.Abs(x) {
				c += (s - tt) + x
			} else {
				c += (x - tt) + s
			}
			s = tt
		}
		for i := range a {
			p := a[i] * b[i]
			add(p)
			add(math.FMA(a[i], b[i], -p))
		}
		want := s + c
		k := float64(n/4 + 2)
		tol := k * 0x1p-53 / (1 - k*0x1p-53) * abs
		if got := Dot(a, b); math.Abs(got-want) > tol {
			t.Fatalf("n=%d: dot = %v, want %v ± %g", n, got, want, tol)
		}
	}
}
