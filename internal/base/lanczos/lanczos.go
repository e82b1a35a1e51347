package lanczos

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// Operator computes dst = A v for a symmetric n×n matrix A. It must not modify v and
// must not keep dst or v after returning (Run reuses them).
type Operator func(dst, v []float64)

// breakdownRel is the relative size of β_j, against max_i ||A q_i||, at which the Krylov
// space is declared invariant. With full reorthogonalization the residual of an exactly
// invariant space is rounding noise of order √j·ε·||A|| ≈ 1e-15·||A||, far below it;
// stopping on a genuine β_j ≤ 1e-12·||A|| loses nothing, since every Ritz pair then has a
// residual ≤ 1e-12·||A|| already.
const breakdownRel = 1e-12

// Tridiag is the result of Run: the k×k tridiagonal T_k of the Lanczos decomposition
// A Q_k = Q_k T_k + β_{k-1} q_k e_kᵀ (0-based β indices below), and Q_k when kept.
type Tridiag struct {
	// Alpha is the diagonal of T, length k = Steps().
	Alpha []float64
	// Beta has length k: Beta[j] = ||r_j|| is the norm of the residual after step j.
	// Beta[0..k-2] are the off-diagonals of T; Beta[k-1] couples T to the next, untaken,
	// Lanczos vector and gives the cheap Ritz residuals.
	Beta []float64
	// Q is the n×k orthonormal Lanczos basis (column j is q_j), nil unless reorth.
	Q *mat.Dense
	// StartNorm is ||v0||₂; Quadrature scales by its square.
	StartNorm float64
	// Breakdown reports an early stop on an invariant subspace (k < requested steps).
	Breakdown bool
	// N is the dimension of A.
	N int
}

// Steps returns k, the number of Lanczos steps taken.
func (t *Tridiag) Steps() int { return len(t.Alpha) }

