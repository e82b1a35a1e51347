package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
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
	// cache, when not nil, keeps the featurized training rows between fits on the same
	// data (fitBlocks); the commands' flags leave it nil.
	cache *blockCache
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	f.pipeline.register(fs)
	fs.StringVar(&f.loss, "loss", "simclr", "objective: bt | simclr | vicreg | byol")
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

// fitModel builds the blocks (fitBlocks, with testN test rows) and runs the daemon's fit
// recipe on them (pipeline.RecipeOf of the daemon's defaults with --loss, --init, --dim,
// --epochs and r fits): diagonal kernel scaling, the default initializer scaling, and r
// Adam fits on all cores, stopping early when ctx ends.
func fitModel(ctx context.Context, f *modelFlags, r, testN int) (*fittedModel, error) {
	if !(f.valFrac > 0 && f.valFrac < 1) {
		return nil, fmt.Errorf("--val-frac: %v must be in (0, 1)", f.valFrac)
	}
	c := config.Default().Fit
	c.Loss, c.Init, c.K, c.Epochs, c.Fits = f.loss, f.init, f.dim, f.epochs, r
	rec, err := pipeline.RecipeOf(c)
	if err != nil {
		return nil, fmt.Errorf("--loss %q, --init %q: %w", f.loss, f.init, err)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("--fits %d, --dim %d, --epochs %d: %w", r, f.dim, f.epochs, err)
	}
	t0 := time.Now()
	prob, info, err := fitBlocks(ctx, &f.pipeline, f.selector, f.valFrac, testN, f.cache)
	if err != nil {
		return nil, err
	}
	blocks := time.Since(t0).Seconds()
	rec.Options.Balanced = info.balanced
	fitted, err := rec.Run(ctx, prob, f.pipeline.seed)
	if err != nil {
		return nil, err
	}
	secs := fitted.Seconds
	secs["kernel"] += blocks
	return &fittedModel{prob: prob, info: info, init: fitted.Init, fits: fitted.Fits, scale: fitted.KernelScale, secs: secs}, nil
}
