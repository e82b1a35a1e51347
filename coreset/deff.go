package coreset

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/lanczos"
	"github.com/cairnhq/cairn/internal/rng"
)

// SLQOptions tunes DeffSLQ. Zero fields take the defaults.
type SLQOptions struct {
	// Probes is the number of Rademacher probe vectors (default 64).
	Probes int
	// Steps is the number of Lanczos steps per probe (default 40, capped at the dimension).
	Steps int
	// Deflate is the number k of leading directions treated deterministically (default 64;
	// negative disables deflation). See DeffSLQ.
	Deflate int
	// Power is the number of power iterations of the deflation subspace (default 2).
	Power int
}

func (o SLQOptions) withDefaults() SLQOptions {
	if o.Probes <= 0 {
		o.Probes = 64
	}
	if o.Steps <= 0 {
		o.Steps = 40
	}
	if o.Deflate == 0 {
		o.Deflate = 64
	}
	if o.Power <= 0 {
		o.Power = 2
	}
	return o
}

// DeffEstimate is an SLQ estimate of the effective dimension.
type DeffEstimate struct {
	// Value is the deflated part plus the mean over probes of the Gauss-quadrature
	// estimates of (Pz)ᵀ f(A) (Pz).
	Value float64
	// Deflated is the deterministic part Σ_i q_iᵀ f(A) q_i over the deflation basis.
	Deflated float64
	// StdErr is the standard error of the stochastic part (sample standard deviation over
	// probes / √probes): the Monte-Carlo error of the trace estimator. The quadrature error
	// of Steps Lanczos steps is not included; Gauss quadrature is exact for polynomials of
	// degree 2·Steps−1 and f(x) = x/(x+λ) is analytic on the spectrum, so it decays
	// geometrically in Steps.
	StdErr  float64
	Probes  int
	Steps   int
	Deflate int
}

// deffFunc is f(x) = x/(x+λ), clamped at 0 for the tiny negative Ritz values rounding can
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
// which is an identity for any orthonormal Q. Each quadratic form v ᵀf(A) v is the Gauss
// quadrature ||v||² e1ᵀ f(T) e1 of Lanczos from v; the first sum is deterministic and the
// expectation is estimated with N Rademacher probes z. Plain Hutchinson has variance
// 2(‖F‖_F² − Σ F_ii²) with F = f(A), about 2 d_eff when eigenvectors are dense; deflating
// the top-k eigenspace, where f ≈ 1, removes most of it. A is the smaller of G Gᵀ and Gᵀ G
// (same nonzero spectrum). Up to dimension denseGramMax it is formed once and applied in
// O(dim²); beyond, it is applied as G(Gᵀv) or Gᵀ(Gv) in O(n q) without forming it.
// Probe i comes from the stream (seed, name+"/probe/i"), so the estimate is reproducible.
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
	opt = opt.withDefaults()
	dim, other := n, q
	if q < n {
		dim, other = q, n
	}
	if dense {
		// Materializing the dim×dim Gram costs dim²·other multiply-adds once (BLAS-3),
		// against 2·dim·other per product for the ~(k+2N)·Steps products below, so it
		// wins whenever dim < (k+2N)·Steps; each product then costs dim².
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
		op := func(dst, v []float64) {
			for i := range dst {
				dst[i] = dot(ad[i*dim:(i+1)*dim], v)
			}
		}
		return slq(dim, op, lambda, seed, name, opt)
	}
	tmp := make([]float64, other)
	var op lanczos.Operator
	if dim == n {
		op = func(dst, v []float64) { // dst = G (Gᵀ v)
			for k := range tmp {
				tmp[k] = 0
			}
			for j := 0; j < n; j++ {
				axpy(tmp, v[j], g[j*q:(j+1)*q])
			}
			for j := 0; j < n; j++ {
				dst[j] = dot(g[j*q:(j+1)*q], tmp)
			}
		}
	} else {
		op = func(dst, v []float64) { // dst = Gᵀ (G v)
			for j := 0; j < n; j++ {
				tmp[j] = dot(g[j*q:(j+1)*q], v)
			}
			for k := range dst {
				dst[k] = 0
			}
			for j := 0; j < n; j++ {
				axpy(dst, tmp[j], g[j*q:(j+1)*q])
			}
		}
	}
	return slq(dim, op, lambda, seed, name, opt)
}

