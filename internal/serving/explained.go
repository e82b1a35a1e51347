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

// gramBy returns the m×m Gram matrix of the float32 rows lf (m×e), computing its lower
// triangle (with the diagonal blocks whole) and mirroring it: with c chunks of gramChunk
// rows it is the loop
//
//	for i0 := 0; i0 < m; i0 += gramChunk {
//		i1 := min(i0+gramChunk, m)
//		rowsTo(R, rows i0 … i1−1 of lf widened to float64 (exactly), i1)
//		for i := i0; i < i1; i++ {
//			G[i][0:i1] = R[i−i0]
//			G[j][i] = R[i−i0][j] for j < i0
//		}
//	}
//
// with the chunks run side by side on par.Workers goroutines, the last (longest) first,
// each goroutine with its own writer rowsTo from newRowsTo (whose scratch it owns), its
// own widening buffer (gramChunk·e float64s; one goroutine per chunk at most, so all of
// them hold at most twice the bytes of lf, rounded up to a chunk) and its own rows R.
// rowsTo(dst, fs, nz) writes the kernel rows of fs against the first nz rows of lf into
// dst (len(fs)·nz, query-major), each entry a function of its query and landmark row
// alone, its scratch fully overwritten; the chunks are a function of m, so every call
// gets the serial loop's arguments and G is bit for bit the serial loop's whatever
// GOMAXPROCS is. Chunk i0's writes, rows i0 … i1−1 up to column i1 and the same columns
// above row i0, are no other chunk's. The mirror is the full product's value as well:
// the writers' entries are symmetric bit for bit (each multiplies the same pairs of
// widened floats in the same lane order either way; TestGramExactCores,
// TestGramModelCores), and skipping the upper triangle saves nearly half the products.
func gramBy(lf []float32, m, e int, newRowsTo func() func(dst []float64, fs [][]float64, nz int)) []float64 {
	g := make([]float64, m*m)
	type worker struct {
		rowsTo   func(dst []float64, fs [][]float64, nz int)
		buf, out []float64
		fs       [][]float64
	}
	chunks, workers := par.Chunks(m, gramChunk), par.Workers(m, gramChunk)
	ws := make([]worker, workers)
	par.For(m, gramChunk, workers, func(w, lo, _ int) {
		wk := &ws[w] // only goroutine w touches it
		if wk.rowsTo == nil {
			wk.rowsTo, wk.buf = newRowsTo(), make([]float64, min(gramChunk, m)*e)
		}
		c := chunks - 1 - lo/gramChunk // the longest chunks first
		i0, i1 := c*gramChunk, min((c+1)*gramChunk, m)
		wk.fs = wk.fs[:0]
		for i := i0; i < i1; i++ {
			f := wk.buf[(i-i0)*e : (i-i0+1)*e]
			for j, v := range lf[i*e : (i+1)*e] {
				f[j] = float64(v)
			}
			wk.fs = append(wk.fs, f)
		}
		wk.out = grow(wk.out, (i1-i0)*i1)
		wk.rowsTo(wk.out, wk.fs, i1)
		for i := i0; i < i1; i++ {
			r := wk.out[(i-i0)*i1 : (i-i0+1)*i1]
			copy(g[i*m:i*m+i1], r)
			for j, v := range r[:i0] {
				g[j*m+i] = v
			}
		}
	})
	return g
}

// gramExact returns the Gram matrix of the m full exact rows lf (m×e): G_ij = ⟨φ_i, φ_j⟩
// through vec.Dots32BatchTo (each query row bit for bit a lone Dots32To's), on all cores.
func gramExact(lf []float32, m, e int) []float64 {
	return gramBy(lf, m, e, func() func(dst []float64, fs [][]float64, nz int) {
		var lanes []float64 // cleared by every call
		return func(dst []float64, fs [][]float64, nz int) {
			lanes = vec.Dots32BatchTo(dst, fs, lf, e, e, nz, lanes)
		}
	})
}

// gramFactored returns the Gram matrix of the m factored float32 rows lf (m×Dim):
// G_ij = entk.Factored.Kernel of rows i and j, through FactoredQuery.KernelRowsTo (one
// query per goroutine), on all cores. It is exactly symmetric (each dot product
// multiplies the same pairs in the same lane order either way).
func gramFactored(f *entk.Factored, lf []float32, m int) []float64 {
	return gramBy(lf, m, f.Dim(), func() func(dst []float64, fs [][]float64, nz int) {
		q := f.NewQuery()
		return func(dst []float64, fs [][]float64, nz int) { q.KernelRowsTo(dst, lf, fs, nz) }
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
