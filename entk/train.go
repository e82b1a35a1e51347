package entk

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// TrainOptions configure Train: supervised training of a backbone's parameters by
// minibatch Adam on the mean softmax cross-entropy of its d outputs.
type TrainOptions struct {
	Epochs int     // passes over the data (≥ 1)
	Batch  int     // minibatch size (≥ 1)
	LR     float64 // Adam step size at the start; cosine-decayed to 0 over all steps
	Seed   uint64  // shuffling: stream "entk/train/epoch/<e>" of Seed
	// Workers splits each minibatch over this many goroutines (0: GOMAXPROCS). The result
	// does not depend on it: every example's gradient is summed in index order.
	Workers int
	// Progress, when set, is called after each epoch with the epoch (from 1) and the mean
	// training loss over it.
	Progress func(epoch int, loss float64)
	// Leave, when set (one entry per row), marks rows left out of training while every
	// other row keeps the minibatches and the step it would have without Leave: each
	// epoch's shuffle is of all n rows, and a minibatch is its shuffled slice without the
	// marked rows, its gradient the mean over the rows that remain. Training on a subset
	// this way differs from training on all rows only by the subset's absence, not by a
	// new order of the others (the counterfactual of a deletion). A minibatch left empty
	// still takes its Adam step, with a zero gradient, so the schedule is unchanged.
	Leave []bool
}

// Validate reports the first invalid option.
func (o TrainOptions) Validate() error {
	switch {
	case o.Epochs < 1:
		return fmt.Errorf("%w: epochs = %d, want ≥ 1", ErrTrain, o.Epochs)
	case o.Batch < 1:
		return fmt.Errorf("%w: batch = %d, want ≥ 1", ErrTrain, o.Batch)
	case !(o.LR > 0) || math.IsInf(o.LR, 0):
		return fmt.Errorf("%w: lr = %v, want > 0", ErrTrain, o.LR)
	case o.Workers < 0:
		return fmt.Errorf("%w: workers = %d, want ≥ 0", ErrTrain, o.Workers)
	}
	return nil
}

// Train returns the parameters (state_dict order) of b after supervised training on the
// n rows of xs (n×InDim) with labels in [0, d): minibatch Adam (β = 0.9, 0.999, ε = 1e-8,
// step size cosine-decayed from opt.LR to 0) on
//
//	L = (1/B) Σ_{i∈batch} −log softmax(f(x_i))_{y_i},  ∇_θ L = (1/B) Σ_i J_{x_i}ᵀ (p_i − e_{y_i}),
//
// each example's gradient being one exact vector–Jacobian product (Forward and Backward
// with w = softmax(f(x_i)) − e_{y_i}). Minibatches are consecutive slices of a permutation
// drawn per epoch from the named stream "entk/train/epoch/<e>" of opt.Seed. Each worker
// sums the gradients of a fixed contiguous range of the batch in index order and the
// workers' sums are added in worker order, so the result is the same bits for every
// scheduling (and for every opt.Workers ≥ 1 only up to the association of that final sum:
// keep Workers fixed to reproduce a file). xs and labels are not modified; b is not
// modified (Train works on a copy). It stops with ctx.Err() between minibatches.
//
// Train sees the rows as given: no augmentation. The shipped weights are trained on the
// plain inputs because that is the distribution the daemon is queried on; the views the
// encoder fits on (dataset.Augmenter: shifts of ≤ 2 pixels, noise σ = 0.05, feature
// masking) are small perturbations, and a caller who wants them can pass augmented rows.
func Train(ctx context.Context, b Backbone, xs []float64, labels []int, opt TrainOptions) ([]float64, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	in, d, p := b.InDim(), b.OutDim(), b.NumParams()
	n := len(labels)
	if n == 0 || len(xs) != n*in {
		return nil, fmt.Errorf("%w: %d labels for %d input values (input size %d)", ErrTrain, n, len(xs), in)
	}
	if opt.Leave != nil && len(opt.Leave) != n {
		return nil, fmt.Errorf("%w: leave has %d entries for %d rows", ErrTrain, len(opt.Leave), n)
	}
	for i, y := range labels {
		if y < 0 || y >= d {
			return nil, fmt.Errorf("%w: label %d of row %d outside [0, %d)", ErrTrain, y, i, d)
		}
	}
	a, err := ParseArch(b.Arch())
	if err != nil {
		return nil, err
	}
	workers := opt.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	params := append([]float64(nil), b.Params()...)
	grad, m, v := make([]float64, p), make([]float64, p), make([]float64, p)
	// Each step wraps the current parameters in a backbone and hands it to the workers:
	// newBackbone aliases params (no copy); only the convnet does work, transposing its
	// conv weights. Measured for the default convnet: 18 µs per rebuild against 0.21 ms for
	// one example's Forward and Backward, so 0.1% of a 64-example step (resmlp:108-128x3-8:
	// 1.7 µs against 56 µs per example).
	cur := newBackbone(a, params)
	g := newGradWorkers(cur, workers)
	perm, kept := make([]int, n), make([]int, 0, opt.Batch)
	left := 0 // rows Leave marks
	for _, l := range opt.Leave {
		if l {
			left++
		}
	}
	steps := opt.Epochs * ((n + opt.Batch - 1) / opt.Batch)
	step := 0
	const beta1, beta2, eps = 0.9, 0.999, 1e-8
	for e := range opt.Epochs {
		r := rng.New(opt.Seed, rng.Sub("entk/train/epoch", e))
		for i := range perm {
			perm[i] = i
		}
		r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		epochLoss := 0.0
		for start := 0; start < n; start += opt.Batch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			batch := perm[start:min(start+opt.Batch, n)]
			if opt.Leave != nil {
				kept = kept[:0]
				for _, i := range batch {
					if !opt.Leave[i] {
						kept = append(kept, i)
					}
				}
				batch = kept
			}
			if len(batch) == 0 {
				clear(grad)
			} else {
				epochLoss += g.lossGradTo(grad, newBackbone(a, params), xs, labels, batch) * float64(len(batch))
			}
			step++
			lr := opt.LR * 0.5 * (1 + math.Cos(math.Pi*float64(step-1)/float64(steps)))
			c1, c2 := 1-math.Pow(beta1, float64(step)), 1-math.Pow(beta2, float64(step))
			for j, gj := range grad {
				m[j] = beta1*m[j] + (1-beta1)*gj
				v[j] = beta2*v[j] + (1-beta2)*gj*gj
				params[j] -= lr * (m[j] / c1) / (math.Sqrt(v[j]/c2) + eps)
			}
		}
		for j, x := range params {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: parameter %d is %v after epoch %d (lower the learning rate)", ErrTrain, j, x, e+1)
			}
		}
		if opt.Progress != nil {
			opt.Progress(e+1, epochLoss/float64(max(1, n-left)))
		}
	}
	return params, nil
}

