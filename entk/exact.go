package entk

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/floats"
)

// The exact empirical NTK (paper eq. composed, the h, s → ∞ limit; appendix B):
//
//	k*(x, y) = tr(J_x J_yᵀ)/d = (1/d) Σ_i <J_xᵀ e_i, J_yᵀ e_i>,
//
// computed by d vector–Jacobian products per input. These are the reference the sketched
// kernel approximates and the exact terms of the variance model; they cost d backward
// passes per input and d·P memory per Jacobian, so they are for small networks and tests.

// scratch returns ws's exact-kernel buffers, allocating them on first use.
func (ws *Workspace) scratch(b Backbone, withJac bool) (vecP, unit []float64) {
	d, p := b.OutDim(), b.NumParams()
	if len(ws.vecP) != p {
		ws.vecP = make([]float64, p)
	}
	if len(ws.unit) != d {
		ws.unit = make([]float64, d)
	}
	if withJac && len(ws.jac) != d*p {
		ws.jac = make([]float64, d*p)
	}
	return ws.vecP, ws.unit
}

// JacobianTo writes J_x into dst (d×P row-major: row i is J_xᵀ e_i, the gradient of output
// i) by one Forward and d Backward passes on ws. x is not modified.
func JacobianTo(dst []float64, b Backbone, x []float64, ws *Workspace) {
	d, p := b.OutDim(), b.NumParams()
	if len(dst) != d*p {
		panic(fmt.Sprintf("entk: JacobianTo: len(dst) = %d, want d·P = %d", len(dst), d*p))
	}
	_, e := ws.scratch(b, false)
	b.Forward(ws.out(d), x, ws)
	clear(e)
	for i := 0; i < d; i++ {
		e[i] = 1
		b.Backward(dst[i*p:(i+1)*p], e, ws)
		e[i] = 0
	}
}

// ExactDiag returns k*(x, x) = ||J_x||_F²/d = (1/d) Σ_i ||J_xᵀ e_i||².
func ExactDiag(b Backbone, x []float64, ws *Workspace) float64 {
	d := b.OutDim()
	g, e := ws.scratch(b, false)
	b.Forward(ws.out(d), x, ws)
	clear(e)
	s := 0.0
	for i := 0; i < d; i++ {
		e[i] = 1
		b.Backward(g, e, ws)
		e[i] = 0
		s += floats.Dot(g, g)
	}
	return s / float64(d)
}

// ExactKernel returns k*(x, y) = tr(J_x J_yᵀ)/d = (1/d) Σ_i <J_xᵀ e_i, J_yᵀ e_i>.
func ExactKernel(b Backbone, x, y []float64, ws *Workspace) float64 {
	d, p := b.OutDim(), b.NumParams()
	g, e := ws.scratch(b, true)
	JacobianTo(ws.jac, b, x, ws)
	b.Forward(ws.out(d), y, ws)
	s := 0.0
	for i := 0; i < d; i++ {
		e[i] = 1
		b.Backward(g, e, ws)
		e[i] = 0
		s += floats.Dot(ws.jac[i*p:(i+1)*p], g)
	}
	return s / float64(d)
}

// ExactGramTo writes the n×n exact kernel matrix of the n inputs xs (n×D row-major) into
// dst: dst[i*n+j] = k*(x_i, x_j) = <vec J_{x_i}, vec J_{x_j}>/d. Each Jacobian is computed
// once and kept, so it needs n·d·P float64s of memory. Work is split over GOMAXPROCS
// goroutines (each with its own Workspace), all joined before it returns. dst is exactly
// symmetric.
func ExactGramTo(dst []float64, b Backbone, xs []float64, n int) {
	D, d, p := b.InDim(), b.OutDim(), b.NumParams()
	if len(dst) != n*n || len(xs) != n*D {
		panic(fmt.Sprintf("entk: ExactGramTo: len(dst) = %d, len(xs) = %d, want %d and %d", len(dst), len(xs), n*n, n*D))
	}
	dp := d * p
	jac := make([]float64, n*dp)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	parallel := func(f func(worker int)) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(w)
			}()
		}
		wg.Wait()
	}
	parallel(func(w int) {
		ws := b.NewWorkspace()
		for i := w; i < n; i += workers {
			JacobianTo(jac[i*dp:(i+1)*dp], b, xs[i*D:(i+1)*D], ws)
		}
	})
	// Upper triangle by rows; row i holds n−i dot products, so striding rows over workers
	// balances the load.
	parallel(func(w int) {
		for i := w; i < n; i += workers {
			ji := jac[i*dp : (i+1)*dp]
			for j := i; j < n; j++ {
				v := floats.Dot(ji, jac[j*dp:(j+1)*dp]) / float64(d)
				dst[i*n+j] = v
				dst[j*n+i] = v
			}
		}
	})
}
