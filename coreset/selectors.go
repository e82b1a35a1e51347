package coreset

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// Selector names (paper Table kappa, appendix F "Selectors").
const (
	SelRandom  = "random"   // uniform without replacement
	SelKMeans  = "kmeans++" // k-means++ seeding in input space (KREPES)
	SelPC      = "pc"       // greedy pivoted Cholesky on an RBF surrogate kernel on inputs
	SelPCNTK   = "pc-ntk"   // greedy pivoted Cholesky on the sketched eNTK features (default)
	SelDPP     = "dpp"      // projection DPP on the sketched features
	SelKCenter = "kcenter"  // farthest-point search on the sketched features
	// SelLeverage samples by ridge leverage scores of the sketched kernel (KREPES Alg.
	// krepes line 1): exact scores up to LeverageExactMax points, recursive RLS above.
	SelLeverage = "leverage"
)

// LeverageExactMax is the largest N whose ridge leverage scores the leverage selector
// computes exactly (RidgeLeverage); above it, RidgeLeverageRLS estimates them.
const LeverageExactMax = 2000

// The leverage selector's default ridge is λ = tr K/m for a budget of m landmarks: then
// d_eff(λ) = Σ μ_i/(μ_i + λ) ≤ tr K/λ = m, so the scores describe about as many
// directions as there are landmarks to draw, and the recursive estimate's samples stay
// near m points. It does not depend on the kernel's scale.

// Selectors lists the selector names.
var Selectors = []string{SelPCNTK, SelPC, SelRandom, SelKMeans, SelDPP, SelKCenter, SelLeverage}

// SelectInput holds the data a selector may use. X (N×D) is the input space, G (N×Q) the
// sketch features; either may be nil when no selector that needs it is asked for. Nothing is
// modified.
type SelectInput struct {
	N int
	X []float64
	D int
	G []float64
	// G32 holds the sketch features in single precision instead of G (which must then be
	// nil), one row of length Q per point, read in place and widened exactly: pc-ntk,
	// kcenter and dpp then allocate nothing of size N×Q, and pc-ntk and kcenter select what
	// they select on the widened G. leverage widens G32 into one float64 matrix.
	G32 [][]float32
	Q   int
	Tol float64 // pivot tolerance of the PC selectors; 0 means DefaultTol
	// Normalize makes pc-ntk pivot on normalized residuals (GreedyOptions.Normalize), as
	// the daemon's pool does by default. pc's RBF surrogate has a unit diagonal, on which
	// the two rules agree; the other selectors ignore it.
	Normalize bool
	// Tolerance is pc-ntk's tolerant pivoting (GreedyOptions.Tolerance), with the rows'
	// decimal indices as the ids of their PivotKeys (PivotKeys), as the top-up keys
	// take them; 0 is the exact argmax. The other selectors ignore it.
	Tolerance float64
	Seed      uint64
	// Lambda is the ridge λ of the leverage selector; 0 means tr K/m.
	Lambda float64
}

// Selection is a selector's result.
type Selection struct {
	// Indices are distinct row indices in selection order (len = min(m, N)).
	Indices []int
	// Greedy is the number of positive-residual pivots for the PC selectors (the rest
	// came from the top-up rule), the rank of the projection for DPP, and len(Indices)
	// otherwise.
	Greedy int
	// Bandwidth is the RBF bandwidth σ of the PC surrogate (median heuristic).
	Bandwidth float64
	// ResidualTrace is tr R of the sketch kernel after each landmark, set by pc-ntk (for
	// which greedy yields it for free, Prop. greedy ii); nil otherwise (see
	// ResidualCurveTo).
	ResidualTrace []float64
	// Trace is tr K of the sketch kernel, set with ResidualTrace.
	Trace float64
	// Leverage are the ridge leverage scores the leverage selector sampled by (exact or
	// recursive RLS estimates, see SelLeverage) and Lambda their ridge; nil and 0 for the
	// other selectors.
	Leverage []float64
	Lambda   float64
}

// Select runs the named selector for m landmarks. Every random draw comes from the stream
// (seed, "coreset/select/<name>/…"), so equal inputs give equal selections. The PC
// selectors and DPP fill a budget beyond the numerical rank by the top-up rule (TopUpKey on
// the decimal row index, seeded by in.Seed).
func Select(name string, in SelectInput, m int) (*Selection, error) {
	return SelectContext(context.Background(), name, in, m)
}