// gradWorkers computes minibatch gradients of the mean cross-entropy on a fixed number of
// goroutines, each with its own Workspace and P-vector accumulators.
type gradWorkers []*gradWorker

type gradWorker struct {
	ws                  *Workspace
	grad, acc, out, res []float64
	loss                float64
}

func newGradWorkers(b Backbone, workers int) gradWorkers {
	p, d := b.NumParams(), b.OutDim()
	g := make(gradWorkers, workers)
	for k := range g {
		g[k] = &gradWorker{ws: b.NewWorkspace(), grad: make([]float64, p), acc: make([]float64, p),
			out: make([]float64, d), res: make([]float64, d)}
	}
	return g
}

// lossGradTo writes into dst (length P) the gradient of the mean cross-entropy over the
// rows batch of xs and returns that mean loss:
//
//	L = (1/B) Σ_{i∈batch} −log softmax(f(x_i))_{y_i},  dst = ∇_θ L = (1/B) Σ_i J_{x_i}ᵀ (p_i − e_{y_i}).
//
// Worker k sums, in batch order, the examples batch[k·B/W : (k+1)·B/W] (one Forward and
// one Backward each, on its own goroutine and Workspace); the W partial sums are then
// added in worker order and scaled by 1/B. Every addition happens in an order fixed by
// (B, W), so the bits do not depend on scheduling. b must have the architecture the
// workers were made for (their workspaces are rebound to it: it may be a new backbone
// around new parameters of the same arch).
func (g gradWorkers) lossGradTo(dst []float64, b Backbone, xs []float64, labels []int, batch []int) float64 {
	in, bs, w := b.InDim(), len(batch), len(g)
	var wg sync.WaitGroup
	for k, wk := range g {
		wk.ws.owner = b
		wg.Add(1)
		go func() {
			defer wg.Done()
			clear(wk.acc)
			wk.loss = 0
			for _, i := range batch[k*bs/w : (k+1)*bs/w] {
				b.Forward(wk.out, xs[i*in:(i+1)*in], wk.ws)
				wk.loss += SoftmaxResidualTo(wk.res, wk.out, labels[i])
				b.Backward(wk.grad, wk.res, wk.ws)
				for j, gj := range wk.grad {
					wk.acc[j] += gj
				}
			}
		}()
	}
	wg.Wait()
	inv := 1 / float64(bs)
	for j := range dst {
		s := 0.0
		for _, wk := range g {
			s += wk.acc[j]
		}
		dst[j] = s * inv
	}
	loss := 0.0
	for _, wk := range g {
		loss += wk.loss
	}
	return loss * inv
}

// SoftmaxResidualTo writes w = softmax(out) − e_y, the gradient of the softmax
// cross-entropy of label y in the logits out, and returns −log softmax(out)_y, in the
// max-shifted form so that no exponential overflows. out is not modified.
func SoftmaxResidualTo(w, out []float64, y int) float64 {
	mx := out[0]
	for _, o := range out[1:] {
		mx = max(mx, o)
	}
	s := 0.0
	for i, o := range out {
		w[i] = math.Exp(o - mx)
		s += w[i]
	}
	for i := range w {
		w[i] /= s
	}
	w[y] -= 1
	return math.Log(s) - (out[y] - mx)
}

// Accuracy returns the fraction of the n rows of xs whose largest output of b is at
// their label, on GOMAXPROCS goroutines.
func Accuracy(b Backbone, xs []float64, labels []int) float64 {
	in, d, n := b.InDim(), b.OutDim(), len(labels)
	if n == 0 {
		return math.NaN()
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	hits := make([]int, workers)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, out := b.NewWorkspace(), make([]float64, d)
			for i := k; i < n; i += workers {
				b.Forward(out, xs[i*in:(i+1)*in], ws)
				best := 0
				for j, o := range out {
					if o > out[best] {
						best = j
					}
				}
				if best == labels[i] {
					hits[k]++
				}
			}
		}()
	}
	wg.Wait()
	t := 0
	for _, h := range hits {
		t += h
	}
	return float64(t) / float64(n)
}
