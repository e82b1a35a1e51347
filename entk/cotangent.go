package entk

import "fmt"

// The gradient ranking (certify.Gradient) and the validate study's linearized-margin rows
// score a stored point i for a query t by the first-order change of the query's
// predicted-class margin under one gradient step on i, in the network linearized at its
// weights:
//
//	s_i(t) = u_tᵀ J_t J_iᵀ g_i = ⟨J_tᵀ u_t, J_iᵀ g_i⟩
//
// with u_t the margin's cotangent (MarginCotangentTo) and g_i the point's
// (PointCotangentTo): TracIn with the final checkpoint only (Pruthi et al. 2020,
// "Estimating Training Data Influence by Tracing Gradient Descent", eq. 3). Each side is
// one forward and one backward pass (Backbone.Backward).

// MarginCotangentTo writes the cotangent of the query's predicted-class margin, u = e_c −
// e_o, into u and returns c: c is the largest of the first classes outputs out (the
// predicted class), o the largest of every other output (the margin's competitor). Ties
// go to the lower index. Wrong lengths panic.
func MarginCotangentTo(u, out []float64, classes int) int {
	if len(u) != len(out) || len(out) < 2 || classes < 1 || classes > len(out) {
		panic(fmt.Sprintf("entk: MarginCotangentTo lengths u %d, out %d, classes %d", len(u), len(out), classes))
	}
	c := 0
	for k := 1; k < classes; k++ {
		if out[k] > out[c] {
			c = k
		}
	}
	o := -1
	for k, v := range out {
		if k != c && (o < 0 || v > out[o]) {
			o = k
		}
	}
	clear(u)
	u[c], u[o] = 1, -1
	return c
}

// PointCotangentTo writes point i's cotangent for label y into g: with grad, the negative
// gradient of its softmax cross-entropy in the logits out, g = e_y − softmax(out)
// (SoftmaxResidualTo negated, bit for bit: what Train's step moves the logits by);
// without, the label part alone centred over the d outputs, g = e_y − 1/d. Wrong lengths
// or a label outside [0, d) panic.
func PointCotangentTo(g, out []float64, y int, grad bool) {
	d := len(out)
	if len(g) != d || y < 0 || y >= d {
		panic(fmt.Sprintf("entk: PointCotangentTo lengths g %d, out %d, label %d", len(g), d, y))
	}
	if !grad {
		for k := range g {
			g[k] = -1 / float64(d)
		}
		g[y]++
		return
	}
	SoftmaxResidualTo(g, out, y)
	for k := range g {
		g[k] = -g[k]
	}
}
