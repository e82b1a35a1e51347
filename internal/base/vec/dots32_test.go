package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDots32To: Dots32To equals Dot32 on every row, bit for bit, with and without the
// assembly block, for row counts around the 1×4 block and lengths around multiples of 4;
// and Dot32 is within the forward error bound of the plain float64 loop (both sum the
// same exactly widened products: |Σ fl − Σ| ≤ γ_n Σ|a_i b_i|, γ_n = n·u/(1−n·u)).
func TestDots32To(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 32))
	for _, asm := range []bool{true, false} {
		if asm && !hasAVX2FMA {
			continue
		}
		old := hasAVX2FMA
		hasAVX2FMA = asm
		for _, nz := range []int{1, 3, 4, 5, 8, 13} {
			for _, n := range []int{0, 1, 3, 4, 5, 8, 33, 257} {
				name := fmt.Sprintf("asm=%v/nz=%d/n=%d", asm, nz, n)
				ldz := n + 3
				f, z := make([]float64, n+1), make([]float32, nz*ldz)
				for i := range f {
					f[i] = r.NormFloat64()
				}
				for i := range z {
					z[i] = float32(r.NormFloat64())
				}
				dst := make([]float64, nz)
				Dots32To(dst, f, z, ldz, n)
				for j := range nz {
					row := z[j*ldz : j*ldz+n]
					want := Dot32(row, f)
					if got := dst[j]; math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("%s: row %d = %v, want Dot32's %v", name, j, got, want)
					}
					var plain, abs float64
					for i, v := range row {
						plain += float64(v) * f[i]
						abs += math.Abs(float64(v) * f[i])
					}
					u := 0x1p-53
					gamma := 2 * float64(n+1) * u / (1 - 2*float64(n+1)*u) // both sums' bounds
					if d := math.Abs(want - plain); d > gamma*abs {
						t.Fatalf("%s: row %d Dot32 %v vs plain %v: |diff| %g > %g", name, j, want, plain, d, gamma*abs)
					}
				}
			}
		}
		hasAVX2FMA = old
	}
}

var sink32 float64

// BenchmarkDots32: one query row against 512 landmark rows of the convnet's exact
// feature length (49,569), float32 storage against the float64 DotsTo of the same shape
// in the same run (the ratio is the figure: both stream the matrix once).
func BenchmarkDots32(b *testing.B) {
	const m, n = 512, 49569
	r := rand.New(rand.NewPCG(1, 1))
	f := make([]float64, n)
	for i := range f {
		f[i] = r.NormFloat64()
	}
	z32 := make([]float32, m*n)
	for i := range z32 {
		z32[i] = float32(r.NormFloat64())
	}
	dst := make([]float64, m)
	b.Run("float32", func(b *testing.B) {
		b.SetBytes(int64(4 * m * n))
		for b.Loop() {
			Dots32To(dst, f, z32, n, n)
		}
		sink32 = dst[0]
	})
	z64 := make([]float64, m*n)
	for i := range z64 {
		z64[i] = float64(z32[i])
	}
	b.Run("float64", func(b *testing.B) {
		b.SetBytes(int64(8 * m * n))
		for b.Loop() {
			DotsTo(dst, 1, f, n, 1, z64, n, m, n)
		}
		sink32 = dst[0]
	})
}

// TestDots32BatchTo: every entry of the batched product equals Dot32 of its row and
// vector bit for bit, with and without the assembly, for lengths that straddle the
// column chunk and row counts around the 4-row block.
func TestDots32BatchTo(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 32))
	for _, asm := range []bool{true, false} {
		if asm && !hasAVX2FMA {
			continue
		}
		old := hasAVX2FMA
		hasAVX2FMA = asm
		var lanes []float64
		for _, nq := range []int{1, 2, 5} {
			for _, nz := range []int{1, 4, 7, 12} {
				for _, n := range []int{3, 8, 2047, 2048, 2053, 2*Dots32BatchChunk + 9} {
					ldz := n + 5
					fs := make([][]float64, nq)
					for q := range fs {
						fs[q] = make([]float64, n)
						for i := range fs[q] {
							fs[q][i] = r.NormFloat64()
						}
					}
					z := make([]float32, nz*ldz)
					for i := range z {
						z[i] = float32(r.NormFloat64())
					}
					dst := make([]float64, nq*nz)
					lanes = Dots32BatchTo(dst, fs, z, ldz, n, nz, lanes)
					for q := range nq {
						for j := range nz {
							want := Dot32(z[j*ldz:j*ldz+n], fs[q])
							if got := dst[q*nz+j]; math.Float64bits(got) != math.Float64bits(want) {
								t.Fatalf("asm=%v nq=%d nz=%d n=%d: [%d,%d] = %v, want Dot32's %v", asm, nq, nz, n, q, j, got, want)
							}
						}
					}
				}
			}
		}
		hasAVX2FMA = old
	}
}

// BenchmarkDots32Batch: 64 query vectors against 512 rows of the convnet's exact feature
// length, batched (the matrix read once) against 64 calls of Dots32To (read 64 times) in
// the same run; the ratio is the figure.
func BenchmarkDots32Batch(b *testing.B) {
	const nq, nz, n = 64, 512, 49569
	r := rand.New(rand.NewPCG(1, 1))
	fs := make([][]float64, nq)
	for q := range fs {
		fs[q] = make([]float64, n)
		for i := range fs[q] {
			fs[q][i] = r.NormFloat64()
		}
	}
	z := make([]float32, nz*n)
	for i := range z {
		z[i] = float32(r.NormFloat64())
	}
	dst := make([]float64, nq*nz)
	var lanes []float64
	b.Run("batched", func(b *testing.B) {
		for b.Loop() {
			lanes = Dots32BatchTo(dst, fs, z, n, n, nz, lanes)
		}
		sink32 = dst[0]
	})
	b.Run("per-vector", func(b *testing.B) {
		for b.Loop() {
			for q := range nq {
				Dots32To(dst[q*nz:(q+1)*nz], fs[q], z, n, n)
			}
		}
		sink32 = dst[0]
	})
}