// SelectContext is Select that gives up with ctx.Err() when ctx ends: pc-ntk, kcenter,
// k-means++ and dpp check ctx at every landmark (dpp also between its products), so a
// command interrupted during an O(N Q m) selection stops within one step.
func SelectContext(ctx context.Context, name string, in SelectInput, m int) (*Selection, error) {
	if m < 1 {
		return nil, fmt.Errorf("%w: m=%d", ErrBudget, m)
	}
	if in.N < 1 {
		return nil, fmt.Errorf("%w: no points", ErrSelector)
	}
	if m > in.N {
		m = in.N
	}
	needX := name == SelKMeans || name == SelPC
	needG := name == SelPCNTK || name == SelDPP || name == SelKCenter || name == SelLeverage
	if needX && (in.D < 1 || len(in.X) != in.N*in.D) {
		return nil, fmt.Errorf("%w: selector %q needs input-space rows (have %d values for N=%d, D=%d)", ErrSelector, name, len(in.X), in.N, in.D)
	}
	var g rows
	if needG {
		var err error
		if g, err = in.features(name); err != nil {
			return nil, err
		}
	}
	switch name {
	case SelRandom:
		r := rng.New(in.Seed, "coreset/select/random")
		perm := r.Perm(in.N)
		return &Selection{Indices: perm[:m], Greedy: m}, nil
	case SelKMeans:
		idx, err := kmeansPP(ctx, in.X, in.N, in.D, m, in.Seed)
		if err != nil {
			return nil, err
		}
		return &Selection{Indices: idx, Greedy: len(idx)}, nil
	case SelKCenter:
		idx, err := kCenter(ctx, g, m, in.Seed)
		if err != nil {
			return nil, err
		}
		return &Selection{Indices: idx, Greedy: len(idx)}, nil
	case SelLeverage:
		G := in.G
		if G == nil {
			G = g.block(make([]float64, in.N*in.Q), 0, in.N)
		}
		lambda := in.Lambda
		if lambda == 0 {
			var tr float64
			for _, v := range G {
				tr += v * v
			}
			lambda = tr / float64(m)
		}
		var (
			tau []float64
			err error
		)
		if in.N <= LeverageExactMax {
			tau, err = RidgeLeverage(G, in.N, in.Q, lambda)
		} else {
			tau, err = RidgeLeverageRLS(G, in.N, in.Q, lambda, in.Seed, "coreset/select/leverage", RLSOptions{})
		}
		if err != nil {
			return nil, err
		}
		idx := LeverageSample(tau, m, in.Seed)
		return &Selection{Indices: idx, Greedy: len(idx), Leverage: tau, Lambda: lambda}, nil
	case SelPCNTK:
		res, err := lazyGreedy(ctx, g, m, GreedyOptions{Tol: in.Tol, TopUpKeys: TopUpKeys(in.Seed, in.N), Normalize: in.Normalize, Tolerance: in.Tolerance})
		if err != nil {
			return nil, err
		}
		return &Selection{Indices: res.Pivots, Greedy: res.Greedy, ResidualTrace: res.ResidualTrace, Trace: res.Trace}, nil
	case SelPC:
		sigma := medianBandwidth(in.X, in.N, in.D, in.Seed)
		ones := make([]float64, in.N) // RBF diagonal
		for i := range ones {
			ones[i] = 1
		}
		res, err := GreedyKernel(ones, rbfColumn(in.X, in.N, in.D, sigma), in.N, m, in.Tol, TopUpKeys(in.Seed, in.N))
		if err != nil {
			return nil, err
		}
		return &Selection{Indices: res.Pivots, Greedy: res.Greedy, Bandwidth: sigma}, nil
	case SelDPP:
		idx, rank, err := projectionDPP(ctx, g, m, in.Seed)
		if err != nil {
			return nil, err
		}
		if len(idx) < m { // rank < m: top-up rule
			chosen := make([]bool, in.N)
			for _, i := range idx {
				chosen[i] = true
			}
			idx = append(idx, topUpOrder(TopUpKeys(in.Seed, in.N), chosen, m-len(idx))...)
		}
		return &Selection{Indices: idx, Greedy: rank}, nil
	}
	return nil, fmt.Errorf("%w: unknown selector %q (want one of %v)", ErrSelector, name, Selectors)
}

