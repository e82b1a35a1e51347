package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/fit"
)

// TestRunFitRejectsBadLR checks that a non-positive or non-finite --lr is refused before
// any data is loaded, with the flag named in the error.
func TestRunFitRejectsBadLR(t *testing.T) {
	for _, flag := range []string{"--lr", "--init-scale"} {
		for _, v := range []string{"0", "-1e-3", "NaN", "+Inf", "units"} {
			err := cmdRun("fit", []string{"--data", "mnist", flag, v}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), strings.TrimLeft(flag, "-")) {
				t.Errorf("%s %s: got error %v, want one naming %s", flag, v, err, flag)
			}
		}
	}
}

// TestRunFitRejectsBadKernelScale checks that an unknown --kernel-scale mode is refused
// with the flag named in the error. The mode is checked once the blocks exist, so this
// runs a tiny pipeline (100 MNIST rows, 4 landmarks, no test split).
func TestRunFitRejectsBadKernelScale(t *testing.T) {
	args := []string{"--data", "mnist", "--n", "100", "--m", "4", "--h", "2", "--s", "32", "--test-n", "0", "--epochs", "1", "--kernel-scale", "Diag"}
	err := cmdRun("fit", args, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--kernel-scale") || !errors.Is(err, fit.ErrOption) {
		t.Errorf("--kernel-scale Diag: got error %v, want one naming --kernel-scale and wrapping fit.ErrOption", err)
	}
}

// TestRunFitDecayFlags checks that --weight-decay and --decay are validated before any data
// is loaded, with the flag named in the error.
func TestRunFitDecayFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--weight-decay", "-1e-5"}, {"--weight-decay", "NaN"}, {"--weight-decay", "Inf"}, {"--decay", "adamw"}, {"--decay", ""}, {"--knn", "0"},
		{"--trace-every", "-1"}, {"--trace-every", "2", "--solver", "krepes"}, {"--solver", "krepes", "--loss", "byol"},
	} {
		err := cmdRun("fit", append([]string{"--data", "mnist"}, args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: got error %v, want one naming %s", args, err, args[0])
		}
	}
}

// TestRunFitProbeKeys runs a small fit (600 MNIST rows, so the 120 validation and 200 test
// rows hold all ten digits) and checks that the linear-probe keys are present and are
// accuracies, and absent with --probe=false. The first run also traces every step: its
// ~480 training rows make one batch per epoch, so the trace has one point per epoch and
// the selected epoch's point is the reported accuracy.
func TestRunFitProbeKeys(t *testing.T) {
	base := []string{"--data", "mnist", "--n", "600", "--m", "8", "--h", "2", "--s", "32", "--test-n", "200", "--epochs", "2", "--k", "8", "--decay", "decoupled"}
	var out strings.Builder
	if err := cmdRun("fit", append(base, "--trace-every", "1"), &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for _, key := range []string{"probe_accuracy", "probe_plain_accuracy", "init_probe_accuracy", "accuracy"} {
		v, ok := got[key].(float64)
		if !ok || !(v > 0 && v <= 1) {
			t.Errorf("%s = %v, want an accuracy in (0, 1]", key, got[key])
		}
	}
	trace, _ := got["trace"].([]any)
	epochs, _ := got["epochs"].(float64)
	best, _ := got["best_epoch"].(float64)
	if len(trace) != int(epochs) || best < 1 {
		t.Fatalf("trace has %d points for %v epochs (best %v), want one per epoch", len(trace), epochs, best)
	}
	pt, _ := trace[int(best)-1].(map[string]any)
	if pt["step"] != best || pt["epoch"] != best || pt["accuracy"] != got["accuracy"] {
		t.Errorf("trace point at the selected epoch = %v, want step = epoch = %v and accuracy %v", pt, best, got["accuracy"])
	}
	out.Reset()
	if err := cmdRun("fit", append(base, "--probe=false"), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "probe_accuracy") || strings.Contains(out.String(), `"trace"`) {
		t.Errorf("--probe=false without --trace-every still reports probe_accuracy or trace:\n%s", out.String())
	}
}
