// Package gradref is the slow reference of the gradient ranking (certify.Gradient) that
// tests and cairnctl bench check the served scores against: every quantity from full
// Jacobians (entk.JacobianTo) and the formulas written out, sharing no code with
// internal/serving's rows or entk's cotangents.
package gradref

import (
	"math"
	"slices"

	"github.com/cairnhq/cairn/entk"
)

// Query returns J_tᵀu_t for the query xt on backbone b: u_t = e_c − e_o, c the largest
// of the first classes outputs at xt, o the largest other output (ties to the lower
// index).
func Query(b entk.Backbone, xt []float64, classes int) []float64 {
	d, p := b.OutDim(), b.NumParams()
	jt, ot := jacobian(b, xt)
	c := 0
	for k := 1; k < classes; k++ {
		if ot[k] > ot[c] {
			c = k
		}
	}
	o := -1
	for k := range d {
		if k != c && (o < 0 || ot[k] > ot[o]) {
			o = k
		}
	}
	v := make([]float64, p)
	for j := range v {
		v[j] = jt[c*p+j] - jt[o*p+j]
	}
	return v
}

// Point returns J_iᵀg_i for the point (x, y) on backbone b: g_i = e_y − softmax(f(x)).
func Point(b entk.Backbone, x []float64, y int) []float64 {
	d, p := b.OutDim(), b.NumParams()
	ji, oi := jacobian(b, x)
	mx := slices.Max(oi)
	var z float64
	g := make([]float64, d)
	for k, v := range oi {
		g[k] = math.Exp(v - mx)
		z += g[k]
	}
	for k := range g {
		g[k] = -g[k] / z
	}
	g[y]++
	r := make([]float64, p)
	for j := range r {
		for k := range d {
			r[j] += g[k] * ji[k*p+j]
		}
	}
	return r
}

// Score returns ⟨Query(b, xt, classes), Point(b, x, y)⟩ and the two vectors' norms.
func Score(b entk.Backbone, xt, x []float64, y, classes int) (score, vn, rn float64) {
	v, r := Query(b, xt, classes), Point(b, x, y)
	for j := range v {
		score += v[j] * r[j]
		vn += v[j] * v[j]
		rn += r[j] * r[j]
	}
	return score, math.Sqrt(vn), math.Sqrt(rn)
}

// jacobian returns the full Jacobian J (d×P, row-major) and the outputs f(x) of b at x.
func jacobian(b entk.Backbone, x []float64) (j, out []float64) {
	d, p := b.OutDim(), b.NumParams()
	ws := b.NewWorkspace()
	j, out = make([]float64, d*p), make([]float64, d)
	entk.JacobianTo(j, b, x, ws)
	b.Forward(out, x, ws)
	return j, out
}
