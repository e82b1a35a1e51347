package onnx

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// ExportRecipe is the PyTorch export call that keeps every parameter a named
// initializer in its own slot: BatchNorm unfolded (PRESERVE keeps the module's mode, so
// export in eval mode for the inference form) and no constant folding, which would fold
// BatchNorm into Conv weights, transpose Linear weights into new initializers and merge
// equal-valued initializers behind Identity nodes.
const ExportRecipe = "torch.onnx.export(..., training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)"

// Coverage says which parts of the model the kernel differentiates.
type Coverage struct {
	// Tensors lists every float initializer in initializer order.
	Tensors []TensorCoverage
	// ModelTensors and ModelParams count the parameter tensors and their elements;
	// KernelTensors and KernelParams those selected into the kernel.
	ModelTensors, KernelTensors int
	ModelParams, KernelParams   int
	// Warnings are the problems found at load, each with the export recipe that avoids it.
	Warnings []Warning
}

// TensorCoverage is one float initializer.
type TensorCoverage struct {
	Name  string
	Shape []int
	Size  int
	// Parameter says the initializer feeds a parameter slot (see the package
	// documentation); the others (running statistics, constants) are never in the kernel.
	Parameter bool
	// InKernel says the parameter is selected; Offset is then its first index in Params,
	// else -1.
	InKernel bool
	Offset   int
	// Slots names the parameter slots it feeds, as `Op "node" input k`.
	Slots []string
}

// Share is KernelParams/ModelParams (1 for a model without parameters).
func (c *Coverage) Share() float64 {
	if c.ModelParams == 0 {
		return 1
	}
	return float64(c.KernelParams) / float64(c.ModelParams)
}

// String renders the coverage as a table, totals and warnings.
func (c *Coverage) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %-18s %10s  %s\n", "tensor", "shape", "size", "role")
	for _, t := range c.Tensors {
		role := "constant"
		switch {
		case t.InKernel:
			role = "kernel"
		case t.Parameter:
			role = "parameter, not selected"
		}
		fmt.Fprintf(&b, "%-40s %-18s %10d  %s\n", t.Name, fmt.Sprint(t.Shape), t.Size, role)
	}
	fmt.Fprintf(&b, "kernel: %d of %d parameter tensors, %d of %d parameters (%.2f%%)\n",
		c.KernelTensors, c.ModelTensors, c.KernelParams, c.ModelParams, 100*c.Share())
	for _, w := range c.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// WarningKind classifies a Warning.
type WarningKind string

// The kinds of Warning.
const (
	// WarnFoldedBatchNorm: Conv weights named like onnx::Conv_N and no BatchNormalization
	// node; the exporter folded BatchNorm into the convolutions, so the kernel
	// differentiates the folded weights, not the network's parameters.
	WarnFoldedBatchNorm WarningKind = "folded-batchnorm"
	// WarnSharedInitializer: one initializer reaches several parameter slots through
	// Identity nodes; the exporter merged equal-valued initializers, so the Jacobian
	// columns of those parameters are summed into one.
	WarnSharedInitializer WarningKind = "shared-initializer"
	// WarnUnusedParameter: a kernel parameter no output depends on; its Jacobian columns
	// are zero.
	WarnUnusedParameter WarningKind = "unused-parameter"
)

// Warning is one problem of the export that makes the kernel differ from the eNTK of the
// PyTorch module's parameters.
type Warning struct {
	Kind    WarningKind
	Tensors []string // the initializers concerned
	Message string
	Fix     string // the export call that avoids it (ExportRecipe)
}

func (w Warning) String() string { return fmt.Sprintf("%s: %s; fix: %s", w.Kind, w.Message, w.Fix) }

// layoutOps only move or relabel their first input's elements; a parameter seen through
// them is still the initializer.
var layoutOps = map[string]bool{
	"Identity": true, "Transpose": true, "Reshape": true, "Squeeze": true, "Unsqueeze": true,
	"Flatten": true, "Expand": true, "Cast": true,
}

