package offline

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// KernelResult is the output of cairnctl entk kernel.
type KernelResult struct {
	Arch   string `json:"arch"`
	Params int    `json:"params"`
	// Weights says where the parameters came from ("shipped:NAME", the file, or
	// "seeded:<seed>") and WeightsSHA256 hashes them, as the daemon's GET /model does.
	weights.Source
	// Coverage is the parameters the kernel is over (every one of a built-in backbone's;
	// those --params selects of an ONNX model's) and Warnings the ONNX loader's findings
	// about the export.
	Coverage InspectedCoverage `json:"coverage"`
	Warnings []Warning         `json:"warnings,omitempty"`
	N        int               `json:"n"`
	Exact    bool              `json:"exact"`
	// Sketch draw, when not exact: heads, width (0 = no sketch), padded P, the seed and the
	// draw name, so the draw is rng.New(seed, "entk/heads/cli") and "entk/srht/cli".
	H       int    `json:"h,omitempty"`
	S       *int   `json:"s,omitempty"`
	PaddedP int    `json:"padded_p,omitempty"`
	Seed    uint64 `json:"seed"`
	Draw    string `json:"draw,omitempty"`
	// Kernel is the n×n Gram matrix, row a = example a.
	Kernel [][]float64 `json:"kernel"`
}

// KernelOptions are the settings of cairnctl entk kernel, each named by its flag.
type KernelOptions struct {
	Arch      string // --arch (required unless --model)
	Model     string // --model: an ONNX file as the backbone
	Params    string // --params: comma-separated globs selecting an ONNX model's kernel parameters
	Weights   string // --weights: safetensors file or shipped:NAME
	Untrained bool   // --untrained
	In        string // --in: headerless CSV, one example per row (required)
	Exact     bool   // --exact
	H, S      int    // --h heads, --s SRHT width of the sketch
	Seed      uint64 // --seed
}

// Kernel is cairnctl entk kernel: the exact eNTK Gram matrix k*(x_a, x_b) = tr(J_a J_bᵀ)/d
// of the rows of o.In, or the sketched K_{h,s} of one draw named "cli" under o.Seed (paper
// eq. composed). The backbone is resolved as the daemon resolves model.weights
// (weights.Load, no data set known): o.Weights, else the shipped trained weights for
// o.Arch, else (nothing is shipped for the arch, the verification use) or with o.Untrained
// the seeded initialization NewBackbone(o.Arch, o.Seed), reported as weights "seeded:N".
// With o.Model the backbone is that ONNX file instead (entk.OpenBackbone, the kernel's
// parameters selected by o.Params), as the daemon's model.file. Which of --h and --s
// were given is the caller's to check (hSet, sSet).
func Kernel(o KernelOptions, hSet, sSet bool) (*KernelResult, error) {
	switch {
	case o.Arch == "" && o.Model == "":
		return nil, errors.New("--arch or --model is required")
	case o.In == "":
		return nil, errors.New("--in is required")
	case o.Exact && (hSet || sSet):
		return nil, errors.New("--exact excludes --h and --s")
	case !o.Exact && !hSet:
		return nil, errors.New("give --exact, or --h (and --s) for a sketch")
	case !o.Exact && o.H < 1:
		return nil, fmt.Errorf("--h: %d heads, want ≥ 1", o.H)
	}
	b, src, cov, err := kernelBackbone(o)
	if err != nil {
		return nil, err
	}
	xs, n, cols, err := ReadMatrixCSV(o.In)
	if err != nil {
		return nil, fmt.Errorf("--in: %w", err)
	}
	if cols != b.InDim() {
		return nil, fmt.Errorf("--in %s: rows have %d values, but the backbone (%s) takes inputs of dimension %d", o.In, cols, b.Arch(), b.InDim())
	}
	res := &KernelResult{Arch: b.Arch(), Params: b.NumParams(), Source: src, N: n, Exact: o.Exact, Seed: o.Seed,
		Coverage: InspectedCoverage{ParamsInKernel: cov.KernelParams, ParamsTotal: cov.ModelParams, Share: cov.Share(),
			TensorsInKernel: cov.KernelTensors, TensorsTotal: cov.ModelTensors}}
	for _, w := range cov.Warnings {
		res.Warnings = append(res.Warnings, Warning{Kind: string(w.Kind), Tensors: w.Tensors, Message: w.Message, Fix: w.Fix})
	}
	k := make([]float64, n*n)
	if o.Exact {
		entk.ExactGramTo(k, b, xs, n)
	} else {
		const draw = "cli"
		sk, err := entk.NewSketch(b, o.H, o.S, o.Seed, draw)
		if err != nil {
			return nil, fmt.Errorf("--h %d --s %d: %w", o.H, o.S, err)
		}
		sk.KernelTo(k, xs, n)
		s := o.S
		res.H, res.S, res.PaddedP, res.Draw = sk.H(), &s, sk.PaddedP(), draw
	}
	res.Kernel = make([][]float64, n)
	for a := range res.Kernel {
		res.Kernel[a] = k[a*n : (a+1)*n]
	}
	return res, nil
}

// kernelBackbone is the backbone of cairnctl entk kernel (see Kernel) with where its
// parameters came from and its coverage.
func kernelBackbone(o KernelOptions) (entk.Backbone, weights.Source, *onnx.Coverage, error) {
	if o.Model != "" {
		if o.Weights != "" || o.Untrained || (o.Arch != "" && !entk.IsONNX(o.Arch, "")) {
			return nil, weights.Source{}, nil, fmt.Errorf("--model %s holds the architecture and weights: drop --arch (%q), --weights (%q) and --untrained (%v), "+
				"or give --arch onnx:<SHA-256> to pin the file", o.Model, o.Arch, o.Weights, o.Untrained)
		}
		spec := o.Arch
		if spec == "" {
			spec = "onnx"
		}
		b, cov, err := entk.OpenBackbone(spec, o.Model, GlobList(o.Params))
		if err != nil {
			return nil, weights.Source{}, nil, fmt.Errorf("--model %s --params %q: %w%s", o.Model, o.Params, err, pipeline.LoadHint(err))
		}
		return b, weights.Source{Weights: o.Model, SHA256: b.(*entk.ONNX).Model().SHA256()}, cov, nil
	}
	if o.Params != "" {
		return nil, weights.Source{}, nil, fmt.Errorf("--params %q selects an ONNX model's parameters: give --model FILE.onnx too", o.Params)
	}
	// A kernel of an arbitrary spec (the verification use, e.g. mlp:6-8-4) has no trained
	// file to default to: it keeps the seeded network, as it always has, and the output's
	// weights key says "seeded:N", so the fall-back is visible, never silent.
	if o.Weights == "" && !o.Untrained {
		if _, ok := weights.Find("", o.Arch); !ok {
			o.Untrained = true
		}
	}
	b, src, err := weights.Load(o.Arch, o.Weights, "", o.Untrained, o.Seed)
	if err != nil {
		return nil, weights.Source{}, nil, fmt.Errorf("--arch %q --weights %q --untrained=%v: %w", o.Arch, o.Weights, o.Untrained, err)
	}
	return b, src, entk.Coverage(b), nil
}
