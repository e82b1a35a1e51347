package coreset

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// RidgeLeverage returns the exact ridge leverage scores of the kernel K = G Gᵀ of the rows
// of g (n×q) at ridge λ > 0,
//
//	τ_i(λ) = [K (K + λI)⁻¹]_ii = g_iᵀ (GᵀG + λI)⁻¹ g_i,
//
// through the smaller of the two systems: the q×q one (push-through identity) when
// q ≤ n, else the n×n one, as τ_i = 1 − λ[(K + λI)⁻¹]_ii. Their sum is d_eff(λ). It costs
// O(n q min(n, q) + min(n, q)³): exact for small n; RidgeLeverageRLS approximates large n.
func RidgeLeverage(g []float64, n, q int, lambda float64) ([]float64, error) {
	if len(g) != n*q || n < 1 || q < 1 {
		panic(fmt.Sprintf("coreset: RidgeLeverage: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	G := mat.NewDense(n, q, g)
	tau := make([]float64, n)
	if q <= n {
		c := mat.NewSymDense(q, nil)
		c.SymOuterK(1, G.T())
		for i := range q {
			c.SetSym(i, i, c.At(i, i)+lambda)
		}
		var ch mat.Cholesky
		if !ch.Factorize(c) {
			return nil, fmt.Errorf("%w: GᵀG + λI is not positive definite", ErrNotFinite)
		}
		// τ_i = ‖L⁻¹ g_i‖² with C = L Lᵀ: one triangular solve for all rows.
		var l mat.TriDense
		ch.LTo(&l)
		var y mat.Dense
		if err := y.Solve(&l, G.T()); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotFinite, err)
		}
		for j := range n {
			col := mat.Col(nil, j, &y)
			tau[j] = dot(col, col)
		}
		return tau, nil
	}
	a := mat.NewSymDense(n, nil)
	a.SymOuterK(1, G)
	for i := range n {
		a.SetSym(i, i, a.At(i, i)+lambda)
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return nil, fmt.Errorf("%w: K + λI is not positive definite", ErrNotFinite)
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFinite, err)
	}
	for i := range n {
		tau[i] = 1 - lambda*inv.At(i, i)
	}
	return tau, nil
}

// RLSOptions tunes RidgeLeverageRLS; zero fields take the defaults.
type RLSOptions struct {
	// Base is the size at which the recursion stops halving and keeps every point
	// (default 256).
	Base int
	// Oversample is β in p_i = min(1, β·l̃_i), the sampling probability of a point from
	// its estimated score (default 3: a sample of about 3·d_eff(λ) points per level;
	// Musco & Musco's proof takes β = O(log(d_eff/δ)), which keeps nearly every point
	// when d_eff is a sizable part of n, at O(n² q) cost).
	Oversample float64
}

