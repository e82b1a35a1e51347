package study

import (
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// TestCheck: the zero Options fail every check, and one error names every flag; the
// defaults with a data set pass.
func TestCheck(t *testing.T) {
	err := (&Options{}).Check()
	if err == nil {
		t.Fatal("zero options passed Check")
	}
	for _, flag := range []string{"--data", "--n", "--m", "--queries", "--halves", "--retrains", "--train-epochs",
		"--train-batch", "--train-lr", "--random", "--trak-ridge", "--val-frac"} {
		if !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("error %q does not name %s", err, flag)
		}
	}
	o := Options{Model: offline.DefaultModelOptions(), Queries: 1, Halves: 2, Retrains: 1, TrainEpochs: 1, TrainBatch: 1,
		TrainLR: 1e-3, Random: 1, TrakRidge: 1e-3}
	o.Model.Pipeline.Data, o.Model.Pipeline.N = "mnist", 8
	if err := o.Check(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	o.Model.Pipeline.Weights = "w.safetensors"
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "--weights") {
		t.Errorf("with --weights: %v, want a refusal naming --weights", err)
	}
}
