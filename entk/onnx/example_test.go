package onnx_test

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// linearModel is what torch.onnx.export writes for nn.Linear(2, 2) with a dynamic batch:
// y = x·Wᵀ + b as one Gemm, the parameters named by their state_dict keys.
func linearModel() []byte {
	f32 := onnxpb.TensorProto_FLOAT
	init := func(name string, dims []int64, v ...float32) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(f32)), FloatData: v}
	}
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		if v < 0 {
			return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}}
		}
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("linear"),
			Initializer: []*onnxpb.TensorProto{init("fc.weight", []int64{2, 2}, 1, 2, 3, 4), init("fc.bias", []int64{2}, 0.5, -0.5)},
			Node: []*onnxpb.NodeProto{{OpType: proto.String("Gemm"), Name: proto.String("/fc/Gemm"),
				Input: []string{"input", "fc.weight", "fc.bias"}, Output: []string{"output"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}}}},
			Input: []*onnxpb.ValueInfoProto{{Name: proto.String("input"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
				TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(f32)), Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{dim(-1), dim(2)}}}}}}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("output")}},
		},
	}
	data, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

// Load a model with only the bias in the kernel, evaluate it and take one vector–Jacobian
// product: the bias's Jacobian is the identity, so J_xᵀw = w.
func ExampleLoadBytes() {
	m, err := onnx.LoadBytes(linearModel(), onnx.Options{Params: []string{"*.bias"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	cov := m.Coverage()
	fmt.Printf("D = %d, d = %d, P = %d of %d (%.0f%%)\n", m.InDim(), m.OutDim(), cov.KernelParams, cov.ModelParams, 100*cov.Share())
	ws := m.NewWorkspace()
	out := make([]float64, m.OutDim())
	m.Forward(out, []float64{1, 1}, ws)
	grad := make([]float64, m.NumParams())
	m.Backward(grad, []float64{2, 3}, ws)
	fmt.Println("f(x) =", out, "J_xᵀw =", grad)
	// Output:
	// D = 2, d = 2, P = 2 of 6 (33%)
	// f(x) = [3.5 6.5] J_xᵀw = [2 3]
}