// Start returns a start vector of n independent N(0,1) entries from the named stream
// (seed, name), e.g. Start(m, seed, "fit/init/pci/lanczos"). Its own stream, so drawing
// it never advances any other random state (paper appendix "Details").
func Start(n int, seed uint64, name string) []float64 {
	r := rng.New(seed, name)
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// Run performs min(steps, n) steps of the symmetric Lanczos iteration on the n×n
// operator op from start vector v0 (Golub & Van Loan, Alg. 10.1.1):
//
//	q_0 = v0/||v0||, β_{-1} q_{-1} = 0
//	for j = 0, 1, …:
//	    w   = A q_j − β_{j−1} q_{j−1}
//	    α_j = q_jᵀ w
//	    w   = w − α_j q_j
//	    if reorth: twice { w = w − Q_j (Q_jᵀ w) }   // Q_j = [q_0 … q_j]
//	    β_j = ||w||,  q_{j+1} = w/β_j
//
// It stops early, with Breakdown set, when β_j ≤ 1e-12·max_i ||A q_i|| (an invariant
// subspace). v0 is not modified. Run panics if n < 1, steps < 1 or len(v0) != n; it
// returns ErrZeroStart for a zero or non-finite v0 and ErrNotFinite when op produces a
// NaN or Inf.
func Run(n, steps int, op Operator, v0 []float64, reorth bool) (*Tridiag, error) {
	if n < 1 {
		panic(fmt.Sprintf("lanczos: n = %d < 1", n))
	}
	if steps < 1 {
		panic(fmt.Sprintf("lanczos: steps = %d < 1", steps))
	}
	if len(v0) != n {
		panic(fmt.Sprintf("lanczos: len(v0) = %d, want n = %d", len(v0), n))
	}
	steps = min(steps, n)
	norm0 := floats.Norm(v0, 2)
	if norm0 == 0 || math.IsNaN(norm0) || math.IsInf(norm0, 0) {
		return nil, fmt.Errorf("%w: ||v0|| = %v", ErrZeroStart, norm0)
	}

	t := &Tridiag{
		Alpha:     make([]float64, 0, steps),
		Beta:      make([]float64, 0, steps),
		StartNorm: norm0,
		N:         n,
	}
	// basis holds q_0 … q_{k-1} as the rows of a k×n row-major matrix (Q transposed), so
	// Q_jᵀ w and Q_j h are two Gemv calls. Without reorth only two rows are kept.
	var basis []float64
	if reorth {
		basis = make([]float64, steps*n)
	} else {
		basis = make([]float64, 2*n)
	}
	row := func(j int) []float64 {
		if !reorth {
			j &= 1
		}
		return basis[j*n : (j+1)*n]
	}
	w := make([]float64, n)
	var h []float64
	if reorth {
		h = make([]float64, steps)
	}
	floats.ScaleTo(row(0), 1/norm0, v0)

	var anorm float64
	for j := 0; j < steps; j++ {
		q := row(j)
		op(w, q)
		aq := floats.Norm(w, 2)
		if math.IsNaN(aq) || math.IsInf(aq, 0) {
			return nil, fmt.Errorf("%w: ||A q_%d|| = %v", ErrNotFinite, j, aq)
		}
		anorm = max(anorm, aq)
		if j > 0 {
			floats.AddScaled(w, -t.Beta[j-1], row(j-1))
		}
		alpha := floats.Dot(q, w)
		floats.AddScaled(w, -alpha, q)
		if reorth {
			qj := blas64.General{Rows: j + 1, Cols: n, Stride: n, Data: basis[:(j+1)*n]}
			wv := blas64.Vector{N: n, Inc: 1, Data: w}
			hv := blas64.Vector{N: j + 1, Inc: 1, Data: h[:j+1]}
			for range 2 {
				blas64.Gemv(blas.NoTrans, 1, qj, wv, 0, hv) // h = Q_jᵀ w
				blas64.Gemv(blas.Trans, -1, qj, hv, 1, wv)  // w = w − Q_j h
			}
		}
		beta := floats.Norm(w, 2)
		t.Alpha = append(t.Alpha, alpha)
		t.Beta = append(t.Beta, beta)
		if j+1 == steps {
			break
		}
		if beta <= breakdownRel*anorm {
			t.Breakdown = true
			break
		}
		floats.ScaleTo(row(j+1), 1/beta, w)
	}

	if reorth {
		k := len(t.Alpha)
		t.Q = mat.NewDense(n, k, nil)
		t.Q.Copy(mat.NewDense(k, n, basis[:k*n]).T())
	}
	return t, nil
}

// tridiagEigen returns the eigenvalues of T in descending order and, in the same column
// order, its orthonormal eigenvectors S (k×k).
func (t *Tridiag) tridiagEigen() ([]float64, *mat.Dense, error) {
	k := len(t.Alpha)
	tm := mat.NewSymDense(k, nil)
	for i := range k {
		tm.SetSym(i, i, t.Alpha[i])
		if i+1 < k {
			tm.SetSym(i, i+1, t.Beta[i])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(tm, true) {
		return nil, nil, fmt.Errorf("%w: k = %d", ErrEigen, k)
	}
	asc := es.Values(nil)
	var sAsc mat.Dense
	es.VectorsTo(&sAsc)
	vals := make([]float64, k)
	s := mat.NewDense(k, k, nil)
	for c := range k {
		vals[c] = asc[k-1-c]
		for r := range k {
			s.Set(r, c, sAsc.At(r, k-1-c))
		}
	}
	return vals, s, nil
}

// Ritz returns the Ritz values θ_1 ≥ … ≥ θ_k (eigenvalues of T), the Ritz vectors
// u_i = Q s_i as the columns of an n×k matrix (nil when Q was not kept) and the residual
// norms ρ_i = ||A u_i − θ_i u_i||₂ = β_{k−1}·|e_kᵀ s_i| (Golub & Van Loan, Thm. 10.1.4;
// exact in exact arithmetic and, with full reorthogonalization, to working precision;
// ResidualNorm checks one pair directly). Prop. amplify of the paper turns ρ_i into the
// error bound of the PCI initializer. After a breakdown β_{k−1} is the (tiny) norm
// observed, so the residuals stay honest rather than exactly zero.
func (t *Tridiag) Ritz() (values []float64, vectors *mat.Dense, residuals []float64, err error) {
	vals, s, err := t.tridiagEigen()
	if err != nil {
		return nil, nil, nil, err
	}
	k := len(vals)
	last := t.Beta[k-1]
	res := make([]float64, k)
	for i := range k {
		res[i] = math.Abs(last * s.At(k-1, i))
	}
	if t.Q != nil {
		vectors = mat.NewDense(t.N, k, nil)
		vectors.Mul(t.Q, s)
	}
	return vals, vectors, res, nil
}

// Gauss returns the k-point Gauss quadrature rule of the spectral measure of A seen from
// v0 (Golub & Meurant, Matrices, Moments and Quadrature, Thm. 6.2): nodes θ_i are the
// eigenvalues of T (descending) and weights τ_i² are the squared first components of its
// normalized eigenvectors, so Σ τ_i² = 1.
func (t *Tridiag) Gauss() (nodes, weights []float64, err error) {
	vals, s, err := t.tridiagEigen()
	if err != nil {
		return nil, nil, err
	}
	w := make([]float64, len(vals))
	for i := range w {
		v := s.At(0, i)
		w[i] = v * v
	}
	return vals, w, nil
}

// Quadrature returns ||v0||²·e1ᵀ f(T) e1 = ||v0||² Σ_i τ_i² f(θ_i), the Gauss-quadrature
// estimate of v0ᵀ f(A) v0 and the building block of stochastic Lanczos quadrature
// (Ubaru, Chen & Saad, SIAM J. Matrix Anal. Appl. 2017, eq. (3.3)). It is exact for
// polynomials f of degree ≤ 2k−1 (and for every f after a breakdown).
func (t *Tridiag) Quadrature(f func(float64) float64) (float64, error) {
	nodes, weights, err := t.Gauss()
	if err != nil {
		return 0, err
	}
	var sum float64
	for i, x := range nodes {
		sum += weights[i] * f(x)
	}
	return t.StartNorm * t.StartNorm * sum, nil
}

// ResidualNorm returns ||A u − θ u||₂ computed with one product by op; it checks a Ritz
// pair directly instead of through the cheap β·|e_kᵀ s| estimate. u is not modified.
func ResidualNorm(op Operator, theta float64, u []float64) float64 {
	au := make([]float64, len(u))
	op(au, u)
	floats.AddScaled(au, -theta, u)
	return floats.Norm(au, 2)
}