// paramInputs returns the input positions of node n that are parameter slots, given
// which of its inputs depend on the graph input (dyn).
func paramInputs(op string, dyn []bool) []int {
	switch op {
	case "Conv", "BatchNormalization", "LayerNormalization":
		return []int{1, 2}
	case "Gemm":
		return []int{0, 1, 2}
	case "MatMul":
		return []int{0, 1}
	case "Gather":
		return []int{0}
	case "Add", "Sub", "Mul", "Concat":
		var ks []int
		for k := range dyn {
			for j, d := range dyn {
				if j != k && d {
					ks = append(ks, k)
					break
				}
			}
		}
		return ks
	}
	return nil
}

var foldedConv = regexp.MustCompile(`^onnx::Conv_\d+$`)

// paramUse is what findParams learns about one initializer.
type paramUse struct {
	slots    []string
	identity bool // some slot reaches it through an Identity node
}

// findParams applies the parameter rule to the graph, selects the kernel's parameters
// by Options.Params, lays them out in initializer order and records the coverage with
// the warnings that need only the graph.
func (c *compiler) findParams(g *onnxpb.GraphProto) error {
	nodes := g.GetNode()
	prod := make(map[string]*onnxpb.NodeProto)
	dyn := map[string]bool{c.inName: true}
	hasBN := false
	for _, n := range nodes {
		d := false
		for _, in := range n.GetInput() {
			d = d || dyn[in]
		}
		if op := n.GetOpType(); op == "Shape" || op == "Size" {
			d = false
		}
		for _, o := range n.GetOutput() {
			prod[o] = n
			dyn[o] = d
		}
		hasBN = hasBN || n.GetOpType() == "BatchNormalization"
	}
	uses := map[string]*paramUse{}
	var convWeights []string
	for i, n := range nodes {
		ins := n.GetInput()
		d := make([]bool, len(ins))
		for k, in := range ins {
			d[k] = dyn[in]
		}
		for _, k := range paramInputs(n.GetOpType(), d) {
			if k >= len(ins) || ins[k] == "" || d[k] {
				continue
			}
			name, viaID := c.trace(ins[k], prod, len(nodes))
			v := c.vals[name]
			if name == "" || v == nil || v.dt != dtFloat {
				continue
			}
			if op := n.GetOpType(); (op == "Add" || op == "Sub" || op == "Mul") && len(v.c) <= 1 && !biasOf(n, k, prod) {
				continue // a scalar such as an epsilon or a scale
			}
			u := uses[name]
			if u == nil {
				u = &paramUse{}
				uses[name] = u
			}
			u.slots = append(u.slots, fmt.Sprintf("%s %q (node %d) input %d", n.GetOpType(), n.GetName(), i, k))
			u.identity = u.identity || viaID
			if n.GetOpType() == "Conv" && k == 1 && foldedConv.MatchString(name) && !slices.Contains(convWeights, name) {
				convWeights = append(convWeights, name)
			}
		}
	}
	if err := c.selectParams(uses); err != nil {
		return err
	}
	if !hasBN && len(convWeights) > 0 {
		c.cov.Warnings = append(c.cov.Warnings, Warning{
			Kind: WarnFoldedBatchNorm, Tensors: convWeights, Fix: ExportRecipe,
			Message: fmt.Sprintf("%d Conv weights are named like onnx::Conv_N (%s) and the graph has no BatchNormalization node: "+
				"the exporter folded BatchNorm into the convolutions, so the kernel differentiates folded weights, not the module's", len(convWeights), strings.Join(convWeights, ", ")),
		})
	}
	for _, name := range c.inits {
		if u := uses[name]; u != nil && u.identity && len(u.slots) > 1 {
			c.cov.Warnings = append(c.cov.Warnings, Warning{
				Kind: WarnSharedInitializer, Tensors: []string{name}, Fix: ExportRecipe,
				Message: fmt.Sprintf("initializer %q reaches %d parameter slots through Identity nodes (%s): the exporter merged "+
					"equal-valued initializers, so their Jacobian columns are summed into one", name, len(u.slots), strings.Join(u.slots, "; ")),
			})
		}
	}
	return nil
}

