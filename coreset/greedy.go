package coreset

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/base/vec"
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
	// Normalize pivots on the normalized residual δ_j/K_jj instead of δ_j: pivot t+1 is
	// the candidate of largest δ^{(t)}_j/K_jj, ties to the lower row index, which is
	// greedy pivoted Cholesky on the normalized kernel K_ij/√(K_ii K_jj) as far as the
	// choice of pivot goes (rows of small norm, which the raw rule starves, are
	// covered). Everything else stays on the raw kernel: PivotValues, the residuals,
	// the traces, the factor and the threshold. A candidate is a row with δ_j >
	// Threshold, so a row with K_jj = 0 is never one (0/0 is not evaluated), and the
	// selection stops when no candidate is left: every δ_j ≤ Tol·max K_jj, as without
	// Normalize.
	Normalize bool
	// Tolerance τ ∈ [0, 1) is tolerant pivoting: pivot t+1 is, among the candidates whose
	// key (δ^{(t)}_j, or δ^{(t)}_j/K_jj with Normalize) is at least (1−τ)·M_t, M_t the
	// largest key of a candidate, the one of smallest Keys[j], ties to the lower row
	// index. Late in a selection many candidates have nearly equal residuals and the
	// exact argmax among them is decided by the sketch's noise; the smallest seed-free
	// key among the near-maximal ones is the same whatever seed drew the sketch (see
	// PivotKey). 0 is the exact argmax, the result bit for bit as without the field (Keys
	// is then not read). The residuals, traces, factor, threshold, stopping rule and
	// top-up are those of the same rule with the pivots it chose.
	Tolerance float64
	// Keys (length n) are the rows' seed-free pivot keys under Tolerance > 0: PivotKey of
	// each row's point id. Nil means PivotKeys(n), the decimal row indices as ids.
	Keys []uint64
	// Beside is how many selections run side by side with this one (as ingest's two
	// views do); 0 means none. The stale rows refreshed at once are then
	// GOMAXPROCS/(Beside+1), so that selections sharing the cores do not refresh rows
	// ahead of need. It changes no bits of the result.
	Beside int
}

// GreedyResult is the outcome of Greedy. Slices are owned by the caller.
type GreedyResult struct {
	// Pivots are row indices in selection order: the Greedy positive-residual pivots, then
	// the top-up rows.
	Pivots []int
	// Greedy is the number of positive-residual pivots (≤ rank K, Prop. greedy iii).
	Greedy int
	// PivotValues[t] is δ^{(t)} at the t-th greedy pivot (length Greedy): the raw
	// residual also with Normalize, whose pivot key is PivotValues[t]/K_pp for pivot
	// row p (K_pp = ||g_p||², the bits Greedy computes).
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
	// StepMax[t] is M_t, the largest pivot key (δ^{(t)}_j, or δ^{(t)}_j/K_jj with
	// Normalize) of a candidate at greedy step t (length Greedy). Without Tolerance it is
	// pivot t's own key; with it, pivot t's key is at least (1−τ)·StepMax[t].
	StepMax []float64
	// StepMaxRow[t] is the candidate of lowest index whose key is StepMax[t], or −1 when
	// pivot t's own key is StepMax[t] (length Greedy, with Tolerance only; nil
	// otherwise). Step t's max can fall only when every row holding it is removed, so
	// only removing that row (or pivot t) can lower it and admit candidates of smaller
	// Keys; removing any other row that is not pivot t leaves step t as it was.
	StepMaxRow []int
}

// TopUpKey is the top-up ordering key of a point id under seed: the derived seed of the
// stream "coreset/topup/<id>". Rows of a matrix use their decimal row index as id.
func TopUpKey(seed uint64, id string) uint64 { return rng.Seed(seed, "coreset/topup/"+id) }

