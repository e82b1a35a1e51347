// Package onnxtest builds small ONNX models in Go for tests: what torch.onnx.export
// writes for cairn's built-in backbones (Export), an MLP over embedding codes
// (EmbeddingMLP), and an export whose BatchNorm was folded into its convolution
// (FoldedBatchNorm), so that tests of the ONNX backbone's users need no PyTorch.
//
// Every model has opset 17, one input "input" with a symbolic batch dimension and one
// output "output". Parameters are double-precision initializers named by the PyTorch
// module's state_dict keys (as an export with do_constant_folding=False names them), so
// an exported built-in backbone has exactly its Params in the same order. Wrong
// arguments panic.
package onnxtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// Builder assembles an ONNX graph node by node.
type Builder struct {
	g *onnxpb.GraphProto
	n int
}

// NewBuilder returns an empty graph.
func NewBuilder() *Builder { return &Builder{g: &onnxpb.GraphProto{Name: proto.String("onnxtest")}} }

// Input declares the float graph input "input" of shape dims (-1: the symbolic batch).
func (b *Builder) Input(dims ...int64) string {
	var ds []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		if d < 0 {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}})
		} else {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
	}
	b.g.Input = append(b.g.Input, &onnxpb.ValueInfoProto{
		Name: proto.String("input"),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape:    &onnxpb.TensorShapeProto{Dim: ds},
		}}},
	})
	return "input"
}

// Init adds a double initializer and returns its name.
func (b *Builder) Init(name string, shape []int, data []float64) string {
	n := 1
	for _, s := range shape {
		n *= s
	}
	if n != len(data) {
		panic(fmt.Sprintf("onnxtest: initializer %s: %d values for shape %v", name, len(data), shape))
	}
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: dims64(shape), DataType: proto.Int32(int32(onnxpb.TensorProto_DOUBLE)),
		DoubleData: append([]float64(nil), data...),
	})
	return name
}

// Ints adds a 1-D int64 constant under a fresh name and returns it; scalar adds a 0-D one.
func (b *Builder) Ints(v ...int64) string { return b.ints([]int{len(v)}, v...) }

func (b *Builder) scalar(v int64) string { return b.ints(nil, v) }

func (b *Builder) ints(shape []int, v ...int64) string {
	b.n++
	name := "const_" + strconv.Itoa(b.n)
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: dims64(shape), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: v,
	})
	return name
}

// Node adds a node with one output and returns the output's name.
func (b *Builder) Node(op string, ins []string, attrs ...*onnxpb.AttributeProto) string {
	b.n++
	out := op + "_" + strconv.Itoa(b.n)
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{
		OpType: proto.String(op), Name: proto.String("/" + out), Input: ins, Output: []string{out}, Attribute: attrs,
	})
	return out
}

// Bytes declares name the graph output and encodes the model.
func (b *Builder) Bytes(name string) []byte {
	b.g.Output = []*onnxpb.ValueInfoProto{{Name: proto.String(name)}}
	raw, err := proto.Marshal(&onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph:       b.g,
	})
	if err != nil { // every field is set by this package: a bug, not input
		panic("onnxtest: encoding the model: " + err.Error())
	}
	return raw
}

