package main

import (
	"context"
	"flag"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// entkKernelCmd prints the exact eNTK Gram matrix of the rows of --in, or the sketched
// K_{h,s} of one draw named "cli" under --seed (offline.Kernel).
func entkKernelCmd(fs *flag.FlagSet) cli.Func {
	var o offline.KernelOptions
	fs.StringVar(&o.Arch, "arch", "", "architecture spec, e.g. mlp:784-256-256-10 (required unless --model)")
	fs.StringVar(&o.Model, "model", "", "an ONNX export (FILE.onnx) as the backbone instead of --arch, as cairnd --model (model.file)")
	fs.StringVar(&o.Params, "params", "", "with --model: comma-separated initializer-name globs selecting the kernel's parameters (model.params); default: all")
	fs.StringVar(&o.Weights, "weights", "", "safetensors file with the parameters, or shipped:NAME (default: the shipped trained weights for --arch)")
	fs.BoolVar(&o.Untrained, "untrained", false, "use the seeded PyTorch-default initialization under --seed instead of trained weights")
	fs.StringVar(&o.In, "in", "", "headerless CSV, one example per row (required)")
	fs.BoolVar(&o.Exact, "exact", false, "exact kernel tr(J_a J_bᵀ)/d instead of a sketch")
	fs.IntVar(&o.H, "h", 0, "number of Gaussian heads of the sketch (≥ 1)")
	fs.IntVar(&o.S, "s", 0, "SRHT width of the sketch (0 = no sketch, else 1..padded P)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the sketch draw (and of the initialization with --untrained)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		return jsonOut(stdio)(offline.Kernel(o, set["h"], set["s"]))
	}
}
