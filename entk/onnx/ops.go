package onnx

import (
	"fmt"
	"math"
	"slices"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// opFunc checks a node's inputs and attributes, infers its outputs and returns the
// kernel that computes them (nil for outputs that are constants or aliases).
type opFunc func(x *nodeCtx) ([]outSpec, kernel, error)

// ops maps every supported operator of the default domain to its compiler. The
// package documentation lists them with the forms each accepts.
var ops = map[string]opFunc{
	// elementwise (ops_elem.go)
	"Add": opBinary('+'), "Sub": opBinary('-'), "Mul": opBinary('*'), "Div": opBinary('/'), "Pow": opBinary('^'),
	"Relu": opUnary(uRelu), "Tanh": opUnary(uTanh), "Sigmoid": opUnary(uSigmoid), "Sqrt": opUnary(uSqrt),
	"Erf": opUnary(uErf), "Neg": opUnary(uNeg), "Exp": opUnary(uExp), "Log": opUnary(uLog),
	// layout (ops_layout.go)
	"Identity": opIdentity, "Dropout": opDropout, "Cast": opCast, "Reshape": opReshape, "Flatten": opFlatten,
	"Squeeze": opSqueeze, "Unsqueeze": opUnsqueeze, "Transpose": opTranspose, "Slice": opSlice,
	"Expand": opExpand, "Pad": opPad, "Concat": opConcat, "Split": opSplit, "Gather": opGather,
	// constants and shape arithmetic, folded at load (ops_const.go)
	"Constant": opConstant, "Shape": opShape, "Size": opSize, "ConstantOfShape": opConstantOfShape,
	"Range": opRange, "Equal": opEqual, "Where": opWhere,
	// networks (ops_nn.go, ops_linalg.go)
	"Conv": opConv, "MaxPool": opMaxPool, "AveragePool": opAveragePool, "GlobalAveragePool": opGlobalAveragePool,
	"BatchNormalization": opBatchNorm, "LayerNormalization": opLayerNorm, "Softmax": opSoftmax,
	"ReduceMean": opReduceMean, "Gemm": opGemm, "MatMul": opMatMul,
}

// nodeCtx is one node under compilation.
type nodeCtx struct {
	c     *compiler
	n     *onnxpb.NodeProto
	in    []*value // nil for an absent optional input
	attrs map[string]*onnxpb.AttributeProto
}

// errf wraps a sentinel with detail.
func errf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// check verifies the input count (lo ≤ inputs ≤ hi, the first lo present) and that every
// attribute is one the operator's compiler reads.
func (x *nodeCtx) check(lo, hi int, attrs ...string) error {
	if len(x.in) < lo || len(x.in) > hi {
		return errf(ErrModel, "%d inputs, want %d to %d", len(x.in), lo, hi)
	}
	for k := 0; k < lo; k++ {
		if x.in[k] == nil {
			return errf(ErrModel, "required input %d is empty", k)
		}
	}
	for _, a := range x.n.GetAttribute() {
		if !slices.Contains(attrs, a.GetName()) {
			return errf(ErrUnsupported, "attribute %s", a.GetName())
		}
	}
	return nil
}

// opt returns input k, or nil when it is absent.
func (x *nodeCtx) opt(k int) *value {
	if k < len(x.in) {
		return x.in[k]
	}
	return nil
}

// allConst reports whether every present input is a constant.
func (x *nodeCtx) allConst() bool {
	for _, v := range x.in {
		if v != nil && v.c == nil {
			return false
		}
	}
	return true
}

// attr returns the attribute name if present with type t.
func (x *nodeCtx) attr(name string, t onnxpb.AttributeProto_AttributeType) (*onnxpb.AttributeProto, error) {
	a := x.attrs[name]
	if a == nil {
		return nil, nil
	}
	if a.GetType() != t {
		return nil, errf(ErrModel, "attribute %s has type %v, want %v", name, a.GetType(), t)
	}
	return a, nil
}

func (x *nodeCtx) attrInt(name string, def int64) (int64, error) {
	a, err := x.attr(name, onnxpb.AttributeProto_INT)
	if a == nil || err != nil {
		return def, err
	}
	return a.GetI(), nil
}

func (x *nodeCtx) attrInts(name string) ([]int64, error) {
	a, err := x.attr(name, onnxpb.AttributeProto_INTS)
	if a == nil || err != nil {
		return nil, err
	}
	return a.GetInts(), nil
}

func (x *nodeCtx) attrFloat(name string, def float64) (float64, error) {
	a, err := x.attr(name, onnxpb.AttributeProto_FLOAT)
	if a == nil || err != nil {
		return def, err
	}
	return float64(a.GetF()), nil
}

func (x *nodeCtx) attrString(name, def string) (string, error) {
	a, err := x.attr(name, onnxpb.AttributeProto_STRING)
	if a == nil || err != nil {
		return def, err
	}
	return string(a.GetS()), nil
}

// constInts reads input k, which must be a constant (computable from shapes and
// initializers), as integers; values beyond the int64 range saturate.
func (x *nodeCtx) constInts(k int, what string) ([]int64, error) {
	v := x.opt(k)
	if v == nil {
		return nil, nil
	}
	if v.c == nil {
		return nil, errf(ErrUnsupported, "input %d (%s) is computed at run time; it must follow from shapes and constants", k, what)
	}
	r := make([]int64, len(v.c))
	for i, f := range v.c {
		r[i] = toInt64(f)
	}
	return r, nil
}

// toInt64 truncates f toward zero, saturating at the int64 range (NaN gives 0).
func toInt64(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// roundInts truncates every value toward zero (folded integer results).
func roundInts(v []float64) {
	for i, f := range v {
		v[i] = math.Trunc(f)
	}
}

// normAxis maps an axis in [-rank, rank) to [0, rank).
func normAxis(a int64, rank int) (int, error) {
	if a < -int64(rank) || a >= int64(rank) {
		return 0, errf(ErrShape, "axis %d out of range for rank %d", a, rank)
	}
	if a < 0 {
		a += int64(rank)
	}
	return int(a), nil
}

// floatIn requires input k to be a float tensor.
func (x *nodeCtx) floatIn(ks ...int) error {
	for _, k := range ks {
		if v := x.opt(k); v != nil && v.dt != dtFloat {
			return errf(ErrUnsupported, "input %d is an integer tensor, want float", k)
		}
	}
	return nil
}
