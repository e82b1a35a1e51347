package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/cli"
)

// trainReport is the output of `cairnctl train`.
type trainReport struct {
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

// trainCmd is `cairnctl train --data D --arch SPEC --epochs N --seed S --out FILE`:
// supervised cross-entropy training of an entk backbone from its seeded PyTorch-default
// initialization (entk.Train: exact VJPs, Adam on two workers), on the plain rows of the
// training split (no augmented views: entk.Train says why), written as a float32
// safetensors state_dict that PyTorch loads (keys of entk.Arch). The accuracies are those
// of the file as written (reloaded from its bytes), on the data set's train and test
// splits; --n limits the training rows only.
//
// The default --arch is the one every other command uses for the data set (defaultArch),
// so the file trained with it is the one they pick up. For Adult that is
// resmlp:108-128x3-8: eight outputs for two classes, the labels being outputs 0 and 1.
// The six other logits are trained too (cross-entropy pushes them below the two used
// ones) and still enter the eNTK (d = 8); a 2-output head would change the default arch
// of select, fit, explain and audit on Adult and every number measured with it, for a
// data set the daemon does not default to, so the head stays as it was.
func trainCmd(fs *flag.FlagSet) cli.Func {
	data := fs.String("data", "", "data set: mnist | fashion-mnist | adult:DIR | csv:FILE")
	arch := fs.String("arch", "", "backbone spec (default: the data set's default, as select/fit use)")
	epochs := fs.Int("epochs", 15, "passes over the training split")
	batch := fs.Int("batch", 64, "minibatch size")
	lr := fs.Float64("lr", 2e-3, "Adam step size (cosine-decayed to 0)")
	seed := fs.Uint64("seed", 1, "seed of the initialization and of the shuffling")
	n := fs.Int("n", 0, "use the first n training rows (0 = all)")
	out := fs.String("out", "", "output safetensors file")
	return func(ctx context.Context, stdio cli.Stdio) error {
		switch {
		case *data == "":
			return fmt.Errorf("--data is required")
		case *out == "":
			return fmt.Errorf("--out is required")
		case *epochs < 1:
			return fmt.Errorf("--epochs %d: must be at least 1", *epochs)
		case *batch < 1:
			return fmt.Errorf("--batch %d: must be at least 1", *batch)
		case !(*lr > 0) || math.IsInf(*lr, 1):
			return fmt.Errorf("--lr %v: must be positive and finite", *lr)
		case *n < 0:
			return fmt.Errorf("--n %d: must be ≥ 0", *n)
		}
		rep, err := train(ctx, *data, *arch, *n, entk.TrainOptions{Epochs: *epochs, Batch: *batch, LR: *lr, Seed: *seed, Workers: 2,
			Progress: func(e int, loss float64) {
				fmt.Fprintf(stdio.Err, "cairnctl train: epoch %d/%d loss %.4f\n", e, *epochs, loss)
			}}, *out)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, rep)
	}
}

// train runs the training and writes the file; Workers is fixed (2) so that a file is
// reproduced bit for bit on one kind of machine whatever GOMAXPROCS is.
func train(ctx context.Context, data, arch string, n int, opt entk.TrainOptions, out string) (trainReport, error) {
	rep := trainReport{Out: out, Data: data, Epochs: opt.Epochs, Batch: opt.Batch, LR: opt.LR, Seed: opt.Seed}
	set, err := dataset.Open(data, "train", n)
	if err != nil {
		return rep, fmt.Errorf("--data %q: %w", data, err)
	}
	test, err := dataset.Open(data, "test", 0)
	if err != nil {
		return rep, fmt.Errorf("--data %q (test split): %w", data, err)
	}
	if arch == "" {
		arch = defaultArch(set)
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

// weightsForData points a daemon configuration that asks for the default weights at the
// shipped file trained on the data set it will be fed (the daemon alone cannot know it:
// MNIST and Fashion-MNIST share the convnet).
func weightsForData(m config.Backbone, data string) config.Backbone {
	if m.Weights == "" && !m.Untrained {
		if f, ok := weights.Find(data, m.Arch); ok && f.Data == data {
			m.Weights = "shipped:" + f.Name
		}
	}
	return m
}