// features returns the sketch features of in as rows (G, or G32 when G is nil), after
// checking their shape.
func (in SelectInput) features(name string) (rows, error) {
	if in.Q < 1 {
		return rows{}, fmt.Errorf("%w: selector %q needs sketch features (Q=%d)", ErrSelector, name, in.Q)
	}
	if in.G != nil || in.G32 == nil {
		if in.G32 != nil || len(in.G) != in.N*in.Q {
			return rows{}, fmt.Errorf("%w: selector %q needs sketch features in G or G32 (have %d values and %d rows for N=%d, Q=%d)", ErrSelector, name, len(in.G), len(in.G32), in.N, in.Q)
		}
		return rows{n: in.N, q: in.Q, f64: in.G}, nil
	}
	if len(in.G32) != in.N {
		return rows{}, fmt.Errorf("%w: selector %q needs sketch features (have %d rows for N=%d)", ErrSelector, name, len(in.G32), in.N)
	}
	for i, r := range in.G32 {
		if len(r) != in.Q {
			return rows{}, fmt.Errorf("%w: selector %q: feature row %d has %d values, want Q=%d", ErrSelector, name, i, len(r), in.Q)
		}
	}
	return rows{n: in.N, q: in.Q, f32: in.G32}, nil
}

// thinQ returns the r×c orthonormal factor Q of the QR factorization of a (r×c, r ≥ c)
// by Householder reflections (LAPACK Dgeqrf, then Dorgqr for the first c columns only):
// the r×r Q that mat.QR.QTo forms would take r² values, 8.5 GB for the 32,561 Adult rows.
// a is not modified.
func thinQ(a *mat.Dense) *mat.Dense {
	r, c := a.Dims()
	q := mat.DenseCopyOf(a)
	g := q.RawMatrix()
	tau := make([]float64, min(r, c))
	work := make([]float64, 1)
	lapack64.Geqrf(g, tau, work, -1)
	work = make([]float64, max(int(work[0]), c))
	lapack64.Geqrf(g, tau, work, len(work))
	lapack64.Orgqr(g, tau, work[:1], -1)
	if n := int(work[0]); n > len(work) {
		work = make([]float64, n)
	}
	lapack64.Orgqr(g, tau, work, len(work))
	return q
}

// rowProducts computes the products of a rows matrix G (n×q) that projectionDPP needs.
// Contiguous float64 rows are one block, a view, so the products are single matrix
// multiplications; float32 rows are widened in blocks of dppBlockBytes, so nothing of
// size n×q is allocated.
type rowProducts struct {
	g     rows
	block int // rows per block
	buf   []float64
}

// dppBlockBytes is the size of one widened block of float32 rows.
const dppBlockBytes = 16 << 20

func newRowProducts(g rows) *rowProducts {
	p := &rowProducts{g: g, block: max(g.n, 1)}
	if g.f32 != nil {
		p.block = max(1, min(g.n, dppBlockBytes/(8*g.q)))
		p.buf = make([]float64, p.block*g.q)
	}
	return p
}

// each calls f on every block of rows [lo, hi) as a (hi−lo)×q matrix.
func (p *rowProducts) each(f func(lo, hi int, blk *mat.Dense)) {
	for lo := 0; lo < p.g.n; lo += p.block {
		hi := min(lo+p.block, p.g.n)
		f(lo, hi, mat.NewDense(hi-lo, p.g.q, p.g.block(p.buf, lo, hi)))
	}
}

// mul sets dst = G·b (n×c for b q×c).
func (p *rowProducts) mul(dst *mat.Dense, b mat.Matrix) {
	_, c := b.Dims()
	dst.ReuseAs(p.g.n, c)
	p.each(func(lo, hi int, blk *mat.Dense) {
		dst.Slice(lo, hi, 0, c).(*mat.Dense).Mul(blk, b)
	})
}

// mulT sets dst = Gᵀ·y (q×c for y n×c), or yᵀ·G (c×q) when left is true, summing the
// blocks' products in row order.
func (p *rowProducts) mulT(dst *mat.Dense, y *mat.Dense, left bool) {
	var part mat.Dense
	first := true
	p.each(func(lo, hi int, blk *mat.Dense) {
		yb := y.Slice(lo, hi, 0, y.RawMatrix().Cols)
		out := dst
		if !first {
			part.Reset()
			out = &part
		}
		if left {
			out.Mul(yb.T(), blk)
		} else {
			out.Mul(blk.T(), yb)
		}
		if !first {
			dst.Add(dst, &part)
		}
		first = false
	})
}

// sqDist returns ||a − b||².
func sqDist(a, b []float64) float64 {
	b = b[:len(a)]
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}

