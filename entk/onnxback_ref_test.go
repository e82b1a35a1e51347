package entk_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
)

// onnxRef is a reference file written by scripts/onnx-reference (make.py) beside each
// exported model: inputs (n × D, each example's input tensor flattened row-major), the
// input shape, PyTorch's float64 outputs (n × d), the exact eNTK k* = tr(J J'ᵀ)/d over
// the parameters it lists (n × n, float64), and those parameters: each a name, or an
// object with the state_dict name, the initializer name it was exported under
// (onnx_name, null when the export has none of its own) and its size.
type onnxRef struct {
	Inputs     [][]float64       `json:"inputs"`
	InputShape []int             `json:"input_shape"`
	Outputs    [][]float64       `json:"outputs"`
	NTK        [][]float64       `json:"ntk"`
	Params     []json.RawMessage `json:"params"`
	NumParams  int               `json:"num_params"`
	Opset      int64             `json:"opset"`
}

// refParam is one entry of onnxRef.Params.
type refParam struct {
	Name     string  `json:"name"`
	ONNXName *string `json:"onnx_name"`
	Size     int     `json:"size"`
}

// params decodes Params: a string entry is a name the export kept.
func (r onnxRef) params(t *testing.T) []refParam {
	t.Helper()
	var ps []refParam
	for _, raw := range r.Params {
		var p refParam
		if err := json.Unmarshal(raw, &p.Name); err == nil {
			p.ONNXName = &p.Name
		} else if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("params entry %s: %v", raw, err)
		}
		if p.ONNXName == nil {
			t.Fatalf("parameter %q has no initializer of its own in the export (merged or folded): its kernel cannot match", p.Name)
		}
		ps = append(ps, p)
	}
	return ps
}

// globEscape quotes path.Match's metacharacters so a name selects exactly itself.
func globEscape(name string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(name)
}

