package onnx

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDgemm checks every path of dgemm (rank-one, matrix–vector, blocked gonum and
// internal/base/gemm sizes) and every transpose against the plain triple loop, on operands
// with padded leading dimensions: C += α·op(A)·op(B) to 1e-13 relative to Σ|terms|.
func TestDgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	sizes := [][3]int{{1, 5, 3}, {4, 1, 3}, {4, 5, 1}, {1, 1, 7}, {3, 4, 5}, {70, 66, 9}, {40, 80, 90}}
	for _, sz := range sizes {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				ra, ca := m, k
				if tA {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tB {
					rb, cb = n, k
				}
				lda, ldb, ldc := ca+2, cb+1, n+3
				a, b := randVals(r, ra*lda, 1), randVals(r, rb*ldb, 1)
				c := randVals(r, m*ldc, 1)
				want, bound := append([]float64(nil), c...), make([]float64, len(c))
				const alpha = -0.75
				for i := range m {
					for j := range n {
						for p := range k {
							var av, bv float64
							if tA {
								av = a[p*lda+i]
							} else {
								av = a[i*lda+p]
							}
							if tB {
								bv = b[j*ldb+p]
							} else {
								bv = b[p*ldb+j]
							}
							want[i*ldc+j] += alpha * av * bv
							bound[i*ldc+j] += math.Abs(alpha * av * bv)
						}
					}
				}
				dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
				for i := range c {
					if math.Abs(c[i]-want[i]) > 1e-13*(bound[i]+math.Abs(want[i])) {
						t.Fatalf("m,n,k = %d,%d,%d tA %v tB %v: c[%d] = %v, want %v", m, n, k, tA, tB, i, c[i], want[i])
					}
				}
			}
		}
	}
}

// TestMatMulTransposedWeight: a MatMul whose B is a parameter's 2-D Transpose (how PyTorch
// exports a Linear on a sequence with do_constant_folding=False) reads the parameter in
// place: no index-map step is left, and the function, its VJP (central differences) and
// BackwardHeads are those of the same network with the transposed weight stored as its
// own initializer, entry for entry (the gradient of W[n, k] is that of Wᵀ[k, n]), to
// 1e-14 relative (the same products, packed differently). With the Transpose's output
// read by a second node as well, its step stays and the result is still right.
func TestMatMulTransposedWeight(t *testing.T) {
	const seq, K, N = 5, 6, 7
	r := rand.New(rand.NewPCG(13, 1))
	pre, w, bias := randVals(r, K, 1), randVals(r, N*K, 1), randVals(r, N, 1)
	wt := make([]float64, K*N)
	for n := range N {
		for k := range K {
			wt[k*N+n] = w[n*K+k]
		}
	}
	build := func(fused, second bool, inShape ...int64) *Model {
		b := newBuilder(17)
		b.input("x", inShape...)
		a := b.node("Add", []string{"x", b.initF("pre.bias", []int{K}, pre)}) // so that A has a gradient
		var bw string
		if fused {
			bw = b.node("Transpose", []string{b.initF("fc.weight", []int{N, K}, w)}, aInts("perm", 1, 0))
		} else {
			bw = b.initF("fc.weightT", []int{K, N}, wt)
		}
		y := b.node("Add", []string{b.node("MatMul", []string{a, bw}), b.initF("fc.bias", []int{N}, bias)})
		if second { // the transposed weight read again: y + the column means of Wᵀ
			y = b.node("Add", []string{y, b.node("ReduceMean", []string{bw}, aInts("axes", 0), aInt("keepdims", 0))})
		}
		b.output(y)
		m, err := LoadBytes(b.bytes(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, shape := range [][]int64{{1, seq, K}, {1, K}, {1, 2, seq, K}} {
		fused, plain := build(true, false, shape...), build(false, false, shape...)
		for _, st := range fused.steps {
			if _, ok := st.k.(*mapKernel); ok {
				t.Errorf("%v: a %s step is left; the MatMul should read the weight in place", shape, st.op)
			}
		}
		x := randVals(r, fused.InDim(), 1)
		checkVJP(t, "fused", fused, x, r)
		checkVJP(t, "fused, read twice", build(true, true, shape...), x, r)
		h, d := 3, fused.OutDim()
		hw := randVals(r, h*d, 1)
		got, want := forwardHeads(fused, x, hw, h), forwardHeads(plain, x, hw, h)
		P := fused.NumParams() // pre.bias, the weight, fc.bias
		for j := range h {
			for n := range N {
				for k := range K {
					g, v := got[j*P+K+n*K+k], want[j*P+K+k*N+n]
					if math.Abs(g-v) > 1e-14*max(1, math.Abs(v)) {
						t.Errorf("%v head %d: dW[%d,%d] = %.17g, dWᵀ[%d,%d] = %.17g", shape, j, n, k, g, k, n, v)
					}
				}
			}
			for _, i := range slices.Concat(span(0, K), span(K+N*K, P)) { // the biases
				if g, v := got[j*P+i], want[j*P+i]; math.Abs(g-v) > 1e-14*max(1, math.Abs(v)) {
					t.Errorf("%v head %d: dL/dp[%d] = %.17g, want %.17g", shape, j, i, g, v)
				}
			}
		}
	}
}

// span is lo, lo+1, …, hi−1.
func span(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// forwardHeads is one Forward and BackwardHeads with h heads hw on a fresh workspace.
func forwardHeads(m *Model, x, hw []float64, h int) []float64 {
	ws := m.NewWorkspace()
	m.Forward(make([]float64, m.OutDim()), x, ws)
	g := make([]float64, h*m.NumParams())
	m.BackwardHeads(g, hw, h, ws)
	return g
}
