package certify

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
)

// Jacobian is one point's Jacobian J_x ∈ R^{d×P} (row-major, unpadded) with the summaries
// the variance model reuses across every pair the point enters: the Gram matrix
// G = J Jᵀ (d×d) and the squared column norms ‖J[:,k]‖². Zero padding to the SRHT length
// changes none of them, so only the padded length is carried separately.
//
// NewJacobian retains J (no copy); the caller must not modify it afterwards. A Jacobian is
// immutable after construction and safe for concurrent reads.
type Jacobian struct {
	D, P     int
	J        []float64 // d×P row-major
	Gram     []float64 // d×d, G_ik = ⟨J_i, J_k⟩
	ColNorm2 []float64 // len P, Σ_i J_ik²
	TraceG   float64   // ‖J‖_F² = d·k*(x, x)
}

// NewJacobian computes the summaries of the d×p row-major Jacobian j in O(d²p). It panics
// if len(j) != d*p or d < 1.
func NewJacobian(j []float64, d, p int) *Jacobian {
	if d < 1 || p < 1 || len(j) != d*p {
		panic(fmt.Sprintf("certify: NewJacobian: len(j) = %d, d = %d, p = %d", len(j), d, p))
	}
	jac := &Jacobian{D: d, P: p, J: j, Gram: make([]float64, d*d), ColNorm2: make([]float64, p)}
	for i := 0; i < d; i++ {
		ri := j[i*p : (i+1)*p]
		for k := i; k < d; k++ {
			g := floats.Dot(ri, j[k*p:(k+1)*p])
			jac.Gram[i*d+k] = g
			jac.Gram[k*d+i] = g
		}
		jac.TraceG += jac.Gram[i*d+i]
		for c, v := range ri {
			jac.ColNorm2[c] += v * v
		}
	}
	return jac
}

// Diag returns the exact diagonal kernel k*(x,x) = ‖J_x‖_F²/d.
func (j *Jacobian) Diag() float64 { return j.TraceG / float64(j.D) }

// Workspace holds scratch for ComputePairTerms: the d×d cross-Jacobian and a length-P
// column buffer. One per goroutine; the zero value is ready and grows on first use.
type Workspace struct {
	m   []float64
	col []float64
}

func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	b = b[:n]
	for i := range b {
		b[i] = 0
	}
	return b
}

// PairTerms are the exact, budget-free terms of Prop. two-axis for one pair (x, y), all
// evaluated with M = J_x J_yᵀ, C̄_1 = J_yᵀ J_x / d and C_1 = J_yᵀ w wᵀ J_x, w ~ N(0, I/d).
// Variance combines them for a budget (h, s).
type PairTerms struct {
	D, P int // outputs, padded parameter count used in the SRHT factor

	TraceM    float64 // tr M; the mean k*(x,y) = tr M / d
	MBarNorm2 float64 // ‖M̄‖_F², M̄ = (M+Mᵀ)/2
	PhiMean   float64 // Φ(C̄_1)
	EPhi      float64 // E Φ(C_1), closed form by Isserlis
	Kxx, Kyy  float64 // exact diagonals k*(x,x), k*(y,y)
}

