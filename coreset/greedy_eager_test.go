package coreset

import (
	"context"
	"fmt"
	"math"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// eagerGreedy is greedy pivoted Cholesky as it was written before the lazy form: every
// row's residual updated at every step (one vec.DotsTo sweep over all n rows per pivot).
// It is the oracle lazyGreedy must reproduce bit for bit.
func eagerGreedy(ctx context.Context, g []float64, n, q, m int, opt GreedyOptions) (*GreedyResult, error) {
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
	dmax, err := eagerInitResidual(res, g, n, q)
	if err != nil {
		return nil, err
	}
	res.Threshold = tol * dmax
	diag := append([]float64(nil), res.Residual...)
	st := &eagerState{g: g, n: n, q: q, res: res, keepGram: opt.KeepGram, normalize: opt.Normalize, diag: diag,
		selected: make([]bool, n), basis: make([]float64, 0, m*q), coef: make([]float64, m),
		v: make([]float64, q), lrow: make([]float64, n)}
	if opt.Tolerance > 0 {
		st.tolerance, st.keys = opt.Tolerance, opt.Keys
		if st.keys == nil {
			st.keys = PivotKeys(n)
		}
		res.StepMaxRow = []int{}
	}
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

// eagerInitResidual sets res.Residual to the diagonal δ_j = ||g_j||² and res.Trace to its
// sum, and returns max δ_j; a non-finite δ_j is ErrNotFinite.
func eagerInitResidual(res *GreedyResult, g []float64, n, q int) (dmax float64, err error) {
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

// eagerState is GreedyContext's working memory, allocated once: the residual δ (in
// res.Residual), the selected rows, the orthonormal basis of their span (row-major,
// t×q), scratch for Gram–Schmidt (coef, v) and for one step's products (lrow), and with
// KeepGram the n×t column-major L (cols).
type eagerState struct {
	g         []float64
	n, q      int
	res       *GreedyResult
	keepGram  bool
	normalize bool
	tolerance float64
	keys      []uint64  // seed-free pivot keys (tolerance > 0)
	diag      []float64 // K_jj
	selected  []bool
	basis     []float64
	coef, v   []float64
	lrow      []float64
	cols      []float64
}

// step runs pivot step t: the unselected row of largest δ (δ/K_jj with normalize) above
// the threshold, or with tolerance the one of smallest key among those within the
// tolerance of that maximum, becomes
// b_t (Gram–Schmidt against b_1..b_{t-1}, twice), and every δ_j drops by (b_t·g_j)².
// It reports false when no row is left to select (all δ_j at most the threshold, or
// the pivot lies in the span already).
func (st *eagerState) step(t int) bool {
	g, n, q, res, delta := st.g, st.n, st.q, st.res, st.res.Residual
	p, best := -1, res.Threshold
	var stepMax float64
	holder := -1
	switch {
	case st.tolerance > 0:
		// M = the largest key of a candidate (held first by row holder), then the
		// candidate of smallest (keys[j], j) among those with key ≥ (1−τ)·M.
		for j := 0; j < n; j++ {
			if !st.selected[j] && delta[j] > res.Threshold && (holder < 0 || st.key(j) > stepMax) {
				holder, stepMax = j, st.key(j)
			}
		}
		if holder < 0 {
			return false
		}
		c := (1 - st.tolerance) * stepMax
		for j := 0; j < n; j++ {
			if !st.selected[j] && delta[j] > res.Threshold && st.key(j) >= c && (p < 0 || st.keys[j] < st.keys[p]) {
				p = j
			}
		}
		if st.key(p) == stepMax {
			holder = -1
		}
		best = delta[p]
	case st.normalize: // argmax δ_j/K_jj over the rows above the threshold, first index on ties
		for j := 0; j < n; j++ {
			if !st.selected[j] && delta[j] > res.Threshold && (p < 0 || delta[j]/st.diag[j] > stepMax) {
				p, stepMax = j, delta[j]/st.diag[j]
			}
		}
		if p >= 0 {
			best = delta[p]
		}
	default:
		for j := 0; j < n; j++ {
			if !st.selected[j] && delta[j] > best {
				p, best = j, delta[j]
			}
		}
		stepMax = best
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
	res.StepMax = append(res.StepMax, stepMax)
	if st.tolerance > 0 {
		res.StepMaxRow = append(res.StepMaxRow, holder)
	}
	if st.keepGram {
		st.cols = st.cols[:(t+1)*n]
	}
	res.ResidualTrace = append(res.ResidualTrace, st.update(t, p, b))
	return true
}

// key is row j's pivot key: δ_j, or δ_j/K_jj with normalize (only asked of candidates,
// whose K_jj > 0).
func (st *eagerState) key(j int) float64 {
	if st.normalize {
		return st.res.Residual[j] / st.diag[j]
	}
	return st.res.Residual[j]
}

// update lowers δ_j by (b·g_j)² for every unselected row (clamped at 0), zeroes the
// pivot's, records the column L_{·t} with KeepGram, and returns the new residual trace,
// summed afresh over δ (O(n), the update's order) so it does not accumulate
// subtraction error.
func (st *eagerState) update(t, p int, b []float64) float64 {
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
func (st *eagerState) factor() {
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
func (st *eagerState) gram() {
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

func (st *eagerState) topUp(keys []uint64, m int) {
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
