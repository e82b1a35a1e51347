package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/cairnhq/cairn/internal/base/par"
)

// naive is the plain triple loop of C = alpha·op(A)·op(B) + beta·C, returning also the
// magnitudes |alpha|·Σ_p |op(A)_ip·op(B)_pj| + |beta·C_ij| that bound its rounding.
func naive(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) (want, mag []float64) {
	want, mag = slices.Clone(c), make([]float64, len(c))
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, abs float64
			for p := 0; p < k; p++ {
				var av, bv float64
				if tA == blas.NoTrans {
					av = a[i*lda+p]
				} else {
					av = a[p*lda+i]
				}
				if tB == blas.NoTrans {
					bv = b[p*ldb+j]
				} else {
					bv = b[j*ldb+p]
				}
				s += av * bv
				abs += math.Abs(av * bv)
			}
			cv := c[i*ldc+j]
			if beta == 0 {
				cv = 0
			}
			want[i*ldc+j] = alpha*s + beta*cv
			mag[i*ldc+j] = math.Abs(alpha)*abs + math.Abs(beta*cv)
		}
	}
	return want, mag
}

func randSlice(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// opDims returns the stored shapes of A (ar×ac) and B (br×bc) of an m×n×k product with
// transposes tA and tB.
func opDims(m, n, k int, tA, tB blas.Transpose) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// kernels lists the micro-kernels this machine runs.
func kernels() []micro[float64] {
	if hasAVX512 {
		return []micro[float64]{avx2, avx512}
	}
	return []micro[float64]{avx2}
}

// kernelsS lists the float32 micro-kernels this machine runs.
func kernelsS() []micro[float32] {
	if hasAVX512 {
		return []micro[float32]{avx2s, avx512s}
	}
	return []micro[float32]{avx2s}
}

// TestDgemm checks the blocked path with each micro-kernel against the triple loop on
// every transpose pair, sizes straddling the 6×8 and 6×16 tiles and the kc, mc and nc
// blocks, leading dimensions larger
// than the rows, and alpha/beta cases (beta = 0 must clear NaNs in C, as BLAS does).
// Tolerance: both sums of k products carry at most γ_k relative error on the sum of
// magnitudes, plus one rounding each for alpha, beta and the final addition:
// |got − want| ≤ 2·(k+3)·u·mag, u = 2⁻⁵³.
func TestDgemm(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA: Dgemm is gonum's")
	}
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {6, 8, 1}, {6, 16, 2}, {7, 9, 3}, {13, 17, 257}, {121, 8, 30}, {5, 2049, 9}, {130, 70, 600}, {12, 4100, 5}}
	for _, mk := range kernels() {
		for _, sh := range shapes {
			m, n, k := sh[0], sh[1], sh[2]
			for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
					for _, ab := range [][2]float64{{1, 0}, {0.7, 1}, {-1.3, 0.5}, {0, 2}} {
						name := fmt.Sprintf("nr=%d/%dx%dx%d/%c%c/alpha=%v/beta=%v", mk.nr, m, n, k, tA, tB, ab[0], ab[1])
						ar, ac, br, bc := opDims(m, n, k, tA, tB)
						lda, ldb, ldc := ac+3, bc+1, n+2
						a, b := randSlice(r, (ar-1)*lda+ac), randSlice(r, (br-1)*ldb+bc)
						c := randSlice(r, (m-1)*ldc+n)
						if ab[1] == 0 {
							c[0] = math.NaN()
						}
						want, mag := naive(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
						got := slices.Clone(c)
						gemm(mk, &pools64, tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc, 2)
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								g, w := got[i*ldc+j], want[i*ldc+j]
								if tol := 2 * float64(k+3) * 0x1p-53 * mag[i*ldc+j]; !(math.Abs(g-w) <= tol) {
									t.Fatalf("%s: C[%d,%d] = %v, want %v (tol %g)", name, i, j, g, w, tol)
								}
							}
							// Padding between rows is never touched.
							for j := n; j < ldc && i < m-1; j++ {
								if got[i*ldc+j] != c[i*ldc+j] {
									t.Fatalf("%s: padding C[%d,%d] written", name, i, j)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestDgemmSplitIndependent: the result is the same bits on 1, 2, 5 and 16 goroutines
// (16: more than op(B)'s 6 or 12 panels, which the goroutines pack between them) and
// with either micro-kernel, on every transpose pair, with alpha and beta not 1 and sizes
// whose edge tiles differ between the kernels (90 = 11·8 + 2 = 5·16 + 10 columns).
func TestDgemmSplitIndependent(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA: Dgemm is gonum's")
	}
	if !hasAVX512 {
		t.Log("no AVX-512 here: only the 6×8 kernel is compared across goroutine counts")
	}
	r := rand.New(rand.NewPCG(3, 2))
	m, n, k := 500, 90, 700
	a, b, c := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, m*n)
	for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
		for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			lda, ldb := k, n
			if tA != blas.NoTrans {
				lda = m
			}
			if tB != blas.NoTrans {
				ldb = k
			}
			var first []float64
			for _, mk := range kernels() {
				for _, w := range []int{1, 2, 5, 16} {
					got := slices.Clone(c)
					gemm(mk, &pools64, tA, tB, m, n, k, -0.7, a, lda, b, ldb, 1.3, got, n, w)
					if first == nil {
						first = got
					} else if !slices.Equal(got, first) {
						t.Fatalf("%c%c, nr = %d, %d goroutines: result differs from nr = 8 on 1 goroutine", tA, tB, mk.nr, w)
					}
				}
			}
		}
	}
}

// TestDgemmSerial: below serialWork (and without AVX2/FMA) DgemmSerial declines and
// leaves C as it was; from serialWork on it agrees with the triple loop within
// TestDgemm's bound; from smallWork on it gives Dgemm's bits, on every transpose pair.
func TestDgemmSerial(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	for _, sh := range [][3]int{{15, 17, 16}, {16, 16, 16}, {17, 48, 12}, {68, 48, 144}, {48, 576, 17}, {64, 64, 64}, {70, 66, 65}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				name := fmt.Sprintf("%dx%dx%d/%c%c", m, n, k, tA, tB)
				ar, ac, br, bc := opDims(m, n, k, tA, tB)
				a, b, c := randSlice(r, ar*ac), randSlice(r, br*bc), randSlice(r, m*n)
				got := slices.Clone(c)
				ok := DgemmSerial(tA, tB, m, n, k, 0.7, a, ac, b, bc, 1.3, got, n)
				if want := hasAVX2FMA && m*n*k >= serialWork; ok != want {
					t.Fatalf("%s: DgemmSerial = %v, want %v", name, ok, want)
				}
				if !ok {
					if !slices.Equal(got, c) {
						t.Fatalf("%s: declined but wrote C", name)
					}
					continue
				}
				want, mag := naive(tA, tB, m, n, k, 0.7, a, ac, b, bc, 1.3, c, n)
				for i := range got {
					if tol := 2 * float64(k+3) * 0x1p-53 * mag[i]; !(math.Abs(got[i]-want[i]) <= tol) {
						t.Fatalf("%s: C[%d] = %v, want %v (tol %g)", name, i, got[i], want[i], tol)
					}
				}
				if m*n*k >= smallWork {
					par := slices.Clone(c)
					Implementation{}.Dgemm(tA, tB, m, n, k, 0.7, a, ac, b, bc, 1.3, par, n)
					if !slices.Equal(got, par) {
						t.Fatalf("%s: DgemmSerial's bits differ from Dgemm's", name)
					}
				}
			}
		}
	}
}