// kmeansPP is k-means++ seeding (Arthur & Vassilvitskii 2007): the first center uniform,
// each next one with probability ∝ D(x)², the squared distance to the nearest chosen
// center. Already-chosen rows have D = 0 and are never drawn again; when every remaining D
// is 0 (duplicates), the rest is drawn uniformly among unchosen rows.
func kmeansPP(ctx context.Context, x []float64, n, d, m int, seed uint64) ([]int, error) {
	r := rng.New(seed, "coreset/select/kmeans++")
	dist := make([]float64, n)
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	chosen := make([]bool, n)
	out := make([]int, 0, m)
	next := r.IntN(n)
	for len(out) < m {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chosen[next] = true
		out = append(out, next)
		c := x[next*d : (next+1)*d]
		var total float64
		for i := 0; i < n; i++ {
			if chosen[i] {
				dist[i] = 0
				continue
			}
			if dd := sqDist(x[i*d:(i+1)*d], c); dd < dist[i] {
				dist[i] = dd
			}
			total += dist[i]
		}
		if len(out) == m {
			break
		}
		next = -1
		if total > 0 {
			u := r.Float64() * total
			for i := 0; i < n; i++ {
				if chosen[i] {
					continue
				}
				u -= dist[i]
				if u < 0 && dist[i] > 0 {
					next = i
					break
				}
			}
			if next < 0 { // rounding left u ≥ 0: take the last positive row
				for i := n - 1; i >= 0; i-- {
					if !chosen[i] && dist[i] > 0 {
						next = i
						break
					}
				}
			}
		}
		if next < 0 {
			k := r.IntN(n - len(out))
			for i := 0; i < n; i++ {
				if !chosen[i] {
					if k == 0 {
						next = i
						break
					}
					k--
				}
			}
		}
	}
	return out, nil
}

// kCenter is farthest-point search (Gonzalez 1985) on the sketch: a seeded uniform first
// point, then repeatedly the row farthest from the chosen set (ties by lower index).
func kCenter(ctx context.Context, g rows, m int, seed uint64) ([]int, error) {
	n := g.n
	r := rng.New(seed, "coreset/select/kcenter")
	dist := make([]float64, n)
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	chosen := make([]bool, n)
	out := make([]int, 0, m)
	buf := make([]float64, g.q)
	next := r.IntN(n)
	for len(out) < m {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chosen[next] = true
		out = append(out, next)
		c := slices.Clone(g.row(buf, next))
		best, bi := -1.0, -1
		for i := 0; i < n; i++ {
			if chosen[i] {
				continue
			}
			if dd := sqDist(g.row(buf, i), c); dd < dist[i] {
				dist[i] = dd
			}
			if dist[i] > best {
				best, bi = dist[i], i
			}
		}
		if bi < 0 {
			break
		}
		next = bi
	}
	return out, nil
}

// medianBandwidth is the median heuristic σ = median_{i<j} ||x_i − x_j|| over the pairs of
// at most 1000 rows drawn from (seed, "coreset/select/pc/bandwidth") (all rows when
// fewer). A zero median (duplicated rows) falls back to the mean distance, then to 1.
func medianBandwidth(x []float64, n, d int, seed uint64) float64 {
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	if n > 1000 {
		rows = rng.New(seed, "coreset/select/pc/bandwidth").Perm(n)[:1000]
	}
	var ds []float64
	var sum float64
	for a := 0; a < len(rows); a++ {
		for b := a + 1; b < len(rows); b++ {
			v := math.Sqrt(sqDist(x[rows[a]*d:(rows[a]+1)*d], x[rows[b]*d:(rows[b]+1)*d]))
			ds = append(ds, v)
			sum += v
		}
	}
	if len(ds) == 0 {
		return 1
	}
	sort.Float64s(ds)
	med := ds[len(ds)/2]
	if med > 0 {
		return med
	}
	if sum > 0 {
		return sum / float64(len(ds))
	}
	return 1
}

// KernelColumn writes column p of an n×n PSD kernel into dst (len n). It is called once
// per pivot, so a kernel may compute the column on the fly.
type KernelColumn func(dst []float64, p int)

// rbfColumn is the RBF kernel k(x, x') = exp(−||x − x'||²/(2σ²)).
func rbfColumn(x []float64, n, d int, sigma float64) KernelColumn {
	s := 1 / (2 * sigma * sigma)
	return func(dst []float64, p int) {
		xp := x[p*d : (p+1)*d]
		for j := 0; j < n; j++ {
			dst[j] = math.Exp(-sqDist(x[j*d:(j+1)*d], xp) * s)
		}
	}
}

