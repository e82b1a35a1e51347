package entk

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// Exact feature map. Every backbone here ends in a Linear layer (weight W [d, A], bias,
// the last two tensors of Arch.Tensors) whose input is a = a_L(x). Its block of the
// Jacobian row J_xᵀe_i is e_i ⊗ a (weight) and e_i (bias), so
//
//	k*(x, y) = (1/d) Σ_i <J_xᵀe_i, J_yᵀe_i> = (1/d) Σ_i <g_i(x), g_i(y)> + a(x)·a(y) + 1
//
// with g_i the rows restricted to the parameters before the Linear ("body"). The map
//
//	φ(x) = [d^{-1/2} g_1(x); …; d^{-1/2} g_d(x); a(x); 1]      (length ExactDim)
//
// therefore has <φ(x), φ(y)> = k*(x, y) exactly in real arithmetic, and costs one Forward
// and the d body rows of a backward sweep: for the ConvNet the d·P_conv rows the Query
// already computes for the exact diagonal plus the A pooled activations (49,569 floats for
// convnet:1x28x28-16-32-10 against d·P = 204,900 for the full Jacobian). The order of
// the body entries is an implementation detail (ConvNet: per conv layer, channel-major
// weight blocks then biases); only inner products between φs of the same backbone mean
// anything.

// ExactDim returns the length of φ for b: d·(P − d·A − d) + A + 1. An ONNX backbone whose
// parameters do not end in a final Linear (onnx.Model.FinalLinear) has A = −1: no closed
// form, φ = [d^{-1/2} g_1; …; d^{-1/2} g_d] over all P parameters, d·P long.
func ExactDim(b Backbone) int {
	d, a := b.OutDim(), lastInDim(b)
	return d*(b.NumParams()-d*a-d) + a + 1
}

// lastInDim returns A, the input width of b's final Linear (−1 for an ONNX backbone
// without one).
func lastInDim(b Backbone) int {
	if o, ok := b.(*ONNX); ok {
		return o.exactLinearIn()
	}
	a, err := ParseArch(b.Arch())
	if err != nil {
		panic(fmt.Sprintf("entk: backbone arch %q does not parse: %v", b.Arch(), err))
	}
	ts := a.Tensors()
	return ts[len(ts)-2].Shape[1]
}

// ExactTo writes φ(x) (see ExactDim) into dst and returns k*(x, x) = <φ(x), φ(x)>
// (computed as the Dot of dst with itself). x is not modified; it panics on wrong
// lengths. Like FeaturesDiagTo it splits the work over the caller's goroutine and at most
// one helper, joined before it returns, and allocates nothing in steady state.
func (q *Query) ExactTo(dst, x []float64) (kxx float64) {
	b := q.b
	if len(dst) != q.exDim || len(x) != b.InDim() {
		panic(fmt.Sprintf("entk: Query.ExactTo lengths dst %d, x %d; want %d, %d", len(dst), len(x), q.exDim, b.InDim()))
	}
	d := b.OutDim()
	c := 1 / math.Sqrt(float64(d))
	q.dst, q.x = dst, x
	defer func() { q.dst, q.x = nil, nil }()
	if q.conv == nil {
		q.phase = phaseGenericExact
		q.both()
		return vec.Dot(dst, dst)
	}
	cq, h0 := q.conv, q.half[0]
	q.convRows(x)
	o := 0
	for l := range cq.n.convs {
		for _, v := range cq.jw[l] {
			dst[o] = c * v
			o++
		}
		for _, v := range cq.jb[l] {
			dst[o] = c * v
			o++
		}
	}
	o += copy(dst[o:], h0.ws.pooled[len(cq.n.convs)-1])
	dst[o] = 1
	return vec.Dot(dst, dst)
}

// genericExactHalf runs one Forward on h's workspace and the Backward of the unit vectors
// e_i, e0 ≤ i < e1, writing block i of φ; the half that holds e_0 also writes a (row 0 of
// the final Linear's weight gradient) and the constant 1.
func (q *Query) genericExactHalf(h *queryHalf) {
	if h.e0 == h.e1 {
		return
	}
	b := q.b
	d, a, body := b.OutDim(), q.exA, q.exBody
	c := 1 / math.Sqrt(float64(d))
	b.Forward(h.out, q.x, h.ws)
	e := h.unit
	clear(e)
	for i := h.e0; i < h.e1; i++ {
		e[i] = 1
		b.Backward(h.grad, e, h.ws)
		e[i] = 0
		blk := q.dst[i*body : (i+1)*body]
		for k, v := range h.grad[:body] {
			blk[k] = c * v
		}
		if i == 0 && a >= 0 {
			copy(q.dst[d*body:d*body+a], h.grad[body:body+a])
			q.dst[d*body+a] = 1
		}
	}
}