// PivotKey is the tolerant-pivoting key of a point id (GreedyOptions.Tolerance): the
// derived seed of the stream "coreset/pivot/<id>" under seed 0. It must not depend on
// model.seed, which draws the sketch: two pools whose sketches differ only in that seed
// then break their near-ties alike. A hash of the id rather than the id itself, so that
// the order among near-maximal candidates is a fixed uniform permutation of the ids,
// unrelated to how ids are assigned (arrival order, class, source), and a new point's
// key is computed in O(1) whatever else is stored.
func PivotKey(id string) uint64 { return rng.Seed(0, "coreset/pivot/"+id) }

// PivotKeys returns PivotKey(strconv.Itoa(i)) for i < n.
func PivotKeys(n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = PivotKey(strconv.Itoa(i))
	}
	return k
}

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
// argmax_j δ_j^{(t)} (argmax_j δ_j^{(t)}/K_jj with opt.Normalize) over the rows with
// δ_j^{(t)} > Tol·max_j K_jj, ties broken by the lower row index, stopping early when no
// such row is left. With opt.Tolerance τ > 0 it is instead, among those rows whose key
// is at least (1−τ) times that maximum, the one of smallest opt.Keys. g is not
// modified.
//
// It works in feature space (Gram–Schmidt form) instead of on K: with an orthonormal
// basis b_1..b_t of the selected rows' span,
//
//	b_t  = (g_p − Σ_{i<t} (b_i·g_p) b_i) / ||·||   (classical Gram–Schmidt, applied twice)
//	L_jt = b_t·g_j,   δ_j^{(t)} = max(0, δ_j^{(t−1)} − L_jt²)
//
// which equals the Schur-complement recursion on K in exact arithmetic. The residuals
// are brought up to date lazily (see lazyGreedy): every δ_j only falls, so a stale δ_j
// bounds the current one from above (and, K_jj being fixed, a stale δ_j/K_jj the
// current ratio), and the argmax is found by updating rows in the order of their stale
// values until the largest is current. Every number is the one the
// eager recursion (all n rows updated at every step) computes, bit for bit: each L_jt is
// vec.Dot(b_t, g_j) and each δ_j^{(t)} the same sequence of subtractions. Total work is
// O(n q m) as in the eager form, but a pivot step reads only the rows whose stale bound
// beats the current maximum (with Tolerance: of the rows whose stale bound reaches
// (1−τ) of it, those of smaller key than the first that qualifies, see tolerant); a
// final blocked sweep over all rows (on all cores) gives the residuals and the traces.
// Memory is O(m q + n) (no n×m factor) unless KeepGram.
func Greedy(g []float64, n, q, m int, opt GreedyOptions) (*GreedyResult, error) {
	return GreedyContext(context.Background(), g, n, q, m, opt)
}

