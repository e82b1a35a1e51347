package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

func writeTempCSV(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.csv")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const entkTestCSV = "0.1,-0.2,0.3,0.4,-0.5,0.6\n1,0,0,0,0,0\n-0.3,0.2,0.9,-1.1,0.05,0.7\n0.5,0.5,0.5,0.5,0.5,0.5\n"

func runEntkJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := cmdRun("entk", args, &out); err != nil {
		t.Fatalf("cairnctl entk %s: %v", strings.Join(args, " "), err)
	}
	var r map[string]any
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	return r
}

func kernelOf(t *testing.T, r map[string]any) [][]float64 {
	t.Helper()
	rows, ok := r["kernel"].([]any)
	if !ok {
		t.Fatalf("no kernel array in %v", r)
	}
	k := make([][]float64, len(rows))
	for i, row := range rows {
		for _, v := range row.([]any) {
			k[i] = append(k[i], v.(float64))
		}
	}
	return k
}

// TestEntkKernel checks shapes and the invariants that hold for any backbone: the exact
// Gram is symmetric with a non-negative diagonal; the sketched one at s = 0 is symmetric,
// and at s = P (an exact rotation, same heads) it equals the s = 0 one to rounding.
func TestEntkKernel(t *testing.T) {
	in := writeTempCSV(t, entkTestCSV)
	exact := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--exact"))
	if len(exact) != 4 {
		t.Fatalf("exact kernel has %d rows, want 4", len(exact))
	}
	for a := range exact {
		if len(exact[a]) != 4 {
			t.Fatalf("row %d has %d entries, want 4", a, len(exact[a]))
		}
		if exact[a][a] < 0 {
			t.Errorf("k*(x_%d, x_%d) = %v < 0", a, a, exact[a][a])
		}
		for b := range exact {
			if math.Abs(exact[a][b]-exact[b][a]) > 1e-12*(1+math.Abs(exact[a][b])) {
				t.Errorf("exact K[%d][%d] = %v, K[%d][%d] = %v", a, b, exact[a][b], b, a, exact[b][a])
			}
		}
	}
	r0 := runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--h", "3", "--s", "0", "--seed", "5")
	if r0["draw"] != "cli" || r0["h"] != 3.0 || r0["s"] != 0.0 || r0["seed"] != 5.0 {
		t.Errorf("sketch metadata: draw %v h %v s %v seed %v; want cli, 3, 0, 5", r0["draw"], r0["h"], r0["s"], r0["seed"])
	}
	pad := int(r0["padded_p"].(float64))
	k0 := kernelOf(t, r0)
	kp := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--h", "3", "--s", strconv.Itoa(pad), "--seed", "5"))
	for a := range k0 {
		for b := range k0 {
			if math.Abs(k0[a][b]-kp[a][b]) > 1e-10*(1+math.Abs(k0[a][b])) {
				t.Errorf("K[%d][%d]: s = P gives %v, s = 0 gives %v", a, b, kp[a][b], k0[a][b])
			}
		}
	}
}