// TestDgemmSerialNoAllocs: the serial path allocates nothing, on a product with edge tiles
// (17 rows and 48 columns are not whole tiles): the ONNX backbone runs several such
// products per example. serial on a workspace of its own is checked always; DgemmSerial,
// which takes its workspace from a sync.Pool, not under the race detector (raceEnabled).
func TestDgemmSerialNoAllocs(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA: DgemmSerial declines")
	}
	r := rand.New(rand.NewPCG(7, 3))
	m, n, k := 17, 48, 144
	a, b, c := randSlice(r, m*k), randSlice(r, k*n), make([]float64, m*n)
	ws := &workspace[float64]{b: make([]float64, kc*nc)}
	ws.reserve(1)
	if got := testing.AllocsPerRun(50, func() {
		serial(best(), ws, false, m, n, k, 1, a, k, c, n, false, func(bp []float64, pc, kb, jc, nb, nr int) {
			packB(bp, b, n, false, pc, kb, jc, nb, nr, 0, 1)
		})
	}); got != 0 {
		t.Errorf("serial: %v allocations a call, want 0", got)
	}
	if raceEnabled {
		return
	}
	if got := testing.AllocsPerRun(50, func() {
		DgemmSerial(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 1, c, n)
	}); got != 0 {
		t.Errorf("DgemmSerial: %v allocations a call, want 0", got)
	}
}

