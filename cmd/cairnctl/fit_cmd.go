package main

import (
	"context"
	"flag"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// fitCmd is `cairnctl fit`: paper Alg. cairn-stage2 (and the KREPES baseline) end to end,
// printing one JSON object (offline.Fit).
func fitCmd(fs *flag.FlagSet) cli.Func {
	var pf pipelineFlags
	var o offline.FitOptions
	d := fit.DefaultOptions(fit.SimCLR)
	pf.register(fs)
	fs.StringVar(&o.Loss, "loss", "simclr", "objective: bt | simclr | vicreg | byol")
	fs.StringVar(&o.Init, "init", "pci", "initializer: kaiming | pci | pci-lanczos | csi | aui | krepes-pci")
	fs.StringVar(&o.Solver, "solver", "adam", "solver: adam | krepes (not with --loss byol)")
	fs.IntVar(&o.Fits, "fits", 1, "number R of repeated Adam fits differing only in the fit seed")
	fs.IntVar(&o.K, "k", 256, "output dimension of the encoder")
	fs.IntVar(&o.Epochs, "epochs", 20, "Adam epochs")
	fs.StringVar(&o.InitScale, "init-scale", fit.DefaultInitScale, "multiply Ã₀ by this factor; unit (default): by the factor giving the training latents K_A Ã₀ unit mean per-dimension variance; auto: unit for the PCI initializers, 1 for the others")
	fs.Float64Var(&o.LR, "lr", d.LR, "Adam peak learning rate (paper Table hparams; in units of Ã, see fit.DefaultInitScale)")
	fs.Float64Var(&o.WeightDecay, "weight-decay", d.WeightDecay, "Adam weight decay (paper Table hparams)")
	fs.StringVar(&o.Decay, "decay", "l2", "how Adam applies --weight-decay: l2 (added to the gradient, torch.optim.Adam) | decoupled (AdamW)")
	fs.IntVar(&o.KNN, "knn", d.KNN, "neighbours of the majority-vote k-NN accuracy (checkpoint selection and the reported accuracy)")
	fs.BoolVar(&o.Probe, "probe", true, "also score the initialization and the reported point with the paper's linear-SVM probe (probe_accuracy, init_probe_accuracy)")
	fs.IntVar(&o.TraceEvery, "trace-every", 0, "Adam: also score the test split every N optimizer steps (trace; the Adam side of the paper's accuracy-vs-time figure; 0 = off)")
	fs.StringVar(&o.Selector, "selector", coreset.SelPCNTK, "landmark selector")
	fs.Float64Var(&o.ValFrac, "val-frac", 0.2, "fraction of the loaded train rows held out for validation")
	fs.IntVar(&o.TestN, "test-n", 2000, "rows of the test split to evaluate on (0 = no test evaluation)")
	fs.Float64Var(&o.Damping, "damping", 1e-3, "KREPES Gauss–Newton damping λ")
	fs.IntVar(&o.CGIters, "cg-iters", 150, "KREPES maximum CG iterations")
	fs.StringVar(&o.Precision, "precision", config.Default().Fit.Precision, "Adam batch products: float32 (about half the time of a step) | float64 (parameters, optimizer and loss are float64 either way; byol always float64)")
	fs.StringVar(&o.KernelScale, "kernel-scale", fit.ScaleDiag, "kernel normalization: diag (divide every block by the mean of diag K_mm) | none")
	return func(ctx context.Context, stdio cli.Stdio) error {
		o.Pipeline = pf.options()
		return jsonOut(stdio)(offline.Fit(ctx, &o))
	}
}