func TestEntkKernelErrors(t *testing.T) {
	in := writeTempCSV(t, entkTestCSV)
	narrow := writeTempCSV(t, "1,2,3\n4,5,6\n")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"exact with h", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--exact", "--h", "2"}, "--exact"},
		{"exact with s", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--exact", "--s", "2"}, "--exact"},
		{"neither", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in}, "--exact"},
		{"zero heads", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--h", "0", "--s", "4"}, "--h"},
		{"wide s", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--h", "2", "--s", "100000"}, "100000"},
		{"no arch", []string{"kernel", "--in", in, "--exact"}, "--arch"},
		{"no in", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--exact"}, "--in"},
		{"row width", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", narrow, "--exact"}, "dimension 6"},
		{"bad arch", []string{"kernel", "--arch", "mlp:x", "--in", in, "--exact"}, "mlp:x"},
		{"weights and untrained", []string{"kernel", "--arch", "mlp:6-8-4", "--untrained", "--weights", "w.safetensors", "--in", in, "--exact"}, "--weights"},
		{"unknown sub", []string{"gram"}, "gram"},
		{"no sub", nil, "subcommand"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := cmdRun("entk", c.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	// An arch with no shipped weights keeps the seeded network (the verification use of
	// the command), and says so in the output rather than silently.
	var out bytes.Buffer
	if err := cmdRun("entk", []string{"kernel", "--arch", "mlp:6-8-4", "--in", in, "--exact", "--seed", "4"}, &out); err != nil {
		t.Fatalf("nothing shipped for mlp:6-8-4: %v", err)
	}
	var rep struct {
		Weights string `json:"weights"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Weights != "seeded:4" {
		t.Errorf("nothing shipped: weights %q (%v), want seeded:4", rep.Weights, err)
	}
	var help bytes.Buffer
	if err := cmdRun("entk", []string{"-h"}, &help); err != nil || !strings.Contains(help.String(), "kernel") {
		t.Errorf("entk -h: got %v and %q, want nil and the usage", err, help.String())
	}
}

// TestEntkKernelWeights writes a backbone (init seed 7) to safetensors and checks that
// --weights loads it: the printed exact Gram equals entk.ExactGramTo on that backbone, and
// differs from the default (seed 1) initialization.
func TestEntkKernelWeights(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 7)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := entk.BackboneTensors(b, "F64")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := entk.WriteSafetensors(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	wpath := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(wpath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	in := writeTempCSV(t, entkTestCSV)
	xs, n, _, err := offline.ReadMatrixCSV(in)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n*n)
	entk.ExactGramTo(want, b, xs, n)
	got := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--weights", wpath, "--in", in, "--exact"))
	def := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--exact"))
	for a := 0; a < n; a++ {
		for c := 0; c < n; c++ {
			if got[a][c] != want[a*n+c] {
				t.Errorf("K[%d][%d] = %v, want %v", a, c, got[a][c], want[a*n+c])
			}
		}
	}
	if def[0][0] == got[0][0] {
		t.Error("--weights gave the same kernel as the default initialization")
	}
}

// TestEntkKernelSketchApproachesExact: at s = 0 with h = 20000 heads, the sketched Gram
// is an average of h i.i.d. unbiased terms; its relative error is about
// sqrt(2/(h·r_tr)) ≤ sqrt(2/h) ≈ 0.01 (Prop. two-axis, output axis, r_tr ≥ 1 for the
// PSD diagonal blocks), so 0.06 is 6 standard deviations on the diagonal entries.
func TestEntkKernelSketchApproachesExact(t *testing.T) {
	in := writeTempCSV(t, entkTestCSV)
	exact := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--exact"))
	sk := kernelOf(t, runEntkJSON(t, "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", in, "--h", "20000", "--s", "0"))
	for a := range exact {
		if rel := math.Abs(sk[a][a]-exact[a][a]) / exact[a][a]; rel > 0.06 {
			t.Errorf("K[%d][%d]: sketched %v, exact %v (relative error %.3f > 0.06)", a, a, sk[a][a], exact[a][a], rel)
		}
	}
}

// TestEntkKernelDefaultWeights: without --weights the default convnet is built from the
// shipped MNIST weights, as the daemon builds it, and the report says so with their
// SHA-256; --untrained gives the seeded initialization instead, and the two kernels differ.
func TestEntkKernelDefaultWeights(t *testing.T) {
	var b strings.Builder
	for i := range 2 * 784 {
		if i%784 != 0 {
			b.WriteByte(',')
		} else if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%.3f", float64((i*37)%101)/101)
	}
	in := writeTempCSV(t, b.String()+"\n")
	const arch = "convnet:1x28x28-16-32-10"
	mnist, _ := weights.ByName("mnist")
	tr := runEntkJSON(t, "kernel", "--arch", arch, "--in", in, "--exact")
	if tr["weights"] != "shipped:mnist" || tr["weights_sha256"] != mnist.SHA256 {
		t.Errorf("default weights %v %v, want shipped:mnist %s", tr["weights"], tr["weights_sha256"], mnist.SHA256)
	}
	un := runEntkJSON(t, "kernel", "--arch", arch, "--untrained", "--seed", "3", "--in", in, "--exact")
	if un["weights"] != "seeded:3" {
		t.Errorf("--untrained weights %v, want seeded:3", un["weights"])
	}
	if kt, ku := kernelOf(t, tr), kernelOf(t, un); kt[0][1] == ku[0][1] {
		t.Error("the trained and the untrained convnet gave the same kernel")
	}
}
