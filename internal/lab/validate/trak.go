package validate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// TRAK is the TRAK-style baseline on given feature rows Φ (n×q, row i the features φ_i of
// stored point i): the score of point i for a query with features φ_t is
//
//	score_i(t) = φ_tᵀ (ΦᵀΦ + λI)⁻¹ φ_i
//
// (Park et al. 2023, "TRAK: Attributing Model Behavior at Scale", eq. 13 without the
// per-example loss weights Q, which a label-free feature map does not have, and with one
// model instead of an ensemble). It factors the smaller system: ΦᵀΦ + λI (q×q) when q < n,
// otherwise ΦΦᵀ + λI (n×n), using the push-through identity
// Φ(ΦᵀΦ + λI)⁻¹ = (ΦΦᵀ + λI)⁻¹Φ. It keeps a reference to Φ, which the caller must not
// change.
type TRAK struct {
	phi    *mat.Dense
	lambda float64
	dual   bool
	chol   mat.Cholesky
}

// NewTRAK factors the system for the features phi with λ = rel·tr(ΦᵀΦ)/n, rel times the
// mean squared norm of a feature row (a ridge relative to the features' scale, so the
// same rel fits any backbone). It returns an error wrapping ErrNotPositive when the
// factorization fails and ErrNotFinite when λ is not a positive finite number.
func NewTRAK(phi *mat.Dense, rel float64) (*TRAK, error) {
	n, q := phi.Dims()
	var tr float64
	for i := range n {
		for _, v := range phi.RawRowView(i) {
			tr += v * v
		}
	}
	lambda := rel * tr / float64(n)
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("%w: TRAK ridge λ = %v (rel %v, tr ΦᵀΦ = %v)", ErrNotFinite, lambda, rel, tr)
	}
	t := &TRAK{phi: phi, lambda: lambda, dual: n <= q}
	var g mat.SymDense
	if t.dual {
		g.SymOuterK(1, phi)
	} else {
		g.SymOuterK(1, phi.T())
	}
	if !factorRidge(&t.chol, &g, lambda) {
		s := g.SymmetricDim()
		return nil, fmt.Errorf("%w: TRAK system %d×%d with λ = %v", ErrNotPositive, s, s, lambda)
	}
	return t, nil
}

// factorRidge adds lambda to the diagonal of g (modified) and factors g + λI into c,
// reporting whether it is positive definite: the ridge system of TRAK and Influence.
func factorRidge(c *mat.Cholesky, g *mat.SymDense, lambda float64) bool {
	for i := range g.SymmetricDim() {
		g.SetSym(i, i, g.At(i, i)+lambda)
	}
	return c.Factorize(g)
}

// Lambda is the ridge λ of the system.
func (t *TRAK) Lambda() float64 { return t.lambda }

// ScoresTo writes dst[r][i] = score_i of query r for the queries' features (nq×q, row r
// the features of query r) into dst (nq×n).
func (t *TRAK) ScoresTo(dst, queries *mat.Dense) error {
	n, q := t.phi.Dims()
	nq, qc := queries.Dims()
	if r, c := dst.Dims(); qc != q || r != nq || c != n {
		panic(fmt.Sprintf("validate: TRAK.ScoresTo: dst %d×%d for %d×%d queries against %d×%d features", r, c, nq, qc, n, q))
	}
	var x mat.Dense
	if t.dual {
		// dst = ((ΦΦᵀ + λI)⁻¹ Φ Qᵀ)ᵀ
		var r mat.Dense
		r.Mul(t.phi, queries.T())
		if err := t.chol.SolveTo(&x, &r); err != nil {
			return fmt.Errorf("%w: %w", ErrNotPositive, err)
		}
		dst.Copy(x.T())
		return nil
	}
	// dst = ((ΦᵀΦ + λI)⁻¹ Qᵀ)ᵀ Φᵀ
	if err := t.chol.SolveTo(&x, queries.T()); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPositive, err)
	}
	dst.Mul(x.T(), t.phi.T())
	return nil
}

// Influence is the influence-function form of the linearized-margin score over rows G
// (n×P, row i the point's step J_iᵀg_i): with a_i = ⟨q, r_i⟩ the gradient scores of a
// query q, the score of point i preconditioned by the damped empirical Fisher is
//
//	score_i = qᵀ (GᵀG + λI)⁻¹ r_i = ((GGᵀ + λI)⁻¹ a)_i
//
// (push-through identity, as TRAK's dual system; Koh and Liang 2017, "Understanding
// Black-box Predictions via Influence Functions", eq. 2, with the Gauss–Newton Hessian
// replaced by the rows' Gram matrix as in TRAK eq. 13). So only the n×n Gram matrix of
// the rows is needed, once for every ridge.
type Influence struct {
	gram mat.SymDense
	mean float64 // tr(GGᵀ)/n, the mean squared norm of a row
}

// NewInfluence computes the Gram matrix of the rows g (n×P; not kept).
func NewInfluence(g *mat.Dense) *Influence {
	n, _ := g.Dims()
	f := &Influence{}
	f.gram.SymOuterK(1, g)
	for i := range n {
		f.mean += f.gram.At(i, i) / float64(n)
	}
	return f
}

// ScoresTo writes dst[t] = (GGᵀ + λI)⁻¹ a[t] with λ = rel times the mean squared norm of a
// row, for the gradient scores a[t] (len n each) of every query t. It returns an error
// wrapping ErrNotFinite for a λ that is not positive and finite and ErrNotPositive when
// the system does not factor.
func (f *Influence) ScoresTo(dst, a [][]float64, rel float64) error {
	n := f.gram.SymmetricDim()
	lambda := rel * f.mean
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return fmt.Errorf("%w: influence ridge λ = %v (rel %v)", ErrNotFinite, lambda, rel)
	}
	s := mat.NewSymDense(n, nil)
	s.CopySym(&f.gram)
	var c mat.Cholesky
	if !factorRidge(&c, s, lambda) {
		return fmt.Errorf("%w: influence system %d×%d with λ = %v", ErrNotPositive, n, n, lambda)
	}
	for t, at := range a {
		if len(at) != n || len(dst[t]) != n {
			panic(fmt.Sprintf("validate: Influence.ScoresTo: query %d has %d scores and %d destinations for %d rows", t, len(at), len(dst[t]), n))
		}
		if err := c.SolveVecTo(mat.NewVecDense(n, dst[t]), mat.NewVecDense(n, at)); err != nil {
			return fmt.Errorf("%w: %w", ErrNotPositive, err)
		}
	}
	return nil
}
