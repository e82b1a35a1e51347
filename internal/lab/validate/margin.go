package validate

import (
	"github.com/cairnhq/cairn/certify"
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
	// Gradient is the served gradient ranking (certify.Gradient): GradDotAll's scores,
	// reported under the name answers use.
	Gradient = string(certify.Gradient)
	// GradientCosine is the served gradient cosine ranking (certify.GradientCosine),
	// reported with GradDotAllCosine's scores: the served ones divide them by the query's
	// gradient norm too, a positive factor per query that changes no order and no LDS.
	GradientCosine = string(certify.GradientCosine)
	GradDot        = "graddot"
	GradDotAll     = "graddot_all"
	LabelNTK       = "label_ntk"
	LabelNTKAll    = "label_ntk_all"
	// GradDotAllCosine is GradDotAll with each point's ‖J_iᵀ g_i‖ divided out (a study
	// row): the direction of a point's step without its size, so that the few points with
	// large loss gradients ("hubs") stop topping most queries.
	GradDotAllCosine = "graddot_all_cosine"
	// GradDotAllIF and GradDotAllIFDamped are GradDotAll preconditioned by the inverse of
	// the rows' damped Gram matrix (Influence; study rows), with ridges InfluenceRidge and
	// InfluenceRidgeDamped times the mean squared norm of a row: the influence-function
	// form, in which a point's score counts only what its step adds to the other points'.
	GradDotAllIF       = "graddot_all_if"
	GradDotAllIFDamped = "graddot_all_if_damped"
)

// The influence rows' ridges, relative to the mean squared norm of a gradient row.
const (
	InfluenceRidge       = 1e-3
	InfluenceRidgeDamped = 1e-1
)

// MarginRows lists the linearized-margin study rows.
var MarginRows = []string{GradDot, GradDotAll, GradDotAllCosine, GradDotAllIF, GradDotAllIFDamped, LabelNTK, LabelNTKAll}

// MarginCotangentTo is entk.MarginCotangentTo (the served gradient ranking's cotangent).
func MarginCotangentTo(u, out []float64, classes int) int {
	return entk.MarginCotangentTo(u, out, classes)
}

// PointCotangentTo is entk.PointCotangentTo (the served gradient ranking's point cotangent).
func PointCotangentTo(g, out []float64, y int, grad bool) { entk.PointCotangentTo(g, out, y, grad) }
