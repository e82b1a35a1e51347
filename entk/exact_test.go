package entk

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

var exactSpecs = []string{"mlp:5-7-3", "resmlp:4-6x2-3", "convnet:2x9x9-3-5-4", "convnet:1x5x6-2-3"}

// fdJacobian is the slow reference: J_x by central differences in each parameter, which is
// exact up to rounding for these piecewise-affine-per-parameter networks (see
// TestVJPFiniteDifference), error ≈ 1e-9.
func fdJacobian(t *testing.T, b Backbone, x []float64) []float64 {
	t.Helper()
	d, p := b.OutDim(), b.NumParams()
	jac := make([]float64, d*p)
	params := append([]float64(nil), b.Params()...)
	const h = 1e-6
	outP, outM := make([]float64, d), make([]float64, d)
	for k := range params {
		old := params[k]
		params[k] = old + h
		bp, _ := FromParams(b.Arch(), params)
		bp.Forward(outP, x, bp.NewWorkspace())
		params[k] = old - h
		bm, _ := FromParams(b.Arch(), params)
		bm.Forward(outM, x, bm.NewWorkspace())
		params[k] = old
		for i := 0; i < d; i++ {
			jac[i*p+k] = (outP[i] - outM[i]) / (2 * h)
		}
	}
	return jac
}

// TestJacobianMatchesVJP: J_xᵀ w = Σ_i w_i J_xᵀ e_i. The two sides sum the same products
// in different orders: agreement to 1e-12·(1+|v|).
func TestJacobianMatchesVJP(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, spec := range exactSpecs {
		b, _ := NewBackbone(spec, 17)
		d, p := b.OutDim(), b.NumParams()
		ws := b.NewWorkspace()
		x, w := bbRandVec(r, b.InDim()), bbRandVec(r, d)
		jac := make([]float64, d*p)
		JacobianTo(jac, b, x, ws)
		v := make([]float64, p)
		VJP(b, v, x, w, ws)
		for k := 0; k < p; k++ {
			s := 0.0
			for i := 0; i < d; i++ {
				s += w[i] * jac[i*p+k]
			}
			if math.Abs(s-v[k]) > 1e-12*(1+math.Abs(v[k])) {
				t.Fatalf("%s: (J^T w)[%d] from Jacobian %v, from VJP %v", spec, k, s, v[k])
			}
		}
	}
}

// TestExactKernel checks ExactKernel and ExactDiag against (1/d)Σ_i <J_x^T e_i, J_y^T e_i>
// from finite-difference Jacobians (each entry error ≈ 1e-9, so the kernel, a sum of P·d
// products of O(1) entries, is within ≈ 1e-9·Σ|J_x||J_y|/d; tolerance 1e-6·(1+|k|)), and
// symmetry k(x,y) = k(y,x) to rounding (1e-12 relative).
func TestExactKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, spec := range exactSpecs {
		b, _ := NewBackbone(spec, 19)
		d, p := b.OutDim(), b.NumParams()
		ws := b.NewWorkspace()
		x, y := bbRandVec(r, b.InDim()), bbRandVec(r, b.InDim())
		jx, jy := fdJacobian(t, b, x), fdJacobian(t, b, y)
		ref := func(a, c []float64) float64 {
			s := 0.0
			for i := 0; i < d*p; i++ {
				s += a[i] * c[i]
			}
			return s / float64(d)
		}
		kxy, kyx := ExactKernel(b, x, y, ws), ExactKernel(b, y, x, ws)
		if want := ref(jx, jy); math.Abs(kxy-want) > 1e-6*(1+math.Abs(want)) {
			t.Errorf("%s: k(x,y) = %.12g, reference %.12g", spec, kxy, want)
		}
		if math.Abs(kxy-kyx) > 1e-12*(1+math.Abs(kxy)) {
			t.Errorf("%s: k(x,y) = %.17g but k(y,x) = %.17g", spec, kxy, kyx)
		}
		kxx := ExactDiag(b, x, ws)
		if want := ref(jx, jx); math.Abs(kxx-want) > 1e-6*(1+want) {
			t.Errorf("%s: k(x,x) = %.12g, reference %.12g", spec, kxx, want)
		}
		if k2 := ExactKernel(b, x, x, ws); math.Abs(k2-kxx) > 1e-12*kxx {
			t.Errorf("%s: ExactKernel(x,x) = %.17g, ExactDiag = %.17g", spec, k2, kxx)
		}
	}
}

// TestExactGram checks the Gram matrix entry by entry against ExactKernel (same products,
// different summation order: 1e-12 relative), exact symmetry, and positive
// semidefiniteness: a Gram matrix of vectors has eigenvalues ≥ 0, and rounding can push
// them below by at most ≈ n·ε·λ_max; we allow −1e-12·λ_max.
func TestExactGram(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, spec := range exactSpecs {
		b, _ := NewBackbone(spec, 23)
		for _, n := range []int{1, 7} {
			xs := bbRandVec(r, n*b.InDim())
			g := make([]float64, n*n)
			ExactGramTo(g, b, xs, n)
			ws := b.NewWorkspace()
			D := b.InDim()
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if g[i*n+j] != g[j*n+i] {
						t.Fatalf("%s n=%d: G[%d,%d] = %v ≠ G[%d,%d] = %v", spec, n, i, j, g[i*n+j], j, i, g[j*n+i])
					}
					want := ExactKernel(b, xs[i*D:(i+1)*D], xs[j*D:(j+1)*D], ws)
					if math.Abs(g[i*n+j]-want) > 1e-12*(1+math.Abs(want)) {
						t.Errorf("%s n=%d: G[%d,%d] = %.17g, ExactKernel %.17g", spec, n, i, j, g[i*n+j], want)
					}
				}
			}
			var eig mat.EigenSym
			if !eig.Factorize(mat.NewSymDense(n, g), false) {
				t.Fatalf("%s: eigendecomposition failed", spec)
			}
			vals := eig.Values(nil)
			if lmax := vals[n-1]; vals[0] < -1e-12*lmax {
				t.Errorf("%s n=%d: smallest eigenvalue %v < -1e-12·λmax (λmax = %v)", spec, n, vals[0], lmax)
			}
		}
	}
}
