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

// onnxRef is a reference file written by scripts/onnx-reference beside each exported
// model: inputs (n × D, each example's input tensor flattened row-major), the input
// shape, PyTorch's outputs (n × d, computed in float64), the exact eNTK k* = tr(J J'ᵀ)/d
// over the kernel's parameters (n × n, float64), the kernel's parameter names and the
// parameter counts.
type onnxRef struct {
	Inputs      [][]float64    `json:"inputs"`
	InputShape  []int          `json:"input_shape"`
	Outputs     [][]float64    `json:"outputs"`
	NTK         [][]float64    `json:"ntk"`
	Params      []string       `json:"params"`
	ParamCounts map[string]int `json:"param_counts"`
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
	for _, name := range []string{"convnet", "resnet20", "vit", "embmlp"} {
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
			globs := make([]string, len(ref.Params))
			for i, p := range ref.Params {
				globs[i] = globEscape(p)
			}
			b, cov, err := entk.LoadONNX(path, globs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d inputs, d = %d, P = %d\n%s", name, len(ref.Inputs), b.OutDim(), b.NumParams(), cov)
			checkRefCoverage(t, b, ref)
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

func checkRefCoverage(t *testing.T, b *entk.ONNX, ref onnxRef) {
	t.Helper()
	if ref.InputShape != nil && !slices.Equal(b.Model().InputShape(), ref.InputShape) {
		t.Errorf("input shape %v, reference %v", b.Model().InputShape(), ref.InputShape)
	}
	var names []string
	sizes := map[string]int{}
	for _, tc := range b.Model().Coverage().Tensors {
		if tc.InKernel {
			names = append(names, tc.Name)
		}
		sizes[tc.Name] = tc.Size
	}
	if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(ref.Params))) {
		t.Errorf("kernel parameters %v, reference %v", names, ref.Params)
	}
	c := b.Model().Coverage()
	for k, v := range ref.ParamCounts {
		got, ok := sizes[k]
		switch k {
		case "kernel", "selected":
			got, ok = c.KernelParams, true
		case "model", "total", "all":
			got, ok = c.ModelParams, true
		}
		if ok && got != v {
			t.Errorf("param_counts[%q] = %d, the loader counts %d", k, v, got)
		}
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
