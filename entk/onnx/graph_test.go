package onnx

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// randVals returns n uniform values in (-a, a).
func randVals(r *rand.Rand, n int, a float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = a * (2*r.Float64() - 1)
	}
	return v
}

// smallCNN is conv → BatchNorm → ReLU → (+ 1×1 conv shortcut) → MaxPool → Flatten →
// Linear, the shape of a ResNet block, on a 1×6×6 input, exported the PyTorch way (float32
// raw initializers named as in a state_dict, symbolic batch).
func smallCNN(t testing.TB, r *rand.Rand) []byte {
	b := newBuilder(17)
	b.input("input", -1, 1, 6, 6)
	w := func(name string, shape ...int) string { return b.initF32(name, shape, randVals(r, numel(shape), 0.5)) }
	pos := func(name string, shape ...int) string {
		v := randVals(r, numel(shape), 0.5)
		for i := range v {
			v[i] += 1
		}
		return b.initF32(name, shape, v)
	}
	c1 := b.node("Conv", []string{"input", w("conv1.weight", 3, 1, 3, 3), w("conv1.bias", 3)}, aInts("pads", 1, 1, 1, 1), aInts("kernel_shape", 3, 3))
	bn := b.node("BatchNormalization", []string{c1, pos("bn1.weight", 3), w("bn1.bias", 3), w("bn1.running_mean", 3), pos("bn1.running_var", 3)}, aFloat("epsilon", 1e-5))
	rl := b.node("Relu", []string{bn})
	sc := b.node("Conv", []string{"input", w("short.weight", 3, 1, 1, 1)})
	add := b.node("Add", []string{rl, sc})
	mp := b.node("MaxPool", []string{add}, aInts("kernel_shape", 2, 2), aInts("strides", 2, 2))
	fl := b.node("Flatten", []string{mp}, aInt("axis", 1))
	out := b.node("Gemm", []string{fl, w("fc.weight", 4, 27), w("fc.bias", 4)}, aInt("transB", 1))
	b.output(out)
	return b.bytes(t)
}

