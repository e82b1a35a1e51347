package entk

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// linear is a view of one nn.Linear inside a parameter vector: w is [out, in] row-major.
type linear struct {
	in, out    int
	w, b       []float64
	wOff, bOff int // offsets of w and b in the parameter vector (and in a VJP dst)
}

func newLinear(params []float64, wt, bt ParamTensor) linear {
	return linear{
		in: wt.Shape[1], out: wt.Shape[0],
		w: params[wt.Offset : wt.Offset+wt.Size], b: params[bt.Offset : bt.Offset+bt.Size],
		wOff: wt.Offset, bOff: bt.Offset,
	}
}

// forwardTo computes y = W x + b:
//
//	for o := range y { y[o] = b[o] + Σ_i W[o*in+i] x[i] }
func (l *linear) forwardTo(y, x []float64) {
	copy(y, l.b)
	blas64.Implementation().Dgemv(blas.NoTrans, l.out, l.in, 1, l.w, l.in, x, 1, 1, y, 1)
}

// paramGradTo writes the parameter part of the VJP for output gradient g and input a into
// dst (a full P-vector): dW = g aᵀ, db = g.
//
//	for o { for i { dst[wOff+o*in+i] = g[o]*a[i] }; dst[bOff+o] = g[o] }
func (l *linear) paramGradTo(dst, g, a []float64) {
	dw := dst[l.wOff : l.wOff+l.out*l.in]
	for o, go_ := range g {
		row := dw[o*l.in : (o+1)*l.in]
		if go_ == 0 {
			clear(row)
			continue
		}
		floats.ScaleTo(row, go_, a)
	}
	copy(dst[l.bOff:l.bOff+l.out], g)
}

// inputGradTo writes Wᵀ g into dx:  for i { dx[i] = Σ_o W[o*in+i] g[o] }.
func (l *linear) inputGradTo(dx, g []float64) {
	blas64.Implementation().Dgemv(blas.Trans, l.out, l.in, 1, l.w, l.in, g, 1, 0, dx, 1)
}

// reluInPlace applies max(·,0).
func reluInPlace(v []float64) {
	for i, x := range v {
		if x < 0 {
			v[i] = 0
		}
	}
}

// maskByActive zeroes g where the ReLU output a is not positive: ReLU'(z) = [z > 0], so
// ReLU'(0) = 0, and a = relu(z) > 0 exactly when z > 0.
func maskByActive(g, a []float64) {
	for i, x := range a {
		if x <= 0 {
			g[i] = 0
		}
	}
}

// MLP is the backbone "mlp:D-h1-…-d": nn.Sequential(Linear, ReLU, …, Linear) with no ReLU
// after the last Linear.
type MLP struct {
	arch   Arch
	params []float64
	layers []linear
	maxW   int
}

func newMLP(a Arch, params []float64) *MLP {
	ts := a.Tensors()
	m := &MLP{arch: a, params: params}
	for i := 0; i < len(ts); i += 2 {
		l := newLinear(params, ts[i], ts[i+1])
		m.layers = append(m.layers, l)
		m.maxW = max(m.maxW, l.out, l.in)
	}
	return m
}

func (m *MLP) Arch() string      { return m.arch.Spec }
func (m *MLP) InDim() int        { return m.arch.In }
func (m *MLP) OutDim() int       { return m.arch.Out }
func (m *MLP) NumParams() int    { return len(m.params) }
func (m *MLP) Params() []float64 { return m.params }
func (m *MLP) String() string    { return fmt.Sprintf("entk.MLP(%s)", m.arch.Spec) }
func (m *MLP) NewWorkspace() *Workspace {
	ws := &Workspace{owner: m}
	// acts[i] is the input of layer i; acts[0] holds a copy of x so later changes to the
	// caller's x cannot corrupt Backward.
	ws.acts = make([][]float64, len(m.layers))
	for i, l := range m.layers {
		ws.acts[i] = make([]float64, l.in)
	}
	ws.g0 = make([]float64, m.maxW)
	ws.g1 = make([]float64, m.maxW)
	return ws
}

// Forward computes f(x) layer by layer, caching each layer's input.
func (m *MLP) Forward(out, x []float64, ws *Workspace) {
	ws.check(m)
	if len(x) != m.arch.In || len(out) != m.arch.Out {
		panic(fmt.Sprintf("entk: MLP.Forward: len(x)=%d len(out)=%d, want %d and %d", len(x), len(out), m.arch.In, m.arch.Out))
	}
	copy(ws.acts[0], x)
	last := len(m.layers) - 1
	for i := 0; i < last; i++ {
		m.layers[i].forwardTo(ws.acts[i+1], ws.acts[i])
		reluInPlace(ws.acts[i+1])
	}
	m.layers[last].forwardTo(out, ws.acts[last])
	ws.cached = true
}

// Backward is reverse-mode through the cached layers; the input gradient of the first
// layer is never formed (the VJP is with respect to parameters only).
func (m *MLP) Backward(dst, w []float64, ws *Workspace) {
	ws.check(m)
	ws.checkCached()
	if len(dst) != len(m.params) || len(w) != m.arch.Out {
		panic(fmt.Sprintf("entk: MLP.Backward: len(dst)=%d len(w)=%d, want %d and %d", len(dst), len(w), len(m.params), m.arch.Out))
	}
	g := w
	cur, next := ws.g0, ws.g1
	for i := len(m.layers) - 1; i >= 0; i-- {
		l := &m.layers[i]
		l.paramGradTo(dst, g, ws.acts[i])
		if i == 0 {
			break
		}
		gi := cur[:l.in]
		l.inputGradTo(gi, g)
		maskByActive(gi, ws.acts[i])
		g = gi
		cur, next = next, cur
	}
}

// addInputGrad accumulates Wᵀ g into dx:  for i { dx[i] += Σ_o W[o*in+i] g[o] }.
func addInputGrad(l *linear, dx, g []float64) {
	blas64.Implementation().Dgemv(blas.Trans, l.out, l.in, 1, l.w, l.in, g, 1, 1, dx, 1)
}
