package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotsTo: DotsTo equals dot on every pair, bit for bit, with and without the assembly
// kernels, for counts around the 4×3 and 1×4 blocks and lengths around multiples of 4,
// and for lengths of two and more chunks with more rows than one pass of dotsBlocked
// holds (its lane chains carried from chunk to chunk).
func TestDotsTo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	shapes := [][3][]int{
		{{1, 2, 4, 5, 9}, {1, 3, 4, 7, 13}, {0, 1, 3, 4, 5, 8, 33, 256}},
		{{4, 7, 8, 13, dotsRows + 5, 2*dotsRows + 4}, {2, 3, 4, 7, 8}, {2 * dotsChunk, 2*dotsChunk + 3, 3*dotsChunk + 126}},
	}
	old, old512 := hasAVX2FMA, hasDots512
	defer func() { hasAVX2FMA, hasDots512 = old, old512 }()
	for _, mode := range []string{"avx512", "avx2", "portable"} {
		if mode == "avx512" && !old512 || mode == "avx2" && !old {
			t.Logf("%s: not on this machine", mode)
			continue
		}
		hasAVX2FMA, hasDots512 = mode != "portable", mode == "avx512"
		for _, sh := range shapes {
			testDotsToShapes(t, r, mode, sh[0], sh[1], sh[2])
		}
	}
}

func testDotsToShapes(t *testing.T, r *rand.Rand, mode string, nfs, nzs, ns []int) {
	t.Helper()
	for _, nf := range nfs {
		for _, nz := range nzs {
			for _, n := range ns {
				name := fmt.Sprintf("%s/nf=%d/nz=%d/n=%d", mode, nf, nz, n)
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

// BenchmarkDotsTo: the ingest's pool products (a batch of 64 or 256 points' features,
// q = 4,096, against 256 landmarks), by one 4×3 block after another over the whole
// length and by dotsBlocked's 4×3 (AVX2) and 8×4 (AVX-512) blocks; GMAC/s is
// multiply-adds per second.
func BenchmarkDotsTo(b *testing.B) {
	if !hasAVX2FMA {
		b.Skip("no AVX2/FMA: DotsTo runs the portable loops")
	}
	n, nz := 4096, 256
	r := rand.New(rand.NewPCG(13, 3))
	for _, nf := range []int{64, 256} {
		f, z, dst := make([]float64, nf*n), make([]float64, nz*n), make([]float64, nf*nz)
		for i := range f {
			f[i] = r.NormFloat64()
		}
		for i := range z {
			z[i] = r.NormFloat64()
		}
		for _, path := range []string{"one-pass", "blocked-avx2", "blocked-avx512"} {
			if path == "blocked-avx512" && !hasDots512 {
				continue
			}
			b.Run(fmt.Sprintf("nf=%d/%s", nf, path), func(b *testing.B) {
				defer func(b1, b2 bool) { dotsBlocking, hasDots512 = b1, b2 }(dotsBlocking, hasDots512)
				dotsBlocking, hasDots512 = path != "one-pass", path == "blocked-avx512"
				for range b.N {
					DotsTo(dst, nz, f, n, nf, z, n, nz, n)
				}
				b.ReportMetric(float64(nf*nz*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