// denseGramMax is the largest min(n, q) for which DeffSLQ materializes the Gram matrix
// (6000² float64 = 288 MB).
const denseGramMax = 6000

// DeffSLQOperator is DeffSLQ for a symmetric PSD operator of dimension n given only
// through products.
func DeffSLQOperator(n int, op lanczos.Operator, lambda float64, seed uint64, name string, opt SLQOptions) (DeffEstimate, error) {
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return DeffEstimate{}, fmt.Errorf("%w: lambda=%v must be positive and finite", ErrBudget, lambda)
	}
	return slq(n, op, lambda, seed, name, opt.withDefaults())
}

func slq(dim int, op lanczos.Operator, lambda float64, seed uint64, name string, opt SLQOptions) (DeffEstimate, error) {
	steps := opt.Steps
	if steps > dim {
		steps = dim
	}
	f := deffFunc(lambda)
	z := make([]float64, dim)
	est := DeffEstimate{Probes: opt.Probes, Steps: steps}
	var qb []float64 // k×dim orthonormal rows
	k := opt.Deflate
	if k > dim { // k = dim makes the estimate deterministic (P = 0)
		k = dim
	}
	if k > 0 {
		var err error
		qb, err = deflationBasis(dim, k, opt.Power, op, seed, name)
		if err != nil {
			return DeffEstimate{}, err
		}
		est.Deflate = k
		for i := 0; i < k; i++ {
			td, err := lanczos.Run(dim, steps, op, qb[i*dim:(i+1)*dim], false)
			if err != nil {
				return DeffEstimate{}, fmt.Errorf("coreset: SLQ deflation vector %d: %w", i, err)
			}
			v, err := td.Quadrature(f)
			if err != nil {
				return DeffEstimate{}, fmt.Errorf("coreset: SLQ deflation vector %d: %w", i, err)
			}
			est.Deflated += v
		}
	}
	var mean, m2 float64 // Welford
	for i := 0; i < opt.Probes; i++ {
		r := rng.New(seed, rng.Sub(name+"/probe", i))
		for k := range z {
			if r.Uint64()&1 == 0 {
				z[k] = 1
			} else {
				z[k] = -1
			}
		}
		for a := 0; a < est.Deflate; a++ { // z ← P z
			qa := qb[a*dim : (a+1)*dim]
			axpy(z, -dot(qa, z), qa)
		}
		td, err := lanczos.Run(dim, steps, op, z, false)
		if errors.Is(err, lanczos.ErrZeroStart) {
			v := 0.0 // P z = 0: the deflation basis spans everything
			d := v - mean
			mean += d / float64(i+1)
			m2 += d * (v - mean)
			continue
		}
		if err != nil {
			return DeffEstimate{}, fmt.Errorf("coreset: SLQ probe %d: %w", i, err)
		}
		v, err := td.Quadrature(f)
		if err != nil {
			return DeffEstimate{}, fmt.Errorf("coreset: SLQ probe %d: %w", i, err)
		}
		d := v - mean
		mean += d / float64(i+1)
		m2 += d * (v - mean)
	}
	est.Value = est.Deflated + mean
	if opt.Probes > 1 {
		est.StdErr = math.Sqrt(m2 / float64(opt.Probes-1) / float64(opt.Probes))
	}
	return est, nil
}

// deflationBasis returns k orthonormal rows spanning orth(A^p Ω) (randomized subspace
// iteration, Halko, Martinsson & Tropp 2011, Alg. 4.3 with re-orthonormalization after
// every product), Ω Gaussian from the stream (seed, name+"/deflate").
func deflationBasis(dim, k, power int, op lanczos.Operator, seed uint64, name string) ([]float64, error) {
	r := rng.New(seed, name+"/deflate")
	b := make([]float64, k*dim)
	for i := range b {
		b[i] = r.NormFloat64()
	}
	tmp := make([]float64, dim)
	for it := 0; it <= power; it++ {
		for i := 0; i < k; i++ {
			row := b[i*dim : (i+1)*dim]
			op(tmp, row)
			copy(row, tmp)
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
