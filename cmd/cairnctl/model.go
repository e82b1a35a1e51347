package main

import (
	"flag"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// modelFlags are the flags of commands that fit a model and then use it (explain, audit,
// validate): the pipeline flags plus the fit's loss, initializer and encoder width
// (offline.ModelOptions).
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
	d := offline.DefaultModelOptions()
	f.pipeline.register(fs)
	fs.StringVar(&f.loss, "loss", d.Loss, "objective: bt | simclr | vicreg | byol")
	fs.StringVar(&f.init, "init", d.Init, "initializer: kaiming | pci | pci-lanczos | csi | aui | krepes-pci")
	fs.IntVar(&f.dim, "dim", d.Dim, "output dimension k of the encoder")
	fs.IntVar(&f.epochs, "epochs", d.Epochs, "Adam epochs")
	fs.StringVar(&f.selector, "selector", d.Selector, "landmark selector")
	fs.Float64Var(&f.valFrac, "val-frac", d.ValFrac, "fraction of the loaded train rows held out for validation")
}

// options returns the parsed flags as offline's settings.
func (f *modelFlags) options() offline.ModelOptions {
	return offline.ModelOptions{Pipeline: f.pipeline.options(), Loss: f.loss, Init: f.init, Dim: f.dim, Epochs: f.epochs,
		Selector: f.selector, ValFrac: f.valFrac}
}
