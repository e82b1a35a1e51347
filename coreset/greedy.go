package coreset

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/cairnhq/cairn/internal/rng"
	"github.com/cairnhq/cairn/internal/vec"
)

// DefaultTol is the relative pivot tolerance of greedy pivoted Cholesky: a residual
// δ_j ≤ Tol·max_j K_jj counts as zero (Prop. greedy iii). The rounding noise left in a
// residual after t exact-arithmetic-zero updates is about t·ε·K_jj ≈ 1e3·2.2e-16 ≈ 2e-13
// of the largest diagonal for t ≤ 1000 pivots, so 1e-10 sits ~500× above the noise and far
// below any residual that carries real kernel mass.
const DefaultTol = 1e-10

// GreedyOptions tunes Greedy.
type GreedyOptions struct {
	// Tol is the relative pivot tolerance; 0 means DefaultTol.
	Tol float64
	// TopUpKeys, when non-nil (length n), fills the budget after the residual reaches zero
	// by the top-up rule: the unselected rows with the smallest key, ties by row index.
	// With keys from TopUpKey this is a seeded uniform sample without replacement that
	// depends only on the ids, never on arrival order. Nil means stop at the numerical
	// rank.
	TopUpKeys []uint64
	// KeepGram asks for Gram = Σ_j y_j y_jᵀ (k×k) where y_j ∈ R^k are the coordinates of
	// row j in the orthonormal pivot basis (row j of the n×k Cholesky factor). It costs a
	// transient n×k buffer; the Pool needs it for its landmark-deletion bound.
	KeepGram bool
}

// GreedyResult is the outcome of Greedy. Slices are owned by the caller.
type GreedyResult struct {
	// Pivots are row indices in selection order: the Greedy positive-residual pivots, then
	// the top-up rows.
	Pivots []int
	// Greedy is the number of positive-residual pivots (≤ rank K, Prop. greedy iii).
	Greedy int
	// PivotValues[t] is δ^{(t)} at the t-th greedy pivot (length Greedy).
	PivotValues []float64
	// ResidualTrace[t] is tr R after the first t+1 landmarks (length len(Pivots)). Top-up
	// landmarks lie in the greedy span to within Tol and are kept out of the factor, so the
	// curve is flat over them.
	ResidualTrace []float64
	// Trace is tr K = Σ_j ||g_j||².
	Trace float64
	// Residual is the final residual diagonal δ_j (length n, clamped at 0; 0 on pivots).
	Residual []float64
	// Factor is the Greedy×Greedy lower-triangular Cholesky factor of K_ZZ in pivot order.
	Factor []float64
	// Gram is Σ_j y_j y_jᵀ (Greedy×Greedy), only with KeepGram.
	Gram []float64
	// Threshold is Tol·max_j K_jj, the residual below which a row is numerically spanned.
	Threshold float64
}

// TopUpKey is the top-up ordering key of a point id under seed: the derived seed of the
// stream "coreset/topup/<id>". Rows of a matrix use their decimal row index as id.
func TopUpKey(seed uint64, id string) uint64 { return rng.Seed(seed, "coreset/topup/"+id) }

// TopUpKeys returns TopUpKey(seed, strconv.Itoa(i)) for i < n.
func TopUpKeys(seed uint64, n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = TopUpKey(seed, strconv.Itoa(i))
	}
	return k
}

// Greedy runs greedy pivoted Cholesky (paper Prop. greedy) on the Gram matrix K = G Gᵀ of
// the rows of g (n×q, row-major), selecting up to m pivots: pivot t+1 is
// argmax_j δ_j^{(t)}, ties broken by the lower row index, stopping early when the largest
// residual is at most Tol·max_j K_jj. g is not modified.
//
// It works in feature space (Gram–Schmidt form) instead of on K: with an orthonormal
// basis b_1..b_t of the selected rows' span,
//
//	b_t  = (g_p − Σ_{i<t} (b_i·g_p) b_i) / ||·||   (classical Gram–Schmidt, applied twice)
//	L_jt = b_t·g_j,   δ_j −= L_jt²
//
// which equals the Schur-complement recursion on K in exact arithmetic, costs
// O(n q + t q) per step and needs O(m q + n) memory (no n×m factor) unless KeepGram.
func Greedy(g []float64, n, q, m int, opt GreedyOptions) (*GreedyResult, error) {
	return GreedyContext(context.Background(), g, n, q, m, opt)
}