// RidgeLeverageRLS approximates the ridge leverage scores of K = G Gᵀ (as RidgeLeverage)
// by recursive ridge leverage score sampling (Musco & Musco, "Recursive sampling for the
// Nyström method", NeurIPS 2017, Alg. 3): the points are halved uniformly (a seeded
// permutation of the stream (seed, name)) down to Base; at each level up, the scores of
// that level's points are estimated from the weighted Nyström sample S of the level
// below,
//
//	l̃_i = (K_ii − K_iS (K_SS + λ·diag(p_S))⁻¹ K_Si) / λ,
//
// and S is redrawn with probabilities p_i = min(1, β·l̃_i) (a seeded coin per point);
// the last S gives the estimates of all n points. With S = all points and p = 1 the
// estimate is exact, so n ≤ Base gives the exact scores. Cost O(n s q + n s²) for a
// sample of size s, against O(n q min(n, q)) for RidgeLeverage. The estimates are
// constant-factor approximations with high probability (Musco & Musco, Thm. 7); the
// test measures the factor.
func RidgeLeverageRLS(g []float64, n, q int, lambda float64, seed uint64, name string, opt RLSOptions) ([]float64, error) {
	if len(g) != n*q || n < 1 || q < 1 {
		panic(fmt.Sprintf("coreset: RidgeLeverageRLS: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	if opt.Base <= 0 {
		opt.Base = 256
	}
	if opt.Oversample <= 0 {
		opt.Oversample = 3
	}
	perm := rng.New(seed, name+"/perm").Perm(n)
	sizes := []int{n}
	for sizes[len(sizes)-1] > opt.Base {
		sizes = append(sizes, (sizes[len(sizes)-1]+1)/2)
	}
	// The smallest level: every point, probability 1.
	sample := append([]int(nil), perm[:sizes[len(sizes)-1]]...)
	probs := make([]float64, len(sample))
	for i := range probs {
		probs[i] = 1
	}
	coin := rng.New(seed, name+"/coins")
	for lv := len(sizes) - 2; lv >= 0; lv-- {
		pts := perm[:sizes[lv]]
		est, err := nystromLeverage(g, q, lambda, sample, probs, pts)
		if err != nil {
			return nil, err
		}
		sample, probs = sample[:0], probs[:0]
		for i, j := range pts {
			p := math.Min(1, opt.Oversample*est[i])
			if coin.Float64() < p {
				sample, probs = append(sample, j), append(probs, p)
			}
		}
		if len(sample) == 0 { // every estimate ~0: keep one point so the next level has a sample
			sample, probs = append(sample, pts[0]), append(probs, 1)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return nystromLeverage(g, q, lambda, sample, probs, all)
}

// nystromLeverage is the weighted Nyström estimate of the ridge leverage scores of the
// rows pts from the sample S with probabilities p (see RidgeLeverageRLS), clamped to
// [0, 1].
func nystromLeverage(g []float64, q int, lambda float64, s []int, p []float64, pts []int) ([]float64, error) {
	rows := func(idx []int) *mat.Dense {
		m := mat.NewDense(len(idx), q, nil)
		for r, j := range idx {
			m.SetRow(r, g[j*q:(j+1)*q])
		}
		return m
	}
	gs := rows(s)
	kss := mat.NewSymDense(len(s), nil)
	kss.SymOuterK(1, gs)
	for i := range s {
		kss.SetSym(i, i, kss.At(i, i)+lambda*p[i])
	}
	var ch mat.Cholesky
	if !ch.Factorize(kss) {
		return nil, fmt.Errorf("%w: K_SS + λP is not positive definite", ErrNotFinite)
	}
	var l mat.TriDense
	ch.LTo(&l)
	out := make([]float64, len(pts))
	const chunk = 512
	for lo := 0; lo < len(pts); lo += chunk {
		hi := min(lo+chunk, len(pts))
		gp := rows(pts[lo:hi])
		var kps, y mat.Dense
		kps.Mul(gs, gp.T()) // |S|×chunk: K_S,i
		if err := y.Solve(&l, &kps); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotFinite, err)
		}
		for c, j := range pts[lo:hi] {
			gj := g[j*q : (j+1)*q]
			col := mat.Col(nil, c, &y)
			v := (dot(gj, gj) - dot(col, col)) / lambda
			out[lo+c] = math.Max(0, math.Min(1, v))
		}
	}
	return out, nil
}

// LeverageSample draws m distinct indices with probabilities proportional to the
// weights w (weighted sampling without replacement, Efraimidis & Spirakis 2006: the m
// largest keys u_i^{1/w_i}, u_i uniform from the stream (seed, "coreset/leverage/<i>"),
// compared as log(u_i)/w_i), in decreasing key order. Indices with w_i ≤ 0 come last,
// in index order. A draw depends only on the seed, the index and its
// weight, never on the order of the others.
func LeverageSample(w []float64, m int, seed uint64) []int {
	n := len(w)
	m = min(m, n)
	type keyed struct {
		i   int
		key float64
	}
	ks := make([]keyed, n)
	for i, wi := range w {
		k := math.Inf(-1)
		if wi > 0 {
			u := (float64(rng.Seed(seed, "coreset/leverage/"+strconv.Itoa(i))>>11) + 0.5) / (1 << 53)
			k = math.Log(u) / wi
		}
		ks[i] = keyed{i, k}
	}
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].key > ks[b].key })
	out := make([]int, 0, m)
	for _, k := range ks[:m] {
		out = append(out, k.i)
	}
	return out
}