// TestSgemm checks the float32 path with each micro-kernel against the float64 triple
// loop of the same float32 inputs, on every transpose pair, the shapes of TestDgemm and
// alpha/beta cases, within the float32 form of TestDgemm's bound,
// 2·(k+3)·2⁻²⁴·mag; and that its bits do not depend on the kernel or on the goroutines.
func TestSgemm(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA: Sgemm is gonum's")
	}
	r := rand.New(rand.NewPCG(7, 2))
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	f64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	shapes := [][3]int{{1, 1, 1}, {6, 16, 2}, {7, 33, 3}, {13, 17, 257}, {121, 32, 30}, {5, 2049, 9}, {130, 70, 600}}
	// SgemmOn's path on par.Teams (nil: par.For's goroutines) must give the same bits.
	teams := []*par.Team{nil, par.NewTeam(1), par.NewTeam(2), par.NewTeam(5)}
	defer func() {
		for _, team := range teams {
			team.Close()
		}
	}()
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, ab := range [][2]float32{{1, 0}, {0.7, 1}, {-1.3, 0.5}} {
					name := fmt.Sprintf("%dx%dx%d/%c%c/alpha=%v/beta=%v", m, n, k, tA, tB, ab[0], ab[1])
					ar, ac, br, bc := opDims(m, n, k, tA, tB)
					lda, ldb, ldc := ac+3, bc+1, n+2
					a, b := f32(randSlice(r, (ar-1)*lda+ac)), f32(randSlice(r, (br-1)*ldb+bc))
					c := f32(randSlice(r, (m-1)*ldc+n))
					want, mag := naive(tA, tB, m, n, k, float64(ab[0]), f64(a), lda, f64(b), ldb, float64(ab[1]), f64(c), ldc)
					var first []float32
					for _, mk := range kernelsS() {
						for _, w := range []int{1, 2, 5, 16} {
							got := slices.Clone(c)
							gemm(mk, &pools32, tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc, w)
							if first == nil {
								first = got
								for i := 0; i < m; i++ {
									for j := 0; j < n; j++ {
										g, w := float64(got[i*ldc+j]), want[i*ldc+j]
										if tol := 2 * float64(k+3) * 0x1p-24 * mag[i*ldc+j]; !(math.Abs(g-w) <= tol) {
											t.Fatalf("%s: C[%d,%d] = %v, want %v (tol %g)", name, i, j, g, w, tol)
										}
									}
									for j := n; j < ldc && i < m-1; j++ {
										if got[i*ldc+j] != c[i*ldc+j] {
											t.Fatalf("%s: padding C[%d,%d] written", name, i, j)
										}
									}
								}
							} else if !slices.Equal(got, first) {
								t.Fatalf("%s: nr = %d on %d goroutines differs from nr = 16 on 1", name, mk.nr, w)
							}
						}
						for _, team := range teams {
							got := slices.Clone(c)
							gemmOn(mk, &pools32, team, tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc)
							if !slices.Equal(got, first) {
								t.Fatalf("%s: nr = %d on a team of %d differs from nr = 16 on 1 goroutine", name, mk.nr, team.Size())
							}
						}
					}
				}
			}
		}
	}
}