// TestONNXReferenceModels loads each reference model the PyTorch scripts committed under
// entk/onnx/testdata (skipped when absent) with the kernel's parameters the reference
// names, and checks the outputs against PyTorch's to 1e-9 relative to the row's largest
// output (float64 on both sides: only summation order differs) and the exact eNTK
// against the reference's to 1e-10 relative to sqrt(k*(x,x)·k*(y,y)).
func TestONNXReferenceModels(t *testing.T) {
	found := 0
	for _, name := range []string{"convnet", "resnet20", "vit", "vit13", "embmlp"} {
		path := filepath.Join("onnx", "testdata", name+".onnx")
		raw, err := os.ReadFile(filepath.Join("onnx", "testdata", name+".ref.json"))
		if _, serr := os.Stat(path); serr != nil || err != nil {
			continue
		}
		found++
		t.Run(name, func(t *testing.T) {
			var ref onnxRef
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			ps := ref.params(t)
			globs := make([]string, len(ps))
			for i, p := range ps {
				globs[i] = globEscape(*p.ONNXName)
			}
			b, cov, err := entk.LoadONNX(path, globs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d inputs, d = %d, P = %d\n%s", name, len(ref.Inputs), b.OutDim(), b.NumParams(), cov)
			if len(cov.Warnings) > 0 || cov.KernelParams != cov.ModelParams {
				t.Errorf("an export by the recipe should have every parameter in the kernel and no warning:\n%s", cov)
			}
			checkRefCoverage(t, b, ref, ps)
			checkRefModel(t, b, ref)
			if name == "convnet" {
				checkShippedConvnet(t, b, ref)
			}
		})
	}
	if found == 0 {
		t.Skip("no reference models under entk/onnx/testdata yet")
	}
}

func checkRefCoverage(t *testing.T, b *entk.ONNX, ref onnxRef, ps []refParam) {
	t.Helper()
	if ref.InputShape != nil && !slices.Equal(b.Model().InputShape(), ref.InputShape) {
		t.Errorf("input shape %v, reference %v", b.Model().InputShape(), ref.InputShape)
	}
	if ref.Opset != 0 && ref.Opset != b.Model().Opset() {
		t.Errorf("opset %d, reference %d", b.Model().Opset(), ref.Opset)
	}
	sizes := map[string]int{}
	var names []string
	for _, tc := range b.Model().Coverage().Tensors {
		if tc.InKernel {
			names = append(names, tc.Name)
			sizes[tc.Name] = tc.Size
		}
	}
	var want []string
	for _, p := range ps {
		want = append(want, *p.ONNXName)
		if p.Size != 0 && sizes[*p.ONNXName] != p.Size {
			t.Errorf("%s (%s): %d values in the kernel, reference %d", p.Name, *p.ONNXName, sizes[*p.ONNXName], p.Size)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(want))) {
		t.Errorf("kernel parameters %v, reference %v", names, want)
	}
	if ref.NumParams != 0 && ref.NumParams != b.NumParams() {
		t.Errorf("P = %d, reference %d", b.NumParams(), ref.NumParams)
	}
}

func checkRefModel(t *testing.T, b *entk.ONNX, ref onnxRef) {
	t.Helper()
	n, D, d := len(ref.Inputs), b.InDim(), b.OutDim()
	xs := make([]float64, 0, n*D)
	for i, x := range ref.Inputs {
		if len(x) != D {
			t.Fatalf("input %d has %d values, the model takes %d", i, len(x), D)
		}
		xs = append(xs, x...)
	}
	ws := b.NewWorkspace()
	out := make([]float64, d)
	for i, want := range ref.Outputs {
		b.Forward(out, xs[i*D:(i+1)*D], ws)
		scale := 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for j := range want {
			if math.Abs(out[j]-want[j]) > 1e-9*scale || len(want) != d {
				t.Fatalf("f(x_%d)[%d] = %.15g, PyTorch %.15g", i, j, out[j], want[j])
			}
		}
	}
	if len(ref.NTK) != n {
		t.Fatalf("reference ntk has %d rows for %d inputs", len(ref.NTK), n)
	}
	k := make([]float64, n*n)
	entk.ExactGramTo(k, b, xs, n)
	for i := range n {
		for j := range n {
			want := ref.NTK[i][j]
			scale := math.Sqrt(ref.NTK[i][i] * ref.NTK[j][j])
			if math.Abs(k[i*n+j]-want) > 1e-10*scale {
				t.Errorf("k*(x_%d, x_%d) = %.15g, reference %.15g", i, j, k[i*n+j], want)
			}
		}
	}
	checkRefHeads(t, b, ref, xs)
}

// checkRefHeads: the Jacobian's d rows from one BackwardHeads call with the d unit
// vectors as heads give k*(x, y) = tr(J_x J_yᵀ)/d within PyTorch's exact eNTK's 1e-10
// relative, as ExactGramTo's rows do.
func checkRefHeads(t *testing.T, b *entk.ONNX, ref onnxRef, xs []float64) {
	t.Helper()
	n, D, d, P := len(ref.Inputs), b.InDim(), b.OutDim(), b.NumParams()
	eye := make([]float64, d*d)
	for i := range d {
		eye[i*d+i] = 1
	}
	ws := b.NewWorkspace()
	out := make([]float64, d)
	js := make([][]float64, n)
	for i := range n {
		b.Forward(out, xs[i*D:(i+1)*D], ws)
		js[i] = make([]float64, d*P)
		b.BackwardHeads(js[i], eye, d, ws)
	}
	for i := range n {
		for j := range n {
			got := 0.0
			for q, v := range js[i] {
				got += v * js[j][q]
			}
			got /= float64(d)
			want, scale := ref.NTK[i][j], math.Sqrt(ref.NTK[i][i]*ref.NTK[j][j])
			if math.Abs(got-want) > 1e-10*scale {
				t.Errorf("k*(x_%d, x_%d) from BackwardHeads = %.15g, reference %.15g", i, j, got, want)
			}
		}
	}
}

// checkShippedConvnet: convnet.onnx is a shipped convnet's export; the built-in ConvNet
// on the shipped weights with the same parameters gives the same exact kernel (1e-12
// relative: two float64 summation orders).
func checkShippedConvnet(t *testing.T, b *entk.ONNX, ref onnxRef) {
	t.Helper()
	var bi entk.Backbone
	for _, f := range weights.Shipped {
		c, _, err := weights.Load(f.Arch, "shipped:"+f.Name, "", false, 0)
		if err == nil && slices.Equal(c.Params(), b.Params()) {
			bi = c
		}
	}
	if bi == nil {
		t.Fatal("convnet.onnx's parameters are not those of any shipped convnet")
	}
	n, D := len(ref.Inputs), b.InDim()
	var xs []float64
	for _, x := range ref.Inputs {
		xs = append(xs, x...)
	}
	ko, ki := make([]float64, n*n), make([]float64, n*n)
	entk.ExactGramTo(ko, b, xs[:n*D], n)
	entk.ExactGramTo(ki, bi, xs[:n*D], n)
	for i := range n {
		for j := range n {
			if scale := math.Sqrt(ki[i*n+i] * ki[j*n+j]); math.Abs(ko[i*n+j]-ki[i*n+j]) > 1e-12*scale {
				t.Errorf("k*(x_%d, x_%d): ONNX %.15g, built-in %s %.15g", i, j, ko[i*n+j], bi.Arch(), ki[i*n+j])
			}
		}
	}
}
