package entk

// Workspace holds per-goroutine scratch for a Backbone: activations cached by Forward for
// Backward, gradient buffers, and an output buffer. It is created by Backbone.NewWorkspace,
// sized for that backbone, and must not be shared between goroutines or backbones.
type Workspace struct {
	outBuf []float64
	// Architecture-specific buffers are added by the implementations.
}

// out returns a reusable buffer of length d.
func (ws *Workspace) out(d int) []float64 {
	if cap(ws.outBuf) < d {
		ws.outBuf = make([]float64, d)
	}
	return ws.outBuf[:d]
}
