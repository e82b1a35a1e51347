package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/fit"
)

// Recipe is the fit of paper Alg. cairn-stage2 as the daemon runs it: the kernel
// scaling, the initializer of output dimension K and its scaling, and Fits Adam fits
// with Options. Build it with RecipeOf (the daemon's settings) and change fields for a
// tool's flags; Validate reports every bad field at once.
type Recipe struct {
	Loss fit.Loss
	Init fit.Init
	// K is the encoder's output dimension.
	K int
	// KernelScale is the fit.ScaleKernels mode (fit.ScaleDiag by default).
	KernelScale string
	// InitScale is the fit.ScaleInit spec (fit.DefaultInitScale by default).
	InitScale string
	// Options are the Adam settings; Run sets Options.Loss to Loss and Options.Seed to its
	// seed argument.
	Options fit.Options
	// Fits is R, the number of repeated fits (fit.RepeatContext).
	Fits int
	// Workers is how many fits run at once; 0 means GOMAXPROCS.
	Workers int
}

// RecipeOf is the daemon's recipe for c: loss and initializer parsed from their names,
// fit.DefaultOptions(loss) overlaid with c's epochs, patience, batch, learning rate and
// weight decay, diagonal kernel scaling and the default initializer scaling. Names that
// do not parse are ErrConfig errors naming the setting.
func RecipeOf(c config.Fit) (Recipe, error) {
	loss, err := fit.ParseLoss(c.Loss)
	if err != nil {
		return Recipe{}, fmt.Errorf("%w: fit.loss: %w", ErrConfig, err)
	}
	in, err := fit.ParseInit(c.Init)
	if err != nil {
		return Recipe{}, fmt.Errorf("%w: fit.init: %w", ErrConfig, err)
	}
	opt := fit.DefaultOptions(loss)
	opt.Epochs, opt.Patience, opt.BatchSize = c.Epochs, c.Patience, c.Batch
	opt.LR, opt.WeightDecay = c.LearningRate, c.WeightDecay
	opt.Float32 = c.Precision != "float64"
	return Recipe{Loss: loss, Init: in, K: c.K, KernelScale: fit.ScaleDiag, InitScale: fit.DefaultInitScale,
		Options: opt, Fits: c.Fits}, nil
}

// Validate reports every invalid field at once, wrapping ErrConfig; the Adam options are
// checked by fit.Options.Validate.
func (r *Recipe) Validate() error {
	var errs []error
	if r.K < 1 {
		errs = append(errs, fmt.Errorf("k = %d must be ≥ 1 (field K)", r.K))
	}
	if r.Fits < 1 {
		errs = append(errs, fmt.Errorf("fits = %d must be ≥ 1 (field Fits)", r.Fits))
	}
	if r.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers = %d must be ≥ 0 (field Workers)", r.Workers))
	}
	if _, _, err := fit.ParseInitScale(r.InitScale, r.Init); err != nil {
		errs = append(errs, fmt.Errorf("InitScale: %w", err))
	}
	opt := r.Options
	opt.Loss = r.Loss
	if err := opt.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: fit recipe: %w", ErrConfig, errors.Join(errs...))
}

// Started is a problem prepared for a solver: the factors its kernel blocks and initial
// coefficients were multiplied by, and the scaled initialization.
type Started struct {
	KernelScale float64
	InitScale   float64
	Init        *fit.InitResult
	// Seconds is wall time by phase: "kernel" (scaling), "init".
	Seconds map[string]float64
}

// Start validates r, scales prob's kernel blocks in place (fit.ScaleKernels with
// r.KernelScale), computes the initializer r.Init of dimension r.K from seed and scales
// it (fit.ScaleInit with r.InitScale). prob is modified; nothing else is.
func (r *Recipe) Start(prob *fit.Problem, seed uint64) (*Started, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	s := &Started{Seconds: map[string]float64{}}
	t0 := time.Now()
	var err error
	if s.KernelScale, err = fit.ScaleKernels(prob, r.KernelScale); err != nil {
		return nil, fmt.Errorf("kernel scale %q: %w", r.KernelScale, err)
	}
	s.Seconds["kernel"] = time.Since(t0).Seconds()
	t0 = time.Now()
	if s.Init, err = fit.Initialize(r.Init, prob, r.K, seed); err != nil {
		return nil, fmt.Errorf("init %s: %w", r.Init, err)
	}
	if s.InitScale, err = fit.ScaleInit(r.InitScale, r.Init, prob.KA, s.Init.A0); err != nil {
		return nil, fmt.Errorf("init scale %q: %w", r.InitScale, err)
	}
	s.Seconds["init"] = time.Since(t0).Seconds()
	return s, nil
}

// Fitted is the outcome of Run: the started problem and the R fits.
type Fitted struct {
	*Started
	Fits *fit.Repeated
}

// Run is Start followed by r.Fits Adam fits (fit.RepeatContext, seeds derived from
// seed, r.Workers at once), stopping early with ctx's error when ctx is done. prob's
// kernel blocks are scaled in place; Seconds gains "fit".
func (r *Recipe) Run(ctx context.Context, prob *fit.Problem, seed uint64) (*Fitted, error) {
	return r.RunThen(ctx, prob, seed, nil)
}

// RunThen is Run calling started, if not nil, between Start and the fits (a caller's
// work that is to share the cores with the fits alone).
func (r *Recipe) RunThen(ctx context.Context, prob *fit.Problem, seed uint64, started func()) (*Fitted, error) {
	s, err := r.Start(prob, seed)
	if err != nil {
		return nil, err
	}
	if started != nil {
		started()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opt := r.Options
	opt.Loss, opt.Seed = r.Loss, seed
	workers := r.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	t0 := time.Now()
	rep, err := fit.RepeatContext(ctx, prob, s.Init, opt, r.Fits, workers)
	if err != nil {
		return nil, err
	}
	s.Seconds["fit"] = time.Since(t0).Seconds()
	return &Fitted{Started: s, Fits: rep}, nil
}
