package main

import (
	"flag"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// pipelineFlags are the data → backbone → sketch → features flags shared by the select,
// fit, explain, audit and validate commands (offline.Pipeline). Register them with
// register, then read them with options.
type pipelineFlags struct {
	data      string    // --data: mnist | fashion-mnist | adult:DIR | csv:FILE
	arch      string    // --arch; "" picks the default for the data set (offline.DefaultArch)
	weights   string    // --weights: backbone parameter file or shipped:NAME
	untrained bool      // --untrained: the seeded initialization (a test fixture)
	onnx      onnxFlags // --model FILE.onnx, --params GLOB,...
	h, s      int       // --h heads, --s SRHT width
	m         int       // --m landmarks per view
	n         int       // --n first rows (0 = all)
	seed      uint64    // --seed: backbone init, sketch, views, selectors
	normalize bool      // --normalize: pc-ntk's normalized residuals
	tolerance float64
}

// register adds the pipeline flags to fs, with offline.DefaultPipeline's defaults.
func (p *pipelineFlags) register(fs *flag.FlagSet) {
	d := offline.DefaultPipeline()
	fs.StringVar(&p.data, "data", "", "data set: mnist | fashion-mnist | adult:DIR | csv:FILE")
	fs.StringVar(&p.arch, "arch", "", "backbone spec (default convnet:1x28x28-16-32-10 for images, resmlp:<D>-128x3-8 otherwise)")
	fs.StringVar(&p.weights, "weights", "", "backbone weights: a safetensors file or shipped:NAME (default: the shipped trained weights for --data and --arch)")
	fs.BoolVar(&p.untrained, "untrained", false, "use the seeded untrained network (PyTorch-default init under --seed) instead of trained weights")
	p.onnx.register(fs)
	fs.IntVar(&p.h, "h", d.H, "number of Gaussian output heads")
	fs.IntVar(&p.s, "s", d.S, "SRHT sketch width")
	fs.IntVar(&p.m, "m", d.M, "landmarks per view (pool M = 2m)")
	fs.IntVar(&p.n, "n", d.N, "use the first n training rows (0 = all)")
	fs.Uint64Var(&p.seed, "seed", d.Seed, "seed of every random draw")
	fs.BoolVar(&p.normalize, "normalize", d.Normalize,
		"pc-ntk pivots on the normalized residual δ_j/K_jj, as the daemon's pool.normalize (covers inputs of small eNTK norm; tr R stays the raw kernel's); false: the paper's raw δ_j")
	fs.Float64Var(&p.tolerance, "tolerance", d.Tolerance,
		"pc-ntk's tolerant pivoting τ in [0, 1), as the daemon's pool.tolerance: each step takes, among the candidates within 1−τ of the largest key, the one of smallest seed-free key of its row (a reseed keeps the landmarks); 0: the paper's exact argmax")
}

// options returns the parsed flags as offline's settings.
func (p *pipelineFlags) options() offline.Pipeline {
	return offline.Pipeline{Data: p.data, Arch: p.arch, Weights: p.weights, Untrained: p.untrained,
		Model: p.onnx.model, Params: p.onnx.params, H: p.h, S: p.s,
		M: p.m, N: p.n, Seed: p.seed, Normalize: p.normalize, Tolerance: p.tolerance}
}
