package offline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
)

// TrainReport is the output of cairnctl train.
type TrainReport struct {
	Out           string  `json:"out"`
	Arch          string  `json:"arch"`
	Data          string  `json:"data"`
	N             int     `json:"n"`
	Epochs        int     `json:"epochs"`
	Batch         int     `json:"batch"`
	LR            float64 `json:"lr"`
	Seed          uint64  `json:"seed"`
	Params        int     `json:"params"`
	TrainAccuracy float64 `json:"train_accuracy"`
	TestAccuracy  float64 `json:"test_accuracy"`
	Seconds       float64 `json:"seconds"`
	SHA256        string  `json:"sha256"`
	Bytes         int     `json:"bytes"`
}

// CheckTrain reports the first of cairnctl train's settings that is missing or out of
// range: data and out are required, epochs and batch at least 1, lr positive and finite,
// n not negative.
func CheckTrain(data, out string, n int, opt entk.TrainOptions) error {
	switch {
	case data == "":
		return fmt.Errorf("--data is required")
	case out == "":
		return fmt.Errorf("--out is required")
	case opt.Epochs < 1:
		return fmt.Errorf("--epochs %d: must be at least 1", opt.Epochs)
	case opt.Batch < 1:
		return fmt.Errorf("--batch %d: must be at least 1", opt.Batch)
	case !(opt.LR > 0) || math.IsInf(opt.LR, 1):
		return fmt.Errorf("--lr %v: must be positive and finite", opt.LR)
	case n < 0:
		return fmt.Errorf("--n %d: must be ≥ 0", n)
	}
	return nil
}

// Train is cairnctl train: supervised cross-entropy training of an entk backbone from
// its seeded PyTorch-default initialization (entk.Train: exact VJPs, Adam), on the plain
// rows of the first n training rows of data (0: all; no augmented views: entk.Train says
// why), written to the file out as a float32 safetensors state_dict that PyTorch loads
// (keys of entk.Arch). arch "" is DefaultArch of the data set, the one every other
// command uses, so the file trained with it is the one they pick up. The accuracies are
// those of the file as written (reloaded from its bytes), on the data set's train and
// test splits. A file is reproduced bit for bit on one kind of machine when opt.Workers
// is fixed (cairnctl passes 2), whatever GOMAXPROCS is.
func Train(ctx context.Context, data, arch string, n int, opt entk.TrainOptions, out string) (TrainReport, error) {
	rep := TrainReport{Out: out, Data: data, Epochs: opt.Epochs, Batch: opt.Batch, LR: opt.LR, Seed: opt.Seed}
	set, err := dataset.Open(data, "train", n)
	if err != nil {
		return rep, fmt.Errorf("--data %q: %w", data, err)
	}
	test, err := dataset.Open(data, "test", 0)
	if err != nil {
		return rep, fmt.Errorf("--data %q (test split): %w", data, err)
	}
	if arch == "" {
		arch = DefaultArch(set)
	}
	rep.Arch, rep.N = arch, set.N
	b, err := entk.NewBackbone(arch, opt.Seed)
	if err != nil {
		return rep, fmt.Errorf("--arch %q: %w", arch, err)
	}
	if b.InDim() != set.D {
		return rep, fmt.Errorf("--arch %q: input size %d, data has %d features", arch, b.InDim(), set.D)
	}
	t0 := time.Now()
	params, err := entk.Train(ctx, b, set.X, set.Labels, opt)
	if err != nil {
		return rep, err
	}
	rep.Seconds = time.Since(t0).Seconds()
	trained, err := entk.FromParams(arch, params)
	if err != nil {
		return rep, err
	}
	ts, err := entk.BackboneTensors(trained, "F32")
	if err != nil {
		return rep, err
	}
	var buf bytes.Buffer
	meta := map[string]string{"arch": arch, "data": set.Name, "epochs": fmt.Sprint(opt.Epochs), "batch": fmt.Sprint(opt.Batch),
		"lr": fmt.Sprint(opt.LR), "seed": fmt.Sprint(opt.Seed), "trainer": "cairnctl train (entk.Train)"}
	if err := entk.WriteSafetensors(&buf, ts, meta); err != nil {
		return rep, err
	}
	loaded, err := entk.LoadBackboneBytes(arch, buf.Bytes())
	if err != nil {
		return rep, fmt.Errorf("the written file does not load back: %w", err)
	}
	rep.TrainAccuracy = entk.Accuracy(loaded, set.X, set.Labels)
	rep.TestAccuracy = entk.Accuracy(loaded, test.X, test.Labels)
	rep.Params = loaded.NumParams()
	sum := sha256.Sum256(buf.Bytes())
	rep.SHA256, rep.Bytes = hex.EncodeToString(sum[:]), buf.Len()
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return rep, fmt.Errorf("--out: %w", err)
	}
	return rep, nil
}

// WeightsForData points a daemon configuration that asks for the default weights at the
// shipped file trained on the data set it will be fed (the daemon alone cannot know it:
// MNIST and Fashion-MNIST share the convnet).
func WeightsForData(m config.Backbone, data string) config.Backbone {
	if m.Weights == "" && !m.Untrained {
		if f, ok := weights.Find(data, m.Arch); ok && f.Data == data {
			m.Weights = "shipped:" + f.Name
		}
	}
	return m
}
