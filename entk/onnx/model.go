package onnx

import (
	"encoding/hex"
	"fmt"
)

// kernel is the run-time form of one operator with every shape fixed at load. in and
// out hold one slice per input and output (in[k] nil for an absent optional input).
type kernel interface {
	// forward writes every output from the inputs; scr is the kernel's scratch in the
	// workspace (len scratch()), which backward may read.
	forward(out, in [][]float64, scr []float64)
	// backward adds the vector–Jacobian product of gout to gin[k] for every input k whose
	// gin[k] is non-nil, after a forward with the same in, out and scr. It only adds to
	// gin (two inputs may share one gradient buffer) and writes nothing else but scr.
	backward(gin, gout, in, out [][]float64, scr []float64)
	// scratch is the number of float64s of per-workspace scratch the kernel needs.
	scratch() int
}

// get returns s[k], or nil when the node has fewer inputs (an absent optional one).
func get(s [][]float64, k int) []float64 {
	if k < len(s) {
		return s[k]
	}
	return nil
}

// slotKind says where a run-time value lives.
type slotKind uint8

const (
	slotAct   slotKind = iota // computed per Forward, held in the workspace
	slotConst                 // a constant the model owns
	slotParam                 // a view of the kernel's parameter vector
)

// slot is one run-time buffer. Values that only reshape another (Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Cast between float types) share its slot.
type slot struct {
	kind slotKind
	dt   dtype
	size int
	data []float64 // slotConst: the constant; slotParam: params[off : off+size]
	off  int       // slotParam: offset in the parameter vector
	grad bool      // a gradient flows here (depends on a kernel parameter, float, live)
	live bool      // the output depends on it
	set  bool      // its gradient's first writer in the reverse sweep sets it (setter)
	// lazy (slotParam): one step alone writes its gradient, and clears it just before
	// (while it is about to touch it anyway) unless it sets it; other parameters'
	// gradients are cleared when the pass starts (Model.preclear).
	lazy bool
}

// paramSpan is a range of the parameter vector.
type paramSpan struct{ off, n int }

// step is one kernel application in graph order.
type step struct {
	k       kernel
	op      string
	node    string
	in, out []int  // slot ids; -1 for an absent optional input
	gin     []bool // input k receives a gradient
	set     []bool // the kernel sets input k's gradient rather than adding to it (setter)
	grad    bool   // some output carries a gradient, so backward runs
}

// setter is a kernel whose backward can set the gradient of its input j, every entry to
// 0 + what it would add (the bits of an addition to a cleared buffer, −0 included),
// instead of adding to it: the buffer then needs no clearing first. The compiler calls
// setsGrad(j, size) only for the step that writes that gradient (size entries) first in
// the reverse sweep, and only when no other input of the step shares its slot; a true
// answer commits the kernel to setting it in backward and in backwardHeads from then on.
type setter interface {
	setsGrad(j, size int) bool
}

// zero is the cleared buffer's 0.0 that a setter adds to: 0.0 + x, which differs from x
// when x = −0; a variable so that the addition is not folded away.
var zero = 0.0

// Model is a loaded ONNX network with a fixed per-example input shape, evaluated in
// float64: f: R^D → R^d with the selected initializers as its P parameters. It is
// immutable after Load and safe for concurrent use; all mutable state lives in a
// *Workspace, one per goroutine.
type Model struct {
	digest   [32]byte
	opset    int64
	inShape  []int // per example (the batch dimension dropped)
	outShape []int // as the graph computes it, batch dimension included
	inDim    int
	outDim   int
	params   []float64
	slots    []slot
	steps    []step
	inSlot   int
	outSlot  int
	cov      *Coverage
	preclear []paramSpan // the parameters whose gradients a pass clears first (slot.lazy)
	linearA  int         // input width of a final Linear holding the last parameters, -1 if none
	indexIn  []IndexInput
}

// SHA256 is the hex SHA-256 of the model file's bytes (external data not included).
func (m *Model) SHA256() string { return hex.EncodeToString(m.digest[:]) }

// Opset is the version of the default operator set the model imports.
func (m *Model) Opset() int64 { return m.opset }

// InDim is D, the number of input values per example.
func (m *Model) InDim() int { return m.inDim }

// OutDim is d, the number of output values per example.
func (m *Model) OutDim() int { return m.outDim }

// InputShape is the per-example input shape (batch dimension dropped); an input x is
// that tensor flattened row-major. The caller must not modify it.
func (m *Model) InputShape() []int { return m.inShape }

// NumParams is P, the number of kernel parameters.
func (m *Model) NumParams() int { return len(m.params) }

// Params returns the kernel parameters: the selected parameter tensors in initializer
// order, each flattened row-major (Coverage().Tensors gives each one's offset). The
// caller must not modify it.
func (m *Model) Params() []float64 { return m.params }

// Coverage reports which initializers are parameters, which of them are in the kernel,
// and the warnings found at load. The caller must not modify it.
func (m *Model) Coverage() *Coverage { return m.cov }