// GreedyContext is Greedy that gives up with ctx.Err() when ctx ends: it checks ctx
// before every pivot step (O(n q) apart), so a daemon shutting down does not wait for
// an O(n q m) selection.
func GreedyContext(ctx context.Context, g []float64, n, q, m int, opt GreedyOptions) (*GreedyResult, error) {
	if n < 0 || q < 1 || len(g) != n*q {
		panic(fmt.Sprintf("coreset: Greedy: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	if opt.TopUpKeys != nil && len(opt.TopUpKeys) != n {
		panic("coreset: Greedy: len(TopUpKeys) != n")
	}
	if m < 0 {
		return nil, fmt.Errorf("%w: m=%d", ErrBudget, m)
	}
	tol := opt.Tol
	if tol == 0 {
		tol = DefaultTol
	}
	m = min(m, n)
	res := &GreedyResult{Residual: make([]float64, n)}
	dmax, err := initResidual(res, g, n, q)
	if err != nil {
		return nil, err
	}
	res.Threshold = tol * dmax
	st := &greedyState{g: g, n: n, q: q, res: res, keepGram: opt.KeepGram,
		selected: make([]bool, n), basis: make([]float64, 0, m*q), coef: make([]float64, m),
		v: make([]float64, q), lrow: make([]float64, n)}
	if opt.KeepGram {
		st.cols = make([]float64, 0, n*m)
	}
	for t := 0; t < m; t++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !st.step(t) {
			break
		}
	}
	k := len(res.Pivots)
	res.Greedy = k
	st.factor()
	if opt.KeepGram {
		st.gram()
	}
	if opt.TopUpKeys != nil && k < m {
		st.topUp(opt.TopUpKeys, m)
	}
	return res, nil
}

// initResidual sets res.Residual to the diagonal δ_j = ||g_j||² and res.Trace to its
// sum, and returns max δ_j; a non-finite δ_j is ErrNotFinite.
func initResidual(res *GreedyResult, g []float64, n, q int) (dmax float64, err error) {
	var trace float64
	for j := 0; j < n; j++ {
		d := dot(g[j*q:(j+1)*q], g[j*q:(j+1)*q])
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return 0, fmt.Errorf("%w: row %d has squared norm %v", ErrNotFinite, j, d)
		}
		res.Residual[j] = d
		trace += d
		dmax = math.Max(dmax, d)
	}
	res.Trace = trace
	return dmax, nil
}

// greedyState is GreedyContext's working memory, allocated once: the residual δ (in
// res.Residual), the selected rows, the orthonormal basis of their span (row-major,
// t×q), scratch for Gram–Schmidt (coef, v) and for one step's products (lrow), and with
// KeepGram the n×t column-major L (cols).
type greedyState struct {
	g        []float64
	n, q     int
	res      *GreedyResult
	keepGram bool
	selected []bool
	basis    []float64
	coef, v  []float64
	lrow     []float64
	cols     []float64
}

// step runs pivot step t: the unselected row of largest δ above the threshold becomes
// b_t (Gram–Schmidt against b_1..b_{t-1}, twice), and every δ_j drops by (b_t·g_j)².
// It reports false when no row is left to select (all δ_j at most the threshold, or
// the pivot lies in the span already).
func (st *greedyState) step(t int) bool {
	g, n, q, res, delta := st.g, st.n, st.q, st.res, st.res.Residual
	p, best := -1, res.Threshold
	for j := 0; j < n; j++ {
		if !st.selected[j] && delta[j] > best {
			p, best = j, delta[j]
		}
	}
	if p < 0 {
		return false
	}
	v := st.v
	copy(v, g[p*q:(p+1)*q])
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < t; i++ {
			b := st.basis[i*q : (i+1)*q]
			st.coef[i] = dot(b, v)
		}
		for i := 0; i < t; i++ {
			axpy(v, -st.coef[i], st.basis[i*q:(i+1)*q])
		}
	}
	nv := math.Sqrt(dot(v, v))
	if !(nv > 0) {
		return false
	}
	for k := range v {
		v[k] /= nv
	}
	st.basis = append(st.basis, v...)
	b := st.basis[t*q : (t+1)*q]
	st.selected[p] = true
	res.Pivots = append(res.Pivots, p)
	res.PivotValues = append(res.PivotValues, best)
	if st.keepGram {
		st.cols = st.cols[:(t+1)*n]
	}
	res.ResidualTrace = append(res.ResidualTrace, st.update(t, p, b))
	return true
}

