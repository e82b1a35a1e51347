package entk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// portable switches the assembly kernels off until the returned function runs (entk's
// tests do not run in parallel, so flipping the package variable is safe here).
func portable() func() {
	old := hasAVX2FMA
	hasAVX2FMA = false
	return func() { hasAVX2FMA = old }
}

// TestConvAccRows checks convAccRowsTo against the plain loop of its doc comment, on
// channel counts and patch lengths straddling the kernel's 16-channel and 2-row blocks and
// on row ranges that start and end odd. Tolerance: the kernel fuses each multiply-add, so
// each of the K steps rounds once where the loop rounds twice; the two sums differ by at
// most about 2K·u·Σ|terms| (u = 2⁻⁵³), bounded here by 4K·u·Σ|terms|.
func TestConvAccRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for _, cout := range []int{1, 3, 15, 16, 17, 31, 32, 33, 48} {
		for _, K := range []int{1, 9, 16, 27, 144} {
			for _, rows := range [][2]int{{0, 1}, {0, 2}, {1, 8}, {3, 10}, {0, 13}} {
				name := fmt.Sprintf("cout=%d/K=%d/rows=%v", cout, K, rows)
				p1 := rows[1]
				cols := randVec(r, p1*K)
				wT := randVec(r, K*cout)
				z0 := randVec(r, p1*cout)
				got := slices.Clone(z0)
				convAccRowsTo(got, cols, wT, K, cout, rows[0], rows[1])
				for p := 0; p < p1; p++ {
					for c := 0; c < cout; c++ {
						want, mag := z0[p*cout+c], math.Abs(z0[p*cout+c])
						if p >= rows[0] {
							for k := 0; k < K; k++ {
								want += cols[p*K+k] * wT[k*cout+c]
								mag += math.Abs(cols[p*K+k] * wT[k*cout+c])
							}
						}
						g := got[p*cout+c]
						if p < rows[0] && g != z0[p*cout+c] {
							t.Fatalf("%s: row %d outside the range changed", name, p)
						}
						if tol := 4 * float64(K) * 0x1p-53 * mag; math.Abs(g-want) > tol {
							t.Fatalf("%s: z[%d,%d] = %v, want %v (tol %g)", name, p, c, g, want, tol)
						}
					}
				}
			}
		}
	}
}

// TestConvAccRowsSplit: rows computed in two calls equal rows computed in one, bit for
// bit (Query splits a forward by rows).
func TestConvAccRowsSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 9))
	K, cout, np := 144, 32, 15
	cols, wT := randVec(r, np*K), randVec(r, K*cout)
	z0 := randVec(r, np*cout)
	a, b := slices.Clone(z0), slices.Clone(z0)
	convAccRowsTo(a, cols, wT, K, cout, 0, np)
	convAccRowsTo(b, cols, wT, K, cout, 0, 7)
	convAccRowsTo(b, cols, wT, K, cout, 7, np)
	if !slices.Equal(a, b) {
		t.Fatal("split rows differ from one call")
	}
}

// TestAxpyGer checks axpyTo and gerTo against the plain loops, lengths around the
// kernel's 16- and 4-blocks; one fused multiply-add rounds once, so |got − want| ≤
// u·(|dst| + |a·x|) per entry (u = 2⁻⁵³), tested with a factor 2.
func TestAxpyGer(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for _, n := range []int{0, 1, 3, 4, 5, 15, 16, 17, 21, 144, 147} {
		x, d0 := randVec(r, n), randVec(r, n+3)
		a := r.NormFloat64()
		got := slices.Clone(d0)
		axpyTo(got, a, x)
		for i := range got {
			want := d0[i]
			if i < n {
				want += a * x[i]
			}
			tol := 0.0
			if i < n {
				tol = 2 * 0x1p-53 * (math.Abs(d0[i]) + math.Abs(a*x[i]))
			}
			if math.Abs(got[i]-want) > tol {
				t.Fatalf("axpy n=%d: dst[%d] = %v, want %v", n, i, got[i], want)
			}
		}
		m, ld, inc := 5, n+2, 3
		xs := randVec(r, (m-1)*inc+1)
		g0 := randVec(r, (m-1)*ld+n)
		g := slices.Clone(g0)
		gerTo(g, ld, xs, inc, m, x)
		for i := 0; i < m; i++ {
			for k := 0; k < n; k++ {
				want := g0[i*ld+k] + xs[i*inc]*x[k]
				tol := 2 * 0x1p-53 * (math.Abs(g0[i*ld+k]) + math.Abs(xs[i*inc]*x[k]))
				if got := g[i*ld+k]; math.Abs(got-want) > tol {
					t.Fatalf("ger n=%d: (%d,%d) = %v, want %v", n, i, k, got, want)
				}
			}
		}
	}
}

