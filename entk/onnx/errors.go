package onnx

import (
	"errors"
	"fmt"
)

// Sentinel errors of package onnx. Every error Load returns wraps one of them with %w and
// names the tensor, node, attribute or byte count at fault, so callers classify with
// errors.Is and users read the detail.
var (
	// ErrModel reports a malformed model: bytes that are not a ModelProto, a missing graph,
	// a tensor whose data does not match its type and shape, a node input that nothing
	// defines before it, or a value too large for the element budget.
	ErrModel = errors.New("onnx: malformed model")
	// ErrOpset reports a model without an import of the default operator set, or one
	// outside the supported versions 13–17.
	ErrOpset = errors.New("onnx: unsupported opset")
	// ErrUnsupported reports an operator, an attribute value, a data type or a graph form
	// this package does not implement; errors from nodes are *OpError values naming the op,
	// the node and the opset.
	ErrUnsupported = errors.New("onnx: unsupported")
	// ErrShape reports shapes that do not fit an operator, or an input shape that is not
	// fixed per example.
	ErrShape = errors.New("onnx: shape mismatch")
	// ErrExternalData reports external tensor data that cannot be read: no directory to
	// read it from, a location outside that directory, a missing file or a short read.
	ErrExternalData = errors.New("onnx: external data")
	// ErrNotFinite reports a NaN or infinite value in a parameter tensor.
	ErrNotFinite = errors.New("onnx: non-finite parameter")
	// ErrParams reports a parameter selection glob that is malformed or matches no
	// parameter of the model.
	ErrParams = errors.New("onnx: bad parameter selection")
)

// OpError is the error of one node: its operator, name and the model's opset, and the
// cause, which wraps one of the sentinels (ErrUnsupported, ErrShape, ErrModel).
type OpError struct {
	Op    string // operator type, e.g. "Conv"
	Node  string // node name as in the file ("" when the exporter left it empty)
	Index int    // position of the node in the graph
	Opset int64  // version of the default operator set the model imports
	Err   error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("onnx: node %d %q (op %s, opset %d): %v", e.Index, e.Node, e.Op, e.Opset, e.Err)
}

// Unwrap returns the cause, so errors.Is sees the sentinel it wraps.
func (e *OpError) Unwrap() error { return e.Err }
