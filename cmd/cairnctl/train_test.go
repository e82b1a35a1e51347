package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
)

// TestTrainCommand runs `cairnctl train` end to end on 300 MNIST rows for three epochs: the
// JSON report has the documented keys, the file's bytes have the reported SHA-256, it
// loads back with entk.LoadBackbone as the reported arch, its test accuracy recomputed
// here equals the reported one, training beat the seeded initialization it started from,
// and a second run writes the same bytes.
func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "w.safetensors")
	args := []string{"train", "--data", "mnist", "--n", "300", "--epochs", "3", "--seed", "4", "--out", out}
	code, stdout, stderr := runCmd(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"out", "arch", "data", "epochs", "seed", "train_accuracy", "test_accuracy", "seconds", "sha256", "params", "n", "batch", "lr", "bytes"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	const arch = "convnet:1x28x28-16-32-10"
	if rep["out"] != out || rep["arch"] != arch || rep["data"] != "mnist" || rep["epochs"] != 3.0 || rep["seed"] != 4.0 || rep["n"] != 300.0 {
		t.Errorf("report %v does not echo the run", rep)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != rep["sha256"] || float64(len(raw)) != rep["bytes"] {
		t.Errorf("file SHA-256 %s, %d bytes; reported %v, %v", got, len(raw), rep["sha256"], rep["bytes"])
	}
	b, err := entk.LoadBackbone(arch, out)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if float64(b.NumParams()) != rep["params"] {
		t.Errorf("params %d, reported %v", b.NumParams(), rep["params"])
	}
	test, err := dataset.Open("mnist", "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if acc := entk.Accuracy(b, test.X, test.Labels); acc != rep["test_accuracy"] {
		t.Errorf("test accuracy of the file %v, reported %v", acc, rep["test_accuracy"])
	}
	train, _ := dataset.Open("mnist", "train", 300)
	seeded, _ := entk.NewBackbone(arch, 4)
	// 15 steps of Adam on 300 rows take the convnet from chance (0.09 with this seed)
	// to 0.64; 0.4 leaves room and still fails a trainer that does not descend.
	if a0, a := entk.Accuracy(seeded, train.X, train.Labels), rep["train_accuracy"].(float64); a < 0.4 || a <= a0 {
		t.Errorf("train accuracy %.3f after training, %.3f before; want ≥ 0.4 and an improvement", a, a0)
	}
	args[len(args)-1] = filepath.Join(dir, "w2.safetensors")
	if code, stdout2, stderr := runCmd(args...); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	} else if raw2, _ := os.ReadFile(args[len(args)-1]); string(raw2) != string(raw) {
		t.Errorf("a second run wrote different bytes:\n%s\n%s", stdout, stdout2)
	}
}

// TestTrainRejectsBadFlags: every invalid flag is refused with the flag named, before any
// training.
func TestTrainRejectsBadFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "w.safetensors")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--out", out}, "--data"},
		{[]string{"train", "--data", "mnist"}, "--out"},
		{[]string{"train", "--data", "mnist", "--out", out, "--epochs", "0"}, "--epochs"},
		{[]string{"train", "--data", "mnist", "--out", out, "--batch", "-3"}, "--batch"},
		{[]string{"train", "--data", "mnist", "--out", out, "--lr", "0"}, "--lr"},
		{[]string{"train", "--data", "mnist", "--out", out, "--lr", "NaN"}, "--lr"},
		{[]string{"train", "--data", "mnist", "--out", out, "--lr", "+Inf"}, "--lr"},
		{[]string{"train", "--data", "mnist", "--out", out, "--n", "-1"}, "--n"},
		{[]string{"train", "--data", "nope", "--out", out}, "--data"},
		{[]string{"train", "--data", "mnist", "--n", "10", "--out", out, "--arch", "mlp:5-3"}, "--arch"},
		{[]string{"train", "--data", "mnist", "--n", "10", "--out", out, "--arch", "mlp:x"}, "--arch"},
		{[]string{"train", "--data", "mnist", "--n", "10", "--epochs", "1", "--arch", "mlp:784-4-10", "--out", filepath.Join(out, "missing", "w")}, "--out"},
	} {
		code, _, errs := runCmd(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want failure naming %s", tc.args, code, errs, tc.want)
		}
	}
}
