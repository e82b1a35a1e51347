package onnx

import "fmt"

// headsKernel is a kernel whose VJP runs for h cotangents at once. Gradients are held
// head-major: head j of an activation's gradient is g[j·size : (j+1)·size], and head j
// of input k's gradient is gin[k][j·gstr[k] : j·gstr[k]+size_k] (gstr[k] is the input's
// size for an activation, NumParams for a parameter, whose heads are the rows of dst).
type headsKernel interface {
	// backwardHeads adds the h VJPs to gin as backward does for one, after a forward
	// with the same in, out and scr; hscr (len headsScratch(h)) is its own scratch. It
	// reports false, having written nothing, for a shape it does not batch; the caller
	// then runs backward once per head.
	backwardHeads(h int, gin, gout, in, out [][]float64, gstr []int, scr, hscr []float64) bool
	// headsScratch is the number of float64s of scratch backwardHeads needs for h heads.
	headsScratch(h int) int
}

// headsSpace is the part of a Workspace that BackwardHeads uses, sized for h heads on
// its first call with that many (or more) heads and reused after.
type headsSpace struct {
	h     int
	grads [][]float64   // per slot with a gradient: h×size, head-major
	scr   [][]float64   // per step: headsKernel scratch
	gin   [][][]float64 // per step: input gradient bases (see headsKernel)
	gstr  [][]int       // per step: input gradient strides between heads
	gout  [][][]float64 // per step: output gradient bases
	gin1  [][][]float64 // per step: one head's input gradients (the per-head fallback)
	gout1 [][][]float64 // per step: one head's output gradients
	sweep uint64        // BackwardHeads calls so far
	done  []uint64      // per slot: the sweep that last zeroed its gradient
}

// zero clears the first n values of slot s's gradient the first time the sweep reaches
// it, just before its first use: every gradient starts at zero, and is cleared while the
// step that adds to it is about to touch it anyway.
func (hd *headsSpace) zero(s, n int) {
	if hd.done[s] != hd.sweep {
		clear(hd.grads[s][:n])
		hd.done[s] = hd.sweep
	}
}

// reserve sizes ws.hd for h heads.
func (ws *Workspace) reserve(h int) {
	m, hd := ws.m, &ws.hd
	if hd.h >= h {
		return
	}
	hd.h = h
	hd.grads, hd.done = make([][]float64, len(m.slots)), make([]uint64, len(m.slots))
	for i, s := range m.slots {
		if s.kind == slotAct && s.live && s.grad {
			hd.grads[i] = make([]float64, h*s.size)
		}
	}
	n := len(m.steps)
	hd.scr, hd.gin, hd.gstr, hd.gout = make([][]float64, n), make([][][]float64, n), make([][]int, n), make([][][]float64, n)
	hd.gin1, hd.gout1 = make([][][]float64, n), make([][][]float64, n)
	for i, st := range m.steps {
		if hk, ok := st.k.(headsKernel); ok {
			hd.scr[i] = make([]float64, hk.headsScratch(h))
		}
		hd.gin[i], hd.gstr[i], hd.gin1[i] = make([][]float64, len(st.in)), make([]int, len(st.in)), make([][]float64, len(st.in))
		hd.gout[i], hd.gout1[i] = make([][]float64, len(st.out)), make([][]float64, len(st.out))
		for j, s := range st.out {
			hd.gout[i][j] = hd.grads[s]
		}
	}
}

// BackwardHeads writes the h vector–Jacobian products J_xᵀw_j into the rows of dst (h×
// NumParams, row-major), w_j being row j of w (h×OutDim, row-major), for the x of the
// last Forward on ws; w is not modified. It is h calls of Backward in one reverse sweep:
// the activation gradients of all heads are held together, so that Conv, Gemm and
// MatMul run one matrix product for the h heads where Backward runs h, and the
// convolution's im2col matrix, built once by Forward, serves every head. Kernels without
// a batched form run their Backward once per head. Row j equals Backward(w_j) up to the
// rounding of the summation order of those products (a relative 1e-12, tested); it is a
// function of x, w and the model alone. The first call with a given h on ws allocates
// the gradients of h heads; later calls with at most as many allocate nothing. It panics
// on wrong lengths, h < 1, a workspace of another model, or before any Forward on ws.
func (m *Model) BackwardHeads(dst, w []float64, h int, ws *Workspace) {
	if ws == nil || ws.m != m {
		panic("onnx: workspace used with a model that did not create it")
	}
	if !ws.cached {
		panic("onnx: BackwardHeads called before Forward on this workspace")
	}
	P := len(m.params)
	if h < 1 || len(dst) != h*P || len(w) != h*m.outDim {
		panic(fmt.Sprintf("onnx: Model.BackwardHeads: h = %d, len(dst) = %d, len(w) = %d, want h ≥ 1, %d and %d", h, len(dst), len(w), h*P, h*m.outDim))
	}
	defer leave(enter())
	ws.reserve(h)
	hd := &ws.hd
	for j := range h {
		for _, sp := range m.preclear {
			clear(dst[j*P+sp.off : j*P+sp.off+sp.n])
		}
	}
	hd.sweep++
	if g := hd.grads[m.outSlot]; g != nil {
		hd.zero(m.outSlot, h*m.outDim)
		addTo(g, w)
	}
	for i := len(m.steps) - 1; i >= 0; i-- {
		if m.steps[i].grad {
			m.stepHeads(i, h, dst, ws)
		}
	}
}

// stepHeads runs step i's VJP for h heads: batched when the kernel has that form, else
// one backward per head on views of the head-major gradients.
func (m *Model) stepHeads(i, h int, dst []float64, ws *Workspace) {
	st, hd := &m.steps[i], &ws.hd
	gin, gstr := hd.gin[i], hd.gstr[i]
	for j, s := range st.in {
		gin[j], gstr[j] = nil, 0
		if !st.gin[j] {
			continue
		}
		switch sl := &m.slots[s]; {
		case sl.kind == slotParam:
			gin[j], gstr[j] = dst[sl.off:], len(m.params)
			if sl.lazy && !st.set[j] {
				for k := range h {
					o := k*len(m.params) + sl.off
					clear(dst[o : o+sl.size])
				}
			}
		case st.set[j]: // the kernel sets it: no clearing
			gin[j], gstr[j] = hd.grads[s], sl.size
			hd.done[s] = hd.sweep
		default:
			gin[j], gstr[j] = hd.grads[s], sl.size
			hd.zero(s, h*sl.size)
		}
	}
	for _, s := range st.out {
		if hd.grads[s] != nil {
			hd.zero(s, h*m.slots[s].size) // no consumer added to it: its gradient is 0
		}
	}
	if hk, ok := st.k.(headsKernel); ok && hk.backwardHeads(h, gin, hd.gout[i], ws.in[i], ws.out[i], gstr, ws.scr[i], hd.scr[i]) {
		return
	}
	gin1, gout1 := hd.gin1[i], hd.gout1[i]
	for k := range h {
		for j, s := range st.in {
			gin1[j] = nil
			if gin[j] != nil {
				o := k * gstr[j]
				gin1[j] = gin[j][o : o+m.slots[s].size]
			}
		}
		for j, s := range st.out {
			gout1[j] = nil
			if g := hd.gout[i][j]; g != nil {
				n := m.slots[s].size
				gout1[j] = g[k*n : (k+1)*n]
			}
		}
		st.k.backward(gin1, gout1, ws.in[i], ws.out[i], ws.scr[i])
	}
}
