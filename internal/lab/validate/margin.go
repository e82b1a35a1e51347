package validate

import (
	"fmt"

	"github.com/cairnhq/cairn/entk"
)

// The linearized-margin study rows (not served; 2026-11-27): the first-order change of the
// query's predicted-class margin under one gradient step on a point i, in the network
// linearized at its trained weights,
//
//	s_i(t) = u_tᵀ J_t J_iᵀ g_i = ⟨J_tᵀ u_t, J_iᵀ g_i⟩
//
// with u_t the margin's cotangent (MarginCotangentTo) and g_i the point's (PointCotangentTo):
// the negative cross-entropy gradient in the logits for GradDot (TracIn with the final
// checkpoint only, Pruthi et al. 2020, "Estimating Training Data Influence by Tracing
// Gradient Descent", eq. 3), its label part alone for LabelNTK (the eNTK's d×d block
// between the query and the point, read in the directions of the query's margin and the
// point's label). Each is scored on the landmark points (a landmark's input is its view,
// as the served rows are) and, as the *_all rows, on every stored point's plain input:
// the pair says how much the restriction to landmarks costs a ranking.
const (
	GradDot     = "graddot"
	GradDotAll  = "graddot_all"
	LabelNTK    = "label_ntk"
	LabelNTKAll = "label_ntk_all"
)

// MarginRows lists the linearized-margin study rows.
var MarginRows = []string{GradDot, GradDotAll, LabelNTK, LabelNTKAll}

// MarginCotangentTo writes the cotangent of the query's predicted-class margin, u = e_c −
// e_o, into u and returns c: c is the largest of the first classes outputs out (the
// predicted class), o the largest of every other output (the margin's competitor, as the
// study's correct-class margin takes it). Ties go to the lower index.
func MarginCotangentTo(u, out []float64, classes int) int {
	if len(u) != len(out) || len(out) < 2 || classes < 1 || classes > len(out) {
		panic(fmt.Sprintf("validate: MarginCotangentTo lengths u %d, out %d, classes %d", len(u), len(out), classes))
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
// (entk.SoftmaxResidualTo negated, bit for bit: what entk.Train's step moves the logits
// by); without, the label part alone centred over the d outputs, g = e_y − 1/d.
func PointCotangentTo(g, out []float64, y int, grad bool) {
	d := len(out)
	if len(g) != d || y < 0 || y >= d {
		panic(fmt.Sprintf("validate: PointCotangentTo lengths g %d, out %d, label %d", len(g), d, y))
	}
	if !grad {
		for k := range g {
			g[k] = -1 / float64(d)
		}
		g[y]++
		return
	}
	entk.SoftmaxResidualTo(g, out, y)
	for k := range g {
		g[k] = -g[k]
	}
}
