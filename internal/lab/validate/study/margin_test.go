package study

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"gonum.org/v1/gonum/mat"
)

// TestPointMarginScores: the study rows' scores equal u_tᵀ (J_t J_iᵀ) g_i computed from
// full Jacobians (entk.JacobianTo, d backward passes each) as a d×d block, on a small MLP
// whose d = 5 outputs carry 3 classes. Both sides sum the same P products in another
// order: tolerance 1e-12 relative to Σ|terms|.
func TestPointMarginScores(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-16-5", 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	in := func(n int) [][]float64 {
		x := make([][]float64, n)
		for i := range x {
			x[i] = make([]float64, 6)
			for j := range x[i] {
				x[i][j] = r.NormFloat64()
			}
		}
		return x
	}
	qs, pts := in(3), in(7)
	labels := []int{0, 1, 2, 4, 1, 0, 3}
	const classes = 3
	vt := marginGradients(b, qs, classes)
	d, p := b.OutDim(), b.NumParams()
	ws := b.NewWorkspace()
	jac := func(x []float64) []float64 {
		j := make([]float64, d*p)
		entk.JacobianTo(j, b, x, ws)
		return j
	}
	out := make([]float64, d)
	rows := mat.NewDense(len(pts), p, nil)
	both, norms := pointMarginScores(b, vt, pts, labels, rows)
	for i, x := range pts { // ‖J_iᵀ g_i‖ with g_i the loss gradient, from the Jacobian
		ji := jac(x)
		b.Forward(out, x, ws)
		g := make([]float64, d)
		validate.PointCotangentTo(g, out, labels[i], true)
		n2 := 0.0
		for k := range p {
			s := 0.0
			for c := range d {
				s += ji[c*p+k] * g[c]
			}
			n2 += s * s
			if got := rows.At(i, k); math.Abs(got-s) > 1e-12*(math.Abs(s)+1e-300)+1e-15 {
				t.Errorf("point %d: row[%d] = %v, from the Jacobian %v", i, k, got, s)
			}
		}
		if want := math.Sqrt(n2); math.Abs(norms[i]-want) > 1e-12*want {
			t.Errorf("point %d: norm %v, from the Jacobian %v", i, norms[i], want)
		}
	}
	for g, grad := range []bool{true, false} {
		got := both[g]
		for t0, q := range qs {
			jt := jac(q)
			b.Forward(out, q, ws)
			u := make([]float64, d)
			validate.MarginCotangentTo(u, out, classes)
			for i, x := range pts {
				ji := jac(x)
				b.Forward(out, x, ws)
				g := make([]float64, d)
				validate.PointCotangentTo(g, out, labels[i], grad)
				want, abs := 0.0, 0.0
				for a := range d {
					for c := range d {
						blk := 0.0 // (J_t J_iᵀ)[a, c]
						for k := range p {
							blk += jt[a*p+k] * ji[c*p+k]
							abs += math.Abs(u[a] * g[c] * jt[a*p+k] * ji[c*p+k])
						}
						want += u[a] * blk * g[c]
					}
				}
				if math.Abs(got[t0][i]-want) > 1e-12*abs {
					t.Errorf("grad %v, query %d, point %d: %v, from Jacobians %v", grad, t0, i, got[t0][i], want)
				}
			}
		}
	}
}
