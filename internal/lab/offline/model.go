package offline

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// ModelOptions are the settings of commands that fit a model and then use it (explain,
// audit, validate, verify certificate's real ω): the pipeline settings plus the fit's
// loss, initializer and encoder width. DefaultModelOptions holds their flags' defaults.
type ModelOptions struct {
	Pipeline Pipeline
	Loss     string  // --loss
	Init     string  // --init
	Dim      int     // --dim: output dimension k of the encoder
	Epochs   int     // --epochs
	Selector string  // --selector
	ValFrac  float64 // --val-frac
	// Cache, when not nil, keeps the featurized training rows between fits on the same
	// data (Blocks); the commands' flags leave it nil.
	Cache *BlockCache
}

// DefaultModelOptions returns the model flags' defaults: DefaultPipeline, SimCLR from
// PCI, k = 256, 20 epochs, pc-ntk landmarks and a fifth of the rows for validation.
func DefaultModelOptions() ModelOptions {
	return ModelOptions{Pipeline: DefaultPipeline(), Loss: "simclr", Init: "pci", Dim: 256, Epochs: 20,
		Selector: coreset.SelPCNTK, ValFrac: 0.2}
}

// Model is a pool with its kernel blocks and R Adam fits that differ only in the fit
// seed (paper Thm. fit-floor), in the units of the raw sketched kernel.
type Model struct {
	Prob    *fit.Problem
	Info    *BlockInfo
	Init    *fit.InitResult
	Fits    *fit.Repeated
	Scale   float64 // kernel_scale: blocks were multiplied by it before fitting
	Seconds map[string]float64
}

// FitModel builds the blocks (Blocks, with testN test rows) and runs the daemon's fit
// recipe on them (pipeline.RecipeOf of the daemon's defaults with --loss, --init, --dim,
// --epochs and r fits): diagonal kernel scaling, the default initializer scaling, and r
// Adam fits on all cores, stopping early when ctx ends.
func FitModel(ctx context.Context, o *ModelOptions, r, testN int) (*Model, error) {
	if !(o.ValFrac > 0 && o.ValFrac < 1) {
		return nil, fmt.Errorf("--val-frac: %v must be in (0, 1)", o.ValFrac)
	}
	c := config.Default().Fit
	c.Loss, c.Init, c.K, c.Epochs, c.Fits = o.Loss, o.Init, o.Dim, o.Epochs, r
	rec, err := pipeline.RecipeOf(c)
	if err != nil {
		return nil, fmt.Errorf("--loss %q, --init %q: %w", o.Loss, o.Init, err)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("--fits %d, --dim %d, --epochs %d: %w", r, o.Dim, o.Epochs, err)
	}
	t0 := time.Now()
	prob, info, err := Blocks(ctx, &o.Pipeline, o.Selector, o.ValFrac, testN, o.Cache)
	if err != nil {
		return nil, err
	}
	blocks := time.Since(t0).Seconds()
	rec.Options.Balanced = info.Balanced
	fitted, err := rec.Run(ctx, prob, o.Pipeline.Seed)
	if err != nil {
		return nil, err
	}
	secs := fitted.Seconds
	secs["kernel"] += blocks
	return &Model{Prob: prob, Info: info, Init: fitted.Init, Fits: fitted.Fits, Scale: fitted.KernelScale, Seconds: secs}, nil
}

// ExplainInput converts the first fit (and the repeated-fit statistics) to raw-kernel
// units for p's sketch budget and seed: the fit saw blocks multiplied by scale, so the
// raw coefficients are scale·Ã and ω_raw = scale·ω, τ²_raw = scale²·τ².
func (m *Model) ExplainInput(p *Pipeline) *ExplainInput {
	f0 := m.Fits.Fits[0]
	in := &ExplainInput{
		Backbone: m.Info.Backbone, H: p.H, S: p.S, Seed: p.Seed,
		LandmarkX: m.Info.LandmarkX, LandmarkIDs: m.Info.LandmarkIDs,
		A: f0.A, B: f0.B,
		Residual: certify.Residual{TraceR: m.Info.TraceR, TraceK: m.Info.TraceK, Exact: true},
	}
	c := m.Scale
	for l, w := range f0.Omega {
		in.Omega = append(in.Omega, c*w)
		in.OmegaMean = append(in.OmegaMean, c*m.Fits.OmegaMean[l])
		if m.Fits.OmegaVar != nil {
			in.Tau2 = append(in.Tau2, c*c*m.Fits.OmegaVar[l])
		}
	}
	return in
}