// TestImplementation: through blas64 the type serves both paths (small products go to
// gonum) and satisfies blas.Float64.
func TestImplementation(t *testing.T) {
	var impl blas.Float64 = Implementation{}
	r := rand.New(rand.NewPCG(4, 2))
	for _, sz := range []int{5, 80} {
		a, b, c := randSlice(r, sz*sz), randSlice(r, sz*sz), make([]float64, sz*sz)
		impl.Dgemm(blas.NoTrans, blas.NoTrans, sz, sz, sz, 1, a, sz, b, sz, 0, c, sz)
		want, mag := naive(blas.NoTrans, blas.NoTrans, sz, sz, sz, 1, a, sz, b, sz, 0, make([]float64, sz*sz), sz)
		for i := range c {
			if tol := 2 * float64(sz+3) * 0x1p-53 * mag[i]; !(math.Abs(c[i]-want[i]) <= tol) {
				t.Fatalf("size %d: C[%d] = %v, want %v", sz, i, c[i], want[i])
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a short C did not panic")
		}
	}()
	impl.Dgemm(blas.NoTrans, blas.NoTrans, 80, 80, 80, 1, make([]float64, 6400), 80, make([]float64, 6400), 80, 0, make([]float64, 100), 80)
}

// BenchmarkDgemm times the fit's typical products with this Dgemm (the widest kernel the
// machine runs), with the 6×8 AVX2 kernel and with gonum's Dgemm in the same loop;
// x_gonum and x_avx2 are the ratios of the times.
func BenchmarkDgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 2))
	for _, sh := range []struct {
		m, n, k int
		tA, tB  blas.Transpose
	}{
		{1024, 256, 512, blas.NoTrans, blas.NoTrans},  // latents of a batch: [K_A; K_B]·Ã
		{512, 256, 1024, blas.Trans, blas.NoTrans},    // their gradient: Kᵀ·G
		{1024, 1024, 256, blas.NoTrans, blas.Trans},   // SimCLR's similarities U·Uᵀ
		{1024, 256, 1024, blas.NoTrans, blas.NoTrans}, // SimCLR's gradient W·U
		{1600, 512, 4096, blas.NoTrans, blas.Trans},   // kernel block: features · landmarksᵀ
	} {
		b.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.n, sh.k), func(b *testing.B) {
			if !hasAVX2FMA {
				b.Skip("no AVX2/FMA: Dgemm is gonum's")
			}
			ar, ac, br, bc := opDims(sh.m, sh.n, sh.k, sh.tA, sh.tB)
			a, bb, c := randSlice(r, ar*ac), randSlice(r, br*bc), make([]float64, sh.m*sh.n)
			var fast, ref Implementation
			var tf, t2, tg float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := nowSeconds()
				fast.Dgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n)
				t1 := nowSeconds()
				gemm(avx2, &pools64, sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n, runtime.GOMAXPROCS(0))
				t2s := nowSeconds()
				ref.Implementation.Dgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n)
				tg += nowSeconds() - t2s
				t2 += t2s - t1
				tf += t1 - t0
			}
			flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
			b.ReportMetric(flops/tf/1e9, "GFLOPS")
			b.ReportMetric(flops/t2/1e9, "avx2-GFLOPS")
			b.ReportMetric(flops/tg/1e9, "gonum-GFLOPS")
			b.ReportMetric(tf/tg, "x_gonum")
			b.ReportMetric(tf/t2, "x_avx2")
		})
	}
}

