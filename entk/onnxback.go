package entk

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/entk/onnx"
)

// ONNX is the Backbone of a network exported to ONNX (package entk/onnx): any graph of
// the supported operators with a fixed per-example input shape, differentiated with
// respect to the parameters its loader selected.
//
//   - Arch is "onnx:<hex SHA-256 of the .onnx file>" (external data files are not hashed;
//     the parameter values are, wherever a fingerprint hashes Params).
//   - InDim is the product of the per-example input shape (the input tensor flattened
//     row-major, the batch dimension dropped), OutDim the output's element count.
//   - Params are the selected parameter tensors in initializer order, each flattened
//     row-major (onnx.Coverage gives each tensor's offset). PyTorch writes initializers
//     in state_dict order, so for a module whose state_dict matches a built-in
//     architecture the order is the built-in one.
//
// The import goes one way: entk imports entk/onnx, which knows nothing of entk, because
// Workspace is entk's own struct and only entk can make one owned by a backbone; the
// model's scratch rides in the workspace's ext field.
//
// Everything else of the engine takes an ONNX backbone unchanged: the feature map, the
// exact diagonal and kernel, and the exact rows of Query.ExactTo, which factor out a final
// Linear in closed form when onnx.Model.FinalLinear finds one holding the last
// parameters, and otherwise hold the d full Jacobian rows (ExactDim = d·P). It has no
// factored rows (NewFactored reports false). ψ costs one Forward and one multi-head
// backward sweep per chunk of heads (BackwardHeads).
type ONNX struct {
	m    *onnx.Model
	arch string
}

// NewONNX wraps a loaded model as a Backbone.
func NewONNX(m *onnx.Model) *ONNX { return &ONNX{m: m, arch: "onnx:" + m.SHA256()} }

// LoadONNX loads the ONNX model at path (external data beside it) with the kernel's
// parameters selected by the initializer-name globs params (nil: all; see
// onnx.Options.Params) and returns it with its coverage report.
func LoadONNX(path string, params []string) (*ONNX, *onnx.Coverage, error) {
	m, err := onnx.Load(path, onnx.Options{Params: params})
	if err != nil {
		return nil, nil, err
	}
	return NewONNX(m), m.Coverage(), nil
}

// IsONNX reports whether a backbone given by spec and weights path is an ONNX model:
// spec "onnx" or "onnx:<sha256>", or an empty spec with a path ending in ".onnx".
func IsONNX(spec, path string) bool {
	if spec == "onnx" || strings.HasPrefix(spec, "onnx:") {
		return true
	}
	return spec == "" && strings.HasSuffix(strings.ToLower(path), ".onnx")
}

// ErrONNXDigest reports an ONNX file whose SHA-256 is not the one its spec names.
var ErrONNXDigest = errors.New("entk: ONNX file does not match the spec's SHA-256")

// OpenBackbone is the loader for callers that accept either kind of backbone: an ONNX
// model when IsONNX(spec, path) (params selects its kernel parameters; a spec
// "onnx:<sha256>" must name the file's digest, so a configuration can pin the exact
// export), else LoadBackbone(spec, path) with params empty. The coverage is the ONNX
// model's, or Coverage's all-in report for a built-in architecture.
func OpenBackbone(spec, path string, params []string) (Backbone, *onnx.Coverage, error) {
	if !IsONNX(spec, path) {
		if len(params) > 0 {
			return nil, nil, fmt.Errorf("%w %q: parameter selection %q needs an ONNX backbone", ErrArchSpec, spec, params)
		}
		b, err := LoadBackbone(spec, path)
		if err != nil {
			return nil, nil, err
		}
		return b, Coverage(b), nil
	}
	if path == "" {
		return nil, nil, fmt.Errorf("%w %q: an ONNX backbone needs the model file's path", ErrArchSpec, spec)
	}
	b, cov, err := LoadONNX(path, params)
	if err != nil {
		return nil, nil, err
	}
	if want, ok := strings.CutPrefix(spec, "onnx:"); ok && !strings.EqualFold(want, b.m.SHA256()) {
		return nil, nil, fmt.Errorf("%w: %s has SHA-256 %s, spec %q", ErrONNXDigest, path, b.m.SHA256(), spec)
	}
	return b, cov, nil
}