func TestGraphVJP(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	m, err := LoadBytes(smallCNN(t, r), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.InDim(), 36; got != want {
		t.Fatalf("InDim = %d, want %d", got, want)
	}
	if got, want := m.NumParams(), 3*9+3+3+3+3+4*27+4; got != want {
		t.Errorf("NumParams = %d, want %d", got, want)
	}
	if a, ok := m.FinalLinear(); !ok || a != 27 {
		t.Errorf("FinalLinear = %d, %v; want 27, true", a, ok)
	}
	cov := m.Coverage()
	if cov.ModelTensors != 7 || cov.KernelTensors != 7 || len(cov.Tensors) != 9 || cov.Share() != 1 || len(cov.Warnings) != 0 {
		t.Errorf("coverage:\n%s", cov)
	}
	for _, x := range [][]float64{randVals(r, 36, 1), randVals(r, 36, 2)} {
		checkVJP(t, "smallCNN", m, x, r)
	}
}

// TestShapeFolding: a reshape whose target is computed from Shape, Gather, Unsqueeze and
// Concat (as PyTorch exports x.reshape(x.shape[0], 3, -1)) folds to a constant at load,
// leaving only the run-time Transpose and MatMul.
func TestShapeFolding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	b := newBuilder(13)
	b.input("x", -1, 12)
	sh := b.node("Shape", []string{"x"})
	n := b.node("Gather", []string{sh, b.initI("zero", nil, 0)}, aInt("axis", 0))
	nu := b.node("Unsqueeze", []string{n, b.ints(0)})
	cat := b.node("Concat", []string{nu, b.ints(3), b.ints(-1)}, aInt("axis", 0))
	cast := b.node("Cast", []string{cat}, aInt("to", int64(onnxpb.TensorProto_INT64)))
	rs := b.node("Reshape", []string{"x", cast})
	tr := b.node("Transpose", []string{rs}, aInts("perm", 0, 2, 1))
	w := randVals(r, 3*2, 1)
	mm := b.node("MatMul", []string{tr, b.initF("w", []int{3, 2}, w)})
	b.output(mm)
	m, err := LoadBytes(b.bytes(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, st := range m.steps {
		ops = append(ops, st.op)
	}
	if !slices.Equal(ops, []string{"Transpose", "MatMul"}) {
		t.Errorf("run-time steps %v, want [Transpose MatMul]", ops)
	}
	x := randVals(r, 12, 1)
	out := make([]float64, m.OutDim())
	m.Forward(out, x, m.NewWorkspace())
	// y[0, i, j] = Σ_c x[c·4 + i]·w[c, j]
	for i := range 4 {
		for j := range 2 {
			want := 0.0
			for c := range 3 {
				want += x[c*4+i] * w[c*2+j]
			}
			if got := out[i*2+j]; math.Abs(got-want) > 1e-14 {
				t.Errorf("y[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	checkVJP(t, "folded", m, x, r)
}

// embMLP is the embedding MLP's export: numeric features x[:, :2], categorical codes
// x[:, 2:] cast to int64, each looked up in its table, concatenated, Linear-ReLU-Linear.
func embMLP(t testing.TB, r *rand.Rand) []byte {
	b := newBuilder(17)
	b.input("x", -1, 4)
	num := b.node("Slice", []string{"x", b.ints(0), b.ints(2), b.ints(1)})
	codes := b.node("Cast", []string{b.node("Slice", []string{"x", b.ints(2), b.ints(math.MaxInt64), b.ints(1)})}, aInt("to", int64(onnxpb.TensorProto_INT64)))
	parts := []string{num}
	for k, card := range []int{5, 3} {
		idx := b.node("Gather", []string{codes, b.initI("col"+string(rune('0'+k)), nil, int64(k))}, aInt("axis", 1))
		tab := b.initF32("emb."+string(rune('0'+k))+".weight", []int{card, 3}, randVals(r, card*3, 1))
		parts = append(parts, b.node("Gather", []string{tab, idx}))
	}
	h := b.node("Concat", parts, aInt("axis", 1))
	h = b.node("Relu", []string{b.node("Gemm", []string{h, b.initF32("fc1.weight", []int{6, 8}, randVals(r, 48, 0.5)), b.initF32("fc1.bias", []int{6}, randVals(r, 6, 0.5))}, aInt("transB", 1))})
	out := b.node("Gemm", []string{h, b.initF32("fc2.weight", []int{2, 6}, randVals(r, 12, 0.5)), b.initF32("fc2.bias", []int{2}, randVals(r, 2, 0.5))}, aInt("transB", 1))
	b.output(out)
	return b.bytes(t)
}

func TestEmbedding(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	m, err := LoadBytes(embMLP(t, r), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cov := m.Coverage()
	if cov.KernelTensors != 6 || cov.KernelParams != 15+9+48+6+12+2 {
		t.Fatalf("coverage:\n%s", cov)
	}
	x := []float64{0.3, -1.2, 4, 2.9} // codes 4 and 2 (Cast truncates)
	checkVJP(t, "embmlp", m, x, r)
	ws := m.NewWorkspace()
	out := make([]float64, m.OutDim())
	m.Forward(out, x, ws)
	g := make([]float64, m.NumParams())
	m.Backward(g, []float64{1, -1}, ws)
	// Only row 4 of table 0 (offset 12..15) and row 2 of table 1 (15+6..15+9) move.
	for i := range 24 {
		used := i >= 12 && i < 15 || i >= 21 && i < 24
		if (g[i] != 0) != used {
			t.Errorf("table gradient %d = %v (row used: %v)", i, g[i], used)
		}
	}
	// An out-of-range code gives a zero embedding and no gradient instead of a panic.
	m.Forward(out, []float64{0.3, -1.2, 7, math.NaN()}, ws)
	m.Backward(g, []float64{1, -1}, ws)
	for i := range 24 {
		if g[i] != 0 {
			t.Fatalf("table gradient %d = %v for out-of-range codes", i, g[i])
		}
	}
}

func TestParamSelection(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	data := smallCNN(t, r)
	m, err := LoadBytes(data, Options{Params: []string{"bn1.*", "fc.*"}})
	if err != nil {
		t.Fatal(err)
	}
	cov := m.Coverage()
	var names []string
	for _, tc := range cov.Tensors {
		if tc.InKernel {
			names = append(names, tc.Name)
			if got := m.Params()[tc.Offset : tc.Offset+tc.Size]; tc.Offset < 0 || len(got) != tc.Size {
				t.Errorf("%s: offset %d", tc.Name, tc.Offset)
			}
		}
	}
	if want := []string{"bn1.weight", "bn1.bias", "fc.weight", "fc.bias"}; !slices.Equal(names, want) {
		t.Errorf("kernel tensors %v, want %v", names, want)
	}
	if cov.KernelParams != 3+3+108+4 || cov.ModelParams != 30+6+3+112 || m.NumParams() != cov.KernelParams {
		t.Errorf("coverage %d of %d, NumParams %d", cov.KernelParams, cov.ModelParams, m.NumParams())
	}
	if math.Abs(cov.Share()-118.0/151) > 1e-15 {
		t.Errorf("share %v", cov.Share())
	}
	checkVJP(t, "subset", m, randVals(r, 36, 1), r)
	full, err := LoadBytes(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The subset's VJP is the full VJP restricted to the selected tensors.
	x, w := randVals(r, 36, 1), randVals(r, 4, 1)
	gs, gf := make([]float64, m.NumParams()), make([]float64, full.NumParams())
	VJPTo(gs, m, x, w)
	VJPTo(gf, full, x, w)
	for _, tc := range cov.Tensors {
		if !tc.InKernel {
			continue
		}
		ft := full.Coverage().Tensors[slices.IndexFunc(full.Coverage().Tensors, func(c TensorCoverage) bool { return c.Name == tc.Name })]
		if !slices.Equal(gs[tc.Offset:tc.Offset+tc.Size], gf[ft.Offset:ft.Offset+ft.Size]) {
			t.Errorf("%s: subset gradient differs from the full one", tc.Name)
		}
	}
	for _, bad := range [][]string{{"[a-"}, {"nothing.*"}} {
		if _, err := LoadBytes(data, Options{Params: bad}); !errors.Is(err, ErrParams) {
			t.Errorf("Params %q: err = %v, want ErrParams", bad, err)
		}
	}
}

// VJPTo is one Forward and one Backward on a fresh workspace.
func VJPTo(dst []float64, m *Model, x, w []float64) {
	ws := m.NewWorkspace()
	m.Forward(make([]float64, m.OutDim()), x, ws)
	m.Backward(dst, w, ws)
}

func TestWarnings(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	b := newBuilder(17)
	b.input("x", 1, 2, 4, 4)
	// Folded BatchNorm: the exporter's names and no BatchNormalization node.
	c := b.node("Conv", []string{"x", b.initF32("onnx::Conv_12", []int{2, 2, 1, 1}, randVals(r, 4, 1)), b.initF32("onnx::Conv_13", []int{2}, randVals(r, 2, 1))})
	f := b.node("Flatten", []string{c})
	// One initializer behind two Identity nodes in two Gemm weight slots.
	shared := b.initF32("fc.weight", []int{32, 32}, randVals(r, 1024, 0.1))
	h := b.node("Gemm", []string{f, b.node("Identity", []string{shared})}, aInt("transB", 1))
	h = b.node("Gemm", []string{h, b.node("Identity", []string{shared})}, aInt("transB", 1))
	// A parameter nothing depends on: its Gemm's output is not the graph output.
	b.node("Gemm", []string{f, b.initF32("aux.weight", []int{3, 32}, randVals(r, 96, 1))}, aInt("transB", 1))
	b.output(h)
	m, err := LoadBytes(b.bytes(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[WarningKind][]string{}
	for _, w := range m.Coverage().Warnings {
		got[w.Kind] = w.Tensors
		if w.Fix != ExportRecipe || !strings.Contains(w.String(), "do_constant_folding=False") {
			t.Errorf("%s: fix %q", w.Kind, w.Fix)
		}
	}
	want := map[WarningKind][]string{
		WarnFoldedBatchNorm:   {"onnx::Conv_12"},
		WarnSharedInitializer: {"fc.weight"},
		WarnUnusedParameter:   {"aux.weight"},
	}
	if len(got) != len(want) {
		t.Errorf("warnings %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s: tensors %v, want %v", k, got[k], v)
		}
	}
	checkVJP(t, "shared", m, randVals(r, 32, 1), r)
}

func TestLoadErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	good := smallCNN(t, r)
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(good, &mp); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*onnxpb.ModelProto)) []byte {
		c := proto.Clone(&mp).(*onnxpb.ModelProto)
		f(c)
		data, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cases := []struct {
		name string
		data []byte
		opts Options
		want error
		text string
	}{
		{"garbage", []byte("not a model at all"), Options{}, ErrModel, ""},
		{"truncated", good[:len(good)/2], Options{}, ErrModel, ""},
		{"opset12", edit(func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = proto.Int64(12) }), Options{}, ErrOpset, "12"},
		{"opset18", edit(func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = proto.Int64(18) }), Options{}, ErrOpset, "18"},
		{"unknown op", edit(func(m *onnxpb.ModelProto) { m.Graph.Node[2].OpType = proto.String("LeakyRelu") }), Options{}, ErrUnsupported,
			`node 2 "/Relu_`},
		{"group conv", edit(func(m *onnxpb.ModelProto) {
			m.Graph.Node[0].Attribute = append(m.Graph.Node[0].Attribute, aInt("group", 3))
		}), Options{}, ErrUnsupported, "op Conv, opset 17"},
		{"redefined value", edit(func(m *onnxpb.ModelProto) { m.Graph.Node[2].Output[0] = "fc.weight" }), Options{}, ErrModel, "defined twice"},
		{"undefined input", edit(func(m *onnxpb.ModelProto) { m.Graph.Node[2].Input[0] = "nowhere" }), Options{}, ErrModel, "nowhere"},
		{"batch 2", edit(func(m *onnxpb.ModelProto) {
			m.Graph.Input[0].Type.GetTensorType().Shape.Dim[0].Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}
		}), Options{}, ErrShape, "batch dimension 2"},
		{"symbolic", edit(func(m *onnxpb.ModelProto) {
			m.Graph.Input[0].Type.GetTensorType().Shape.Dim[2].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "h"}
		}), Options{}, ErrShape, "InputShape"},
		{"input shape disagrees", good, Options{InputShape: []int{1, 6, 7}}, ErrShape, ""},
		{"bad raw length", edit(func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].RawData = m.Graph.Initializer[0].RawData[:5] }), Options{}, ErrModel, "conv1.weight"},
		{"non-finite", edit(func(m *onnxpb.ModelProto) { copy(m.Graph.Initializer[0].RawData, []byte{0, 0, 0xc0, 0x7f}) }), Options{}, ErrNotFinite, "conv1.weight"},
		{"shape mismatch", edit(func(m *onnxpb.ModelProto) { m.Graph.Initializer[len(m.Graph.Initializer)-2].Dims = []int64{27, 4} }), Options{}, ErrShape, "Gemm"},
		{"budget", good, Options{MaxElements: 100}, ErrModel, "more than"},
		{"external without dir", edit(func(m *onnxpb.ModelProto) {
			t := m.Graph.Initializer[0]
			t.RawData, t.DataLocation = nil, onnxpb.TensorProto_EXTERNAL.Enum()
			t.ExternalData = []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("w.bin")}}
		}), Options{}, ErrExternalData, "Options.Dir"},
	}
	for _, c := range cases {
		_, err := LoadBytes(c.data, c.opts)
		if !errors.Is(err, c.want) || !strings.Contains(fmtErr(err), c.text) {
			t.Errorf("%s: err = %v, want %v containing %q", c.name, err, c.want, c.text)
		}
	}
	// InputShape fills symbolic dimensions.
	sym := edit(func(m *onnxpb.ModelProto) {
		m.Graph.Input[0].Type.GetTensorType().Shape.Dim[3].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "w"}
	})
	if m, err := LoadBytes(sym, Options{InputShape: []int{1, 6, 6}}); err != nil || !slices.Equal(m.InputShape(), []int{1, 6, 6}) {
		t.Errorf("InputShape override: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestExternalData(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	good := smallCNN(t, r)
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(good, &mp); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Move every float initializer into one data file, as torch.onnx.export does for
	// models over 2 GiB, at offsets after a 16-byte gap.
	var blob []byte
	blob = append(blob, make([]byte, 16)...)
	for _, init := range mp.Graph.Initializer {
		off := len(blob)
		blob = append(blob, init.RawData...)
		init.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String("weights.bin")},
			{Key: proto.String("offset"), Value: proto.String(strconv.Itoa(off))},
			{Key: proto.String("length"), Value: proto.String(strconv.Itoa(len(init.RawData)))},
		}
		init.RawData, init.DataLocation = nil, onnxpb.TensorProto_EXTERNAL.Enum()
	}
	data, err := proto.Marshal(&mp)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	ext, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := LoadBytes(good, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ext.Params(), in.Params()) {
		t.Error("parameters read from external data differ from the inline ones")
	}
	if ext.SHA256() == in.SHA256() || len(ext.SHA256()) != 64 {
		t.Errorf("SHA256 %q names the model file", ext.SHA256())
	}
	mp.Graph.Initializer[0].ExternalData[0].Value = proto.String("../weights.bin")
	data, _ = proto.Marshal(&mp)
	if _, err := LoadBytes(data, Options{Dir: dir}); !errors.Is(err, ErrExternalData) || !strings.Contains(err.Error(), "leaves") {
		t.Errorf("location ../weights.bin: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "weights.bin"), 40); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{}); !errors.Is(err, ErrExternalData) {
		t.Errorf("short data file: %v", err)
	}
}

