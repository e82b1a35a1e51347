package certify

import (
	"fmt"
	"math"
	"strings"
)

// Ranking names what an answer's scores are (certify's doc "Rankings").
type Ranking string

const (
	// Similarity ranks by the exact eNTK similarity k*(x_t, x_ℓ): which landmarks the
	// network itself sees as closest to the query. It does not depend on the fit.
	Similarity Ranking = "entk"
	// Displacement is the paper's influence I_ℓt = k(x_t, x_ℓ)·ω_ℓ, ω_ℓ = ‖Ã_ℓ − Ã_{0,ℓ}‖₂
	// (eq. conditional-score): the kernel times how far the fit moved the landmark's
	// coefficients.
	Displacement Ranking = "displacement"
	// Representer is the landmark's contribution to the query's latent, projected on it:
	// k(x_t, x_ℓ)·⟨Ã_ℓ, ẑ⟩ with ẑ = z(x_t)/‖z(x_t)‖ and z(x_t) = Σ_ℓ k(x_t, x_ℓ)Ã_ℓ + b
	// (RepresenterTo). Positive scores pull the latent toward where it is.
	Representer Ranking = "representer"
	// Gradient ranks every stored labelled point the model was fitted on, not the
	// landmarks: ⟨J_tᵀu_t, J_iᵀg_i⟩, the first-order change of the query's predicted-class
	// margin (u_t = e_c − e_o) under one gradient step on point i (g_i = e_y −
	// softmax(f(x_i)), its negative loss gradient in its outputs), from the served
	// backbone's exact gradients (entk.MarginCotangentTo, entk.PointCotangentTo). It
	// depends on neither the fit nor the pool, and its LDS against retraining is the
	// highest (docs/validate).
	Gradient Ranking = "gradient"
	// GradientCosine ranks the same points by the cosine of the same two gradients,
	// ⟨J_tᵀu_t, J_iᵀg_i⟩/(‖J_tᵀu_t‖·‖J_iᵀg_i‖) (GradientCosineRadius): the direction of a
	// point's step without its size, so that the few points with large loss gradients
	// do not top most queries. Left out of training (three seeds averaged), its top point
	// lowered the query's margin more than random points did in the median query on MNIST
	// and Fashion-MNIST, where Gradient's did not on Fashion-MNIST (docs/validate).
	GradientCosine Ranking = "gradient_cosine"
)

// Rankings lists every ranking an answer may use, the default first.
var Rankings = []Ranking{GradientCosine, Gradient, Similarity, Displacement, Representer}

// ParseRanking returns the ranking named s, or an error wrapping ErrValue that lists the
// names.
func ParseRanking(s string) (Ranking, error) {
	for _, r := range Rankings {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(Rankings))
	for i, r := range Rankings {
		names[i] = string(r)
	}
	return "", fmt.Errorf("%w: ranking %q, want one of %s", ErrValue, s, strings.Join(names, ", "))
}

// FitFree reports whether the ranking's scores do not depend on the fitted coefficients.
func (r Ranking) FitFree() bool { return r == Similarity || r.AllPoints() }

// AllPoints reports whether the ranking ranks every stored point rather than the
// landmarks.
func (r Ranking) AllPoints() bool { return r == Gradient || r == GradientCosine }

// GradientCosineRadius is the score and radius of the gradient cosine ranking for one
// point from its gradient score a (|a − ⟨q, r⟩| ≤ ra, q and r the exact gradients) and the
// computed norms qn of q and rn of r, each within rel relative of the exact norm:
//
//	score  = a/(qn·rn)
//	radius = (ra + (|a| + ra)·η)/(qn·rn·(1 − η)),  η = 2·rel + 2⁻⁵¹
//
// since |a/D − a*/D*| ≤ |a − a*|/D + |a*|·|D − D*|/(D·D*) and the computed D = qn·rn is
// within η of D* (the two norms' errors and the product's and quotient's rounding),
// inflated by 2⁻²⁰ for the radius's own rounding, and never more than |score| + 1 (a
// cosine lies in [−1, 1]). A zero vector's cosine is 0 by convention: a computed norm of
// 0 means an exact norm of 0 (within rel relative), so the score is 0 exactly.
func GradientCosineRadius(a, ra, qn, rn, rel float64) (score, radius float64) {
	d := qn * rn
	if d == 0 {
		return 0, 0
	}
	eta := 2*rel + 0x1p-51
	score = a / d
	radius = (ra + (math.Abs(a)+ra)*eta) / (d * (1 - eta)) * (1 + 0x1p-20)
	return score, min(radius, math.Abs(score)+1)
}

// CertifyIntervalsTo fills c with the top-K certificate of scores known to within radii:
// |scores[ℓ] − exact_ℓ| ≤ radii[ℓ] for every ℓ (deterministically, or jointly with the
// probability the caller's allocation states). Then certified (eq. observed-separation
// with these radii) means the top-K set equals the exact one. It does not set
// c.Allocation. Errors and panics as CertifyTo: ErrTopK unless 1 ≤ k < m, ErrValue for a
// non-finite score or a negative or non-finite radius.
func (r *Ranker) CertifyIntervalsTo(c *Certificate, scores, radii []float64, k int) error {
	m := len(scores)
	if len(radii) != m {
		panic(fmt.Sprintf("certify: CertifyIntervalsTo lengths scores %d, radii %d", m, len(radii)))
	}
	if k < 1 || k >= m {
		return fmt.Errorf("%w: K = %d for m = %d landmarks, want 1 ≤ K < m", ErrTopK, k, m)
	}
	r.grow(m)
	for l, sc := range scores {
		if err := checkEntry(l, sc, 1, "radius", radii[l]); err != nil {
			return err
		}
	}
	copy(r.scores, scores)
	copy(r.radii, radii)
	r.rank(c, k)
	return nil
}

