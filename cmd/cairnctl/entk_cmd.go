package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/cli"
)

// entkKernelResult is the output of "cairnctl entk kernel".
type entkKernelResult struct {
	Arch   string `json:"arch"`
	Params int    `json:"params"`
	// Weights says where the parameters came from ("shipped:NAME", the file, or
	// "seeded:<seed>") and WeightsSHA256 hashes them, as the daemon's GET /model does.
	weights.Source
	N     int  `json:"n"`
	Exact bool `json:"exact"`
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

// entkKernelCmd prints the exact eNTK Gram matrix k*(x_a, x_b) = tr(J_a J_bᵀ)/d of the rows
// of --in, or the sketched K_{h,s} of one draw named "cli" under --seed (paper eq.
// composed). The backbone is resolved as the daemon resolves model.weights (weights.Load,
// no data set known): --weights FILE or shipped:NAME, else the shipped trained weights for
// --arch, else (nothing is shipped for --arch, the verification use) or with --untrained
// the seeded initialization NewBackbone(--arch, --seed), reported as weights "seeded:N".
func entkKernelCmd(fs *flag.FlagSet) cli.Func {
	arch := fs.String("arch", "", "architecture spec, e.g. mlp:784-256-256-10 (required)")
	wpath := fs.String("weights", "", "safetensors file with the parameters, or shipped:NAME (default: the shipped trained weights for --arch)")
	untrained := fs.Bool("untrained", false, "use the seeded PyTorch-default initialization under --seed instead of trained weights")
	in := fs.String("in", "", "headerless CSV, one example per row (required)")
	exact := fs.Bool("exact", false, "exact kernel tr(J_a J_bᵀ)/d instead of a sketch")
	h := fs.Int("h", 0, "number of Gaussian heads of the sketch (≥ 1)")
	s := fs.Int("s", 0, "SRHT width of the sketch (0 = no sketch, else 1..padded P)")
	seed := fs.Uint64("seed", 1, "seed of the sketch draw (and of the initialization with --untrained)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		switch {
		case *arch == "":
			return errors.New("--arch is required")
		case *in == "":
			return errors.New("--in is required")
		case *exact && (set["h"] || set["s"]):
			return errors.New("--exact excludes --h and --s")
		case !*exact && !set["h"]:
			return errors.New("give --exact, or --h (and --s) for a sketch")
		case !*exact && *h < 1:
			return fmt.Errorf("--h: %d heads, want ≥ 1", *h)
		}

		// A kernel of an arbitrary spec (the verification use, e.g. mlp:6-8-4) has no trained
		// file to default to: it keeps the seeded network, as it always has, and the output's
		// weights key says "seeded:N", so the fall-back is visible, never silent.
		fallback := *wpath == "" && !*untrained
		if fallback {
			if _, ok := weights.Find("", *arch); !ok {
				*untrained = true
			}
		}
		b, src, err := weights.Load(*arch, *wpath, "", *untrained, *seed)
		if err != nil {
			return fmt.Errorf("--arch %q --weights %q --untrained=%v: %w", *arch, *wpath, *untrained, err)
		}
		xs, n, cols, err := readMatrixCSV(*in)
		if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
		if cols != b.InDim() {
			return fmt.Errorf("--in %s: rows have %d values, but --arch %s takes inputs of dimension %d", *in, cols, *arch, b.InDim())
		}

		res := entkKernelResult{Arch: b.Arch(), Params: b.NumParams(), Source: src, N: n, Exact: *exact, Seed: *seed}
		k := make([]float64, n*n)
		if *exact {
			entk.ExactGramTo(k, b, xs, n)
		} else {
			const draw = "cli"
			sk, err := entk.NewSketch(b, *h, *s, *seed, draw)
			if err != nil {
				return fmt.Errorf("--h %d --s %d: %w", *h, *s, err)
			}
			sk.KernelTo(k, xs, n)
			res.H, res.S, res.PaddedP, res.Draw = sk.H(), s, sk.PaddedP(), draw
		}
		res.Kernel = make([][]float64, n)
		for a := range res.Kernel {
			res.Kernel[a] = k[a*n : (a+1)*n]
		}
		return writeJSON(stdio.Out, res)
	}
}
