package entk

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExactRowsAgainstJacobian: for every architecture kind (sizes that make both
// halves of the split work, and a ConvNet with two conv layers), <φ(x), φ(y)> in float64
// equals the reference k*(x, y) = tr(J_x J_yᵀ)/d from full Jacobians (ExactKernel) to
// 1e-13 relative to sqrt(k*(x,x)·k*(y,y)) — two summation orders of the same float64
// products, so a few hundred u₆₄ at most; ExactTo's return equals <φ, φ> and agrees with
// ExactDiag; and the float32 rows of ExactBatch32To give ExactRowTo entries within
// ExactRowError of the reference. It also records the largest float64 discrepancy, the
// number ExactRowError's ρ allowance is set against.
func TestExactRowsAgainstJacobian(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 14))
	worst := 0.0
	for _, spec := range []string{"mlp:7-5-3", "mlp:9-4", "resmlp:6-8x2-3", "convnet:1x8x8-3-4-5", "convnet:2x12x12-4-3", "convnet:1x28x28-16-32-10"} {
		t.Run(spec, func(t *testing.T) {
			b, err := NewBackbone(spec, 7)
			if err != nil {
				t.Fatal(err)
			}
			in, e := b.InDim(), ExactDim(b)
			const n = 6
			xs := make([]float64, n*in)
			for i := range xs {
				xs[i] = r.Float64()
			}
			ws := b.NewWorkspace()
			phis := make([][]float64, n)
			for _, split := range []bool{false, true} {
				q := newQuery(b, nil, split)
				for i := range n {
					phi := make([]float64, e)
					kxx := q.ExactTo(phi, xs[i*in:(i+1)*in])
					if phis[i] != nil {
						for k := range phi {
							if math.Float64bits(phi[k]) != math.Float64bits(phis[i][k]) {
								t.Fatalf("split=%v: φ(x_%d)[%d] = %v, want the unsplit %v", split, i, k, phi[k], phis[i][k])
							}
						}
					}
					phis[i] = phi
					dot := 0.0
					for _, v := range phi {
						dot += v * v
					}
					want := ExactDiag(b, xs[i*in:(i+1)*in], ws)
					if math.Abs(kxx-want) > 1e-13*want || math.Abs(dot-want) > 1e-13*want {
						t.Fatalf("ExactTo k*(x_%d,x_%d) = %v (<φ,φ> %v), ExactDiag %v", i, i, kxx, dot, want)
					}
				}
			}
			lf := make([]float32, n*e)
			diag := make([]float64, n)
			ExactBatch32To(lf, diag, b, xs, n)
			for i := range n { // whichever worker took row i, it holds φ(x_i) rounded
				for k, v := range phis[i] {
					if lf[i*e+k] != float32(v) {
						t.Fatalf("ExactBatch32To row %d [%d] = %v, want float32(φ) %v", i, k, lf[i*e+k], float32(v))
					}
				}
			}
			row := make([]float64, n)
			for j := range n {
				xj := xs[j*in : (j+1)*in]
				ExactRowTo(row, lf, phis[j])
				for i := range n {
					ref := ExactKernel(b, xs[i*in:(i+1)*in], xj, ws)
					dot := 0.0
					for k, v := range phis[i] {
						dot += v * phis[j][k]
					}
					scale := math.Sqrt(diag[i] * diag[j])
					rel := math.Abs(dot-ref) / scale
					worst = max(worst, rel)
					if rel > 1e-13 {
						t.Errorf("<φ_%d, φ_%d> = %v, ExactKernel %v: relative %g > 1e-13", i, j, dot, ref, rel)
					}
					if bound := ExactRowError(diag[i], diag[j], e); math.Abs(row[i]-ref) > bound {
						t.Errorf("float32 row entry (%d,%d) = %v, ExactKernel %v: |diff| %g > bound %g", i, j, row[i], ref, math.Abs(row[i]-ref), bound)
					}
				}
			}
		})
	}
	t.Logf("largest float64 discrepancy relative to sqrt(kxx·kyy): %.2g", worst)
}

// TestExactDim: the ConvNet's φ is the d conv-parameter rows plus the pooled activations
// and the constant, as the package comment counts them.
func TestExactDim(t *testing.T) {
	for _, c := range []struct {
		spec string
		want int
	}{
		{"convnet:1x28x28-16-32-10", 10*(16*9+16+32*16*9+32) + 32*7*7 + 1},
		{"mlp:7-5-3", 3*(7*5+5) + 5 + 1},
		{"resmlp:6-8x2-3", 3*(6*8+8+2*2*(8*8+8)) + 8 + 1},
	} {
		b, err := NewBackbone(c.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := ExactDim(b); got != c.want {
			t.Errorf("ExactDim(%s) = %d, want %d", c.spec, got, c.want)
		}
	}
}

// TestExactToAllocates: the query path's exact row and φ allocate nothing in steady state
// (docs/architecture.md, "Invariants"), on the convnet (whose row is large enough to split
// between two goroutines) and on the generic path. A garbage collection may empty the helper's
// sync.Pool, costing one allocation now and then, so the bound is below one per query.
func TestExactToAllocates(t *testing.T) {
	for _, spec := range []string{"convnet:1x8x8-3-4-5", "mlp:7-5-3"} {
		b, _ := NewBackbone(spec, 2)
		q := NewExactQuery(b)
		x := make([]float64, b.InDim())
		for i := range x {
			x[i] = float64(i%5) / 5
		}
		phi := make([]float64, ExactDim(b))
		const m = 64
		lf := make([]float32, m*len(phi))
		row := make([]float64, m)
		q.ExactTo(phi, x)
		ExactRowTo(row, lf, phi)
		if a := testing.AllocsPerRun(20, func() { q.ExactTo(phi, x); ExactRowTo(row, lf, phi) }); a >= 1 {
			t.Errorf("%s: %v allocations per query", spec, a)
		}
	}
}