// biasOf reports whether input k of the Add n is the bias of a Linear or Conv written
// out: its other operand comes straight from a MatMul, Gemm or Conv (nn.Linear(·, 1) on
// a 3-D input exports as MatMul then Add of a one-element bias).
func biasOf(n *onnxpb.NodeProto, k int, prod map[string]*onnxpb.NodeProto) bool {
	if n.GetOpType() != "Add" {
		return false
	}
	for j, in := range n.GetInput() {
		if p := prod[in]; j != k && p != nil {
			switch p.GetOpType() {
			case "MatMul", "Gemm", "Conv":
				return true
			}
		}
	}
	return false
}

// trace follows name back through layout-only nodes to the value they start from, and
// reports whether an Identity node was on the way. It gives up after limit nodes (a
// malformed graph may be cyclic).
func (c *compiler) trace(name string, prod map[string]*onnxpb.NodeProto, limit int) (string, bool) {
	viaID := false
	for range limit + 1 {
		if _, isInit := c.vals[name]; isInit && name != c.inName {
			return name, viaID
		}
		n := prod[name]
		if n == nil || !layoutOps[n.GetOpType()] || len(n.GetInput()) == 0 {
			return "", false
		}
		viaID = viaID || n.GetOpType() == "Identity"
		name = n.GetInput()[0]
	}
	return "", false
}

// selectParams matches the globs, assigns offsets in initializer order, moves the
// selected parameters into the parameter vector and fills the coverage table.
func (c *compiler) selectParams(uses map[string]*paramUse) error {
	matched := make([]bool, len(c.opts.Params))
	for _, glob := range c.opts.Params {
		if _, err := path.Match(glob, ""); err != nil {
			return fmt.Errorf("%w: glob %q: %v", ErrParams, glob, err)
		}
	}
	selected := func(name string) bool {
		if len(c.opts.Params) == 0 {
			return true
		}
		hit := false
		for i, glob := range c.opts.Params {
			if ok, _ := path.Match(glob, name); ok {
				matched[i], hit = true, true
			}
		}
		return hit
	}
	c.cov = &Coverage{}
	off := 0
	for _, name := range c.inits {
		v := c.vals[name]
		if v.dt != dtFloat {
			continue
		}
		tc := TensorCoverage{Name: name, Shape: v.shape, Size: len(v.c), Offset: -1}
		if u := uses[name]; u != nil {
			tc.Parameter, tc.Slots = true, u.slots
			c.cov.ModelTensors++
			c.cov.ModelParams += len(v.c)
			for i, x := range v.c {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return fmt.Errorf("%w: parameter %q element %d is %v", ErrNotFinite, name, i, x)
				}
			}
			if selected(name) {
				tc.InKernel, tc.Offset = true, off
				c.cov.KernelTensors++
				c.cov.KernelParams += len(v.c)
				off += len(v.c)
			}
		}
		c.cov.Tensors = append(c.cov.Tensors, tc)
	}
	for i, ok := range matched {
		if !ok {
			return fmt.Errorf("%w: glob %q matches no parameter of the model", ErrParams, c.opts.Params[i])
		}
	}
	c.params = make([]float64, off)
	for _, tc := range c.cov.Tensors {
		if !tc.InKernel {
			continue
		}
		v := c.vals[tc.Name]
		p := c.params[tc.Offset : tc.Offset+tc.Size]
		copy(p, v.c)
		v.c = nil
		v.slot = c.newSlot(slot{kind: slotParam, dt: dtFloat, size: tc.Size, data: p, off: tc.Offset})
	}
	return nil
}
