package entk

import (
	"fmt"
	"math"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// Factored gradient rows (the gradient ranking, certify.Gradient). For one cotangent c
// of the outputs, the parameter gradient J_xᵀc of a dense backbone is, per Linear, δ_c ⊗ a
// (weight) and δ_c (bias), with a the layer's input and δ_c = Σ_i c_i ∂f_i/∂z its output
// gradient; so two such gradients have
//
//	<J_xᵀc, J_yᵀc'> = Σ_layers (<a_x, a_y> + 1)·<δ_{x,c}, δ_{y,c'}>,
//
// and a gradient row needs Σ(in + out) floats instead of P. A factored gradient row is,
// for each Linear but the last in parameter order, a (in floats) then δ_c (out floats),
// then the last Linear's input and c itself (its δ). It is contracted from the factored
// row (RowTo): δ_c[o] = √d·Σ_i c_i Δ̃[o·d+i]. GradDot32 sums a float32 stored row against a
// float64 query row as Kernel sums an entry: s = (Dot(a_L, a'_L) + 1)·Dot(c, c'), then for
// each layer s = fma(Dot(a, a') + 1, Dot(δ, δ'), s), every Dot a vec.Dot32. Its rounding
// bound (GradError) is RowError's derivation with the two diagonals replaced by the two
// gradients' squared norms (GradNorm2), which Cauchy–Schwarz over the layers allows.

// GradDim is the length of a factored gradient row: Σ over the Linear layers but the
// last of in + out, plus the last one's input width and d.
func (f *Factored) GradDim() int {
	n := f.lastA + f.d
	for _, l := range f.layers {
		n += l.in + l.out
	}
	return n
}

// GradError bounds |GradDot32(p, q) − <J_xᵀc, J_yᵀc'>| for a stored float32 row p and a
// float64 row q whose float64 rows have squared norms n2p and n2q (GradNorm2).
func (f *Factored) GradError(n2p, n2q float64) float64 {
	return f.errC * math.Sqrt(n2p*n2q)
}

// GradTo writes the factored gradient row of x for the cotangent cot writes from f(x)
// (cot(c, out), len d each) into dst (len GradDim); phi is scratch of len Dim.
func (q *FactoredQuery) GradTo(dst, phi, x []float64, cot func(c, out []float64)) {
	f, d := q.f, q.f.d
	if len(dst) != f.GradDim() || len(phi) != f.dim {
		panic(fmt.Sprintf("entk: FactoredQuery.GradTo lengths dst %d, phi %d; want %d, %d", len(dst), len(phi), f.GradDim(), f.dim))
	}
	q.RowTo(phi, x)
	q.cot = growFloats(q.cot, d)
	c := q.cot
	cot(c, q.out)
	sd := math.Sqrt(float64(d))
	o := 0
	for _, l := range f.layers {
		o += copy(dst[o:], phi[l.aOff:l.aOff+l.in])
		for k := range l.out {
			g := phi[l.gOff+k*d : l.gOff+(k+1)*d]
			dst[o+k] = sd * vec.Dot(c, g)
		}
		o += l.out
	}
	o += copy(dst[o:], phi[f.dim-f.lastA:])
	copy(dst[o:], c)
}

// GradDot32 returns the inner product of the two gradients whose factored gradient rows
// are p (float32, widened exactly) and q, summed as the package comment states.
func (f *Factored) GradDot32(p []float32, q []float64) float64 {
	o := f.GradDim() - f.lastA - f.d
	s := (vec.Dot32(p[o:o+f.lastA], q[o:o+f.lastA]) + 1) * vec.Dot32(p[o+f.lastA:o+f.lastA+f.d], q[o+f.lastA:])
	o = 0
	for _, l := range f.layers {
		a := vec.Dot32(p[o:o+l.in], q[o:o+l.in]) + 1
		s = math.FMA(a, vec.Dot32(p[o+l.in:o+l.in+l.out], q[o+l.in:o+l.in+l.out]), s)
		o += l.in + l.out
	}
	return s
}

// GradNorm2 returns ‖J_xᵀc‖² of a float64 factored gradient row q: Σ_layers (‖a‖² + 1)·‖δ‖².
func (f *Factored) GradNorm2(q []float64) float64 {
	o := f.GradDim() - f.lastA - f.d
	s := (vec.Dot(q[o:o+f.lastA], q[o:o+f.lastA]) + 1) * vec.Dot(q[o+f.lastA:], q[o+f.lastA:])
	o = 0
	for _, l := range f.layers {
		s += (vec.Dot(q[o:o+l.in], q[o:o+l.in]) + 1) * vec.Dot(q[o+l.in:o+l.in+l.out], q[o+l.in:o+l.in+l.out])
		o += l.in + l.out
	}
	return s
}
