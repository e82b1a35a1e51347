package onnx

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// constant adds a Constant node holding a float64 scalar (exporters write Python scalars
// as Constant nodes, not initializers, so they are never parameters).
func (b *builder) constant(v float64) string {
	b.n++
	name := "const_scalar_" + string(rune('a'+b.n%26)) + string(rune('a'+b.n/26%26))
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{OpType: proto.String("Constant"), Output: []string{name},
		Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
			T: &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxpb.TensorProto_DOUBLE)), DoubleData: []float64{v}}}}})
	return name
}

// tinyViT is the reference ViT's graph as the TorchScript exporter writes it, small: a
// 1×8×8 input cut into four 4×4 patches by a strided Conv, flatten(2) and transpose, a
// class token expanded to the batch (Shape, Gather, Unsqueeze, Concat, Equal, Where,
// ConstantOfShape, Expand), position embeddings, one pre-norm block (qkv Linear as
// MatMul with a Transpose of the weight, per-head attention by Reshape, Transpose and
// Gather, softmax, projection; GELU by Erf), a final LayerNorm and a Linear head on the
// class token. At opset 17 LayerNorm is LayerNormalization; below, its decomposition
// (ReduceMean, Sub, Pow, Add, Sqrt, Div, Mul, Add).
func tinyViT(t testing.TB, opset int64, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	const dim, heads, dh, tokens, hidden = 8, 2, 4, 5, 16
	b := newBuilder(opset)
	b.input("x", -1, 1, 8, 8)
	w := func(name string, scale float64, shape ...int) string {
		return b.initF32(name, shape, randVals(r, numel(shape), scale))
	}
	ln := func(h, pre string) string {
		gv := randVals(r, dim, 0.1)
		for i := range gv {
			gv[i]++
		}
		g := b.initF32(pre+".weight", []int{dim}, gv)
		bb := w(pre+".bias", 0.1, dim)
		if opset >= 17 {
			return b.node("LayerNormalization", []string{h, g, bb}, aInt("axis", -1), aFloat("epsilon", 1e-5))
		}
		mu := b.node("ReduceMean", []string{h}, aInts("axes", -1))
		c := b.node("Sub", []string{h, mu})
		v := b.node("ReduceMean", []string{b.node("Pow", []string{c, b.constant(2)})}, aInts("axes", -1))
		sd := b.node("Sqrt", []string{b.node("Add", []string{v, b.constant(float64(float32(1e-5)))})})
		return b.node("Add", []string{b.node("Mul", []string{b.node("Div", []string{c, sd}), g}), bb})
	}
	linear := func(h, pre string, in, out int) string {
		wt := b.node("Transpose", []string{w(pre+".weight", 1/math.Sqrt(float64(in)), out, in)}, aInts("perm", 1, 0))
		return b.node("Add", []string{b.node("MatMul", []string{h, wt}), w(pre+".bias", 0.1, out)})
	}
	y := b.node("Conv", []string{"x", w("patch.weight", 0.25, dim, 1, 4, 4), w("patch.bias", 0.1, dim)},
		aInts("kernel_shape", 4, 4), aInts("strides", 4, 4))
	sh := b.node("Shape", []string{y})
	head2 := b.node("Slice", []string{sh, b.ints(0), b.ints(2), b.ints(0)})
	y = b.node("Reshape", []string{y, b.node("Concat", []string{head2, b.ints(-1)}, aInt("axis", 0))})
	y = b.node("Transpose", []string{y}, aInts("perm", 0, 2, 1))
	batch := b.node("Unsqueeze", []string{b.node("Gather", []string{b.node("Shape", []string{y}), b.initI("zero", nil, 0)}, aInt("axis", 0)), b.ints(0)})
	want := b.node("Concat", []string{batch, b.ints(-1), b.ints(-1)}, aInt("axis", 0))
	isNeg := b.node("Equal", []string{want, b.ints(-1, -1, -1)})
	ones := b.node("ConstantOfShape", []string{b.ints(3)}, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
		T: &onnxpb.TensorProto{Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{1}}})
	cls := b.node("Expand", []string{w("cls", 0.02, 1, 1, dim), b.node("Where", []string{isNeg, ones, want})})
	y = b.node("Add", []string{b.node("Concat", []string{cls, y}, aInt("axis", 1)), w("pos", 0.02, 1, tokens, dim)})
	// attention
	h := linear(ln(y, "blocks.0.norm1"), "blocks.0.attn.qkv", dim, 3*dim)
	h = b.node("Reshape", []string{h, b.ints(-1, tokens, 3, heads, dh)})
	h = b.node("Transpose", []string{h}, aInts("perm", 2, 0, 3, 1, 4))
	qkv := make([]string, 3)
	for i := range qkv {
		qkv[i] = b.node("Gather", []string{h, b.initI("idx"+string(rune('0'+i)), nil, int64(i))}, aInt("axis", 0))
	}
	kt := b.node("Transpose", []string{qkv[1]}, aInts("perm", 0, 1, 3, 2))
	att := b.node("Mul", []string{b.node("MatMul", []string{qkv[0], kt}), b.constant(1 / math.Sqrt(dh))})
	att = b.node("Softmax", []string{att}, aInt("axis", -1))
	h = b.node("Transpose", []string{b.node("MatMul", []string{att, qkv[2]})}, aInts("perm", 0, 2, 1, 3))
	h = b.node("Reshape", []string{h, b.ints(-1, tokens, dim)})
	y = b.node("Add", []string{y, linear(h, "blocks.0.attn.proj", dim, dim)})
	// MLP with GELU(x) = x·½(1 + erf(x/√2))
	h = linear(ln(y, "blocks.0.norm2"), "blocks.0.fc1", dim, hidden)
	e := b.node("Erf", []string{b.node("Div", []string{h, b.constant(math.Sqrt2)})})
	h = b.node("Mul", []string{b.node("Mul", []string{h, b.node("Add", []string{e, b.constant(1)})}), b.constant(0.5)})
	y = b.node("Add", []string{y, linear(h, "blocks.0.fc2", hidden, dim)})
	y = b.node("Gather", []string{ln(y, "norm"), b.initI("first", nil, 0)}, aInt("axis", 1))
	out := b.node("Gemm", []string{y, w("head.weight", 0.3, 3, dim), w("head.bias", 0.1, 3)}, aInt("transB", 1))
	b.output(out)
	return b.bytes(t)
}