// GreedyContext is Greedy that gives up with ctx.Err() when ctx ends: it checks ctx
// before every pivot step and every block of the final sweep, so a daemon shutting down
// does not wait for an O(n q m) selection.
func GreedyContext(ctx context.Context, g []float64, n, q, m int, opt GreedyOptions) (*GreedyResult, error) {
	if n < 0 || q < 1 || len(g) != n*q {
		panic(fmt.Sprintf("coreset: Greedy: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	return lazyGreedy(ctx, rows{n: n, q: q, f64: g}, m, opt)
}

// GreedyRows32 is GreedyContext on n rows stored in single precision (each of length q),
// read in place and widened exactly to float64: its result is bit for bit
// GreedyContext's on the widened matrix, and nothing of size n×q is allocated. The rows
// are not modified.
func GreedyRows32(ctx context.Context, g [][]float32, q, m int, opt GreedyOptions) (*GreedyResult, error) {
	if q < 1 {
		panic(fmt.Sprintf("coreset: GreedyRows32: q=%d", q))
	}
	for j, r := range g {
		if len(r) != q {
			panic(fmt.Sprintf("coreset: GreedyRows32: row %d has length %d, want %d", j, len(r), q))
		}
	}
	return lazyGreedy(ctx, rows{n: len(g), q: q, f32: g}, m, opt)
}

// rows is the matrix a greedy selection reads: n rows of length q, either contiguous in
// float64 (f64, row-major) or one float32 slice per row (f32), widened on reading.
type rows struct {
	n, q int
	f64  []float64
	f32  [][]float32
}

// row returns row j in float64: a view of f64, or f32's row widened into buf (len q).
func (a rows) row(buf []float64, j int) []float64 {
	if a.f32 == nil {
		return a.f64[j*a.q : (j+1)*a.q]
	}
	for i, v := range a.f32[j] {
		buf[i] = float64(v)
	}
	return buf
}

// block returns rows j0..j1−1 as one (j1−j0)×q float64 matrix: a view of f64, or the
// widened rows in buf (len ≥ (j1−j0)·q).
func (a rows) block(buf []float64, j0, j1 int) []float64 {
	q := a.q
	if a.f32 == nil {
		return a.f64[j0*q : j1*q]
	}
	for j := j0; j < j1; j++ {
		a.row(buf[(j-j0)*q:(j-j0+1)*q], j)
	}
	return buf[:(j1-j0)*q]
}

// lazyGreedy is the selection behind Greedy and GreedyRows32.
func lazyGreedy(ctx context.Context, a rows, m int, opt GreedyOptions) (*GreedyResult, error) {
	n, q := a.n, a.q
	if opt.TopUpKeys != nil && len(opt.TopUpKeys) != n {
		panic("coreset: Greedy: len(TopUpKeys) != n")
	}
	if !(opt.Tolerance >= 0 && opt.Tolerance < 1) {
		panic(fmt.Sprintf("coreset: Greedy: Tolerance=%v not in [0, 1)", opt.Tolerance))
	}
	if m < 0 {
		return nil, fmt.Errorf("%w: m=%d", ErrBudget, m)
	}
	tol := opt.Tol
	if tol == 0 {
		tol = DefaultTol
	}
	m = min(m, n)
	res := &GreedyResult{}
	st := &greedyState{a: a, res: res, normalize: opt.Normalize, beside: max(0, opt.Beside), selAt: make([]int32, n), done: make([]int32, n),
		basis: make([]float64, 0, m*q), coef: make([]float64, m), v: make([]float64, q),
		buf: make([]float64, q), dots: make([]float64, m)}
	if opt.Tolerance > 0 {
		st.tolerance, st.pkeys = opt.Tolerance, opt.Keys
		if st.pkeys == nil {
			st.pkeys = PivotKeys(n)
		} else if len(st.pkeys) != n {
			panic("coreset: Greedy: len(Keys) != n")
		}
		res.StepMaxRow = make([]int, 0, m)
	}
	dmax, err := st.init()
	if err != nil {
		return nil, err
	}
	// The steps' loops (refreshTop, refreshWith's split, orthogonalize: a few a pivot, each
	// short) run on one team for the whole selection, this view's share of the cores.
	st.team = par.NewTeam(runtime.GOMAXPROCS(0) / (st.beside + 1))
	defer st.team.Close()
	res.Threshold = tol * dmax
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
	if err := st.sweep(ctx, opt.KeepGram); err != nil {
		return nil, err
	}
	st.factor()
	if opt.KeepGram {
		st.gram()
	}
	if opt.TopUpKeys != nil && k < m {
		st.topUp(opt.TopUpKeys, m)
	}
	return res, nil
}

// greedyState is lazyGreedy's working memory: the squared row norms (diag), each row's
// residual δ_j (delta) after done[j] basis vectors and its pivot key (key: delta itself,
// or δ_j/K_jj with normalize), the step at which a row was selected (selAt, −1 if not),
// the max-heap of unselected candidate rows by (key_j, −j), the orthonormal
// basis of the pivots' span (row-major, t×q), scratch for Gram–Schmidt (coef, v), for a
// widened row (buf) and for one row's products (dots), and with KeepGram the n×k
// column-major L (cols). With tolerance > 0, pkeys are the seed-free pivot keys and
// near, order and moved the heap positions a step visits, orders and refreshes
// (tolerant).
type greedyState struct {
	a           rows
	res         *GreedyResult
	normalize   bool
	beside      int
	team        *par.Team
	tolerance   float64
	pkeys       []uint64
	near        []int
	order       []int
	moved       []int
	diag, delta []float64
	key         []float64
	done, selAt []int32
	heap        []int32
	basis       []float64
	coef, v     []float64
	buf, dots   []float64
	bufs        [][]float64 // refreshTop's per-goroutine row buffer and dots
	cols        []float64
}

// init sets diag and delta to δ_j = ||g_j||², key to delta's keys, res.Trace to their
// sum and builds the heap; it returns max δ_j. A non-finite δ_j is ErrNotFinite (the
// first such row). The norms are computed in chunks of initRows rows side by side
// (internal/base/par); the trace and the maximum are taken in row order after them.
func (st *greedyState) init() (dmax float64, err error) {
	n, q := st.a.n, st.a.q
	st.diag, st.delta = make([]float64, n), make([]float64, n)
	st.key = st.delta
	if st.normalize {
		st.key = make([]float64, n)
	}
	workers := par.Workers(n, initRows)
	bufs := make([][]float64, workers)
	for w := range bufs {
		bufs[w] = make([]float64, q)
	}
	par.For(n, initRows, workers, func(w, lo, hi int) {
		for j := lo; j < hi; j++ {
			g := st.a.row(bufs[w], j)
			st.diag[j] = dot(g, g)
		}
	})
	var trace float64
	for j, d := range st.diag {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return 0, fmt.Errorf("%w: row %d has squared norm %v", ErrNotFinite, j, d)
		}
		st.delta[j] = d
		if st.normalize {
			st.key[j] = normalized(d, d) // 1, or 0 for a zero row
		}
		st.selAt[j] = -1
		trace += d
		dmax = math.Max(dmax, d)
	}
	st.res.Trace = trace
	st.heap = make([]int32, n)
	for j := range st.heap {
		st.heap[j] = int32(j)
	}
	for i := n/2 - 1; i >= 0; i-- {
		st.down(i)
	}
	return dmax, nil
}

// initRows is the row count of one chunk of init's norms.
const initRows = 256

// normalized is the pivot key δ/K_jj of a row with residual delta and diagonal diag: 0
// when diag is 0 (then delta is 0 too, and the row is never a candidate).
func normalized(delta, diag float64) float64 {
	if diag > 0 {
		return delta / diag
	}
	return 0
}

// above reports whether row i comes before row j in the heap: larger key, then lower
// index.
func (st *greedyState) above(i, j int32) bool {
	if st.key[i] != st.key[j] {
		return st.key[i] > st.key[j]
	}
	return i < j
}

// pop removes the top of the heap.
func (st *greedyState) pop() {
	last := len(st.heap) - 1
	st.heap[0] = st.heap[last]
	st.heap = st.heap[:last]
	st.down(0)
}

// remove removes the heap entry at position i.
func (st *greedyState) remove(i int) {
	last := len(st.heap) - 1
	st.heap[i] = st.heap[last]
	st.heap = st.heap[:last]
	if i < last {
		st.down(i)
		st.up(i)
	}
}

func (st *greedyState) up(i int) {
	h := st.heap
	for i > 0 {
		p := (i - 1) / 2
		if !st.above(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (st *greedyState) down(i int) {
	h := st.heap
	for {
		l, r, top := 2*i+1, 2*i+2, i
		if l < len(h) && st.above(h[l], h[top]) {
			top = l
		}
		if r < len(h) && st.above(h[r], h[top]) {
			top = r
		}
		if top == i {
			return
		}
		h[i], h[top] = h[top], h[i]
		i = top
	}
}

// refresh brings δ_j up to date with the first t basis vectors.
func (st *greedyState) refresh(j int32, t int) {
	st.refreshWith(j, t, st.buf, st.dots, true)
}

// refreshWith is refresh with the row buffer buf (len q) and dots (len ≥ t); with split,
// the dot products are formed in chunks side by side. δ_j gets the same bits either way,
// and whether it is brought up to date in one call or several: the squares are
// subtracted in basis order.
func (st *greedyState) refreshWith(j int32, t int, buf, dots []float64, split bool) {
	u, q := int(st.done[j]), st.a.q
	if u >= t {
		return
	}
	dots = dots[:t-u]
	// dots[i] = Dot(b_{u+i}, g_j), the same bits as the eager sweep's vec.DotsTo, which
	// gives every pair Dot's bits however the vectors are split: from gsMin·2 of them on,
	// chunks of gsVectors·2 run side by side (internal/base/par).
	g := st.a.row(buf, int(j))
	if !split || t-u < 2*gsMin {
		vec.DotsTo(dots, 1, g, q, 1, st.basis[u*q:], q, t-u, q)
	} else {
		st.team.For(t-u, 2*gsVectors, func(_, lo, hi int) {
			vec.DotsTo(dots[lo:hi], 1, g, q, 1, st.basis[(u+lo)*q:], q, hi-lo, q)
		})
	}
	d := st.delta[j]
	for _, l := range dots {
		d -= l * l
		if d < 0 {
			d = 0
		}
	}
	st.delta[j], st.done[j] = d, int32(t)
	if st.normalize {
		st.key[j] = normalized(d, st.diag[j])
	}
}

// refreshTop brings the stale top of the heap up to date with the first t basis
// vectors. On one core (GOMAXPROCS over Beside+1) that is the top alone, then a sift
// down. With more, it takes the stale rows of largest key, best first from the root, up
// to the first current row or one row per core: the rows that refreshing the top one at a time would refresh
// next (each refreshed row sinks and the next largest key surfaces). They are refreshed
// side by side, each on one goroutine, and their positions sifted down deepest first
// (each sift then sees heaps below it, as in heapify). Refreshing a row sooner than the
// serial loop would changes no bits (refreshWith), and the pivot a step then takes is the
// same: the current top is the largest (key, lower index) of the rows' current keys,
// every stale key being at least its row's current one, and the tolerant pick is the
// least pivot key among the rows whose current key reaches c, however many were
// refreshed.
func (st *greedyState) refreshTop(t int) {
	workers := runtime.GOMAXPROCS(0) / (st.beside + 1)
	if workers <= 1 {
		st.refresh(st.heap[0], t)
		st.down(0)
		return
	}
	h := st.heap
	// front is a max-heap of heap positions by their rows' order (above).
	front, batch := append(st.order[:0], 0), st.moved[:0]
	better := func(a, b int) bool { return st.above(h[a], h[b]) }
	for len(front) > 0 && len(batch) < workers {
		i := front[0]
		front[0] = front[len(front)-1]
		front = front[:len(front)-1]
		siftPositions(front, 0, better)
		if int(st.done[h[i]]) == t {
			break
		}
		batch = append(batch, i)
		for _, ch := range [2]int{2*i + 1, 2*i + 2} {
			if ch < len(h) {
				front = append(front, ch)
				upPositions(front, len(front)-1, better)
			}
		}
	}
	for len(st.bufs) < len(batch) {
		st.bufs = append(st.bufs, make([]float64, st.a.q+cap(st.dots)))
	}
	st.team.For(len(batch), 1, func(_, lo, _ int) {
		b := st.bufs[lo]
		st.refreshWith(h[batch[lo]], t, b[:st.a.q], b[st.a.q:], false)
	})
	slices.Sort(batch)
	for k := len(batch) - 1; k >= 0; k-- {
		st.down(batch[k])
	}
	st.order, st.moved = front, batch
}

// siftPositions and upPositions keep h a heap under before (before(h[0], x) for every
// other entry x): h holds heap positions in refreshTop and tolerant, rows in topUp.
func siftPositions(h []int, i int, before func(a, b int) bool) {
	for {
		l, r, top := 2*i+1, 2*i+2, i
		if l < len(h) && before(h[l], h[top]) {
			top = l
		}
		if r < len(h) && before(h[r], h[top]) {
			top = r
		}
		if top == i {
			return
		}
		h[i], h[top] = h[top], h[i]
		i = top
	}
}

func upPositions(h []int, i int, before func(a, b int) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// step runs pivot step t: the unselected row of largest key above the threshold (found
// on the heap, refreshing stale rows until the top is current) becomes b_t by
// Gram–Schmidt against b_1..b_{t-1}, twice. It reports false when no row is left to
// select (all δ_j at most the threshold, or the pivot lies in the span already).
func (st *greedyState) step(t int) bool {
	res := st.res
	for len(st.heap) > 0 {
		top := st.heap[0]
		if int(st.done[top]) != t {
			st.refreshTop(t)
			continue
		}
		// With normalize the top's key may beat rows of larger δ: a top at or below the
		// threshold is no candidate, now or later (δ only falls), and leaves the heap.
		// Without normalize the top has the largest δ, and the loop below stops.
		if st.normalize && !(st.delta[top] > res.Threshold) {
			st.pop()
			continue
		}
		break
	}
	if len(st.heap) == 0 || !(st.delta[st.heap[0]] > res.Threshold) {
		return false
	}
	top := st.heap[0]
	p, at := top, 0
	if st.tolerance > 0 {
		p, at = st.tolerant(t)
	}
	best := st.delta[p]
	v := st.v
	copy(v, st.a.row(st.buf, int(p)))
	for pass := 0; pass < 2; pass++ {
		st.orthogonalize(v, t)
	}
	nv := math.Sqrt(dot(v, v))
	if !(nv > 0) {
		return false
	}
	for k := range v {
		v[k] /= nv
	}
	st.basis = append(st.basis, v...)
	res.StepMax = append(res.StepMax, st.key[top])
	if st.tolerance > 0 {
		holder := int(top) // the lowest index of key M: one above it would be on top
		if st.key[p] == st.key[top] {
			holder = -1
		}
		res.StepMaxRow = append(res.StepMaxRow, holder)
	}
	st.remove(at)
	st.selAt[p] = int32(t)
	res.Pivots = append(res.Pivots, int(p))
	res.PivotValues = append(res.PivotValues, best)
	return true
}

// orthogonalize is one Gram–Schmidt pass of v against b_0..b_{t−1}:
//
//	coef_i = Dot(b_i, v) for i < t;  then v −= coef_i·b_i for i = 0, 1, …, t−1
//
// From gsMin vectors on, the coefficients are formed in chunks of basis vectors and the
// updates in chunks of v's entries side by side (internal/base/par); each entry gets
// the loop's operations in the loop's order either way.
func (st *greedyState) orthogonalize(v []float64, t int) {
	q := st.a.q
	if t < gsMin {
		vec.DotsTo(st.coef[:t], 1, v, q, 1, st.basis, q, t, q)
		for i := 0; i < t; i++ {
			axpy(v, -st.coef[i], st.basis[i*q:(i+1)*q])
		}
		return
	}
	st.team.For(t, gsVectors, func(_, lo, hi int) {
		vec.DotsTo(st.coef[lo:hi], 1, v, q, 1, st.basis[lo*q:], q, hi-lo, q)
	})
	st.team.For(q, gsEntries, func(_, lo, hi int) {
		for i := 0; i < t; i++ {
			axpy(v[lo:hi], -st.coef[i], st.basis[i*q+lo:i*q+hi])
		}
	})
}

// The Gram–Schmidt pass's parallel form: from gsMin basis vectors on (below, one
// vector's work is too little to share), in chunks of gsVectors vectors and of
// gsEntries entries of v (8 KiB).
const (
	gsMin     = 16
	gsVectors = 8
	gsEntries = 1024
)

// tolerant chooses pivot t under the tolerance, the heap's top being a current candidate
// whose key M is the step's max. A candidate qualifies when its current key is at least
// c = (1−τ)·M, and the pivot is the qualifying one of smallest (pkeys[j], j). A stale
// key bounds the current one, so only the rows whose stale key is at least c can
// qualify; they are the heap positions reachable from the root through keys at least c
// (the heap property). Those rows are taken in (pkeys[j], j) order, each brought up to
// date (the eager recursion's bits) until one qualifies: that one is the pivot, and the
// rows after it need not be read (most rows whose stale key reaches c still qualify,
// so a step usually refreshes a few rows, however many are within the tolerance). The
// refreshed rows' positions are then sifted down deepest first (each sift sees heaps
// below it, as in heapify). It returns the pivot and its heap position after that.
func (st *greedyState) tolerant(t int) (p int32, at int) {
	c := (1 - st.tolerance) * st.key[st.heap[0]]
	// order is a min-heap of the reachable positions by their rows' (pkeys, index);
	// positions do not move before the repair below.
	order := append(st.order[:0], st.reach(c)...)
	first := func(a, b int) bool { // heap positions a and b
		ja, jb := st.heap[a], st.heap[b]
		return st.pkeys[ja] < st.pkeys[jb] || st.pkeys[ja] == st.pkeys[jb] && ja < jb
	}
	siftOrder := func(i int) { siftPositions(order, i, first) }
	for i := len(order)/2 - 1; i >= 0; i-- {
		siftOrder(i)
	}
	moved := st.moved[:0]
	p = -1
	for len(order) > 0 {
		i := order[0]
		order[0] = order[len(order)-1]
		order = order[:len(order)-1]
		siftOrder(0)
		j := st.heap[i]
		if int(st.done[j]) < t {
			st.refresh(j, t)
			moved = append(moved, i)
		}
		if st.delta[j] > st.res.Threshold && st.key[j] >= c {
			p = j
			break
		}
	}
	slices.Sort(moved)
	for k := len(moved) - 1; k >= 0; k-- {
		st.down(moved[k])
	}
	st.order, st.moved = order, moved
	for _, i := range st.reach(c) { // p's key is at least c: it is reached
		if st.heap[i] == p {
			return p, i
		}
	}
	panic("coreset: tolerant pivot left the heap")
}

// reach returns the heap positions reachable from the root through entries of key at
// least c, in increasing order (breadth first), in st.near's storage.
func (st *greedyState) reach(c float64) []int {
	h, near := st.heap, append(st.near[:0], 0)
	for i := 0; i < len(near); i++ {
		for _, ch := range [2]int{2*near[i] + 1, 2*near[i] + 2} {
			if ch < len(h) && st.key[h[ch]] >= c {
				near = append(near, ch)
			}
		}
	}
	st.near = near
	return near
}

// sweepRows is how many rows the final sweep multiplies against the basis at once: the
// widened block (64×q float64, 2 MiB at q = 4096) stays in L2 while the basis passes.
const sweepRows = 64

// sweep computes, for the k = len(Pivots) greedy steps, every L_jt = Dot(b_t, g_j) in
// blocks of sweepRows rows (in rounds of up to GOMAXPROCS blocks on as many goroutines,
// joined), and from them in row order the eager recursion's numbers: the
// final residuals (0 on pivots), ResidualTrace[t] = Σ over rows unselected after step t
// of δ_j^{(t)}, summed in increasing j as the eager sweep sums, and with keepGram the
// columns of L.
func (st *greedyState) sweep(ctx context.Context, keepGram bool) error {
	res, n, q := st.res, st.a.n, st.a.q
	k := len(res.Pivots)
	res.Residual = st.delta
	tr := make([]float64, k)
	res.ResidualTrace = tr
	if keepGram {
		st.cols = make([]float64, n*k)
	}
	if k == 0 {
		return nil
	}
	// One block per goroutine per round, as many as GOMAXPROCS allows; the round's rows
	// are then folded in row order on this goroutine (a few per cent of the block
	// products' work), so the numbers do not depend on the count.
	workers := par.Workers(n, sweepRows)
	type part struct{ buf, l []float64 }
	parts := make([]part, workers)
	for w := range parts {
		parts[w] = part{buf: make([]float64, sweepRows*q), l: make([]float64, sweepRows*k)}
	}
	compute := func(w, j0, j1 int) {
		g := st.a.block(parts[w].buf, j0, j1)
		// l[r*k+t] = Dot(b_t, g_{j0+r}): vec.DotsTo gives Dot's bits for every pair.
		vec.DotsTo(parts[w].l, k, g, q, j1-j0, st.basis, q, k, q)
	}
	for j0 := 0; j0 < n; j0 += workers * sweepRows {
		if err := ctx.Err(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			if lo := j0 + w*sweepRows; lo < n {
				wg.Add(1)
				go func() { defer wg.Done(); compute(w, lo, min(lo+sweepRows, n)) }()
			}
		}
		compute(0, j0, min(j0+sweepRows, n))
		wg.Wait()
		for w := range workers {
			lo := j0 + w*sweepRows
			for j := lo; j < min(lo+sweepRows, n); j++ {
				l := parts[w].l[(j-lo)*k : (j-lo+1)*k]
				d, sel := st.diag[j], int(st.selAt[j])
				for t, v := range l {
					if keepGram {
						st.cols[t*n+j] = v
					}
					if sel >= 0 && t >= sel {
						d = 0
						continue
					}
					d -= v * v
					if d < 0 {
						d = 0
					}
					tr[t] += d
				}
				st.delta[j] = d
			}
		}
	}
	return nil
}

// factor sets res.Factor: the pivots' coordinates in the basis, L_st = b_t·g_{p_s},
// the pivots in chunks side by side (internal/base/par).
func (st *greedyState) factor() {
	res, q := st.res, st.a.q
	k := len(res.Pivots)
	res.Factor = make([]float64, k*k)
	workers := par.Workers(k, 4)
	bufs := make([][]float64, workers)
	for w := range bufs {
		bufs[w] = make([]float64, q)
	}
	par.For(k, 4, workers, func(w, lo, hi int) {
		for s := lo; s < hi; s++ {
			g := st.a.row(bufs[w], res.Pivots[s])
			vec.DotsTo(res.Factor[s*k:s*k+s+1], 1, g, q, 1, st.basis, q, s+1, q)
		}
	})
}

// gram sets res.Gram = LᵀL from the kept columns (KeepGram), the rows of its lower
// triangle in chunks side by side (internal/base/par).
func (st *greedyState) gram() {
	res, n := st.res, st.a.n
	k := len(res.Pivots)
	res.Gram = make([]float64, k*k)
	par.For(k, 4, par.Workers(k, 4), func(_, lo, hi int) {
		for a := lo; a < hi; a++ {
			vec.DotsTo(res.Gram[a*k:a*k+a+1], 1, st.cols[a*n:(a+1)*n], n, 1, st.cols, n, a+1, n)
			for c := 0; c < a; c++ {
				res.Gram[c*k+a] = res.Gram[a*k+c]
			}
		}
	})
}

// topUp fills the pivots up to m with unselected rows in key order (topUpOrder), each
// at the residual trace the greedy steps ended with.
func (st *greedyState) topUp(keys []uint64, m int) {
	res := st.res
	selected := make([]bool, st.a.n)
	for j, s := range st.selAt {
		selected[j] = s >= 0
	}
	k := len(res.Pivots)
	last := 0.0
	if k > 0 {
		last = res.ResidualTrace[k-1]
	} else {
		for _, d := range res.Residual {
			last += d
		}
	}
	for _, j := range topUpOrder(keys, selected, m-k) {
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
	after := func(a, b int) bool { return less(b, a) }
	down := func(i int) { siftPositions(h, i, after) }
	for j := range keys {
		if selected[j] || want == 0 {
			continue
		}
		if len(h) < want {
			h = append(h, j)
			upPositions(h, len(h)-1, after)
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
