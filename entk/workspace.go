package entk

// Workspace holds per-goroutine scratch for a Backbone: activations cached by Forward for
// Backward, gradient buffers, and an output buffer. It is created by Backbone.NewWorkspace,
// sized for that backbone, and must not be shared between goroutines or backbones: every
// method that takes a Workspace panics if it was made by a different backbone, and
// Backward panics if no Forward has run on it.
//
// Memory: the dense architectures keep one vector per layer (ΣN widths); the convnet keeps,
// per conv layer, the im2col matrix (H·W × 9·Cin), the pre-activation (H·W × Cout), the
// pooled output and the pooling argmax list. The exact-kernel helpers add a d×P Jacobian
// buffer on first use.
type Workspace struct {
	outBuf []float64

	owner  Backbone // the backbone that made this workspace
	cached bool     // a Forward has run, so Backward may read the caches

	// Dense architectures (mlp, resmlp): acts[i] is the input of layer i (acts[0] = x) or,
	// for resmlp, the residual stream and the block hidden units; g0, g1 are gradient
	// buffers of the widest layer.
	acts   [][]float64
	g0, g1 []float64

	// convnet, per conv layer l: cols[l] is im2col of its input (position-major,
	// cols[p*K+k], K = 9·Cin, k = ci*9+ky*3+kx, as the PyTorch weight [Cout, Cin, 3, 3]);
	// z[l] the pre-activation (z[p*Cout+c]); pooled[l] the pooled output (CHW);
	// actOut[l], actPos[l] the pooled outputs that are positive (index c*Q+q) and the conv
	// position p of their window's first maximum — the only places a gradient passes.
	// dcols[l] and dpooled[l] are the gradient counterparts.
	cols, z, pooled, dcols, dpooled [][]float64
	actOut, actPos                  [][]int32

	// convnet BackwardHeads scratch, allocated on first use: heads[h] serves calls with h
	// heads (the multi-column scratch's layout depends on h, and FeaturesTo uses at most two
	// values of h, a chunk and the remainder).
	heads []*convHeadsScratch

	// exact-kernel scratch (exact.go), allocated on first use: a d×P Jacobian, one
	// P-vector and one d-vector.
	jac, vecP, unit []float64

	// ext is the scratch of a backbone implemented outside this package (an ONNX model's
	// *onnx.Workspace), which only that backbone reads.
	ext any
}

// out returns a reusable buffer of length d.
func (ws *Workspace) out(d int) []float64 {
	if cap(ws.outBuf) < d {
		ws.outBuf = make([]float64, d)
	}
	return ws.outBuf[:d]
}

// check panics unless ws was made by b; a programmer error, like a wrong slice length.
func (ws *Workspace) check(b Backbone) {
	if ws == nil || ws.owner != b {
		panic("entk: workspace used with a backbone that did not create it")
	}
}

// checkCached panics unless a Forward has run on ws.
func (ws *Workspace) checkCached() {
	if !ws.cached {
		panic("entk: Backward called before Forward on this workspace")
	}
}
