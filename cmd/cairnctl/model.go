package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
)

// modelFlags are the flags of commands that fit a model and then use it (explain, audit):
// the pipeline flags plus the fit's loss, initializer and encoder width.
type modelFlags struct {
	pipeline pipelineFlags
	loss     string
	init     string
	dim      int
	epochs   int
	selector string
	valFrac  float64
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	f.pipeline.register(fs)
	fs.StringVar(&f.loss, "loss", "simclr", "objective: bt | simclr | vicreg")
	fs.StringVar(&f.init, "init", "pci", "initializer: kaiming | pci | pci-lanczos | csi | aui | krepes-pci")
	fs.IntVar(&f.dim, "dim", 256, "output dimension k of the encoder")
	fs.IntVar(&f.epochs, "epochs", 20, "Adam epochs")
	fs.StringVar(&f.selector, "selector", coreset.SelPCNTK, "landmark selector")
	fs.Float64Var(&f.valFrac, "val-frac", 0.2, "fraction of the loaded train rows held out for validation")
}

// fittedModel is a pool with its kernel blocks and R Adam fits that differ only in the fit
// seed (paper Thm. fit-floor), in the units of the raw sketched kernel.
type fittedModel struct {
	prob  *fit.Problem
	info  *blockInfo
	init  *fit.InitResult
	fits  *fit.Repeated
	scale float64 // kernel_scale: blocks were multiplied by it before fitting
	secs  map[string]float64
}

// fitModel builds the blocks (fitBlocks, with testN test rows), scales the kernel and the
// initial coefficients exactly as cairnctl fit does by default (fit.ScaleKernels
// fit.ScaleDiag, fit.ScaleInit fit.DefaultInitScale), and runs r Adam fits on all cores.
func fitModel(f *modelFlags, r, testN int) (*fittedModel, error) {
	loss, err := fit.ParseLoss(f.loss)
	if err != nil {
		return nil, fmt.Errorf("--loss: %w", err)
	}
	in, err := fit.ParseInit(f.init)
	if err != nil {
		return nil, fmt.Errorf("--init: %w", err)
	}
	if r < 1 || f.dim < 1 || f.epochs < 1 {
		return nil, fmt.Errorf("--fits %d, --dim %d, --epochs %d: each must be ≥ 1", r, f.dim, f.epochs)
	}
	if !(f.valFrac > 0 && f.valFrac < 1) {
		return nil, fmt.Errorf("--val-frac: %v must be in (0, 1)", f.valFrac)
	}
	secs := map[string]float64{}
	t0 := time.Now()
	prob, info, err := fitBlocks(&f.pipeline, f.selector, f.valFrac, testN)
	if err != nil {
		return nil, err
	}
	scale, err := fit.ScaleKernels(prob, fit.ScaleDiag)
	if err != nil {
		return nil, err
	}
	secs["kernel"] = time.Since(t0).Seconds()
	t0 = time.Now()
	init, err := fit.Initialize(in, prob, f.dim, f.pipeline.seed)
	if err != nil {
		return nil, fmt.Errorf("--init %s: %w", in, err)
	}
	if _, err := fit.ScaleInit(fit.DefaultInitScale, in, prob.KA, init.A0); err != nil {
		return nil, err
	}
	secs["init"] = time.Since(t0).Seconds()
	t0 = time.Now()
	opt := fit.DefaultOptions(loss)
	opt.Seed = f.pipeline.seed
	opt.Epochs = f.epochs
	opt.Balanced = info.balanced
	rep, err := fit.Repeat(prob, init, opt, r, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	secs["fit"] = time.Since(t0).Seconds()
	return &fittedModel{prob: prob, info: info, init: init, fits: rep, scale: scale, secs: secs}, nil
}