// Int is an integer attribute.
func Int(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// IntList is an integer-list attribute.
func IntList(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func dims64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// Linear adds nn.Linear's export y = x·Wᵀ + b (Gemm, transB = 1) with the parameters
// named prefix+"weight" and prefix+"bias".
func (b *Builder) Linear(x, prefix string, w []float64, bias []float64) string {
	out, in := len(bias), len(w)/len(bias)
	return b.Node("Gemm", []string{x, b.Init(prefix+"weight", []int{out, in}, w), b.Init(prefix+"bias", []int{out}, bias)}, Int("transB", 1))
}

// Export returns the ONNX form of a built-in backbone (mlp, resmlp or convnet; see
// entk.Arch for the PyTorch modules): the same function of the same parameters, which
// entk.LoadONNX loads with Params equal to b.Params() in order.
func Export(bb entk.Backbone) []byte {
	a, err := entk.ParseArch(bb.Arch())
	if err != nil {
		panic("onnxtest: Export: " + err.Error())
	}
	p, ts := bb.Params(), a.Tensors()
	tensor := func(i int) []float64 { return p[ts[i].Offset : ts[i].Offset+ts[i].Size] }
	b := NewBuilder()
	linear := func(x string, i int) string {
		return b.Linear(x, ts[i].Name[:len(ts[i].Name)-len("weight")], tensor(i), tensor(i+1))
	}
	var h string
	switch a.Kind {
	case "mlp":
		h = b.Input(-1, int64(a.In))
		for i := 0; i < len(ts); i += 2 {
			if i > 0 {
				h = b.Node("Relu", []string{h})
			}
			h = linear(h, i)
		}
	case "resmlp":
		h = b.Node("Relu", []string{linear(b.Input(-1, int64(a.In)), 0)})
		for k := range a.Blocks {
			i := 2 + 4*k
			h = b.Node("Add", []string{h, linear(b.Node("Relu", []string{linear(h, i)}), i+2)})
		}
		h = linear(h, len(ts)-2)
	case "convnet":
		h = b.Input(-1, int64(a.C), int64(a.H), int64(a.W))
		for l := range a.Channels {
			w, bias := ts[2*l], ts[2*l+1]
			h = b.Node("Conv", []string{h, b.Init(w.Name, w.Shape, tensor(2*l)), b.Init(bias.Name, bias.Shape, tensor(2*l+1))},
				IntList("kernel_shape", 3, 3), IntList("pads", 1, 1, 1, 1))
			h = b.Node("Relu", []string{h})
			h = b.Node("MaxPool", []string{h}, IntList("kernel_shape", 2, 2), IntList("strides", 2, 2))
		}
		h = linear(b.Node("Flatten", []string{h}, Int("axis", 1)), len(ts)-2)
	default:
		panic("onnxtest: Export of " + a.Kind)
	}
	return b.Bytes(h)
}

// EmbeddingMLP is the export of an MLP over numeric features and categorical codes:
// input [batch, numeric+len(cards)], the first numeric columns used as they are, each
// later column c cast to int64 and looked up in the table "emb.<c>.weight" of cards[c]
// rows and 3 columns, everything concatenated, then Linear(·, hidden)-ReLU-Linear(hidden,
// out) ("fc1.*", "fc2.*"). Parameters are drawn from N(0, 0.25) under seed.
func EmbeddingMLP(numeric int, cards []int, hidden, out int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	vals := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = 0.5 * r.NormFloat64()
		}
		return v
	}
	b := NewBuilder()
	x := b.Input(-1, int64(numeric+len(cards)))
	parts := []string{b.Node("Slice", []string{x, b.Ints(0), b.Ints(int64(numeric)), b.Ints(1)})}
	codes := b.Node("Cast", []string{b.Node("Slice", []string{x, b.Ints(int64(numeric)), b.Ints(int64(numeric + len(cards))), b.Ints(1)})},
		Int("to", int64(onnxpb.TensorProto_INT64)))
	for c, card := range cards {
		idx := b.Node("Gather", []string{codes, b.scalar(int64(c))}, Int("axis", 1))
		tab := b.Init("emb."+strconv.Itoa(c)+".weight", []int{card, 3}, vals(3*card))
		parts = append(parts, b.Node("Gather", []string{tab, idx}))
	}
	width := numeric + 3*len(cards)
	h := b.Node("Concat", parts, Int("axis", 1))
	h = b.Node("Relu", []string{b.Linear(h, "fc1.", vals(hidden*width), vals(hidden))})
	return b.Bytes(b.Linear(h, "fc2.", vals(out*hidden), vals(out)))
}

// FoldedBatchNorm is what torch.onnx.export writes for Conv2d(1, 2, 3)-BatchNorm2d(2)-ReLU-
// global average pool-Linear(2, 3) on 1×6×6 inputs with its default constant folding:
// BatchNorm folded into the convolution, whose weight and bias become the initializers
// "onnx::Conv_7" and "onnx::Conv_8", and no BatchNormalization node.
func FoldedBatchNorm() []byte {
	r := rand.New(rand.NewPCG(3, 3))
	vals := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		return v
	}
	b := NewBuilder()
	h := b.Node("Conv", []string{b.Input(-1, 1, 6, 6), b.Init("onnx::Conv_7", []int{2, 1, 3, 3}, vals(18)), b.Init("onnx::Conv_8", []int{2}, vals(2))},
		IntList("kernel_shape", 3, 3))
	h = b.Node("GlobalAveragePool", []string{b.Node("Relu", []string{h})})
	h = b.Node("Flatten", []string{h}, Int("axis", 1))
	return b.Bytes(b.Linear(h, "fc.", vals(6), vals(3)))
}
