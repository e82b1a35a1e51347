package entk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// exportONNX writes a built-in backbone as the graph torch.onnx.export gives for its
// documented PyTorch module (arch.go): Conv/Relu/MaxPool blocks, Flatten and Gemm
// (transB = 1) for the convnet; Gemm/Relu chains for mlp and resmlp; initializers named
// by state_dict key, in state_dict order, stored as float64 so the parameters are
// bit-identical.
func exportONNX(t testing.TB, b Backbone) []byte {
	t.Helper()
	a, err := ParseArch(b.Arch())
	if err != nil {
		t.Fatal(err)
	}
	g := &onnxpb.GraphProto{Name: proto.String(a.Spec)}
	p := b.Params()
	for _, ts := range a.Tensors() {
		dims := make([]int64, len(ts.Shape))
		for i, s := range ts.Shape {
			dims[i] = int64(s)
		}
		g.Initializer = append(g.Initializer, &onnxpb.TensorProto{Name: proto.String(ts.Name), Dims: dims,
			DataType: proto.Int32(int32(onnxpb.TensorProto_DOUBLE)), DoubleData: p[ts.Offset : ts.Offset+ts.Size]})
	}
	n := 0
	node := func(op string, ins []string, attrs ...*onnxpb.AttributeProto) string {
		n++
		out := fmt.Sprintf("/%s_%d_output_0", op, n)
		g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(fmt.Sprintf("/%s_%d", op, n)),
			Input: ins, Output: []string{out}, Attribute: attrs})
		return out
	}
	ints := func(name string, v ...int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
	}
	transB := &onnxpb.AttributeProto{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}
	linear := func(h, prefix string) string {
		return node("Gemm", []string{h, prefix + "weight", prefix + "bias"}, transB)
	}
	dims := []int64{1, int64(a.In)}
	h := "input"
	switch a.Kind {
	case "convnet":
		dims = []int64{1, int64(a.C), int64(a.H), int64(a.W)}
		for l := range a.Channels {
			pre := fmt.Sprintf("%d.", 3*l)
			h = node("Conv", []string{h, pre + "weight", pre + "bias"}, ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1))
			h = node("MaxPool", []string{node("Relu", []string{h})}, ints("kernel_shape", 2, 2), ints("strides", 2, 2))
		}
		h = linear(node("Flatten", []string{h}), fmt.Sprintf("%d.", 3*len(a.Channels)+1))
	case "mlp":
		for l := range len(a.Hidden) + 1 {
			if l > 0 {
				h = node("Relu", []string{h})
			}
			h = linear(h, fmt.Sprintf("%d.", 2*l))
		}
	case "resmlp":
		h = node("Relu", []string{linear(h, "inp.")})
		for k := range a.Blocks {
			pre := fmt.Sprintf("blocks.%d.", k)
			h = node("Add", []string{h, linear(node("Relu", []string{linear(h, pre+"fc1.")}), pre+"fc2.")})
		}
		h = linear(h, "out.")
	}
	var ds []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	g.Input = []*onnxpb.ValueInfoProto{{Name: proto.String("input"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}}
	g.Output = []*onnxpb.ValueInfoProto{{Name: proto.String(h)}}
	data, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// relClose reports |a − b| ≤ tol·max(scale, 1e-300) elementwise, scale the largest |b|.
func relClose(a, b []float64, tol float64) (int, bool) {
	scale := 1e-300
	for _, v := range b {
		scale = max(scale, math.Abs(v))
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*scale || math.IsNaN(a[i]) {
			return i, false
		}
	}
	return 0, true
}

// TestONNXMatchesBuiltin: the ONNX export of each built-in architecture is the same
// function with the same parameters in the same order, so every quantity the engine
// computes agrees with the built-in backbone's to rounding (the products summed in
// another order: 1e-12 relative to the largest entry, a thousand u₆₄): outputs, VJPs,
// the exact Gram matrix, ψ under the same draw, and the exact rows of Query.ExactTo
// (whose final Linear the ONNX model also factors out: the same ExactDim).
func TestONNXMatchesBuiltin(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	for _, spec := range []string{"convnet:1x8x8-3-4-5", "mlp:7-5-3", "resmlp:6-8x2-3"} {
		t.Run(spec, func(t *testing.T) {
			bi, err := NewBackbone(spec, 3)
			if err != nil {
				t.Fatal(err)
			}
			ob, err := LoadONNXBytes(exportONNX(t, bi), onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if ob.NumParams() != bi.NumParams() || ob.InDim() != bi.InDim() || ob.OutDim() != bi.OutDim() || ExactDim(ob) != ExactDim(bi) {
				t.Fatalf("sizes P %d/%d D %d/%d d %d/%d ExactDim %d/%d", ob.NumParams(), bi.NumParams(), ob.InDim(), bi.InDim(),
					ob.OutDim(), bi.OutDim(), ExactDim(ob), ExactDim(bi))
			}
			const n = 4
			D := bi.InDim()
			xs := make([]float64, n*D)
			for i := range xs {
				xs[i] = r.Float64()
			}
			check := func(what string, got, want []float64) {
				t.Helper()
				if i, ok := relClose(got, want, 1e-12); !ok {
					t.Errorf("%s[%d] = %v, built-in %v", what, i, got[i], want[i])
				}
			}
			wo, wi := ob.NewWorkspace(), bi.NewWorkspace()
			w := make([]float64, bi.OutDim())
			for i := range w {
				w[i] = r.NormFloat64()
			}
			for i := range n {
				x := xs[i*D : (i+1)*D]
				fo, fi := make([]float64, bi.OutDim()), make([]float64, bi.OutDim())
				ob.Forward(fo, x, wo)
				bi.Forward(fi, x, wi)
				check("f(x)", fo, fi)
				go_, gi := make([]float64, bi.NumParams()), make([]float64, bi.NumParams())
				ob.Backward(go_, w, wo)
				bi.Backward(gi, w, wi)
				check("J_xᵀw", go_, gi)
			}
			ko, ki := make([]float64, n*n), make([]float64, n*n)
			ExactGramTo(ko, ob, xs, n)
			ExactGramTo(ki, bi, xs, n)
			check("k*", ko, ki)
			sko, err := NewSketch(ob, 3, 16, 5, "fit")
			if err != nil {
				t.Fatal(err)
			}
			ski, _ := NewSketch(bi, 3, 16, 5, "fit")
			po, pi := make([]float64, n*sko.Dim()), make([]float64, n*ski.Dim())
			sko.FeaturesBatchTo(po, xs, n)
			ski.FeaturesBatchTo(pi, xs, n)
			check("ψ", po, pi)
			qso, qsi := sko.NewQuery(), ski.NewQuery()
			for i := range n {
				x := xs[i*D : (i+1)*D]
				fo, fi := make([]float64, sko.Dim()), make([]float64, ski.Dim())
				do, di := qso.FeaturesDiagTo(fo, x), qsi.FeaturesDiagTo(fi, x)
				check("Query ψ", fo, fi)
				check("Query k*(x,x)", []float64{do}, []float64{di})
			}
			qo, qi := NewExactQuery(ob), NewExactQuery(bi)
			e := ExactDim(bi)
			phis := make([][]float64, 2*n)
			for i := range n {
				phis[i], phis[n+i] = make([]float64, e), make([]float64, e)
				qo.ExactTo(phis[i], xs[i*D:(i+1)*D])
				qi.ExactTo(phis[n+i], xs[i*D:(i+1)*D])
			}
			dots := func(off int) []float64 {
				var r []float64
				for i := range n {
					for j := range n {
						r = append(r, dot(phis[off+i], phis[off+j]))
					}
				}
				return r
			}
			check("<φ, φ>", dots(0), dots(n))
			check("<φ, φ> against k*", dots(0), ki)
		})
	}
}

// TestONNXExactKernelFiniteDifferences checks the adapter through ExactKernel against the
// slow reference k*(x, y) = tr(J_x J_yᵀ)/d with J built column by column from central
// differences of Forward (h = 1e-6: each column within ≈1e-9 of the truth on these O(1)
// values, so 1e-7 relative to sqrt(k*(x,x)·k*(y,y)) is rounding, not a bug), on a model
// whose kernel is a subset of the parameters (so ExactTo has no closed-form Linear and
// its φ is the d full rows).
func TestONNXExactKernelFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	bi, err := NewBackbone("convnet:1x6x6-2-3", 4)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := LoadONNXBytes(exportONNX(t, bi), onnx.Options{Params: []string{"0.*"}})
	if err != nil {
		t.Fatal(err)
	}
	d, p, D := ob.OutDim(), ob.NumParams(), ob.InDim()
	if p != 2*9+2 || ExactDim(ob) != d*p {
		t.Fatalf("P = %d, ExactDim = %d; want 20 and %d", p, ExactDim(ob), d*p)
	}
	jac := func(x []float64) []float64 {
		j := make([]float64, d*p)
		ws, fp, fm := ob.NewWorkspace(), make([]float64, d), make([]float64, d)
		params := ob.Params() // the test perturbs the model's own parameters and restores them
		const h = 1e-6
		for k := range p {
			v := params[k]
			params[k] = v + h
			ob.Forward(fp, x, ws)
			params[k] = v - h
			ob.Forward(fm, x, ws)
			params[k] = v
			for i := range d {
				j[i*p+k] = (fp[i] - fm[i]) / (2 * h)
			}
		}
		return j
	}
	xs := [][]float64{make([]float64, D), make([]float64, D), make([]float64, D)}
	for _, x := range xs {
		for i := range x {
			x[i] = r.Float64()
		}
	}
	ws := ob.NewWorkspace()
	q := NewExactQuery(ob)
	for a := range xs {
		for b := range xs {
			ja, jb := jac(xs[a]), jac(xs[b])
			want := dot(ja, jb) / float64(d)
			scale := math.Sqrt(dot(ja, ja) * dot(jb, jb) / float64(d*d))
			got := ExactKernel(ob, xs[a], xs[b], ws)
			pa, pb := make([]float64, d*p), make([]float64, d*p)
			q.ExactTo(pa, xs[a])
			q.ExactTo(pb, xs[b])
			if math.Abs(got-want) > 1e-7*scale || math.Abs(dot(pa, pb)-want) > 1e-7*scale {
				t.Errorf("k*(x%d, x%d) = %v, <φ, φ> = %v, finite differences %v", a, b, got, dot(pa, pb), want)
			}
		}
	}
}

func TestOpenBackbone(t *testing.T) {
	bi, err := NewBackbone("mlp:4-3-2", 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "mlp.onnx")
	if err := os.WriteFile(path, exportONNX(t, bi), 0o644); err != nil {
		t.Fatal(err)
	}
	b, cov, err := OpenBackbone("", path, []string{"2.*"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.Arch(), "onnx:") || len(b.Arch()) != 5+64 || b.NumParams() != 8 || cov.KernelParams != 8 || cov.ModelParams != 23 {
		t.Errorf("arch %q, P %d, coverage %d of %d", b.Arch(), b.NumParams(), cov.KernelParams, cov.ModelParams)
	}
	if _, _, err := OpenBackbone(b.Arch(), path, nil); err != nil {
		t.Errorf("pinned digest: %v", err)
	}
	if _, _, err := OpenBackbone("onnx:"+strings.Repeat("0", 64), path, nil); !errors.Is(err, ErrONNXDigest) {
		t.Errorf("wrong digest: err = %v, want ErrONNXDigest", err)
	}
	st := filepath.Join(dir, "mlp.safetensors")
	f, err := os.Create(st)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := BackboneTensors(bi, "F64")
	if err := WriteSafetensors(f, ts, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b2, cov2, err := OpenBackbone("mlp:4-3-2", st, nil)
	if err != nil || b2.NumParams() != 23 || cov2.Share() != 1 || cov2.KernelTensors != 4 {
		t.Errorf("built-in: %v, coverage %+v", err, cov2)
	}
	if _, _, err := OpenBackbone("mlp:4-3-2", st, []string{"0.*"}); !errors.Is(err, ErrArchSpec) {
		t.Errorf("selection on a built-in: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a built-in workspace used with an ONNX backbone did not panic")
		}
	}()
	b.Forward(make([]float64, 2), make([]float64, 4), bi.NewWorkspace())
}

// TestONNXHeadsFeatures: ψ through BackwardHeads on the reference ResNet-20 and ViT (whose
// products are large enough to run in internal/base/gemm on several goroutines) has the
// same bits at GOMAXPROCS 1 and 2, and equals ψ with one Backward per head within 1e-12
// relative to the largest entry (BackwardHeads' tolerance, see the onnx package's tests).
func TestONNXHeadsFeatures(t *testing.T) {
	for _, name := range []string{"resnet20", "vit"} {
		path := filepath.Join("onnx", "testdata", name+".onnx")
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		ob, _, err := LoadONNX(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 2
		r := rand.New(rand.NewPCG(4, 1))
		xs := make([]float64, n*ob.InDim())
		for i := range xs {
			xs[i] = r.Float64()
		}
		sk, err := NewSketch(ob, 4, 1024, 1, "fit")
		if err != nil {
			t.Fatal(err)
		}
		skh, _ := NewSketch(perHead{ob}, 4, 1024, 1, "fit")
		got := make([]float64, n*sk.Dim())
		one, per := make([]float64, len(got)), make([]float64, len(got))
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
		sk.FeaturesBatchTo(got, xs, n)
		skh.FeaturesBatchTo(per, xs, n)
		runtime.GOMAXPROCS(1)
		sk.FeaturesBatchTo(one, xs, n)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(one[i]) {
				t.Fatalf("%s: ψ[%d] = %v at GOMAXPROCS 2, %v at 1", name, i, got[i], one[i])
			}
		}
		if i, ok := relClose(got, per, 1e-12); !ok {
			t.Errorf("%s: ψ[%d] = %.17g with BackwardHeads, %.17g with one Backward per head", name, i, got[i], per[i])
		}
	}
}