// FinalLinear reports whether the output is a Gemm y = a·Wᵀ + b (transB = 1, alpha =
// beta = 1) whose weight W [d, A] and bias b [d] are the last two tensors of Params, used
// nowhere else, and returns A. Then the Jacobian rows restricted to W and b are e_i ⊗ a
// and e_i, the structure entk's exact feature map factors out.
func (m *Model) FinalLinear() (a int, ok bool) { return m.linearA, m.linearA >= 0 }

// Workspace is the scratch of one goroutine: the activations Forward caches for
// Backward, their gradients, and each kernel's scratch. Make it with Model.NewWorkspace;
// it must not be shared between goroutines or used with another Model.
type Workspace struct {
	m      *Model
	vals   [][]float64 // per slot (constants and parameters alias the model's memory)
	grads  [][]float64 // per slot with a gradient; parameter slots are set per Backward
	scr    [][]float64 // per step
	in     [][][]float64
	out    [][][]float64
	gin    [][][]float64
	gout   [][][]float64
	cached bool
	hd     headsSpace // BackwardHeads' gradients and scratch, sized on first use
}

// NewWorkspace allocates the scratch of Forward and Backward.
func (m *Model) NewWorkspace() *Workspace {
	ws := &Workspace{m: m, vals: make([][]float64, len(m.slots)), grads: make([][]float64, len(m.slots))}
	for i, s := range m.slots {
		switch {
		case s.kind != slotAct:
			ws.vals[i] = s.data
		case s.live:
			ws.vals[i] = make([]float64, s.size)
			if s.grad {
				ws.grads[i] = make([]float64, s.size)
			}
		}
	}
	for _, st := range m.steps {
		ws.scr = append(ws.scr, make([]float64, st.k.scratch()))
		ws.in = append(ws.in, make([][]float64, len(st.in)))
		ws.gin = append(ws.gin, make([][]float64, len(st.in)))
		ws.out = append(ws.out, make([][]float64, len(st.out)))
		ws.gout = append(ws.gout, make([][]float64, len(st.out)))
		k := len(ws.in) - 1
		for j, s := range st.in {
			if s >= 0 {
				ws.in[k][j] = ws.vals[s]
			}
		}
		for j, s := range st.out {
			ws.out[k][j] = ws.vals[s]
			ws.gout[k][j] = ws.grads[s]
		}
	}
	return ws
}

// Forward writes f(x) into out (len OutDim) and caches in ws what Backward needs. x (len
// InDim, the input tensor flattened row-major) is not modified. It panics on wrong
// lengths or a workspace of another model.
func (m *Model) Forward(out, x []float64, ws *Workspace) {
	if ws == nil || ws.m != m {
		panic("onnx: workspace used with a model that did not create it")
	}
	if len(x) != m.inDim || len(out) != m.outDim {
		panic(fmt.Sprintf("onnx: Model.Forward: len(x) = %d, len(out) = %d, want %d and %d", len(x), len(out), m.inDim, m.outDim))
	}
	defer leave(enter())
	copy(ws.vals[m.inSlot], x)
	for i, st := range m.steps {
		st.k.forward(ws.out[i], ws.in[i], ws.scr[i])
	}
	copy(out, ws.vals[m.outSlot])
	ws.cached = true
}

// Backward writes the vector–Jacobian product J_xᵀw into dst (len NumParams), for the x of
// the last Forward on ws; w (len OutDim) is not modified. It may be called any number of
// times after one Forward. It panics on wrong lengths, on a workspace of another model,
// or before any Forward on ws.
func (m *Model) Backward(dst, w []float64, ws *Workspace) {
	if ws == nil || ws.m != m {
		panic("onnx: workspace used with a model that did not create it")
	}
	if !ws.cached {
		panic("onnx: Backward called before Forward on this workspace")
	}
	if len(dst) != len(m.params) || len(w) != m.outDim {
		panic(fmt.Sprintf("onnx: Model.Backward: len(dst) = %d, len(w) = %d, want %d and %d", len(dst), len(w), len(m.params), m.outDim))
	}
	defer leave(enter())
	for _, sp := range m.preclear {
		clear(dst[sp.off : sp.off+sp.n])
	}
	for i, s := range m.slots {
		switch {
		case s.kind == slotParam:
			ws.grads[i] = dst[s.off : s.off+s.size]
		case s.grad && s.live && !s.set:
			clear(ws.grads[i])
		}
	}
	if g := ws.grads[m.outSlot]; g != nil {
		for i, v := range w {
			g[i] += v
		}
	}
	for i := len(m.steps) - 1; i >= 0; i-- {
		st := &m.steps[i]
		if !st.grad {
			continue
		}
		gin := ws.gin[i]
		for j, s := range st.in {
			gin[j] = nil
			if st.gin[j] {
				gin[j] = ws.grads[s]
				if m.slots[s].lazy && !st.set[j] {
					clear(gin[j])
				}
			}
		}
		st.k.backward(gin, ws.gout[i], ws.in[i], ws.out[i], ws.scr[i])
	}
}
