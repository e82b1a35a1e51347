package fit

import (
	"math"

	"github.com/cairnhq/cairn/internal/base/par"
)

// adam is Adam (Kingma & Ba 2015, Alg. 1) with weight decay in one of two forms. Coupled
// (L2 added to the gradient after clipping, as PyTorch's torch.optim.Adam(weight_decay=…)):
//
//	g ← g + wd·θ;  m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²
//	θ ← θ − lr · (m/(1−β₁ᵗ)) / (sqrt(v/(1−β₂ᵗ)) + ε)
//
// or decoupled (AdamW, Loshchilov & Hutter 2019, in torch.optim.AdamW's convention where
// the shrink is scaled by the scheduled lr): the moments see g alone and the weights
// shrink by lr·wd·θ,
//
//	θ ← θ − lr · (m/(1−β₁ᵗ)) / (sqrt(v/(1−β₂ᵗ)) + ε) − lr·wd·θ
type adam struct {
	beta1, beta2, eps, wd float64
	decoupled             bool
	m, v                  []float64
	t                     int
	team                  *par.Team // the fit's workers (nil: par.For's goroutines)
}

func newAdam(n int, wd float64, decoupled bool) *adam {
	return &adam{beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: wd, decoupled: decoupled, m: make([]float64, n), v: make([]float64, n)}
}

// step updates theta in place from gradient g (not modified) with learning rate lr, in
// chunks of adamChunk coordinates side by side (internal/base/par); every coordinate gets
// the serial loop's operations.
func (a *adam) step(theta, g []float64, lr float64) {
	if len(theta) != len(g) || len(theta) != len(a.m) {
		panic("fit: adam length mismatch")
	}
	a.t++
	c1 := 1 - math.Pow(a.beta1, float64(a.t))
	c2 := 1 - math.Pow(a.beta2, float64(a.t))
	a.team.For(len(g), adamChunk, func(_, lo, hi int) {
		a.stepRange(theta, g, lr, c1, c2, lo, hi)
	})
}

// adamChunk is the coordinate count of one chunk of an Adam step (32 KiB of θ).
const adamChunk = 4096

// stepRange is step's update of coordinates lo ≤ i < hi, with the bias corrections c1
// and c2 of the step.
func (a *adam) stepRange(theta, g []float64, lr, c1, c2 float64, lo, hi int) {
	if a.decoupled {
		shrink := lr * a.wd
		for i := lo; i < hi; i++ {
			gi := g[i]
			a.m[i] = a.beta1*a.m[i] + (1-a.beta1)*gi
			a.v[i] = a.beta2*a.v[i] + (1-a.beta2)*gi*gi
			theta[i] -= lr*(a.m[i]/c1)/(math.Sqrt(a.v[i]/c2)+a.eps) + shrink*theta[i]
		}
		return
	}
	for i := lo; i < hi; i++ {
		gi := g[i] + a.wd*theta[i]
		a.m[i] = a.beta1*a.m[i] + (1-a.beta1)*gi
		a.v[i] = a.beta2*a.v[i] + (1-a.beta2)*gi*gi
		theta[i] -= lr * (a.m[i] / c1) / (math.Sqrt(a.v[i]/c2) + a.eps)
	}
}

// cosineLR is the cosine schedule without warm-up or floor (Loshchilov & Hutter 2017 with
// η_min = 0), stepped once per minibatch over the whole planned run of total steps:
//
//	lr(t) = lr₀ · (1 + cos(π t/total))/2,  t = 0, …, total−1
func cosineLR(lr0 float64, t, total int) float64 {
	return lr0 * 0.5 * (1 + math.Cos(math.Pi*float64(t)/float64(total)))
}

// clipNorm scales g in place so that its Euclidean norm is at most c (the global norm over
// all parameters, torch.nn.utils.clip_grad_norm_) and returns the norm before clipping.
// The sum of squares runs in index order (one chain: its bits fix the model's); the
// scaling in chunks side by side, on team's workers (nil: par.For's goroutines).
func clipNorm(team *par.Team, g []float64, c float64) float64 {
	var ss float64
	for _, v := range g {
		ss += v * v
	}
	n := math.Sqrt(ss)
	if n > c {
		s := c / n
		team.For(len(g), adamChunk, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= s
			}
		})
	}
	return n
}
