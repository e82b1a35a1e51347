package entk

import (
	"fmt"
)

// ResMLP is the backbone "resmlp:D-WIDTHxB-d":
//
//	h_0     = relu(inp x)
//	h_{k+1} = h_k + fc2_k relu(fc1_k h_k)        k = 0..B-1
//	f(x)    = out h_B
//
// (module ResMLP in arch.go; keys inp.*, blocks.{k}.fc1.*, blocks.{k}.fc2.*, out.*).
type ResMLP struct {
	arch     Arch
	params   []float64
	inp, out linear
	fc1, fc2 []linear
}

func newResMLP(a Arch, params []float64) *ResMLP {
	ts := a.Tensors()
	r := &ResMLP{arch: a, params: params}
	r.inp = newLinear(params, ts[0], ts[1])
	for k := 0; k < a.Blocks; k++ {
		r.fc1 = append(r.fc1, newLinear(params, ts[2+4*k], ts[3+4*k]))
		r.fc2 = append(r.fc2, newLinear(params, ts[4+4*k], ts[5+4*k]))
	}
	n := len(ts)
	r.out = newLinear(params, ts[n-2], ts[n-1])
	return r
}

func (r *ResMLP) Arch() string      { return r.arch.Spec }
func (r *ResMLP) InDim() int        { return r.arch.In }
func (r *ResMLP) OutDim() int       { return r.arch.Out }
func (r *ResMLP) NumParams() int    { return len(r.params) }
func (r *ResMLP) Params() []float64 { return r.params }
func (r *ResMLP) String() string    { return fmt.Sprintf("entk.ResMLP(%s)", r.arch.Spec) }

// NewWorkspace lays out acts as [x, h_0, u_0, h_1, u_1, …, h_B] where u_k = relu(fc1_k h_k).
func (r *ResMLP) NewWorkspace() *Workspace {
	ws := &Workspace{owner: r}
	ws.acts = make([][]float64, 2+2*r.arch.Blocks)
	ws.acts[0] = make([]float64, r.arch.In)
	for i := 1; i < len(ws.acts); i++ {
		ws.acts[i] = make([]float64, r.arch.Width)
	}
	ws.g0 = make([]float64, r.arch.Width)
	ws.g1 = make([]float64, r.arch.Width)
	return ws
}

func (r *ResMLP) Forward(out, x []float64, ws *Workspace) {
	ws.check(r)
	if len(x) != r.arch.In || len(out) != r.arch.Out {
		panic(fmt.Sprintf("entk: ResMLP.Forward: len(x)=%d len(out)=%d, want %d and %d", len(x), len(out), r.arch.In, r.arch.Out))
	}
	copy(ws.acts[0], x)
	h := ws.acts[1]
	r.inp.forwardTo(h, ws.acts[0])
	reluInPlace(h)
	for k := range r.fc1 {
		u, hn := ws.acts[2+2*k], ws.acts[3+2*k]
		r.fc1[k].forwardTo(u, h)
		reluInPlace(u)
		r.fc2[k].forwardTo(hn, u)
		for i, v := range h {
			hn[i] += v
		}
		h = hn
	}
	r.out.forwardTo(out, h)
	ws.cached = true
}

// Backward: with gh the gradient on the residual stream,
//
//	block k: d fc2 = gh ⊗ u_k; gu = (fc2ᵀ gh) ⊙ [u_k > 0]; d fc1 = gu ⊗ h_k; gh += fc1ᵀ gu
//	input:   gz = gh ⊙ [h_0 > 0]; d inp = gz ⊗ x
func (r *ResMLP) Backward(dst, w []float64, ws *Workspace) {
	ws.check(r)
	ws.checkCached()
	if len(dst) != len(r.params) || len(w) != r.arch.Out {
		panic(fmt.Sprintf("entk: ResMLP.Backward: len(dst)=%d len(w)=%d, want %d and %d", len(dst), len(w), len(r.params), r.arch.Out))
	}
	B := r.arch.Blocks
	gh, gu := ws.g0, ws.g1
	r.out.paramGradTo(dst, w, ws.acts[1+2*B])
	r.out.inputGradTo(gh, w)
	for k := B - 1; k >= 0; k-- {
		h, u := ws.acts[1+2*k], ws.acts[2+2*k]
		r.fc2[k].paramGradTo(dst, gh, u)
		r.fc2[k].inputGradTo(gu, gh)
		maskByActive(gu, u)
		r.fc1[k].paramGradTo(dst, gu, h)
		// gh += fc1ᵀ gu (the skip connection carries gh through unchanged).
		addInputGrad(&r.fc1[k], gh, gu)
	}
	maskByActive(gh, ws.acts[1])
	r.inp.paramGradTo(dst, gh, ws.acts[0])
}
