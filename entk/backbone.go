package entk

// Backbone is a frozen network f: R^D → R^d with P parameters, evaluated in float64.
//
// It is the seam between the three architectures (mlp, resmlp, convnet) and everything
// that needs Jacobian products: the sketched feature map, the exact kernel, and the
// variance model's exact terms. Implementations are immutable after construction and safe
// for concurrent use; all mutable scratch lives in a *Workspace, one per goroutine.
type Backbone interface {
	// Arch returns the architecture spec string, e.g. "mlp:784-256-256-10".
	Arch() string
	// InDim is D, the input length (C·H·W for convnets, flattened row-major).
	InDim() int
	// OutDim is d, the number of outputs.
	OutDim() int
	// NumParams is P, the number of parameters (unpadded).
	NumParams() int
	// Params returns the parameters flattened in PyTorch state_dict order. The caller must
	// not modify the returned slice.
	Params() []float64
	// NewWorkspace allocates scratch for one goroutine.
	NewWorkspace() *Workspace
	// Forward writes f(x) into out (len OutDim) and caches in ws what Backward needs.
	// x (len InDim) is not modified.
	Forward(out, x []float64, ws *Workspace)
	// Backward writes the vector–Jacobian product J_x^T w into dst (len NumParams) for the
	// x of the last Forward on ws; w (len OutDim) is not modified. It may be called many
	// times after one Forward (one call per Gaussian head) and allocates nothing.
	Backward(dst, w []float64, ws *Workspace)
}

// VJP writes J_x^T w into dst: one Forward and one Backward on ws.
func VJP(b Backbone, dst, x, w []float64, ws *Workspace) {
	out := ws.out(b.OutDim())
	b.Forward(out, x, ws)
	b.Backward(dst, w, ws)
}
