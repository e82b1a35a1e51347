package coreset

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/lanczos"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// SLQOptions tunes DeffSLQ. Zero fields take the defaults (WithDefaults). Probes and
// Steps are limits: DeffSLQ stops earlier on its own error estimates (see DeffSLQ), so
// raising them costs time only where the estimate needs it.
type SLQOptions struct {
	// Probes is the largest number of Rademacher probe vectors (default 128). They run in
	// batches of slqBatch; DeffSLQ stops after the batch that brings the standard error
	// to at most slqRelSE of the estimate, once at least slqMinProbes ran.
	Probes int
	// Steps is the largest number of Lanczos steps per quadratic form (default 300, capped
	// at the dimension). A form stops earlier once its Gauss and Gauss–Radau estimates,
	// which bracket it, agree to slqQuadTol relative.
	Steps int
	// Deflate is the number k of leading directions treated deterministically (default 64;
	// negative disables deflation). See DeffSLQ.
	Deflate int
	// Power is the number of power iterations of the deflation subspace (default 2).
	Power int
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o SLQOptions) WithDefaults() SLQOptions {
	if o.Probes <= 0 {
		o.Probes = 128
	}
	if o.Steps <= 0 {
		o.Steps = 300
	}
	if o.Deflate == 0 {
		o.Deflate = 64
	}
	if o.Power <= 0 {
		o.Power = 2
	}
	return o
}

// The stopping rules of DeffSLQ. slqRelSE = 0.2% makes the 1% target of the estimate
// (the paper reports ≤ 0.72%) five standard errors away; slqQuadTol = 0.05%
// keeps the quadrature error, which is a bias that more probes do not shrink, a quarter
// of that standard error. slqMinProbes keeps the standard error itself from resting on
// too few probes.
const (
	slqBatch     = 16
	slqMinProbes = 32
	slqRelSE     = 2e-3
	slqQuadTol   = 5e-4
	// slqQuadAbs is an absolute floor of the quadrature tolerance, relative to ‖v‖²: a
	// form whose value is rounding noise (v almost in the null space) stops at once.
	slqQuadAbs = 1e-12
	// slqBlockMax is the most start vectors one lockstep batch runs (the deflation basis
	// goes in chunks of it), bounding the workspace at 3·slqBlockMax·dim floats.
	slqBlockMax = 64
	// slqRadauShift places the Gauss–Radau node at −slqRadauShift·λ, below the spectrum
	// of the PSD matrix even after rounding (Ritz values of a PSD matrix stay above
	// −O(ε‖A‖)), at a cost to the bound of that relative size, far below slqQuadTol.
	slqRadauShift = 1e-8
	// slqBreakdown is internal/base/lanczos's breakdownRel: β_j ≤ 1e-12·max‖A q_i‖ ends a form
	// on an invariant subspace, where Gauss quadrature is exact.
	slqBreakdown = 1e-12
)

// DeffEstimate is an SLQ estimate of the effective dimension.
type DeffEstimate struct {
	// Value is the deflated part plus the mean over probes of the quadrature estimates
	// of (Pz)ᵀ f(A) (Pz).
	Value float64
	// Deflated is the deterministic part Σ_i q_iᵀ f(A) q_i over the deflation basis.
	Deflated float64
	// StdErr is the standard error of the stochastic part (sample standard deviation over
	// probes / √probes): the Monte-Carlo error of the trace estimator.
	StdErr float64
	// QuadErr bounds the quadrature error of Value (a bias, not covered by StdErr): half
	// the width of each form's Gauss/Gauss–Radau bracket, summed over the deflation basis
	// plus its mean over the probes. It is exact arithmetic's bound; without
	// reorthogonalization it holds to rounding.
	QuadErr float64
	// Probes is the number of probes run: at most SLQOptions.Probes, and none when the
	// deflation basis spans the whole space (Deflate ≥ dim, P = 0).
	Probes int
	// Steps is the limit of Lanczos steps per form (SLQOptions.Steps capped at the
	// dimension); StepsUsed the most any form took.
	Steps, StepsUsed int
	Deflate          int
}

// deffFunc is f(x) = x/(x+λ), clamped at 0 for the tiny negative eigenvalues rounding can
// produce on a PSD matrix.
func deffFunc(lambda float64) func(float64) float64 {
	return func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return x / (x + lambda)
	}
}

// DeffFromEigenvalues returns Σ_i λ_i/(λ_i+λ) (eigenvalues ≤ 0 count 0).
func DeffFromEigenvalues(eig []float64, lambda float64) float64 {
	f := deffFunc(lambda)
	var s float64
	for _, e := range eig {
		s += f(e)
	}
	return s
}

