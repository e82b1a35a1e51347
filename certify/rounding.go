package certify

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Float32Unit is the unit roundoff of rounding to float32 (2⁻²⁴): every entry of the
// stored fit-draw features ψ̃ = fl32(ψ) is within Float32Unit·|ψ_i| of the unrounded one.
const Float32Unit = 0x1p-24

// RoundingBound bounds the residual certificate of the unrounded features from the
// certificate of the stored ones. traceR and traceK are tr R̃ and tr K̃ of greedy
// landmarks Z over the stored features ψ̃ (rows within u·|ψ| of ψ entrywise), and
// factor is the k×k lower-triangular Cholesky factor L of K̃_ZZ (row-major, the greedy
// pivots only). It returns an upper bound on tr R of the same landmarks under the
// kernel of the unrounded features ψ:
//
//	tr R ≤ (√tr R̃ + a·√tr K̃)²,  a = u/(1−u)·(1 + ‖L‖_F/σ_min(L))
//
// Derivation: for a point j let c be the coefficients of the projection of ψ̃_j on the
// span of Ψ̃_Z, so ψ̃_j − Ψ̃_Zᵀc has norm √R̃_jj. The same coefficients on the unrounded
// rows leave ψ_j − Ψ_Zᵀc = (ψ̃_j − Ψ̃_Zᵀc) − e_j + E_Zᵀc with ‖e_j‖ ≤ u/(1−u)·‖ψ̃_j‖,
// ‖E_Zᵀc‖ ≤ u/(1−u)·‖c‖·‖Ψ̃_Z‖_F and ‖c‖ ≤ ‖ψ̃_j‖/σ_min(Ψ̃_Z); Ψ̃_Z Ψ̃_Zᵀ = L Lᵀ gives
// σ_min(Ψ̃_Z) = σ_min(L) and ‖Ψ̃_Z‖_F = ‖L‖_F. The optimal coefficients do no worse, so
// √R_jj ≤ √R̃_jj + a‖ψ̃_j‖, and Minkowski's inequality sums the squares. A factor with
// σ_min(L) = 0 (or none, k = 0) bounds nothing useful: it returns +Inf for k > 0 and,
// for k = 0, (1+u/(1−u))²·tr K̃ (no landmarks: R = K).
func RoundingBound(traceR, traceK float64, factor []float64, k int, u float64) (float64, error) {
	if len(factor) != k*k {
		panic(fmt.Sprintf("certify: RoundingBound: len(factor)=%d for k=%d", len(factor), k))
	}
	if !(traceR >= 0) || !(traceK >= 0) || math.IsInf(traceK, 0) || !(u >= 0 && u < 1) {
		return 0, fmt.Errorf("%w: RoundingBound(traceR=%v, traceK=%v, u=%v)", ErrValue, traceR, traceK, u)
	}
	r := u / (1 - u)
	if k == 0 {
		return (1 + r) * (1 + r) * traceK, nil
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(k, k, factor), mat.SVDNone) {
		return 0, fmt.Errorf("%w: RoundingBound: the SVD of the %d×%d factor did not converge", ErrValue, k, k)
	}
	s := svd.Values(nil)
	smin := s[len(s)-1]
	if !(smin > 0) {
		return math.Inf(1), nil
	}
	var fro float64
	for _, v := range s {
		fro += v * v
	}
	a := r * (1 + math.Sqrt(fro)/smin)
	b := math.Sqrt(traceR) + a*math.Sqrt(traceK)
	return b * b, nil
}
