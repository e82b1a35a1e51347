package serving

import (
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// The query's residual fraction needs the Gram matrix of the
// landmarks' answer rows (exact rows, full or factored, or the evaluation draw's
// features), computed once
// per model and shared by its serving values (Model.gram), and the Cholesky factor of
// its active block (Model.chol), rebuilt when the mask changes. The residual of a query
// t is
//
//	r_t = k(x_t, x_t) − k_tZ K_ZZ⁻¹ k_Zt   over the active landmarks Z,
//
// the kernel mass of x_t that the landmarks' span does not hold, and the fraction is
// r_t / k(x_t, x_t), clamped to [0, 1]. A tiny jitter (explainedJitter × mean diagonal,
// raised by 100× until the factorization succeeds) keeps near-collinear landmarks from
// failing it; it only shrinks the explained part, so the fraction errs toward more
// residual, never less.

// explainedJitter is the relative jitter of the Gram diagonal (times its mean).
const explainedJitter = 1e-10

// gramChunk is gramBy's row chunk: the chunk's widened rows (4 KiB each per column
// chunk of vec.Dots32BatchChunk, 256 KiB for 64) stay in L2 while the rows of lf stream
// past once per chunk.
const gramChunk = 64

// gramBy returns the m×m Gram matrix of the float32 rows lf (m×e). It is the loop
//
//	for i0 := 0; i0 < m; i0 += gramChunk {
//		i1 := min(i0+gramChunk, m)
//		rowsTo(G[i0·m : i1·m], rows i0 … i1−1 of lf widened to float64 (exactly))
//	}
//
// with the chunks run side by side on par.Workers goroutines, each with its own writer
// rowsTo from newRowsTo (whose scratch it owns) and its own widening buffer (gramChunk·e
// float64s; one goroutine per chunk at most, so all of them hold at most twice the bytes
// of lf, rounded up to a chunk). rowsTo(dst, fs) writes
// the kernel rows of fs against every row of lf into dst (len(fs)·m) as a function of fs
// alone, its scratch fully overwritten; the chunks are a function of m, so every call
// gets the serial loop's arguments, and G is bit for bit the serial loop's whatever
// GOMAXPROCS is.
func gramBy(lf []float32, m, e int, newRowsTo func() func(dst []float64, fs [][]float64)) []float64 {
	g := make([]float64, m*m)
	type worker struct {
		rowsTo func(dst []float64, fs [][]float64)
		buf    []float64
		fs     [][]float64
	}
	workers := par.Workers(m, gramChunk)
	ws := make([]worker, workers)
	par.For(m, gramChunk, workers, func(w, i0, i1 int) {
		wk := &ws[w] // only goroutine w touches it
		if wk.rowsTo == nil {
			wk.rowsTo, wk.buf = newRowsTo(), make([]float64, min(gramChunk, m)*e)
		}
		wk.fs = wk.fs[:0]
		for i := i0; i < i1; i++ {
			f := wk.buf[(i-i0)*e : (i-i0+1)*e]
			for j, v := range lf[i*e : (i+1)*e] {
				f[j] = float64(v)
			}
			wk.fs = append(wk.fs, f)
		}
		wk.rowsTo(g[i0*m:i1*m], wk.fs)
	})
	return g
}

// gramExact returns the Gram matrix of the m full exact rows lf (m×e): G_ij = ⟨φ_i, φ_j⟩
// through vec.Dots32BatchTo (each query row bit for bit a lone Dots32To's), on all cores.
func gramExact(lf []float32, m, e int) []float64 {
	return gramBy(lf, m, e, func() func(dst []float64, fs [][]float64) {
		var lanes []float64 // cleared by every call
		return func(dst []float64, fs [][]float64) {
			lanes = vec.Dots32BatchTo(dst, fs, lf, e, e, m, lanes)
		}
	})
}

// gramFactored returns the Gram matrix of the m factored float32 rows lf (m×Dim):
// G_ij = entk.Factored.Kernel of rows i and j, through FactoredQuery.KernelRowsTo (one
// query per goroutine), on all cores. It is exactly symmetric (each dot product
// multiplies the same pairs in the same lane order either way).
func gramFactored(f *entk.Factored, lf []float32, m int) []float64 {
	return gramBy(lf, m, f.Dim(), func() func(dst []float64, fs [][]float64) {
		q := f.NewQuery()
		return func(dst []float64, fs [][]float64) { q.KernelRowsTo(dst, lf, fs, m) }
	})
}

// gramDenseChunk is gramDense's row chunk: row i costs i+1 dot products, so chunks far
// smaller than m/GOMAXPROCS keep the last, longest ones from running alone.
const gramDenseChunk = 8

// gramDense returns the Gram matrix of the m float64 rows lf (m×q): the loop
//
//	for i := range m { for j := 0; j <= i; j++ { G_ij = G_ji = vec.Dot(row i, row j) } }
//
// with chunks of rows i side by side on all cores. Row i's pass is the only writer of
// G_ij and G_ji for j ≤ i, so G is bit for bit the serial loop's.
func gramDense(lf []float64, m, q int) []float64 {
	g := make([]float64, m*m)
	par.For(m, gramDenseChunk, par.Workers(m, gramDenseChunk), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := 0; j <= i; j++ {
				v := vec.Dot(lf[i*q:(i+1)*q], lf[j*q:(j+1)*q])
				g[i*m+j], g[j*m+i] = v, v
			}
		}
	})
	return g
}