// Coverage returns b's parameter coverage: an ONNX model's own report, or for a
// built-in architecture every state_dict tensor, all in the kernel.
func Coverage(b Backbone) *onnx.Coverage {
	if o, ok := b.(*ONNX); ok {
		return o.m.Coverage()
	}
	cov := &onnx.Coverage{}
	a, err := ParseArch(b.Arch())
	if err != nil {
		return cov
	}
	for _, t := range a.Tensors() {
		cov.Tensors = append(cov.Tensors, onnx.TensorCoverage{
			Name: t.Name, Shape: t.Shape, Size: t.Size, Parameter: true, InKernel: true, Offset: t.Offset,
		})
		cov.ModelTensors++
		cov.ModelParams += t.Size
	}
	cov.KernelTensors, cov.KernelParams = cov.ModelTensors, cov.ModelParams
	return cov
}

// Model returns the loaded ONNX model.
func (b *ONNX) Model() *onnx.Model { return b.m }

// Arch is "onnx:<hex SHA-256 of the model file>".
func (b *ONNX) Arch() string { return b.arch }

// InDim is the element count of one example's input tensor.
func (b *ONNX) InDim() int { return b.m.InDim() }

// OutDim is the element count of the graph's output.
func (b *ONNX) OutDim() int { return b.m.OutDim() }

// NumParams is the number of selected parameters.
func (b *ONNX) NumParams() int { return b.m.NumParams() }

// Params returns the selected parameters in initializer order; do not modify.
func (b *ONNX) Params() []float64 { return b.m.Params() }

func (b *ONNX) String() string { return fmt.Sprintf("entk.ONNX(%s)", b.arch) }

// NewWorkspace allocates the model's activations, gradients and kernel scratch.
func (b *ONNX) NewWorkspace() *Workspace {
	return &Workspace{owner: b, ext: b.m.NewWorkspace()}
}

// Forward runs the graph on x (the input tensor flattened row-major).
func (b *ONNX) Forward(out, x []float64, ws *Workspace) {
	ws.check(b)
	b.m.Forward(out, x, ws.ext.(*onnx.Workspace))
	ws.cached = true
}

// BackwardHeads writes J_xᵀw_j for the h rows w_j of w (h×d) into the rows of dst
// (h×P) in one reverse sweep of the graph for all heads (onnx.Model.BackwardHeads); the
// Sketch's feature map uses it.
func (b *ONNX) BackwardHeads(dst, w []float64, h int, ws *Workspace) {
	ws.check(b)
	ws.checkCached()
	b.m.BackwardHeads(dst, w, h, ws.ext.(*onnx.Workspace))
}

// Backward writes J_xᵀw by the graph's reverse sweep.
func (b *ONNX) Backward(dst, w []float64, ws *Workspace) {
	ws.check(b)
	ws.checkCached()
	b.m.Backward(dst, w, ws.ext.(*onnx.Workspace))
}

// exactLinearIn is lastInDim for an ONNX backbone: the final Linear's input width, or -1
// when the parameters do not end in one (see ExactDim).
func (b *ONNX) exactLinearIn() int {
	if a, ok := b.m.FinalLinear(); ok {
		return a
	}
	return -1
}

// LoadONNXBytes is LoadONNX for a model in memory (external data read from opts.Dir).
func LoadONNXBytes(data []byte, opts onnx.Options) (*ONNX, error) {
	m, err := onnx.LoadBytes(data, opts)
	if err != nil {
		return nil, err
	}
	return NewONNX(m), nil
}
