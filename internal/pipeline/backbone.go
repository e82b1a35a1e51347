package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/weights"
)

// backbone is the frozen network a configuration names, with what the pipeline derives
// from it.
type backbone struct {
	b     entk.Backbone
	src   weights.Source
	cov   *onnx.Coverage
	shape [3]int            // (C, H, W) of image inputs, zeros for tabular ones
	index []onnx.IndexInput // input positions read as table indices (ONNX only)
	sel   string            // the ONNX kernel's tensors, "" for a built-in backbone
}

// openBackbone resolves m: the ONNX model of m.File (IsONNX), else the built-in
// architecture m.Arch with the weights weights.Load resolves for the data set data.
func openBackbone(m config.Backbone, data string) (backbone, error) {
	if m.File == "" && !entk.IsONNX(m.Arch, "") {
		return openBuiltin(m, data)
	}
	if m.Weights != "" || m.Untrained {
		return backbone{}, fmt.Errorf("%w: model.file %q: the ONNX file holds the weights; unset model.weights (%q) and model.untrained (%v)",
			ErrConfig, m.File, m.Weights, m.Untrained)
	}
	spec := m.Arch
	if !entk.IsONNX(spec, "") {
		spec = "onnx" // model.arch is ignored beside a file unless it pins the digest
	}
	b, cov, err := entk.OpenBackbone(spec, m.File, m.Params)
	if err != nil {
		sel := ""
		if len(m.Params) > 0 {
			sel = fmt.Sprintf(" (model.params %q)", m.Params)
		}
		return backbone{}, fmt.Errorf("%w: model.file %q%s: %w%s", ErrConfig, m.File, sel, err, LoadHint(err))
	}
	o := b.(*entk.ONNX)
	if w := FoldedBatchNorm(cov); w != nil && !m.AllowFoldedBatchNorm {
		return backbone{}, fmt.Errorf("%w: model.file %q: %w: %s; re-export with %s, or set model.allow_folded_batchnorm: true to accept a kernel over the folded weights",
			ErrConfig, m.File, ErrFoldedBatchNorm, w.Message, w.Fix)
	}
	out := backbone{b: b, cov: cov, index: o.Model().IndexInputs(),
		src: weights.Source{Weights: m.File, SHA256: o.Model().SHA256()}}
	if s := o.Model().InputShape(); len(s) == 3 {
		out.shape = [3]int{s[0], s[1], s[2]}
	}
	var names []string
	for _, t := range cov.Tensors {
		if t.InKernel {
			names = append(names, t.Name)
		}
	}
	out.sel = strings.Join(names, "\x00")
	return out, nil
}

// LoadHint is what to change for an ONNX file that does not load with err, beyond what
// err says: which operators are supported, how to fix the input shape or the opset, where
// the parameter names are listed. It starts with a space, or is empty when there is no
// more to say.
func LoadHint(err error) string {
	var oe *onnx.OpError
	switch {
	case errors.Is(err, onnx.ErrUnsupported) && errors.As(err, &oe):
		return fmt.Sprintf(" (cairn evaluates the operators `go doc github.com/cairnhq/cairn/entk/onnx` lists: "+
			"rewrite the module so that its export has no %s)", oe.Op)
	case errors.Is(err, onnx.ErrShape) && oe == nil && !errors.As(err, &oe):
		return " (the input's per-example shape must be fixed by the file: export with a concrete example input, torch.zeros(1, *input_shape), " +
			"and a dynamic axis only for the batch)"
	case errors.Is(err, onnx.ErrOpset):
		return " (export with opset_version between 13 and 17)"
	case errors.Is(err, onnx.ErrParams):
		return " (each model.params glob must match a parameter: cairnctl model inspect FILE.onnx lists them)"
	}
	return ""
}

// openBuiltin is openBackbone for a built-in architecture.
func openBuiltin(m config.Backbone, data string) (backbone, error) {
	arch, err := entk.ParseArch(m.Arch)
	if err != nil {
		return backbone{}, fmt.Errorf("%w: model.arch %q: %w", ErrConfig, m.Arch, err)
	}
	if len(m.Params) > 0 {
		return backbone{}, fmt.Errorf("%w: model.params %q selects an ONNX model's parameters; model %q is built in", ErrConfig, m.Params, m.Arch)
	}
	b, src, err := weights.Load(m.Arch, m.Weights, data, m.Untrained, m.Seed)
	if err != nil {
		return backbone{}, fmt.Errorf("%w: model %q (weights %q, untrained %v): %w", ErrConfig, m.Arch, m.Weights, m.Untrained, err)
	}
	out := backbone{b: b, src: src, cov: entk.Coverage(b)}
	if arch.Kind == "convnet" {
		out.shape = [3]int{arch.C, arch.H, arch.W}
	}
	return out, nil
}

// FoldedBatchNorm returns cov's folded-BatchNorm warning, or nil.
func FoldedBatchNorm(cov *onnx.Coverage) *onnx.Warning {
	for i, w := range cov.Warnings {
		if w.Kind == onnx.WarnFoldedBatchNorm {
			return &cov.Warnings[i]
		}
	}
	return nil
}

// selectionFingerprint folds an ONNX kernel's tensor selection into a fingerprint: the
// architecture names the file's SHA-256 and the parameter values are hashed, but two
// selections of equal-valued tensors would hash alike without their names.
func selectionFingerprint(fp, sel string) string {
	h := sha256.New()
	h.Write([]byte("cairn/daemon/features/onnx-params\x00" + fp + "\x00" + sel))
	return hex.EncodeToString(h.Sum(nil))
}

// keepIndices restores in a view the input positions the model reads as table indices:
// noise or masking would change the category (Cast truncates 2.97 to 2), so a code is
// the same in both views and in the point.
func (f *Features) keepIndices(view, x []float64) {
	for _, in := range f.index {
		view[in.Pos] = x[in.Pos]
	}
}

// Coverage is the kernel's parameter coverage: for an ONNX backbone the loader's report
// (per tensor, the totals and the warnings), for a built-in one every tensor in the
// kernel. The caller must not modify it.
func (f *Features) Coverage() *onnx.Coverage { return f.cov }

// IndexInputs are the input positions an ONNX backbone reads as table indices
// (onnx.Model.IndexInputs), whose values must be integers in [0, N); nil for other
// backbones. The caller must not modify it.
func (f *Features) IndexInputs() []onnx.IndexInput { return f.index }

// InputShape is the per-example input shape, in a new slice: an ONNX model's input
// tensor, (C, H, W) of a convnet, or (D) of the dense backbones.
func (f *Features) InputShape() []int {
	if o, ok := f.backbone.(*entk.ONNX); ok {
		return slices.Clone(o.Model().InputShape())
	}
	if f.shape != [3]int{} {
		return []int{f.shape[0], f.shape[1], f.shape[2]}
	}
	return []int{f.backbone.InDim()}
}