// BenchmarkDgemmSerial times DgemmSerial on the ONNX ViT's products (17 tokens of width
// 48, 4 heads side by side) against gonum's Dgemm in the same loop; x_gonum is the ratio
// of the times.
func BenchmarkDgemmSerial(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 2))
	for _, sh := range []struct {
		m, n, k int
		tA, tB  blas.Transpose
	}{
		{48, 576, 17, blas.Trans, blas.NoTrans},   // weight gradient of the QKV projection, 4 heads
		{68, 48, 144, blas.NoTrans, blas.Trans},   // its input gradient
		{17, 144, 48, blas.NoTrans, blas.NoTrans}, // the projection itself
		{17, 17, 12, blas.NoTrans, blas.Trans},    // one attention head's scores
		{17, 12, 17, blas.Trans, blas.NoTrans},    // a gradient of one attention head's values
		{17, 12, 17, blas.NoTrans, blas.NoTrans},  // the head's weighted values
		{8, 8, 12, blas.NoTrans, blas.Trans},      // below serialWork: gonum's
	} {
		b.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.n, sh.k), func(b *testing.B) {
			ar, ac, br, bc := opDims(sh.m, sh.n, sh.k, sh.tA, sh.tB)
			a, bb, c := randSlice(r, ar*ac), randSlice(r, br*bc), make([]float64, sh.m*sh.n)
			var ref Implementation
			tf, tg := timePair(b.N, func() {
				if !DgemmSerial(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n) {
					ref.Implementation.Dgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n)
				}
			}, func() {
				ref.Implementation.Dgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n)
			})
			flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
			b.ReportMetric(flops/tf/1e9, "GFLOPS")
			b.ReportMetric(flops/tg/1e9, "gonum-GFLOPS")
			b.ReportMetric(tf/tg, "x_gonum")
		})
	}
}

// BenchmarkSgemm times the fit's products in float32 against the same products in
// float64 (Dgemm) in the same loop; x_dgemm is the ratio of the times.
func BenchmarkSgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 2))
	for _, sh := range []struct {
		m, n, k int
		tA, tB  blas.Transpose
	}{
		{1024, 256, 512, blas.NoTrans, blas.NoTrans},
		{512, 256, 1024, blas.Trans, blas.NoTrans},
		{1024, 1024, 256, blas.NoTrans, blas.Trans},
		{1024, 256, 1024, blas.NoTrans, blas.NoTrans},
	} {
		b.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.n, sh.k), func(b *testing.B) {
			if !hasAVX2FMA {
				b.Skip("no AVX2/FMA: Sgemm is gonum's")
			}
			ar, ac, br, bc := opDims(sh.m, sh.n, sh.k, sh.tA, sh.tB)
			a, bb, c := randSlice(r, ar*ac), randSlice(r, br*bc), make([]float64, sh.m*sh.n)
			a32, b32, c32 := make([]float32, len(a)), make([]float32, len(bb)), make([]float32, len(c))
			for i, v := range a {
				a32[i] = float32(v)
			}
			for i, v := range bb {
				b32[i] = float32(v)
			}
			var impl Implementation
			b.ResetTimer()
			ts, td := timePair(b.N, func() {
				impl.Sgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a32, ac, b32, bc, 0, c32, sh.n)
			}, func() {
				impl.Dgemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, a, ac, bb, bc, 0, c, sh.n)
			})
			flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
			b.ReportMetric(flops/ts/1e9, "GFLOPS")
			b.ReportMetric(flops/td/1e9, "dgemm-GFLOPS")
			b.ReportMetric(ts/td, "x_dgemm")
		})
	}
}

// timePair runs f then g n times and returns the seconds each took in all, so that a
// benchmark compares two routines under the same load.
func timePair(n int, f, g func()) (tf, tg float64) {
	for range n {
		t0 := nowSeconds()
		f()
		t1 := nowSeconds()
		g()
		tg += nowSeconds() - t1
		tf += t1 - t0
	}
	return tf, tg
}