// GreedyKernel is greedy pivoted Cholesky on a kernel given by columns (the surrogate-kernel
// form, Harbrecht, Peters & Schneider 2012), with the same pivot rule, tolerance and top-up
// rule as Greedy. It keeps the n×k factor (column t at L[t*n:]) because it has no features
// to project: O(n k) memory, O(n k²) time plus k kernel columns. Only Pivots, Greedy,
// PivotValues, ResidualTrace, Trace, Residual and Threshold are set.
func GreedyKernel(diag []float64, col KernelColumn, n, m int, tol float64, topUpKeys []uint64) (*GreedyResult, error) {
	if len(diag) != n {
		panic("coreset: GreedyKernel: len(diag) != n")
	}
	if tol == 0 {
		tol = DefaultTol
	}
	if m > n {
		m = n
	}
	res := &GreedyResult{Residual: make([]float64, n)}
	delta := res.Residual
	c := make([]float64, n)
	var trace, dmax float64
	for j, d := range diag {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("%w: kernel diagonal %d is %v", ErrNotFinite, j, d)
		}
		delta[j] = d
		trace += d
		dmax = math.Max(dmax, d)
	}
	res.Trace, res.Threshold = trace, tol*dmax
	selected := make([]bool, n)
	L := make([]float64, 0, n*m)
	for t := 0; t < m; t++ {
		p, best := -1, res.Threshold
		for j := 0; j < n; j++ {
			if !selected[j] && delta[j] > best {
				p, best = j, delta[j]
			}
		}
		if p < 0 {
			break
		}
		col(c, p)
		lpp := math.Sqrt(best)
		L = L[:(t+1)*n]
		lt := L[t*n : (t+1)*n]
		for j := 0; j < n; j++ {
			s := c[j]
			for i := 0; i < t; i++ {
				s -= L[i*n+j] * L[i*n+p]
			}
			lt[j] = s / lpp
		}
		selected[p] = true
		res.Pivots = append(res.Pivots, p)
		res.PivotValues = append(res.PivotValues, best)
		var tr float64
		for j := 0; j < n; j++ {
			if selected[j] {
				delta[j] = 0
				continue
			}
			d := delta[j] - lt[j]*lt[j]
			if d < 0 {
				d = 0
			}
			delta[j] = d
			tr += d
		}
		res.ResidualTrace = append(res.ResidualTrace, tr)
	}
	res.Greedy = len(res.Pivots)
	if topUpKeys != nil && res.Greedy < m {
		last := trace
		if res.Greedy > 0 {
			last = res.ResidualTrace[res.Greedy-1]
		}
		for _, j := range topUpOrder(topUpKeys, selected, m-res.Greedy) {
			res.Pivots = append(res.Pivots, j)
			res.ResidualTrace = append(res.ResidualTrace, last)
		}
	}
	return res, nil
}

// projectionDPP samples the projection DPP whose marginal kernel projects onto the top-k
// left singular vectors of G, k = min(m, numerical rank) (Hough et al. 2006; Kulesza &
// Taskar 2012, Alg. 1 with the projection kernel): with V (n×k) orthonormal columns,
// repeat k times: draw row i with probability ||V_i||²/rank, then restrict V to the
// orthogonal complement of its row i (one Householder-free Gram–Schmidt step). The
// singular vectors come from a randomized range finder with two power iterations (Halko,
// Martinsson & Tropp 2011, Alg. 4.4) and an exact SVD of the small projected matrix.
func projectionDPP(ctx context.Context, g rows, m int, seed uint64) ([]int, int, error) {
	V, k, err := dppBasis(ctx, g, m, seed)
	if err != nil {
		return nil, 0, err
	}
	out, err := sampleProjection(ctx, V, g.n, k, rng.New(seed, "coreset/select/dpp/sample"))
	if err != nil {
		return nil, 0, err
	}
	return out, k, nil
}

