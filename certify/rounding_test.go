package certify

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/coreset"
)

// roundBits rounds x to p significant bits (relative error at most 2⁻ᵖ).
func roundBits(x float64, p int) float64 {
	f, e := math.Frexp(x)
	return math.Ldexp(math.Round(math.Ldexp(f, p))/math.Exp2(float64(p)), e)
}

// residualTrace is the reference tr R of landmarks rows z over the rows of g (n×q):
// Σ_j ‖g_j − P g_j‖² with P the orthogonal projection on the span of the landmark rows,
// from a QR factorization of the landmarks (gonum), independent of coreset's greedy.
func residualTrace(g []float64, n, q int, z []int) float64 {
	lz := mat.NewDense(q, len(z), nil)
	for c, r := range z {
		for i := range q {
			lz.Set(i, c, g[r*q+i])
		}
	}
	var qr mat.QR
	qr.Factorize(lz)
	var qm mat.Dense
	qr.QTo(&qm)
	basis := qm.Slice(0, q, 0, len(z))
	var tr float64
	for j := range n {
		v := mat.NewVecDense(q, append([]float64(nil), g[j*q:(j+1)*q]...))
		var c, p mat.VecDense
		c.MulVec(basis.T(), v)
		p.MulVec(basis, &c)
		v.SubVec(v, &p)
		tr += mat.Dot(v, v)
	}
	return tr
}

// TestRoundingBound: greedy landmarks selected on rounded features ψ̃; the residual
// trace of the same landmarks on the unrounded ψ (reference: QR projection) never
// exceeds RoundingBound of the rounded certificate, for float32 rounding and for coarse
// roundings (p = 8, 12, 16 bits) where the effect is large enough to see. It is a
// worst-case bound (the factor's condition number enters it; at the coarse roundings it
// is 10⁴–10⁶ times the true change), so it must also be informative where it is used:
// under float32 rounding within 1% of tr R̃ on these features.
func TestRoundingBound(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const n, q, m = 150, 30, 12
	g := make([]float64, n*q)
	for j := range n {
		for i := range q {
			g[j*q+i] = r.NormFloat64() * math.Pow(0.7, float64(i)) // decaying spectrum
		}
	}
	for _, p := range []int{8, 12, 16, 24} {
		u := math.Exp2(-float64(p))
		gt := make([]float64, len(g))
		for i, v := range g {
			gt[i] = roundBits(v, p)
			if p == 24 {
				gt[i] = float64(float32(v))
			}
		}
		res, err := coreset.Greedy(gt, n, q, m, coreset.GreedyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k := res.Greedy
		trRt := res.ResidualTrace[k-1]
		bound, err := RoundingBound(trRt, res.Trace, res.Factor, k, u)
		if err != nil {
			t.Fatal(err)
		}
		trR := residualTrace(g, n, q, res.Pivots[:k])
		if trR > bound {
			t.Errorf("p=%d: tr R of the unrounded features %.17g exceeds the bound %.17g", p, trR, bound)
		}
		if p == 24 && bound-trRt > 1e-2*trRt {
			t.Errorf("float32: bound %.9g is %.3g above tr R̃ = %.9g (more than 1%%)", bound, bound-trRt, trRt)
		}
		t.Logf("p=%d: tr R̃ %.9g, tr R %.9g, bound %.9g", p, trRt, trR, bound)
	}
	if _, err := RoundingBound(-1, 1, nil, 0, Float32Unit); err == nil {
		t.Error("negative trace accepted")
	}
	if b, _ := RoundingBound(0, 2, nil, 0, Float32Unit); !(b >= 2) {
		t.Errorf("no landmarks: bound %v below tr K̃", b)
	}
}
