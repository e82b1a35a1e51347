package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// builder assembles a ModelProto in Go for the tests.
type builder struct {
	g     *onnxpb.GraphProto
	opset int64
	n     int
}

func newBuilder(opset int64) *builder {
	return &builder{g: &onnxpb.GraphProto{Name: proto.String("test")}, opset: opset}
}

// input declares the graph input: float, shape dims (-1: symbolic).
func (b *builder) input(name string, dims ...int64) {
	var ds []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		if d < 0 {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}})
		} else {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
	}
	b.g.Input = append(b.g.Input, &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape:    &onnxpb.TensorShapeProto{Dim: ds},
		}}},
	})
}

// initF adds a float64 initializer (double_data) and returns its name.
func (b *builder) initF(name string, shape []int, data []float64) string {
	if len(data) != numel(shape) {
		panic(fmt.Sprintf("initF %s: %d values for %v", name, len(data), shape))
	}
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: ints64(shape), DataType: proto.Int32(int32(onnxpb.TensorProto_DOUBLE)),
		DoubleData: append([]float64(nil), data...),
	})
	return name
}

// initF32 adds a float32 initializer as raw little-endian bytes, as PyTorch writes them.
func (b *builder) initF32(name string, shape []int, data []float64) string {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
	}
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: ints64(shape), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: raw,
	})
	return name
}

// initI adds an int64 initializer.
func (b *builder) initI(name string, shape []int, data ...int64) string {
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: ints64(shape), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: data,
	})
	return name
}

// ints adds a 1-D int64 constant initializer with a fresh name.
func (b *builder) ints(v ...int64) string {
	b.n++
	return b.initI(fmt.Sprintf("const_%d", b.n), []int{len(v)}, v...)
}

// node adds a node with one output and returns the output's name.
func (b *builder) node(op string, ins []string, attrs ...*onnxpb.AttributeProto) string {
	return b.nodeN(op, ins, 1, attrs...)[0]
}

// nodeN adds a node with nout outputs.
func (b *builder) nodeN(op string, ins []string, nout int, attrs ...*onnxpb.AttributeProto) []string {
	b.n++
	var outs []string
	for i := range nout {
		outs = append(outs, fmt.Sprintf("%s_%d_out%d", op, b.n, i))
	}
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{
		OpType: proto.String(op), Name: proto.String(fmt.Sprintf("/%s_%d", op, b.n)), Input: ins, Output: outs, Attribute: attrs,
	})
	return outs
}

func (b *builder) output(name string) {
	b.g.Output = append(b.g.Output, &onnxpb.ValueInfoProto{Name: proto.String(name)})
}

func (b *builder) model() *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(b.opset)}},
		Graph:       b.g,
	}
}

func (b *builder) bytes(t testing.TB) []byte {
	t.Helper()
	data, err := proto.Marshal(b.model())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func aInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func aInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func aFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func aStr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}
