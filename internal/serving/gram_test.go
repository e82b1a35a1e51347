package serving

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// serialGramBy is gramBy as it was before it ran on all cores, kept as the reference
// for its bits: one goroutine, 64-row chunks one after another, each row widened into a
// fresh slice, one writer for every chunk, every entry of both triangles computed (the
// upper one is now mirrored from the lower).
func serialGramBy(lf []float32, m, e int, rowsTo func(dst []float64, fs [][]float64)) []float64 {
	g := make([]float64, m*m)
	const chunk = 64
	fs := make([][]float64, 0, chunk)
	for i0 := 0; i0 < m; i0 += chunk {
		i1 := min(i0+chunk, m)
		fs = fs[:0]
		for i := i0; i < i1; i++ {
			f := make([]float64, e)
			for j, v := range lf[i*e : (i+1)*e] {
				f[j] = float64(v)
			}
			fs = append(fs, f)
		}
		rowsTo(g[i0*m:i1*m], fs)
	}
	return g
}

// serialGram is the serial reference of ExactRows.gram: the previous gramExact and
// gramFactored through serialGramBy.
func serialGram(r *ExactRows, m int) []float64 {
	if r.fac != nil {
		q := r.fac.NewQuery()
		return serialGramBy(r.lf, m, r.dim, func(dst []float64, fs [][]float64) { q.KernelRowsTo(dst, r.lf, fs, m) })
	}
	var lanes []float64
	return serialGramBy(r.lf, m, r.dim, func(dst []float64, fs [][]float64) {
		lanes = vec.Dots32BatchTo(dst, fs, r.lf, r.dim, r.dim, m, lanes)
	})
}

// serialGramDense is gramDense's loop on one goroutine.
func serialGramDense(lf []float64, m, q int) []float64 {
	g := make([]float64, m*m)
	for i := range m {
		for j := 0; j <= i; j++ {
			v := vec.Dot(lf[i*q:(i+1)*q], lf[j*q:(j+1)*q])
			g[i*m+j], g[j*m+i] = v, v
		}
	}
	return g
}

// dotBound is the float64 rounding bound of a sum of n products whose absolute values
// sum to abs: γ_n·abs with γ_n = n·u/(1 − n·u), u = 2⁻⁵³ (Higham, Accuracy and Stability
// of Numerical Algorithms, eq. 3.5), doubled for the reference's own rounding.
func dotBound(n int, abs float64) float64 {
	u := math.Ldexp(1, -53)
	return 2 * float64(n) * u / (1 - float64(n)*u) * abs
}

// TestGramExactCores: gramExact on random float32 rows gives the serial loop's bits at
// GOMAXPROCS 1, 2 and 3 (though its upper triangle is mirrored from products against
// fewer rows), and every entry is the plain float64 dot product of the two widened rows
// within dotBound. The shapes straddle the edges: 131 rows are two full chunks of 64
// and a short one whose length is not a multiple of 4 (the kernel's tail rows); 517
// columns are a full column chunk of vec.Dots32BatchChunk, a short one and a tail of
// one.
func TestGramExactCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct{ m, e int }{{1, 3}, {5, 7}, {64, 9}, {131, 517}} {
		lf := make([]float32, c.m*c.e)
		for i := range lf {
			lf[i] = float32(r.NormFloat64())
		}
		var lanes []float64
		want := serialGramBy(lf, c.m, c.e, func(dst []float64, fs [][]float64) {
			lanes = vec.Dots32BatchTo(dst, fs, lf, c.e, c.e, c.m, lanes)
		})
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			if got := gramExact(lf, c.m, c.e); !vec.SameBits(got, want) {
				t.Errorf("m %d e %d GOMAXPROCS %d: the Gram's bits differ from the serial loop's", c.m, c.e, procs)
			}
		}
		for i := range c.m {
			for j := range c.m {
				var s, abs float64
				for k := range c.e {
					p := float64(lf[i*c.e+k]) * float64(lf[j*c.e+k])
					s, abs = s+p, abs+math.Abs(p)
				}
				if got := want[i*c.m+j]; math.Abs(got-s) > dotBound(c.e, abs) {
					t.Fatalf("m %d e %d: G[%d][%d] = %v, plain dot %v (bound %v)", c.m, c.e, i, j, got, s, dotBound(c.e, abs))
				}
			}
		}
	}
}

// TestGramModelCores: the serving form's Gram matrix, with full exact rows, factored
// rows and a sketched evaluation draw, has the same bits at GOMAXPROCS 1, 2 and 3 as
// the serial reference computes from the same rows, for 130 landmarks (three row
// chunks, the last of two rows). The factored Gram is checked against
// entk.Factored.Kernel of the widened rows as well (checkFactoredGram states the
// tolerance).
func TestGramModelCores(t *testing.T) {
	if testing.Short() {
		t.Skip("nine serving models of 130 landmarks")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const m = 130
	for _, c := range []struct {
		name  string
		bytes int64
	}{{"full", 1 << 30}, {"factored", 64 << 10}, {"sketched", 0}} {
		var first []float64
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			s, _ := testModel(t, m, c.bytes)
			var want []float64
			switch {
			case s.Exact != nil:
				if got := s.Exact.Factored(); got != (c.name == "factored") {
					t.Fatalf("%s: factored rows %v", c.name, got)
				}
				want = serialGram(s.Exact, m)
			case c.name == "sketched":
				want = serialGramDense(s.Draw.lf, m, s.Draw.sketch.Dim())
			default:
				t.Fatalf("%s: no exact rows", c.name)
			}
			if !vec.SameBits(s.gram, want) {
				t.Errorf("%s GOMAXPROCS %d: the Gram's bits differ from the serial reference's", c.name, procs)
			}
			if first == nil {
				first = s.gram
			} else if !vec.SameBits(s.gram, first) {
				t.Errorf("%s GOMAXPROCS %d: the Gram's bits differ from GOMAXPROCS 1's", c.name, procs)
			}
			if c.name == "factored" && procs == 1 {
				checkFactoredGram(t, s.Exact.fac, s.Exact.lf, s.gram, m)
			}
		}
	}
}

// checkFactoredGram compares g with entk.Factored.Kernel of the widened rows of lf.
func checkFactoredGram(t *testing.T, f *entk.Factored, lf []float32, g []float64, m int) {
	t.Helper()
	e := f.Dim()
	rows := make([][]float64, m)
	for i := range rows {
		rows[i] = make([]float64, e)
		for k, v := range lf[i*e : (i+1)*e] {
			rows[i][k] = float64(v)
		}
	}
	for i := range m {
		for j := range m {
			want := f.Kernel(rows[i], rows[j])
			// An entry is 1 + ⟨x_0, y_0⟩ + Σ_s (⟨x_a, y_a⟩ + 1)·⟨x_g, y_g⟩ over the
			// segments; with abs = Σ_k |x_k y_k| each dot's error is at most
			// γ_e·(its part of abs) and each factor at most 1 + abs, so the entry's
			// error is under γ_e·abs·(1 + abs) plus the sums' own rounding: twice
			// dotBound(e, (1 + abs)²) covers both evaluations.
			var abs float64
			for k := range e {
				abs += math.Abs(rows[i][k] * rows[j][k])
			}
			if tol := 2 * dotBound(e, (1+abs)*(1+abs)); math.Abs(g[i*m+j]-want) > tol {
				t.Fatalf("factored G[%d][%d] = %v, Kernel %v (tolerance %v)", i, j, g[i*m+j], want, tol)
			}
		}
	}
}