// TestSIMDExact: the FWHT, scaling and sign kernels give the portable loops' results bit
// for bit (the same additions, subtractions and products in vector lanes), for every
// length from 1 to 2¹⁶, including the SRHT's pruned plan and full transform.
func TestSIMDExact(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA on this machine: only the portable loops run")
	}
	t.Run("widest", testSIMDExact)
	if hasAVX512 { // and the AVX2 passes, which the AVX-512 ones replace on this machine
		hasAVX512 = false
		defer func() { hasAVX512 = true }()
		t.Run("avx2", testSIMDExact)
	}
}

func testSIMDExact(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 9))
	for lg := 0; lg <= 16; lg++ {
		v := randVec(r, 1<<lg)
		a, b := slices.Clone(v), slices.Clone(v)
		FWHT(a)
		restore := portable()
		FWHT(b)
		restore()
		if !slices.Equal(a, b) {
			t.Fatalf("FWHT n=2^%d differs from the portable loop", lg)
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 100} {
		x, y := randVec(r, n), randVec(r, n)
		got, want := make([]float64, n), make([]float64, n)
		mulTo(got, x, y)
		for i := range want {
			want[i] = x[i] * y[i]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("mulTo n=%d differs", n)
		}
		got = slices.Clone(x)
		scaleTo(got, 0.3)
		for i := range want {
			want[i] = x[i] * 0.3
		}
		if !slices.Equal(got, want) {
			t.Fatalf("scaleTo n=%d differs", n)
		}
	}
	for _, p := range []int{7, 300, 2049, 20490, 272186} { // the last in blocks of 8,192 (above fwhtBlock)
		for _, s := range []int{0, 5, 64} {
			tr, err := NewSRHT(p, min(s, PaddedLen(p)), rand.New(rand.NewPCG(uint64(p), uint64(s))))
			if err != nil {
				t.Fatal(err)
			}
			pl := newSRHTPlan(tr)
			v := randVec(r, p)
			work := make([]float64, tr.WorkLen())
			a, b := make([]float64, tr.OutLen()), make([]float64, tr.OutLen())
			c, d := make([]float64, tr.OutLen()), make([]float64, tr.OutLen())
			tr.ApplyTo(a, v, work)
			pl.applyScaledTo(c, v, work, 1)
			restore := portable()
			tr.ApplyTo(b, v, work)
			pl.applyScaledTo(d, v, work, 1)
			restore()
			if !slices.Equal(a, b) || !slices.Equal(c, d) {
				t.Fatalf("SRHT p=%d s=%d differs from the portable loops", p, s)
			}
		}
	}
}

// TestFeaturesPortable: ψ with the assembly kernels agrees with ψ from the portable
// loops for the MNIST convnet, to 1e-12 relative in norm (the fused multiply-adds change
// roundings only; a pooling decision flipped by them would show as an O(1) difference).
func TestFeaturesPortable(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA on this machine: only the portable loops run")
	}
	b, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSketch(b, 4, 256, 1, "simd")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 9))
	for i := 0; i < 3; i++ {
		x := randVec(r, b.InDim())
		got, want := make([]float64, sk.Dim()), make([]float64, sk.Dim())
		ws := sk.NewWorkspace()
		sk.FeaturesTo(got, x, ws)
		restore := portable()
		sk.FeaturesTo(want, x, sk.NewWorkspace())
		restore()
		var d, n float64
		for j := range got {
			d += (got[j] - want[j]) * (got[j] - want[j])
			n += want[j] * want[j]
		}
		if math.Sqrt(d) > 1e-12*math.Sqrt(n) {
			t.Fatalf("example %d: ‖ψ_avx − ψ‖ = %g, ‖ψ‖ = %g", i, math.Sqrt(d), math.Sqrt(n))
		}
	}
}

// TestAccGather: accGatherTo equals the sequence of gerTo calls it stands for, bit for
// bit, on row counts around the kernel's 4-row blocks, patch lengths around its
// 12-column blocks, and repeated rows and offsets.
func TestAccGather(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, m := range []int{1, 3, 4, 5, 8, 9} {
		for _, K := range []int{1, 9, 12, 13, 24, 27, 144} {
			for _, n := range []int{0, 1, 2, 7} {
				inc, ld, nrows := 5, K+3, 6
				src := randVec(r, 40+(m-1)*inc)
				mat := randVec(r, nrows*K)
				offs, rows := make([]int32, n), make([]int32, n)
				for j := range offs {
					offs[j], rows[j] = int32(r.IntN(40)), int32(r.IntN(nrows))
				}
				d0 := randVec(r, (m-1)*ld+K+2)
				got, want := slices.Clone(d0), slices.Clone(d0)
				accGatherTo(got, ld, m, src, inc, offs, rows, mat, K)
				for j, a := range offs {
					gerTo(want, ld, src[a:], inc, m, mat[int(rows[j])*K:(int(rows[j])+1)*K])
				}
				if !slices.Equal(got, want) {
					t.Fatalf("m=%d K=%d n=%d: accGatherTo differs from gerTo per term", m, K, n)
				}
			}
		}
	}
}
