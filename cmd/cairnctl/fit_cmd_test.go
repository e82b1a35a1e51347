package main

import (
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
			err := runFit([]string{"--data", "mnist", flag, v}, io.Discard)
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
	err := runFit(args, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--kernel-scale") || !errors.Is(err, fit.ErrOption) {
		t.Errorf("--kernel-scale Diag: got error %v, want one naming --kernel-scale and wrapping fit.ErrOption", err)
	}
}