// ExactBatch32To writes φ of the n rows of xs (n×InDim) into dst (n×ExactDim), rounded to
// float32, on GOMAXPROCS goroutines (each with its own Query), joined before it returns;
// it returns k*(x_i, x_i) computed from the float64 φ (before rounding) in diag (len n).
// xs is not modified; it panics on wrong lengths.
func ExactBatch32To(dst []float32, diag []float64, b Backbone, xs []float64, n int) {
	e, in := ExactDim(b), b.InDim()
	if len(dst) != n*e || len(diag) != n || len(xs) != n*in {
		panic(fmt.Sprintf("entk: ExactBatch32To lengths dst %d, diag %d, xs %d for n = %d (dim %d, in %d)",
			len(dst), len(diag), len(xs), n, e, in))
	}
	batch32To(dst, diag, xs, n, e, in, func() func(phi, x []float64) float64 {
		return newQuery(b, nil, false).ExactTo
	})
}

// batch32To writes row(x_i) of the n rows of xs (n×in) into dst (n×e), rounded to
// float32, and the diagonal row returns into diag[i], on GOMAXPROCS goroutines, each
// with its own row function from newRow (its workspace), joined before it returns: the
// shared loop of ExactBatch32To and Factored.Batch32To. The workers take the next row
// from a shared counter, so one whose thread is descheduled leaves its rows to the
// others instead of finishing a fixed share alone; each row's bits depend on its input
// only, not on which worker computed it.
func batch32To(dst []float32, diag, xs []float64, n, e, in int, newRow func() func(phi, x []float64) float64) {
	workers := min(runtime.GOMAXPROCS(0), max(n, 1))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := newRow()
			phi := make([]float64, e)
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				diag[i] = row(phi, xs[i*in:(i+1)*in])
				r := dst[i*e : (i+1)*e]
				for k, v := range phi {
					r[k] = float32(v)
				}
			}
		}()
	}
	wg.Wait()
}

// ExactRowTo writes the exact kernel row dst[ℓ] = Σ_k float64(lf[ℓ·e+k])·phi[k] (e =
// len(phi)) of a query's φ against m = len(dst) float32 landmark rows, each entry
// vec.Dot32's bits; the rows are split between the caller's goroutine and one pooled
// helper (joined before return, as KernelRowTo) when GOMAXPROCS > 1 and the row is large,
// so in steady state it allocates nothing. It does not modify lf
// or phi and panics on wrong lengths.
func ExactRowTo(dst []float64, lf []float32, phi []float64) {
	m, e := len(dst), len(phi)
	if len(lf) < m*e {
		panic(fmt.Sprintf("entk: ExactRowTo: len(lf) = %d < %d·%d", len(lf), m, e))
	}
	mid := (m / 2) &^ 3
	if mid == 0 || m*e < rowSplitMin || runtime.GOMAXPROCS(0) < 2 {
		vec.Dots32To(dst, phi, lf, e, e)
		return
	}
	splitRows(dst, nil, lf, phi, mid)
}

// ExactRowError bounds |computed − k*(x_ℓ, x_t)| for an ExactRowTo entry, given the exact
// diagonals kll = k*(x_ℓ,x_ℓ) and ktt = k*(x_t,x_t) and the length e of φ:
//
//	(u₃₂ + γ_{e+2}(u₆₄) + ρ) · sqrt(kll·ktt)
//
// The stored landmark entries are φ rounded to float32 (|fl(v) − v| ≤ u₃₂|v|, u₃₂ = 2^-24),
// the sum of e products runs in float64 (γ_n = n·u₆₄/(1 − n·u₆₄), u₆₄ = 2^-53), the scaling
// by d^{-1/2} adds one more rounding per entry, and by Cauchy–Schwarz Σ|φ_ℓ,k||φ_t,k| ≤
// ||φ_ℓ||·||φ_t|| = sqrt(kll·ktt). ρ = 1e-11 covers the float64 rounding of computing φ
// itself (a Forward and a backward sweep; the relative discrepancy between two different
// summation orders of the same Jacobian is below 1e-13 on every backbone tested,
// TestExactRowsAgainstJacobian, so ρ holds it a hundredfold).
func ExactRowError(kll, ktt float64, e int) float64 {
	const u32, u64, rho = 0x1p-24, 0x1p-53, 1e-11
	n := float64(e + 2)
	return (u32 + n*u64/(1-n*u64) + rho) * math.Sqrt(kll*ktt)
}