// Eigenvalues returns the nonzero-side spectrum of K = G Gᵀ for g (n×q, row-major) from
// the smaller of the Gram matrices G Gᵀ (n×n) and Gᵀ G (q×q), which share their nonzero
// eigenvalues. Dense: O(min(n,q)² max(n,q) + min(n,q)³); for small problems only.
func Eigenvalues(g []float64, n, q int) ([]float64, error) {
	if len(g) != n*q || n < 1 || q < 1 {
		panic(fmt.Sprintf("coreset: Eigenvalues: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	G := mat.NewDense(n, q, g)
	var a *mat.SymDense
	if n <= q {
		a = mat.NewSymDense(n, nil)
		a.SymOuterK(1, G)
	} else {
		a = mat.NewSymDense(q, nil)
		a.SymOuterK(1, G.T())
	}
	var es mat.EigenSym
	if !es.Factorize(a, false) {
		return nil, fmt.Errorf("%w: %d×%d Gram matrix", ErrEigen, a.SymmetricDim(), a.SymmetricDim())
	}
	return es.Values(nil), nil
}

// DeffExact returns d_eff(λ) = tr K (K + λI)⁻¹ = Σ_i λ_i/(λ_i+λ) (Lemma deff) from dense
// eigenvalues. λ must be positive.
func DeffExact(g []float64, n, q int, lambda float64) (float64, error) {
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return 0, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	eig, err := Eigenvalues(g, n, q)
	if err != nil {
		return 0, err
	}
	return DeffFromEigenvalues(eig, lambda), nil
}

// DeffSLQ estimates d_eff(λ) of K = G Gᵀ by stochastic Lanczos quadrature (Ubaru, Chen &
// Saad 2017) from matrix–vector products alone, with the deflation of Hutch++ (Meyer,
// Musco, Musco & Woodruff 2021) to cut the probe variance:
//
//	Q    = orth(A^p Ω),  Ω ∈ R^{dim×k} Gaussian, P = I − Q Qᵀ
//	d_eff = Σ_i q_iᵀ f(A) q_i + E[(Pz)ᵀ f(A) (Pz)],   f(x) = x/(x+λ),
//
// which is an identity for any orthonormal Q. The first sum is deterministic and the
// expectation is estimated with Rademacher probes z. Plain Hutchinson has variance
// 2(‖F‖_F² − Σ F_ii²) with F = f(A), about 2 d_eff when eigenvectors are dense; deflating
// the top-k eigenspace, where f ≈ 1, removes most of it. Probes run in batches of
// slqBatch until the standard error is at most slqRelSE of the estimate (after at least
// slqMinProbes) or opt.Probes ran.
//
// Each quadratic form vᵀ f(A) v is bracketed by Lanczos from v (Golub & Meurant,
// Matrices, Moments and Quadrature with Applications, 2010, ch. 6–7): with f = 1 − λ/(x+λ)
// and the derivatives of 1/(x+λ) alternating in sign, the k-point Gauss rule
// ‖v‖² e1ᵀ f(T_k) e1 is an upper bound and the (k+1)-point Gauss–Radau rule with a node
// at a ≤ λ_min(A), T_k bordered by β_k and α̃ = a + β_k² [(T_k − aI)⁻¹]_kk (ibid. §6.2),
// a lower bound. A form stops when the two agree to slqQuadTol and contributes their
// midpoint; one that runs out of steps contributes the Gauss value, with the bracket's
// width as its error. The bracket matters: when much of the spectrum sits at and above
// λ and ‖A‖/λ is large, the Gauss rule converges slowly (its error decays like
// ((√κ−1)/(√κ+1))^{2k}, κ = (‖A‖+λ)/λ) and every probe errs upward, a bias no number of
// probes averages away: on MNIST's eNTK (n = 3000, q = 1024, λ = 10, ‖A‖/λ ≈ 2·10⁵) a
// fixed 40 steps read d_eff 0.8% high, and a probe's Gauss error is +11 after 40 steps,
// +0.9 after 100, +0.09 after 160. Until the bracket closes the Radau end is the worse
// one (−67 after 40 steps: its node sits where the measure has almost no mass), hence
// Gauss alone when out of steps; once it closes the two errors are about opposite
// (+0.49 and −0.50 after 120 steps) and the midpoint is far better than either.
//
// A is the smaller of G Gᵀ and Gᵀ G (same nonzero spectrum). Up to dimension
// denseGramMax it is formed once and applied in O(dim²); beyond, it is applied as
// G(Gᵀv) or Gᵀ(Gv) in O(n q) without forming it. The forms of a batch run in lockstep,
// their products one vec.DotsTo sweep (Dot's bits, so the result does not depend on the
// batching). Probe i comes from the stream (seed, name+"/probe/i") and Ω from (seed,
// name+"/deflate"), and every stopping rule is a function of the data, so the estimate
// is reproducible.
func DeffSLQ(g []float64, n, q int, lambda float64, seed uint64, name string, opt SLQOptions) (DeffEstimate, error) {
	return deffSLQ(g, n, q, lambda, seed, name, opt, min(n, q) <= denseGramMax)
}

func deffSLQ(g []float64, n, q int, lambda float64, seed uint64, name string, opt SLQOptions, dense bool) (DeffEstimate, error) {
	if len(g) != n*q || n < 1 || q < 1 {
		panic(fmt.Sprintf("coreset: DeffSLQ: len(g)=%d, n=%d, q=%d", len(g), n, q))
	}
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return DeffEstimate{}, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	opt = opt.WithDefaults()
	dim, other := n, q
	if q < n {
		dim, other = q, n
	}
	if dense {
		// Materializing the dim×dim Gram costs dim²·other multiply-adds once (BLAS-3),
		// against 2·dim·other per product for the many products below, so it wins
		// whenever dim is below their number; each product then costs dim².
		G := mat.NewDense(n, q, g)
		a := mat.NewSymDense(dim, nil)
		if dim == n {
			a.SymOuterK(1, G)
		} else {
			a.SymOuterK(1, G.T())
		}
		ad := a.RawSymmetric().Data // upper triangle filled; mirror it for row dots
		for i := 0; i < dim; i++ {
			for j := 0; j < i; j++ {
				ad[i*dim+j] = ad[j*dim+i]
			}
		}
		op := func(dst, v []float64, b int) { // dst_c[i] = Dot(A_i, v_c)
			vec.DotsTo(dst, dim, v, dim, b, ad, dim, dim, dim)
		}
		return slq(dim, op, lambda, seed, name, opt)
	}
	tmp := make([]float64, slqBlockMax*other)
	var op blockOp
	if dim == n {
		op = func(dst, v []float64, b int) { // dst_c = G (Gᵀ v_c)
			for c := 0; c < b; c++ {
				t, vc := tmp[c*q:(c+1)*q], v[c*n:(c+1)*n]
				clear(t)
				for j := 0; j < n; j++ {
					axpy(t, vc[j], g[j*q:(j+1)*q])
				}
			}
			vec.DotsTo(dst, n, tmp, q, b, g, q, n, q)
		}
	} else {
		op = func(dst, v []float64, b int) { // dst_c = Gᵀ (G v_c)
			vec.DotsTo(tmp, n, v, q, b, g, q, n, q)
			for c := 0; c < b; c++ {
				d, t := dst[c*q:(c+1)*q], tmp[c*n:(c+1)*n]
				clear(d)
				for j := 0; j < n; j++ {
					axpy(d, t[j], g[j*q:(j+1)*q])
				}
			}
		}
	}
	return slq(dim, op, lambda, seed, name, opt)
}

// denseGramMax is the largest min(n, q) for which DeffSLQ materializes the Gram matrix
// (6000² float64 = 288 MB).
const denseGramMax = 6000

// DeffSLQOperator is DeffSLQ for a symmetric PSD operator of dimension n given only
// through products (one at a time: the lockstep batches call op once per vector).
func DeffSLQOperator(n int, op lanczos.Operator, lambda float64, seed uint64, name string, opt SLQOptions) (DeffEstimate, error) {
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return DeffEstimate{}, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	bop := func(dst, v []float64, b int) {
		for c := 0; c < b; c++ {
			op(dst[c*n:(c+1)*n], v[c*n:(c+1)*n])
		}
	}
	return slq(n, bop, lambda, seed, name, opt.WithDefaults())
}

// blockOp computes dst_c = A v_c for the b rows v_c of v (b×dim, row-major, b ≤
// slqBlockMax) into the rows of dst. It must not modify v.
type blockOp func(dst, v []float64, b int)

func slq(dim int, op blockOp, lambda float64, seed uint64, name string, opt SLQOptions) (DeffEstimate, error) {
	steps := min(opt.Steps, dim)
	est := DeffEstimate{Steps: steps}
	k := min(opt.Deflate, dim) // k = dim makes the estimate deterministic (P = 0)
	qw := newQuadWork(dim, steps, lambda, op, max(min(k, slqBlockMax), min(opt.Probes, slqBatch)))
	var qb []float64 // k×dim orthonormal rows
	if k > 0 {
		var err error
		qb, err = deflationBasis(dim, k, opt.Power, op, seed, name)
		if err != nil {
			return DeffEstimate{}, err
		}
		est.Deflate = k
		for c0 := 0; c0 < k; c0 += slqBlockMax {
			b := min(slqBlockMax, k-c0)
			used, err := qw.forms(qb[c0*dim:(c0+b)*dim], b)
			if err != nil {
				return DeffEstimate{}, fmt.Errorf("coreset: SLQ deflation vectors %d–%d: %w", c0, c0+b-1, err)
			}
			est.StepsUsed = max(est.StepsUsed, used)
			for c := 0; c < b; c++ {
				est.Deflated += qw.val[c]
				est.QuadErr += qw.qerr[c]
			}
		}
	}
	probes := opt.Probes
	if k == dim { // P = 0: the deflated part is all of tr f(A)
		probes = 0
	}
	z := make([]float64, min(probes, slqBatch)*dim)
	var mean, m2, qmean float64 // Welford
	minProbes := min(probes, slqMinProbes)
	for i := 0; i < probes; {
		b := min(slqBatch, probes-i)
		for c := 0; c < b; c++ {
			zc := z[c*dim : (c+1)*dim]
			r := rng.New(seed, rng.Sub(name+"/probe", i+c))
			for t := range zc {
				if r.Uint64()&1 == 0 {
					zc[t] = 1
				} else {
					zc[t] = -1
				}
			}
			for a := 0; a < est.Deflate; a++ { // z ← P z
				qa := qb[a*dim : (a+1)*dim]
				axpy(zc, -dot(qa, zc), qa)
			}
		}
		used, err := qw.forms(z[:b*dim], b)
		if err != nil {
			return DeffEstimate{}, fmt.Errorf("coreset: SLQ probes %d–%d: %w", i, i+b-1, err)
		}
		est.StepsUsed = max(est.StepsUsed, used)
		for c := 0; c < b; c++ {
			i++
			v := qw.val[c]
			d := v - mean
			mean += d / float64(i)
			m2 += d * (v - mean)
			qmean += (qw.qerr[c] - qmean) / float64(i)
		}
		est.Probes = i
		est.Value = est.Deflated + mean
		if i > 1 {
			est.StdErr = math.Sqrt(m2 / float64(i-1) / float64(i))
		}
		if i >= minProbes && est.StdErr <= slqRelSE*math.Abs(est.Value) {
			break
		}
	}
	est.Value = est.Deflated + mean
	est.QuadErr += qmean
	return est, nil
}

// quadWork brackets the quadratic forms vᵀ f(A) v of a batch of start vectors by
// Lanczos runs in lockstep (see DeffSLQ): one block product per step for all forms still
// running, each stopping on its own bracket. Its buffers are reused from batch to batch.
type quadWork struct {
	dim, steps   int
	lambda, node float64
	op           blockOp
	// cur, prev and w hold, for the running forms in the order of runs, q_j, q_{j−1}
	// and A q_j (each b×dim).
	cur, prev, w []float64
	runs         []quadRun
	tri          []float64 // α and β of every run: 2·steps per batch slot
	val, qerr    []float64 // per start vector: the estimate and its bracket half-width
}

// quadRun is one form's Lanczos state: T_k's diagonal α and β (β_j = ‖r_j‖, β_{k−1}
// couples T_k to the next, untaken, vector), the last pivot of the LDLᵀ factorization of
// T_k − aI (a = node) and whether all its pivots were positive.
type quadRun struct {
	slot        int
	norm2       float64
	anorm       float64
	alpha, beta []float64
	piv         float64
	pd          bool
}

func newQuadWork(dim, steps int, lambda float64, op blockOp, batch int) *quadWork {
	return &quadWork{
		dim: dim, steps: steps, lambda: lambda, node: -slqRadauShift * lambda, op: op,
		cur: make([]float64, batch*dim), prev: make([]float64, batch*dim), w: make([]float64, batch*dim),
		runs: make([]quadRun, 0, batch), tri: make([]float64, 2*batch*steps),
		val: make([]float64, batch), qerr: make([]float64, batch),
	}
}

// forms sets w.val[c] and w.qerr[c] for the b rows v_c of v (not modified) to the
// estimate of v_cᵀ f(A) v_c and its bracket half-width, and returns the most Lanczos
// steps a form took. The recurrence is internal/base/lanczos.Run's without
// reorthogonalization (Golub & Van Loan, Alg. 10.1.1), run here in lockstep so that
// every form stops on its own bracket.
func (w *quadWork) forms(v []float64, b int) (int, error) {
	dim, steps := w.dim, w.steps
	runs := w.runs[:0]
	for c := 0; c < b; c++ {
		vc := v[c*dim : (c+1)*dim]
		n2 := dot(vc, vc)
		if math.IsNaN(n2) || math.IsInf(n2, 0) {
			return 0, fmt.Errorf("%w: start vector %d has squared norm %v", ErrNotFinite, c, n2)
		}
		w.val[c], w.qerr[c] = 0, 0
		if n2 == 0 { // P z = 0: the deflation basis spans everything
			continue
		}
		i, s := len(runs), 1/math.Sqrt(n2)
		for t, x := range vc {
			w.cur[i*dim+t] = x * s
		}
		tri := w.tri[2*c*steps : 2*(c+1)*steps]
		runs = append(runs, quadRun{slot: c, norm2: n2, alpha: tri[:0:steps], beta: tri[steps:steps], pd: true})
	}
	used := 0
	for j := 0; len(runs) > 0; j++ {
		na := len(runs)
		w.op(w.w[:na*dim], w.cur[:na*dim], na)
		used = j + 1
		keep := 0
		for i := range runs {
			r := &runs[i]
			q, wi := w.cur[i*dim:(i+1)*dim], w.w[i*dim:(i+1)*dim]
			aq := math.Sqrt(dot(wi, wi))
			if math.IsNaN(aq) || math.IsInf(aq, 0) {
				return 0, fmt.Errorf("%w: ‖A q_%d‖ = %v", ErrNotFinite, j, aq)
			}
			r.anorm = max(r.anorm, aq)
			if j > 0 {
				axpy(wi, -r.beta[j-1], w.prev[i*dim:(i+1)*dim])
			}
			alpha := dot(q, wi)
			axpy(wi, -alpha, q)
			beta := math.Sqrt(dot(wi, wi))
			r.alpha, r.beta = append(r.alpha, alpha), append(r.beta, beta)
			r.pivot(w.node)
			hi, lo, ok := r.bracket(w.lambda, w.node)
			half, mid := math.Abs(hi-lo)/2, (hi+lo)/2
			switch {
			case beta <= slqBreakdown*r.anorm: // invariant subspace: Gauss is exact
				w.val[r.slot], w.qerr[r.slot] = hi, 0
				continue
			case ok && half <= slqQuadTol*math.Abs(mid)+slqQuadAbs*r.norm2:
				w.val[r.slot], w.qerr[r.slot] = mid, half
				continue
			case j+1 == steps: // out of steps: Gauss, the bracket's closer end before it closes
				if !ok {
					lo = 0 // f ≥ 0
				}
				w.val[r.slot], w.qerr[r.slot] = hi, math.Abs(hi-lo)
				continue
			}
			for t := range wi {
				wi[t] /= beta
			}
			if keep != i {
				copy(w.cur[keep*dim:(keep+1)*dim], q)
				copy(w.w[keep*dim:(keep+1)*dim], wi)
				runs[keep] = *r
			}
			keep++
		}
		runs = runs[:keep]
		w.prev, w.cur, w.w = w.cur, w.w, w.prev
	}
	return used, nil
}

// pivot extends the LDLᵀ factorization of T − aI by the last step's α:
// d_0 = α_0 − a, d_j = α_j − a − β_{j−1}²/d_{j−1}. T_k − aI is positive definite iff every
// d_j > 0, and then [(T_k − aI)⁻¹]_kk = 1/d_{k−1}.
func (r *quadRun) pivot(a float64) {
	k := len(r.alpha)
	d := r.alpha[k-1] - a
	if k > 1 {
		d -= r.beta[k-2] * r.beta[k-2] / r.piv
	}
	r.piv = d
	if !(d > 0) {
		r.pd = false
	}
}

// bracket returns the Gauss estimate hi = ‖v‖²(1 − λ e1ᵀ(T_k + λI)⁻¹e1) ≥ vᵀ f(A) v and,
// when T_k − aI is positive definite (ok), the Gauss–Radau estimate lo ≤ vᵀ f(A) v from
// T_k bordered by β_{k−1} and α̃ = a + β_{k−1}²/d_{k−1}. Each (·)⁻¹_11 is 1/u_0 of the
// bottom-up recurrence u_i = α_i + λ − β_i²/u_{i+1}, whose terms are ≥ λ > 0 for a PSD T:
// O(k) per step.
func (r *quadRun) bracket(lambda, a float64) (hi, lo float64, ok bool) {
	k := len(r.alpha)
	u := r.alpha[k-1] + lambda
	for i := k - 2; i >= 0; i-- {
		u = r.alpha[i] + lambda - r.beta[i]*r.beta[i]/u
	}
	hi = r.norm2 * (1 - lambda/u)
	if !r.pd {
		return hi, 0, false
	}
	bk := r.beta[k-1]
	u = a + bk*bk/r.piv + lambda
	for i := k - 1; i >= 0; i-- {
		u = r.alpha[i] + lambda - r.beta[i]*r.beta[i]/u
	}
	return hi, r.norm2 * (1 - lambda/u), true
}

// deflationBasis returns k orthonormal rows spanning orth(A^p Ω) (randomized subspace
// iteration, Halko, Martinsson & Tropp 2011, Alg. 4.3 with re-orthonormalization after
// every product), Ω Gaussian from the stream (seed, name+"/deflate").
func deflationBasis(dim, k, power int, op blockOp, seed uint64, name string) ([]float64, error) {
	r := rng.New(seed, name+"/deflate")
	b := make([]float64, k*dim)
	for i := range b {
		b[i] = r.NormFloat64()
	}
	tmp := make([]float64, min(k, slqBlockMax)*dim)
	for it := 0; it <= power; it++ {
		for c0 := 0; c0 < k; c0 += slqBlockMax {
			nb := min(slqBlockMax, k-c0)
			rows := b[c0*dim : (c0+nb)*dim]
			op(tmp[:nb*dim], rows, nb)
			copy(rows, tmp[:nb*dim])
		}
		if err := orthonormalizeRows(b, k, dim); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// orthonormalizeRows runs modified Gram–Schmidt twice on the k rows of b (k×dim). A row
// that vanishes (rank < k) is replaced by a unit coordinate vector orthogonalized in turn,
// so the result is always k orthonormal rows.
func orthonormalizeRows(b []float64, k, dim int) error {
	for i := 0; i < k; i++ {
		row := b[i*dim : (i+1)*dim]
		orig := math.Sqrt(dot(row, row))
		if math.IsNaN(orig) || math.IsInf(orig, 0) {
			return fmt.Errorf("%w: deflation basis row %d", ErrNotFinite, i)
		}
		for attempt := 0; ; attempt++ {
			for pass := 0; pass < 2; pass++ {
				for j := 0; j < i; j++ {
					qj := b[j*dim : (j+1)*dim]
					axpy(row, -dot(qj, row), qj)
				}
			}
			nr := math.Sqrt(dot(row, row))
			if nr > 1e-10*orig && nr > 0 {
				for t := range row {
					row[t] /= nr
				}
				break
			}
			if attempt >= dim {
				return fmt.Errorf("%w: cannot complete a basis of %d rows in dimension %d", ErrEigen, k, dim)
			}
			for t := range row {
				row[t] = 0
			}
			row[(i+attempt)%dim] = 1
			orig = 1
		}
	}
	return nil
}

// NystromDeff is the effective dimension d_eff(λ) = Σ_i μ_i/(μ_i + λ) of the Nyström
// approximation K_nZ K_ZZ⁺ K_Zn of greedy landmarks, whose nonzero eigenvalues μ_i are
// those of gram (k×k, row-major: GreedyResult.Gram, Σ_j y_j y_jᵀ over the points'
// coordinates in the pivots' orthonormal basis). It never exceeds k, and it is at most
// the d_eff(λ) of K itself (the approximation is below K in the Loewner order).
func NystromDeff(gram []float64, k int, lambda float64) (float64, error) {
	if len(gram) != k*k {
		panic(fmt.Sprintf("coreset: NystromDeff: len(gram)=%d for k=%d", len(gram), k))
	}
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return 0, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	if k == 0 {
		return 0, nil
	}
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(k, slices.Clone(gram)), false) {
		return 0, fmt.Errorf("%w: the eigendecomposition of the %d×%d Gram matrix did not converge", ErrNotFinite, k, k)
	}
	var d float64
	for _, mu := range es.Values(nil) {
		if mu > 0 {
			d += mu / (mu + lambda)
		}
	}
	return d, nil
}