// factorActive returns the Cholesky factor of the Gram block (gram is m×m) of the
// active landmarks, or nil when even the largest jitter fails (no fraction is then
// given).
func factorActive(gram []float64, m int, active []int) *mat.Cholesky {
	n := len(active)
	if n == 0 || gram == nil {
		return nil
	}
	var mean float64
	for _, l := range active {
		mean += gram[l*m+l]
	}
	mean /= float64(n)
	a := mat.NewSymDense(n, nil)
	for jit := explainedJitter; jit <= 1e-4; jit *= 100 {
		for i, li := range active {
			for j := i; j < n; j++ {
				a.SetSym(i, j, gram[li*m+active[j]])
			}
			a.SetSym(i, i, gram[li*m+li]+jit*mean)
		}
		var c mat.Cholesky
		if c.Factorize(a) {
			return &c
		}
	}
	return nil
}

// fractionTo returns r_t / ktt for the kernel row over the active landmarks (sol is
// the caller's scratch of the same length: the factor is only read, so one factor
// serves every goroutine), and false when no factor exists or ktt is not positive.
// The explained part rowᵀ G⁻¹ row is ‖y‖² for Uᵀ y = row (G = UᵀU): one triangular
// solve, by columns so that each step is an axpy over a contiguous row of U. gonum's
// SolveVecTo does two solves through its general Dtrsm, which took 1.7 ms of a
// query's 7 ms of CPU at M = 512 (profiled); this takes about a tenth of that.
func fractionTo(sol *mat.VecDense, chol *mat.Cholesky, row []float64, ktt float64) (float64, bool) {
	if chol == nil || !(ktt > 0) {
		return 0, false
	}
	td, ok := chol.RawU().(*mat.TriDense)
	n := len(row)
	if !ok || sol.Len() != n || sol.RawVector().Inc != 1 {
		return 0, false
	}
	u, y := td.RawTriangular(), sol.RawVector().Data[:n]
	copy(y, row)
	expl := 0.0
	for j := range n {
		d := u.Data[j*u.Stride+j]
		if !(d > 0) {
			return 0, false
		}
		y[j] /= d
		expl += y[j] * y[j]
		if y[j] != 0 && j+1 < n {
			floats.AddScaled(y[j+1:n], -y[j], u.Data[j*u.Stride+j+1:j*u.Stride+n])
		}
	}
	f := (ktt - expl) / ktt
	if math.IsNaN(f) {
		return 0, false
	}
	return min(max(f, 0), 1), true
}

// gram returns the Gram matrix of the m exact rows (full or factored), computed once and
// shared by every serving value and every redraw of the model (ExactRows is shared
// likewise).
func (r *ExactRows) gram(m int) []float64 {
	r.gramOnce.Do(func() {
		if r.fac != nil {
			r.g = gramFactored(r.fac, r.lf, m)
			return
		}
		r.g = gramExact(r.lf, m, r.dim)
	})
	return r.g
}