// dppBasis returns V (n×k, row-major), orthonormal columns spanning the top-k left
// singular vectors of G, with k = min(m, the number of singular values above
// sqrt(DefaultTol) times the largest): a randomized range finder of l = min(m+10, n, q)
// columns drawn from the "coreset/select/dpp/range" stream of seed, two power
// iterations (Halko, Martinsson & Tropp 2011, Alg. 4.4), and an exact SVD of the l×q
// projection.
func dppBasis(ctx context.Context, g rows, m int, seed uint64) ([]float64, int, error) {
	n, q := g.n, g.q
	l := m + 10
	if l > n {
		l = n
	}
	if l > q {
		l = q
	}
	p := newRowProducts(g)
	r := rng.New(seed, "coreset/select/dpp/range")
	om := mat.NewDense(q, l, nil)
	for i := 0; i < q; i++ {
		for j := 0; j < l; j++ {
			om.Set(i, j, r.NormFloat64())
		}
	}
	var y, z mat.Dense
	p.mul(&y, om)
	Y := thinQ(&y)
	for it := 0; it < 2; it++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		p.mulT(&z, Y, false)
		Z := thinQ(&z)
		y.Reset()
		p.mul(&y, Z)
		Y = thinQ(&y)
	}
	var b mat.Dense
	p.mulT(&b, Y, true) // l×q
	var svd mat.SVD
	if !svd.Factorize(&b, mat.SVDThin) {
		return nil, 0, fmt.Errorf("%w: SVD of the %d×%d range projection", ErrEigen, l, q)
	}
	sv := svd.Values(nil)
	var ub mat.Dense
	svd.UTo(&ub)
	k := 0
	for k < len(sv) && k < m && sv[k] > math.Sqrt(DefaultTol)*sv[0] {
		k++
	}
	var u mat.Dense
	u.Mul(Y, ub.Slice(0, l, 0, k)) // n×k
	V := make([]float64, n*k)      // row-major
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			V[i*k+j] = u.At(i, j)
		}
	}
	return V, k, nil
}

// sampleProjection runs the sequential sampler of the projection DPP whose kernel is
// V Vᵀ (V n×k row-major with orthonormal columns; V is overwritten): it draws rows until
// the remaining subspace is empty or every unchosen row has zero norm, and returns them
// in the order drawn.
func sampleProjection(ctx context.Context, V []float64, n, k int, rs *rand.Rand) ([]int, error) {
	out := make([]int, 0, k)
	chosen := make([]bool, n)
	norms := make([]float64, n)
	// cols is the current number of effective columns; V is kept with orthonormal columns
	// spanning the remaining subspace, stored in its first cols columns.
	cols := k
	for cols > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var tot float64
		for i := 0; i < n; i++ {
			row := V[i*k : i*k+cols]
			norms[i] = dot(row, row)
			if chosen[i] {
				norms[i] = 0
			}
			tot += norms[i]
		}
		if !(tot > 0) {
			break
		}
		pick := drawRow(norms, rs.Float64()*tot)
		chosen[pick] = true
		out = append(out, pick)
		dropRow(V, n, k, cols, pick)
		cols--
	}
	return out, nil
}

// drawRow returns the first row i with norms[i] > 0 at which u − Σ_{j≤i} norms[j] falls
// below zero (u uniform on [0, Σ norms) draws row i with probability norms[i]/Σ norms);
// when rounding leaves u non-negative past the end, the last row with a positive norm.
func drawRow(norms []float64, u float64) int {
	for i := range norms {
		u -= norms[i]
		if u < 0 && norms[i] > 0 {
			return i
		}
	}
	for i := len(norms) - 1; i >= 0; i-- {
		if norms[i] > 0 {
			return i
		}
	}
	return -1
}

// dropRow restricts the first cols columns of V (n×k row-major, orthonormal columns) to
// {v ∈ span V : v_pick = 0}: a Householder reflection of the coordinates maps row pick's
// direction onto the last column, which the caller then drops (cols−1 columns remain,
// orthonormal, with row pick zero up to rounding).
func dropRow(V []float64, n, k, cols, pick int) {
	// New basis of {v ∈ span V : v_pick = 0}: with a = row pick of V (coordinates),
	// rotate coordinates so that a lies along the last one and drop it.
	a := append([]float64(nil), V[pick*k:pick*k+cols]...)
	na := math.Sqrt(dot(a, a))
	for j := range a {
		a[j] /= na
	}
	// Householder H = I − 2 w wᵀ with w = (a − e_last)/||·|| maps a to e_last.
	w := append([]float64(nil), a...)
	w[cols-1] -= 1
	nw := math.Sqrt(dot(w, w))
	if nw > 1e-14 {
		for j := range w {
			w[j] /= nw
		}
		for i := 0; i < n; i++ {
			row := V[i*k : i*k+cols]
			s := 2 * dot(row, w)
			axpy(row, -s, w)
		}
	}
}