// update lowers δ_j by (b·g_j)² for every unselected row (clamped at 0), zeroes the
// pivot's, records the column L_{·t} with KeepGram, and returns the new residual trace,
// summed afresh over δ (O(n), the update's order) so it does not accumulate
// subtraction error.
func (st *greedyState) update(t, p int, b []float64) float64 {
	n, q, delta, lrow := st.n, st.q, st.res.Residual, st.lrow
	var tr float64
	// lrow[j] = dot(b, g_j) (vec.DotsTo gives dot's bits), the selected rows' too.
	vec.DotsTo(lrow, 1, b, q, 1, st.g, q, n, q)
	for j := 0; j < n; j++ {
		if st.selected[j] {
			if j == p {
				delta[j] = 0
			}
			if st.keepGram {
				st.cols[t*n+j] = lrow[j]
			}
			continue
		}
		l := lrow[j]
		if st.keepGram {
			st.cols[t*n+j] = l
		}
		d := delta[j] - l*l
		if d < 0 {
			d = 0
		}
		delta[j] = d
		tr += d
	}
	return tr
}

// factor sets res.Factor: the pivots' coordinates in the basis, L_st = b_t·g_{p_s}.
func (st *greedyState) factor() {
	res, q := st.res, st.q
	k := len(res.Pivots)
	res.Factor = make([]float64, k*k)
	for s, p := range res.Pivots {
		for t := 0; t <= s; t++ {
			res.Factor[s*k+t] = dot(st.basis[t*q:(t+1)*q], st.g[p*q:(p+1)*q])
		}
	}
}

// gram sets res.Gram = LᵀL from the kept columns (KeepGram).
func (st *greedyState) gram() {
	res, n := st.res, st.n
	k := len(res.Pivots)
	res.Gram = make([]float64, k*k)
	for a := 0; a < k; a++ {
		for c := 0; c <= a; c++ {
			s := dot(st.cols[a*n:(a+1)*n], st.cols[c*n:(c+1)*n])
			res.Gram[a*k+c], res.Gram[c*k+a] = s, s
		}
	}
}

// topUp fills the pivots up to m with unselected rows in key order (topUpOrder), each
// at the residual trace the greedy steps ended with.
func (st *greedyState) topUp(keys []uint64, m int) {
	res := st.res
	k := len(res.Pivots)
	last := 0.0
	if k > 0 {
		last = res.ResidualTrace[k-1]
	} else {
		for _, d := range res.Residual {
			last += d
		}
	}
	for _, j := range topUpOrder(keys, st.selected, m-k) {
		res.Pivots = append(res.Pivots, j)
		res.ResidualTrace = append(res.ResidualTrace, last)
	}
}

// topUpOrder returns up to want unselected rows with the smallest keys (ties by row index)
// in increasing key order, by a bounded max-heap scan: O(n log want).
func topUpOrder(keys []uint64, selected []bool, want int) []int {
	less := func(a, b int) bool { // a before b
		if keys[a] != keys[b] {
			return keys[a] < keys[b]
		}
		return a < b
	}
	h := make([]int, 0, want) // max-heap under less
	down := func(i int) {
		for {
			l, r, big := 2*i+1, 2*i+2, i
			if l < len(h) && less(h[big], h[l]) {
				big = l
			}
			if r < len(h) && less(h[big], h[r]) {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for j := range keys {
		if selected[j] || want == 0 {
			continue
		}
		if len(h) < want {
			h = append(h, j)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !less(h[p], h[i]) {
					break
				}
				h[p], h[i] = h[i], h[p]
				i = p
			}
		} else if less(j, h[0]) {
			h[0] = j
			down(0)
		}
	}
	out := make([]int, 0, len(h))
	for len(h) > 0 {
		out = append(out, h[0])
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		down(0)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// axpy computes y[i] += a·x[i].
func axpy(y []float64, a float64, x []float64) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