// ComputePairTerms evaluates the terms of Prop. two-axis for the pair (x, y) with the
// SRHT acting on the zero-padded length p (a power of two ≥ x.P). It never forms a P×P
// matrix: with G_x = J_x J_xᵀ, G_y = J_y J_yᵀ, c_k = Σ_i J_x[i,k] J_y[i,k] and
// a_k = ‖J_x[:,k]‖², b_k = ‖J_y[:,k]‖²,
//
//	‖C̄_1‖_F² = (⟨G_x, G_y⟩_F + tr M²) / (2d²)     (‖C‖² = tr CᵀC, tr C² cycle to d×d)
//	Φ(C̄_1)  = 2‖sym C̄_1‖_F² − 2 Σ_k c_k²/d²
//
// and, writing u = J_xᵀw, v = J_yᵀw and using Isserlis' theorem for w ~ N(0, I/d)
// (E[(wᵀAw)(wᵀBw)] = (tr A tr B + 2 tr AB)/d² for symmetric A, B),
//
//	E‖u‖²‖v‖²     = (tr G_x tr G_y + 2⟨G_x, G_y⟩) / d²
//	E⟨u,v⟩²       = ((tr M)² + 2‖M̄‖_F²) / d²
//	E u_k² v_k²   = (a_k b_k + 2 c_k²) / d²
//	E Φ(C_1)      = E‖u‖²‖v‖² + E⟨u,v⟩² − 2 Σ_k E u_k² v_k².
//
// Cost O(d²P) with G_x, G_y already in x and y; it allocates nothing once ws has grown.
// It panics if the shapes of x and y differ or p is not a power of two ≥ x.P.
func ComputePairTerms(x, y *Jacobian, p int, ws *Workspace) PairTerms {
	if x.D != y.D || x.P != y.P {
		panic(fmt.Sprintf("certify: ComputePairTerms: shapes %d×%d and %d×%d differ", x.D, x.P, y.D, y.P))
	}
	if !IsPow2(p) || p < x.P {
		panic(fmt.Sprintf("certify: ComputePairTerms: padded P = %d for %d parameters", p, x.P))
	}
	d, np := x.D, x.P
	ws.m = grow(ws.m, d*d)
	ws.col = grow(ws.col, np)
	m, col := ws.m, ws.col
	for i := 0; i < d; i++ {
		xi := x.J[i*np : (i+1)*np]
		for k := 0; k < d; k++ {
			m[i*d+k] = floats.Dot(xi, y.J[k*np:(k+1)*np])
		}
		yi := y.J[i*np : (i+1)*np]
		for c, v := range xi {
			col[c] += v * yi[c]
		}
	}
	var trM, mNorm2, trM2, gxgy float64
	for i := 0; i < d; i++ {
		trM += m[i*d+i]
		for k := 0; k < d; k++ {
			mik := m[i*d+k]
			mNorm2 += mik * mik
			trM2 += mik * m[k*d+i]
			gxgy += x.Gram[i*d+k] * y.Gram[i*d+k]
		}
	}
	var c2, ab float64
	for c, v := range col {
		c2 += v * v
		ab += x.ColNorm2[c] * y.ColNorm2[c]
	}
	dd := float64(d) * float64(d)
	mBar2 := 0.5 * (mNorm2 + trM2)
	phiMean := (gxgy + trM2 - 2*c2) / dd
	ePhi := (x.TraceG*y.TraceG + 2*gxgy + trM*trM + 2*mBar2 - 2*ab - 4*c2) / dd
	return PairTerms{
		D: d, P: p,
		TraceM: trM, MBarNorm2: mBar2,
		PhiMean: phiMean, EPhi: ePhi,
		Kxx: x.Diag(), Kyy: y.Diag(),
	}
}

// Mean returns E K_{h,s}(x,y) = k*(x,y) = tr M / d.
func (t PairTerms) Mean() float64 { return t.TraceM / float64(t.D) }

// TwoAxis is Var K_{h,s} split as in eq. two-axis.
type TwoAxis struct {
	H, S, P int
	// Factor is (P−s)/((P−1)s), 0 without a sketch.
	Factor float64
	// Output is 2‖M̄‖_F²/(h d²), the head (output-axis) variance.
	Output float64
	// Shared is Factor·Φ(C̄_1): the sketch variance no number of heads removes.
	Shared float64
	// Heads is Factor·(EΦ(C_1) − Φ(C̄_1))/h: the sketch variance heads average away.
	Heads float64
	// Parameter is Shared + Heads.
	Parameter float64
	// Total is Output + Parameter = Var K_{h,s}.
	Total float64
}

// Variance returns eq. two-axis for h heads and SRHT width s (0: no sketch) on the pair's
// padded length. It panics on an invalid budget (see CheckBudget).
func (t PairTerms) Variance(h, s int) TwoAxis {
	if err := CheckBudget(h, s, t.P); err != nil {
		panic(err)
	}
	f := SRHTFactor(t.P, s)
	hf := float64(h)
	v := TwoAxis{H: h, S: s, P: t.P, Factor: f}
	v.Output = 2 * t.MBarNorm2 / (hf * float64(t.D) * float64(t.D))
	v.Shared = f * t.PhiMean
	v.Heads = f * (t.EPhi - t.PhiMean) / hf
	v.Parameter = v.Shared + v.Heads
	v.Total = v.Output + v.Parameter
	return v
}

// Conservative returns eq. conservative-variance for the pair's exact diagonals: a valid
// upper bound on Variance(h, s).Total that needs only k*(x,x) and k*(y,y).
func (t PairTerms) Conservative(h, s int) float64 {
	return ConservativeVariance(t.Kxx, t.Kyy, h, s, t.P)
}

// RelTrace returns r_tr(M̄) = (tr M)²/‖M̄‖_F².
func (t PairTerms) RelTrace() float64 { return RelTrace(t.TraceM, t.MBarNorm2) }
