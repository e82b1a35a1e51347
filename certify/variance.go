package certify

import (
	"fmt"
	"math"
)

// IsPow2 reports whether p is a power of two ≥ 2, the only lengths the SRHT accepts.
func IsPow2(p int) bool { return p >= 2 && p&(p-1) == 0 }

// NextPow2 returns the smallest power of two ≥ max(p, 2): the zero-padded length the SRHT
// works on.
func NextPow2(p int) int {
	q := 2
	for q < p {
		q <<= 1
	}
	return q
}

// CheckBudget validates an evaluation budget (h heads, SRHT width s on padded length p).
// s == 0 means "no sketch".
func CheckBudget(h, s, p int) error {
	switch {
	case h < 1:
		return fmt.Errorf("%w: h = %d, want ≥ 1", ErrBudget, h)
	case !IsPow2(p):
		return fmt.Errorf("%w: padded P = %d is not a power of two ≥ 2", ErrBudget, p)
	case s < 0 || s > p:
		return fmt.Errorf("%w: s = %d, want 0 (no sketch) or 1 ≤ s ≤ P = %d", ErrBudget, s, p)
	}
	return nil
}

// SRHTFactor returns the finite-population factor (P−s)/((P−1)s) of Thm. srht-exact for
// padded length p and width s; it is 0 for s == 0 (no sketch) and for s == p (an exact
// rotation). It panics if (1, s, p) is not a valid budget.
func SRHTFactor(p, s int) float64 {
	if err := CheckBudget(1, s, p); err != nil {
		panic(err)
	}
	if s == 0 {
		return 0
	}
	return float64(p-s) / (float64(p-1) * float64(s))
}

// PhiDense returns Φ(C) = 2(‖C̄‖_F² − Σ_j C_jj²), C̄ = (C+Cᵀ)/2 (eq. srht-exact), for the
// p×p row-major matrix c. It is the plain loop
//
//	for j < k: Φ += 4·((C_jk + C_kj)/2)²
//
// i.e. 2 Σ_{j≠k} C̄_jk², which is what the definition reduces to. O(p²).
func PhiDense(c []float64, p int) float64 {
	if len(c) != p*p {
		panic(fmt.Sprintf("certify: PhiDense: len(c) = %d, want p*p = %d", len(c), p*p))
	}
	var phi float64
	for j := 0; j < p; j++ {
		for k := j + 1; k < p; k++ {
			b := 0.5 * (c[j*p+k] + c[k*p+j])
			phi += b * b
		}
	}
	return 4 * phi
}

// PhiRankOne returns Φ(v uᵀ) = ‖u‖²‖v‖² + ⟨u,v⟩² − 2 Σ_j u_j² v_j² (Thm. srht-exact) in O(P),
// without forming the P×P matrix. tr(SᵀS v uᵀ) = ⟨Su, Sv⟩, so this is the Φ of the
// sketched inner product.
func PhiRankOne(v, u []float64) float64 {
	if len(u) != len(v) {
		panic(fmt.Sprintf("certify: PhiRankOne: len(u) = %d != len(v) = %d", len(u), len(v)))
	}
	var uu, vv, uv, diag float64
	for j, uj := range u {
		vj := v[j]
		uu += uj * uj
		vv += vj * vj
		p := uj * vj
		uv += p
		diag += p * p
	}
	return uu*vv + uv*uv - 2*diag
}

// SRHTVariance returns Var[tr(SᵀSC)] = (P−s)/((P−1)s)·Φ(C) (Thm. srht-exact) given Φ(C).
func SRHTVariance(phi float64, p, s int) float64 { return SRHTFactor(p, s) * phi }

// JLVariance returns the variance of ⟨Su, Sv⟩ for a dense Gaussian sketch with N(0, 1/s)
// entries, (‖u‖²‖v‖² + ⟨u,v⟩²)/s. The paper compares its identity against "the JL rate"
// without writing it out; this is the standard rate of a JL sketch for an inner product,
// and it keeps neither the finite-population factor nor the diagonal correction.
// It is 0 for s == 0 (no sketch).
func JLVariance(u, v []float64, s int) float64 {
	if len(u) != len(v) {
		panic(fmt.Sprintf("certify: JLVariance: len(u) = %d != len(v) = %d", len(u), len(v)))
	}
	if s == 0 {
		return 0
	}
	var uu, vv, uv float64
	for j, uj := range u {
		uu += uj * uj
		vv += v[j] * v[j]
		uv += uj * v[j]
	}
	return (uu*vv + uv*uv) / float64(s)
}

// ConservativeVariance returns the bound of eq. conservative-variance,
//
//	V ≤ k*(x,x)·k*(y,y)·[2/h + (P−s)/((P−1)s)·(2 + 4/h)],
//
// from exact diagonal kernel values (or valid upper bounds) kxx, kyy. It needs no
// Jacobian and is what a daemon uses when the exact Φ terms are unaffordable. It panics on
// an invalid budget; kxx and kyy must be ≥ 0.
func ConservativeVariance(kxx, kyy float64, h, s, p int) float64 {
	if err := CheckBudget(h, s, p); err != nil {
		panic(err)
	}
	f := SRHTFactor(p, s)
	hf := float64(h)
	return kxx * kyy * (2/hf + f*(2+4/hf))
}

// RelTrace returns r_tr(B) = tr(B)²/‖B‖_F² (Prop. two-axis): the output axis adds
// 2/(h·r_tr(M̄)) to the relative variance. ‖B‖_F = 0 forces tr B = 0, where the ratio is
// undefined: it returns NaN.
func RelTrace(trace, frob2 float64) float64 {
	if frob2 == 0 {
		return math.NaN()
	}
	return trace * trace / frob2
}