// TestNoAllocs: Forward and Backward allocate nothing once the workspace exists (products
// this small stay below internal/base/gemm's parallel threshold).
func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	m, err := LoadBytes(smallCNN(t, r), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := m.NewWorkspace()
	x, w := randVals(r, m.InDim(), 1), randVals(r, m.OutDim(), 1)
	out, g := make([]float64, m.OutDim()), make([]float64, m.NumParams())
	if n := testing.AllocsPerRun(20, func() {
		m.Forward(out, x, ws)
		m.Backward(g, w, ws)
	}); n != 0 {
		t.Errorf("Forward+Backward: %v allocations", n)
	}
}

// TestParamRule: a one-element bias added straight to a MatMul is a parameter (the bias
// of nn.Linear(·, 1) on a 3-D input); a one-element factor is a constant; BatchNorm's
// running statistics never are, and an embedding table is.
func TestParamRule(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	b := newBuilder(17)
	b.input("x", -1, 2, 3)
	h := b.node("MatMul", []string{"x", b.initF32("head.weight_t", []int{3, 1}, randVals(r, 3, 1))})
	h = b.node("Add", []string{h, b.initF32("head.bias", []int{1}, randVals(r, 1, 1))})
	h = b.node("Mul", []string{h, b.initF32("temperature", []int{1}, []float64{0.5})})
	b.output(b.node("Reshape", []string{h, b.ints(1, -1)}))
	m, err := LoadBytes(b.bytes(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tc := range m.Coverage().Tensors {
		got[tc.Name] = tc.Parameter
	}
	want := map[string]bool{"head.weight_t": true, "head.bias": true, "temperature": false}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: parameter %v, want %v", k, got[k], v)
		}
	}
	checkVJP(t, "rule", m, randVals(r, 6, 1), r)
}