// TestDgemmSerialFunc: a B given by a packing function of its own (entries written by the
// documented panel layout from a formula, not by packB) gives the bits of DgemmSerial on
// the same B as a matrix, with A plain and transposed, over shapes with edge panels, two
// blocks of kc and two of nc.
func TestDgemmSerialFunc(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA: DgemmSerialFunc declines")
	}
	r := rand.New(rand.NewPCG(9, 4))
	bAt := func(p, j int) float64 { return math.Sin(float64(3*p+7*j)) + float64(p%5) }
	for _, sh := range [][3]int{{17, 53, 300}, {6, 16, 16}, {5, nc + 37, 40}} {
		m, n, k := sh[0], sh[1], sh[2]
		b := make([]float64, k*n)
		for p := range k {
			for j := range n {
				b[p*n+j] = bAt(p, j)
			}
		}
		pack := func(bp []float64, pc, kb, jc, nb, nr int) {
			for s := 0; s < nb; s += nr {
				for p := range kb {
					for j := range nr {
						v := 0.0
						if s+j < nb {
							v = bAt(pc+p, jc+s+j)
						}
						bp[(s/nr)*kb*nr+p*nr+j] = v
					}
				}
			}
		}
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			a, lda := randSlice(r, m*k), k
			if tA == blas.Trans {
				lda = m
			}
			c0 := randSlice(r, m*n)
			want, got := slices.Clone(c0), slices.Clone(c0)
			if !DgemmSerial(tA, blas.NoTrans, m, n, k, 0.5, a, lda, b, n, 1, want, n) {
				t.Fatalf("%v: DgemmSerial declined", sh)
			}
			if !DgemmSerialFunc(tA, m, n, k, 0.5, a, lda, pack, 1, got, n) {
				t.Fatalf("%v: DgemmSerialFunc declined", sh)
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%v %v: C[%d] = %v, DgemmSerial %v", sh, tA, i, got[i], want[i])
				}
			}
		}
	}
}

// TestStoreSameBits: a product with beta = 0 written by kernZ, C not read (storesFirst),
// gives the bits of the same product on a cleared C by kern, on edge tiles, two blocks of
// kc and a C full of NaNs; serially and on two goroutines.
func TestStoreSameBits(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: no kernZ")
	}
	r := rand.New(rand.NewPCG(5, 8))
	noZ := avx512
	noZ.kernZ = nil
	for _, sh := range [][3]int{{17, 53, 300}, {64, 144, 784}, {7, 16, 1}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b := randSlice(r, m*k), randSlice(r, k*n)
		a[0] = math.Copysign(0, -1) // a zero term's sign: fma(−0, α, +0) is +0 either way
		for _, w := range []int{1, 2} {
			got, want := make([]float64, m*n), make([]float64, m*n)
			for i := range got {
				got[i], want[i] = math.NaN(), math.NaN()
			}
			gemm(avx512, &pools64, blas.NoTrans, blas.NoTrans, m, n, k, 0.75, a, k, b, n, 0, got, n, w)
			gemm(noZ, &pools64, blas.NoTrans, blas.NoTrans, m, n, k, 0.75, a, k, b, n, 0, want, n, w)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%v, %d goroutines: C[%d] = %v stored, %v on a cleared C", sh, w, i, got[i], want[i])
				}
			}
		}
	}
}

// TestMoveRows checks MoveRows against a copy per row for every width it takes, float32
// and float64, with gaps in both strides, and that another width panics.
func TestMoveRows(t *testing.T) {
	check := func(t *testing.T, moved, want []float64) {
		t.Helper()
		for i := range want {
			if moved[i] != want[i] {
				t.Fatalf("entry %d: %v, want %v", i, moved[i], want[i])
			}
		}
	}
	for _, w := range []int{3, 6, 8, 16} {
		const n = 5
		ldd, lds := w+3, 2*w+1
		src := make([]float64, (n-1)*lds+w)
		for i := range src {
			src[i] = float64(i) + 0.5
		}
		dst, want := make([]float64, (n-1)*ldd+w), make([]float64, (n-1)*ldd+w)
		for i := range dst {
			dst[i], want[i] = -1, -1
		}
		for r := range n {
			copy(want[r*ldd:r*ldd+w], src[r*lds:r*lds+w])
		}
		MoveRows(dst, ldd, src, lds, n, w)
		check(t, dst, want)

		s32 := make([]float32, len(src)*2) // 2w float32s: the same bytes per row
		for i := range s32 {
			s32[i] = float32(i)
		}
		d32 := make([]float32, len(dst)*2)
		MoveRows(d32, 2*ldd, s32, 2*lds, n, 2*w)
		for r := range n {
			for j := range 2 * w {
				if d32[2*r*ldd+j] != s32[2*r*lds+j] {
					t.Fatalf("float32 width %d row %d entry %d", 2*w, r, j)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MoveRows of 40-byte rows did not panic")
		}
	}()
	MoveRows(make([]float64, 5), 5, make([]float64, 5), 5, 1, 5)
}
