package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/onnxtest"
)

// onnxFile writes raw into a temporary FILE.onnx.
func onnxFile(t *testing.T, name string, raw []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelInspect: the report of a folded-BatchNorm export names the warning with the
// export recipe and says the daemon refuses the file; --params (after the file) selects
// the kernel's parameters and the coverage follows; embedding codes are listed; a file
// with an unsupported operator prints what could be read and exits 1 naming the op.
func TestModelInspect(t *testing.T) {
	folded := onnxFile(t, "folded.onnx", onnxtest.FoldedBatchNorm())
	code, out, errs := runCmd("model", "inspect", folded)
	if code != 0 {
		t.Fatalf("model inspect: exit %d: %s", code, errs)
	}
	var r offline.Inspection
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 1 || r.Warnings[0].Kind != "folded-batchnorm" || !strings.Contains(r.Warnings[0].Fix, "do_constant_folding=False") ||
		!strings.Contains(r.ExportRecipe, "TrainingMode.PRESERVE") || !strings.HasPrefix(r.Daemon, "refuses") {
		t.Errorf("folded export: warnings %+v, recipe %q, daemon %q", r.Warnings, r.ExportRecipe, r.Daemon)
	}
	if r.Opset != 17 || r.Ops["Conv"] != 1 || r.Ops["Gemm"] != 1 || !slices.Equal(r.InputShape, []int{1, 6, 6}) || r.InputDim != 36 || r.OutputDim != 3 ||
		len(r.SHA256) != 64 || r.Coverage.Share != 1 {
		t.Errorf("folded export: %s", out)
	}

	emb := onnxFile(t, "emb.onnx", onnxtest.EmbeddingMLP(3, []int{5, 4}, 6, 2, 1))
	code, out, errs = runCmd("model", "inspect", emb, "--params", "fc1.*, fc2.weight")
	if code != 0 {
		t.Fatalf("model inspect --params: exit %d: %s", code, errs)
	}
	r = offline.Inspection{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// fc1: 6×9 + 6, fc2.weight: 2×6, of 15 + 12 + 60 + 14 = 101.
	if c := r.Coverage; c.ParamsInKernel != 72 || c.ParamsTotal != 101 || c.TensorsInKernel != 3 || c.TensorsTotal != 6 || r.Daemon != "accepts" {
		t.Errorf("coverage %+v, daemon %q", c, r.Daemon)
	}
	if len(r.IndexInputs) != 2 || r.IndexInputs[0].Pos != 3 || r.IndexInputs[0].N != 5 || r.IndexInputs[1].Pos != 4 || r.IndexInputs[1].N != 4 {
		t.Errorf("index inputs %+v", r.IndexInputs)
	}
	in := map[string]bool{}
	for _, p := range r.Params {
		in[p.Name] = p.InKernel
	}
	if len(in) != 6 || in["emb.0.weight"] || !in["fc1.weight"] || !in["fc2.weight"] || in["fc2.bias"] {
		t.Errorf("params %+v", r.Params)
	}

	b := onnxtest.NewBuilder()
	bad := onnxFile(t, "bad.onnx", b.Bytes(b.Node("HardSwish", []string{b.Input(-1, 3)})))
	code, out, errs = runCmd("model", "inspect", bad)
	if code != 1 || !strings.Contains(errs, "HardSwish") || !strings.Contains(out, `"error"`) || !strings.Contains(out, `"HardSwish": 1`) {
		t.Errorf("unsupported op: exit %d, stdout %s, stderr %s", code, out, errs)
	}
	if code, _, errs = runCmd("model", "inspect"); code != 1 || !strings.Contains(errs, "want one ONNX file") {
		t.Errorf("no file: exit %d, %s", code, errs)
	}
}

// TestONNXFlags: the commands that take a backbone take --model and --params, and the
// ONNX export of a built-in network gives its results: the same exact kernel from entk
// kernel (to 1e-12 relative: the engines sum the same products in different orders),
// and the same landmarks from select.
func TestONNXFlags(t *testing.T) {
	for _, cmd := range [][]string{{"select"}, {"fit"}, {"explain"}, {"audit"}, {"bench"}, {"demo"}, {"entk", "kernel"}, {"validate"}} {
		_, out, _ := runCmd(append(cmd, "-h")...)
		if !strings.Contains(out, "-model") || !strings.Contains(out, "-params") {
			t.Errorf("%v -h lacks --model or --params", cmd)
		}
	}
	bb, err := entk.NewBackbone("mlp:6-8-4", 5)
	if err != nil {
		t.Fatal(err)
	}
	model := onnxFile(t, "mlp.onnx", onnxtest.Export(bb))
	data := writeCSV(t, 40, 6)
	x := filepath.Join(t.TempDir(), "x.csv")
	if err := os.WriteFile(x, []byte("1,2,3,4,5,6\n-1,0.5,0,2,1,-3\n0.1,0.2,0.3,0.4,0.5,0.6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kernel := func(args ...string) offline.KernelResult {
		t.Helper()
		code, out, errs := runCmd(append([]string{"entk", "kernel", "--in", x, "--exact"}, args...)...)
		var r offline.KernelResult
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("entk kernel %v: exit %d: %s", args, code, errs)
		}
		return r
	}
	got, want := kernel("--model", model), kernel("--arch", "mlp:6-8-4", "--untrained", "--seed", "5")
	if got.Coverage.Share != 1 || got.Params != want.Params || got.Weights != model || !strings.HasPrefix(got.Arch, "onnx:") {
		t.Errorf("entk kernel --model: %+v", got)
	}
	for a := range want.Kernel {
		for b, w := range want.Kernel[a] {
			if math.Abs(got.Kernel[a][b]-w) > 1e-12*math.Abs(w) {
				t.Errorf("k(%d,%d) = %v from the export, %v built in", a, b, got.Kernel[a][b], w)
			}
		}
	}
	if part := kernel("--model", model, "--params", "2.*"); part.Params != 4*8+4 || part.Coverage.ParamsTotal != bb.NumParams() {
		t.Errorf("entk kernel --params 2.*: %d parameters of %d", part.Params, part.Coverage.ParamsTotal)
	}
	sel := func(args ...string) string {
		t.Helper()
		code, out, errs := runCmd(append([]string{"select", "--data", "csv:" + data, "--m", "4", "--h", "2", "--s", "16", "--seed", "5"}, args...)...)
		if code != 0 {
			t.Fatalf("select %v: exit %d: %s", args, code, errs)
		}
		var r struct {
			Landmarks any `json:"landmarks"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		l, _ := json.Marshal(r.Landmarks)
		return string(l)
	}
	if g, w := sel("--model", model), sel("--arch", "mlp:6-8-4", "--untrained"); g != w {
		t.Errorf("select --model: landmarks %s, built in %s", g, w)
	}
	if code, _, errs := runCmd("select", "--data", "csv:"+data, "--model", model, "--untrained"); code == 0 || !strings.Contains(errs, "--model") {
		t.Errorf("select --model --untrained: exit %d, %s", code, errs)
	}
}
