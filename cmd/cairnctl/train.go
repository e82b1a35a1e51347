package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// trainCmd is `cairnctl train --data D --arch SPEC --epochs N --seed S --out FILE`:
// supervised cross-entropy training of an entk backbone (offline.Train, on two workers so
// that a file is reproduced bit for bit whatever GOMAXPROCS is), written as a float32
// safetensors state_dict that PyTorch loads; --n limits the training rows only.
//
// The default --arch is the one every other command uses for the data set
// (offline.DefaultArch), so the file trained with it is the one they pick up. For Adult
// that is resmlp:108-128x3-8: eight outputs for two classes, the labels being outputs 0
// and 1. The six other logits are trained too (cross-entropy pushes them below the two
// used ones) and still enter the eNTK (d = 8); a 2-output head would change the default
// arch of select, fit, explain and audit on Adult and every number measured with it, for
// a data set the daemon does not default to, so the head stays as it was.
func trainCmd(fs *flag.FlagSet) cli.Func {
	data := fs.String("data", "", "data set: mnist | fashion-mnist | adult:DIR | csv:FILE")
	arch := fs.String("arch", "", "backbone spec (default: the data set's default, as select/fit use)")
	opt := entk.TrainOptions{Workers: 2}
	fs.IntVar(&opt.Epochs, "epochs", 15, "passes over the training split")
	fs.IntVar(&opt.Batch, "batch", 64, "minibatch size")
	fs.Float64Var(&opt.LR, "lr", 2e-3, "Adam step size (cosine-decayed to 0)")
	fs.Uint64Var(&opt.Seed, "seed", 1, "seed of the initialization and of the shuffling")
	n := fs.Int("n", 0, "use the first n training rows (0 = all)")
	out := fs.String("out", "", "output safetensors file")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if err := offline.CheckTrain(*data, *out, *n, opt); err != nil {
			return err
		}
		opt.Progress = func(e int, loss float64) {
			fmt.Fprintf(stdio.Err, "cairnctl train: epoch %d/%d loss %.4f\n", e, opt.Epochs, loss)
		}
		rep, err := offline.Train(ctx, *data, *arch, *n, opt, *out)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, rep)
	}
}