func TestViTGraph(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	x := randVals(r, 64, 1)
	var outs [][]float64
	for _, opset := range []int64{17, 13} {
		m, err := LoadBytes(tinyViT(t, opset, 5), Options{})
		if err != nil {
			t.Fatalf("opset %d: %v", opset, err)
		}
		cov := m.Coverage()
		want := 8*16 + 8 + 8 + 5*8 + 3*(8+8) + 24*8 + 24 + 8*8 + 8 + 16*8 + 16 + 8*16 + 8 + 3*8 + 3
		if cov.KernelParams != want || cov.ModelParams != want || len(cov.Warnings) != 0 {
			t.Errorf("opset %d: %d of %d parameters in the kernel, want %d:\n%s", opset, cov.KernelParams, cov.ModelParams, want, cov)
		}
		if a, ok := m.FinalLinear(); !ok || a != 8 {
			t.Errorf("opset %d: FinalLinear = %d, %v", opset, a, ok)
		}
		for _, st := range m.steps {
			if slices.Contains([]string{"Shape", "Equal", "Where", "ConstantOfShape"}, st.op) {
				t.Errorf("opset %d: %s was not folded", opset, st.op)
			}
		}
		out := make([]float64, m.OutDim())
		m.Forward(out, x, m.NewWorkspace())
		outs = append(outs, out)
		checkVJP(t, "vit", m, x, r)
	}
	// LayerNormalization and its decomposition are the same function.
	for i := range outs[0] {
		if math.Abs(outs[0][i]-outs[1][i]) > 1e-12 {
			t.Errorf("output %d: LayerNormalization %v, decomposed %v", i, outs[0][i], outs[1][i])
		}
	}
}
