package fit

import (
	"context"
	"sync"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// Repeated is the outcome of R fits that differ only in the fit seed.
type Repeated struct {
	Fits []*Result
	// Seeds[r] is the fit seed of fit r (minibatch order and, under BYOL, the predictor's
	// draw): opt.Seed for r = 0, then rng.Seed(opt.Seed, "fit/repeat/<r>").
	Seeds []uint64
	// Scales[r] = c_r, the mean of fit r's ω over the landmarks.
	Scales []float64
	// OmegaMean[ℓ] = ω̄_ℓ and OmegaVar[ℓ] = τ_ℓ² (unbiased, divisor R−1; nil when R = 1)
	// over the R fits of ω normalized per fit by its scale, ω̃_ℓ^(r) = ω_ℓ^(r)·c̄/c_r with
	// c̄ the mean of the c_r: the inputs of the fit-floor certificate (Thm. fit-floor).
	// A ranking by k·ω does not change when a fit scales every ω alike, so a fit that
	// only moved further from Ã₀ overall is not counted as disagreement between fits.
	OmegaMean, OmegaVar []float64
}

// Repeat runs R Adam fits from the same Ã₀, sharing p read-only, on up to workers
// goroutines (all joined before it returns). Each fit's result is the same as a lone
// Adam call with its seed, whatever the scheduling.
func Repeat(p *Problem, a0 *InitResult, opt Options, r, workers int) (*Repeated, error) {
	return RepeatContext(context.Background(), p, a0, opt, r, workers)
}

// RepeatContext is Repeat whose fits stop with ctx.Err() when ctx is done (AdamContext).
func RepeatContext(ctx context.Context, p *Problem, a0 *InitResult, opt Options, r, workers int) (*Repeated, error) {
	if r < 1 || workers < 1 {
		return nil, errorf(ErrOption, "R = %d, workers = %d", r, workers)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := &Repeated{Fits: make([]*Result, r), Seeds: make([]uint64, r)}
	for i := range r {
		out.Seeds[i] = opt.Seed
		if i > 0 {
			out.Seeds[i] = rng.Seed(opt.Seed, rng.Sub("fit/repeat", i))
		}
	}
	errs := make([]error, r)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, r) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := opt
				o.Seed = out.Seeds[i]
				out.Fits[i], errs[i] = AdamContext(ctx, p, a0.A0, o)
			}
		}()
	}
	for i := range r {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	m := len(out.Fits[0].Omega)
	out.Scales = make([]float64, r)
	cbar := 0.0
	for i, f := range out.Fits {
		for _, w := range f.Omega {
			out.Scales[i] += w / float64(m)
		}
		cbar += out.Scales[i] / float64(r)
	}
	norm := func(i int) float64 {
		if out.Scales[i] == 0 {
			return 1 // every ω of this fit is 0: nothing to normalize
		}
		return cbar / out.Scales[i]
	}
	out.OmegaMean = make([]float64, m)
	for i, f := range out.Fits {
		c := norm(i)
		for l, w := range f.Omega {
			out.OmegaMean[l] += w * c / float64(r)
		}
	}
	if r > 1 {
		out.OmegaVar = make([]float64, m)
		for i, f := range out.Fits {
			c := norm(i)
			for l, w := range f.Omega {
				d := w*c - out.OmegaMean[l]
				out.OmegaVar[l] += d * d / float64(r-1)
			}
		}
	}
	return out, nil
}