// RepresenterTo writes the representer scores and their radii for one query:
//
//	z      = b + scale·Σ_ℓ row[ℓ]·A[ℓ,:]          (A is m×k row-major, the active rows)
//	g_ℓ    = scale·⟨A[ℓ,:], z⟩/‖z‖
//	score  = row[ℓ]·g_ℓ
//
// from a kernel row known to within rowErr (|row[ℓ] − k_ℓ| ≤ rowErr[ℓ]). The radius covers
// the row's error in both places it enters: with E = scale·Σ_ℓ rowErr[ℓ]·‖A_ℓ‖ bounding
// ‖z − z*‖, the unit vector moves by at most 2E/‖z‖ (capped at 2), so
// |g_ℓ − g*_ℓ| ≤ Δ_ℓ = scale·‖A_ℓ‖·min(2, 2E/‖z‖), and
//
//	|score_ℓ − k*_ℓ g*_ℓ| ≤ rowErr[ℓ]·(|g_ℓ| + Δ_ℓ) + |row[ℓ]|·Δ_ℓ,
//
// plus a rounding allowance of 16(m+k)u relative to the magnitudes summed (u = 2⁻⁵³).
// z (len k) is scratch. It returns ‖z‖. Inputs are not modified; wrong lengths panic.
func RepresenterTo(score, radius, z, row, rowErr, a, b []float64, scale float64) float64 {
	m, k := len(row), len(b)
	if len(score) != m || len(radius) != m || len(rowErr) != m || len(a) != m*k || len(z) != k {
		panic(fmt.Sprintf("certify: RepresenterTo lengths score %d radius %d row %d rowErr %d a %d b %d z %d",
			len(score), len(radius), m, len(rowErr), len(a), k, len(z)))
	}
	copy(z, b)
	var e, mag float64
	for l, kl := range row {
		al := a[l*k : (l+1)*k]
		w := scale * kl
		var n2 float64
		for j, v := range al {
			z[j] += w * v
			n2 += v * v
		}
		an := scale * math.Sqrt(n2)
		e += rowErr[l] * an
		mag += math.Abs(kl) * an
		radius[l] = an // ‖A_ℓ‖·scale, finished below
	}
	var zn2 float64
	for _, v := range z {
		zn2 += v * v
	}
	zn := math.Sqrt(zn2)
	const u = 0x1p-53
	e += 16 * float64(m+k) * u * (mag + math.Abs(zn))
	move := 2.0
	if zn > 0 {
		move = min(2, 2*e/zn)
	}
	inv := 0.0
	if zn > 0 {
		inv = 1 / zn
	}
	for l, kl := range row {
		al := a[l*k : (l+1)*k]
		var d float64
		for j, v := range al {
			d += v * z[j]
		}
		g := scale * d * inv
		delta := radius[l] * move
		sc := kl * g
		score[l] = sc
		radius[l] = rowErr[l]*(math.Abs(g)+delta) + math.Abs(kl)*delta + 16*float64(k)*u*(math.Abs(kl)*radius[l]+math.Abs(sc))
	}
	return zn
}

// FitStability is the expected top-K Jaccard of a ranking under a refit with another
// seed, for the displacement scores of one query, under the repeated-fit model of Thm.
// fit-floor: a refit's score of landmark ℓ is Gaussian with mean μ_ℓ = κ_ℓ·ω̄_ℓ and
// standard deviation σ_ℓ = |κ_ℓ|·τ_ℓ, independently across landmarks. top are the served
// top-K indices (into kappa). The refit's cut c solves Σ_ℓ Pr[score_ℓ > c] = K (its
// top-K has K members on average), each landmark is in it with p_ℓ = Φ((μ_ℓ − c)/σ_ℓ)
// (1 or 0 when σ_ℓ = 0), and with I = Σ_{ℓ∈top} p_ℓ the expected overlap,
//
//	J = I / (2K − I).
//
// It is a plug-in estimate from R fits (ω̄ and τ² are sample moments). Inputs are not
// modified; unequal lengths panic.
func FitStability(kappa, omegaMean, tau2 []float64, top []int) float64 {
	m, k := len(kappa), len(top)
	if len(omegaMean) != m || len(tau2) != m || k < 1 || k >= m {
		panic(fmt.Sprintf("certify: FitStability lengths kappa %d omegaMean %d tau2 %d top %d", m, len(omegaMean), len(tau2), k))
	}
	p := func(l int, c float64) float64 {
		mu := kappa[l] * omegaMean[l]
		sd := math.Abs(kappa[l]) * math.Sqrt(max(tau2[l], 0))
		if sd == 0 {
			switch {
			case mu > c:
				return 1
			case mu == c:
				return 0.5
			}
			return 0
		}
		return 0.5 * math.Erfc(-(mu-c)/(sd*math.Sqrt2))
	}
	count := func(c float64) float64 {
		var s float64
		for l := range kappa {
			s += p(l, c)
		}
		return s
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for l := range kappa {
		mu := kappa[l] * omegaMean[l]
		sd := math.Abs(kappa[l]) * math.Sqrt(max(tau2[l], 0))
		lo, hi = min(lo, mu-9*sd), max(hi, mu+9*sd)
	}
	lo, hi = lo-1, hi+1 // count(lo) = m > K, count(hi) = 0 < K
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if count(mid) > float64(k) {
			lo = mid
		} else {
			hi = mid
		}
	}
	c := hi // count(hi) ≤ K: with ties in μ and no variance, the cut sits above them
	var in float64
	for _, l := range top {
		in += p(l, c)
	}
	return in / (2*float64(k) - in)
}
