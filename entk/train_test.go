package entk

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// meanLoss is the reference loss: (1/n) Σ −log softmax(f(x_i))_{y_i}, written plainly.
func meanLoss(b Backbone, xs []float64, labels []int) float64 {
	in, d := b.InDim(), b.OutDim()
	ws, out := b.NewWorkspace(), make([]float64, d)
	s := 0.0
	for i, y := range labels {
		b.Forward(out, xs[i*in:(i+1)*in], ws)
		z := 0.0
		for _, o := range out {
			z += math.Exp(o)
		}
		s += math.Log(z) - out[y]
	}
	return s / float64(len(labels))
}

// randomProblem returns n Gaussian rows for b and labels uniform in [0, d).
func randomProblem(r *rand.Rand, b Backbone, n int) ([]float64, []int) {
	xs := make([]float64, n*b.InDim())
	for i := range xs {
		xs[i] = r.NormFloat64()
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = r.IntN(b.OutDim())
	}
	return xs, labels
}

// TestLossGradFiniteDifferences: the minibatch gradient Train steps on (one VJP per
// example, reduced over 3 workers) equals central finite differences of the plain
// reference loss, for every parameter of an mlp, a resmlp and a convnet, and the loss it
// returns equals the reference. Step h = 1e-5: the quotient's truncation error is about
// h²·|f”'|/6 ≈ 1e-11 and its rounding error about 1e-16/h ≈ 1e-11 here, so the tolerance
// 1e-7 + 1e-6·|g| leaves room only for a kink (ReLU, max-pool) within h of a parameter,
// which these seeds avoid.
func TestLossGradFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 7))
	for _, spec := range []string{"mlp:5-6-3", "resmlp:4-5x2-3", "convnet:1x6x6-2-3-3", "convnet:2x5x4-3-4"} {
		b, err := NewBackbone(spec, 3)
		if err != nil {
			t.Fatal(err)
		}
		const n = 7
		xs, labels := randomProblem(r, b, n)
		batch := []int{0, 1, 2, 3, 4, 5, 6}
		grad := make([]float64, b.NumParams())
		loss := newGradWorkers(b, 3).lossGradTo(grad, b, xs, labels, batch)
		if want := meanLoss(b, xs, labels); math.Abs(loss-want) > 1e-12*want {
			t.Errorf("%s: loss %v, want %v", spec, loss, want)
		}
		p0 := b.Params()
		for j := range p0 {
			q := append([]float64(nil), p0...)
			const h = 1e-5
			q[j] = p0[j] + h
			bp, _ := FromParams(spec, q)
			q[j] = p0[j] - h
			bm, _ := FromParams(spec, q)
			fd := (meanLoss(bp, xs, labels) - meanLoss(bm, xs, labels)) / (2 * h)
			if math.Abs(grad[j]-fd) > 1e-7+1e-6*math.Abs(fd) {
				t.Errorf("%s param %d: gradient %.10g, finite differences %.10g", spec, j, grad[j], fd)
			}
		}
	}
}

// TestTrainAdamFirstStep: with one full batch, Adam's bias-corrected first step is
// −lr·g/(|g| + ε) per parameter (m̂ = g, v̂ = g²), g the mean gradient.
func TestTrainAdamFirstStep(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	b, _ := NewBackbone("resmlp:4-5x2-3", 1)
	xs, labels := randomProblem(r, b, 9)
	grad := make([]float64, b.NumParams())
	newGradWorkers(b, 1).lossGradTo(grad, b, xs, labels, []int{0, 1, 2, 3, 4, 5, 6, 7, 8})
	const lr = 1e-3
	p1, err := Train(context.Background(), b, xs, labels, TrainOptions{Epochs: 1, Batch: 9, LR: lr, Seed: 1, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for j, p0 := range b.Params() {
		// The reductions over 1 and 2 workers associate differently: g agrees to ~1e-16
		// relative, so the step to far below 1e-9·lr unless |g| is near ε.
		want := -lr * grad[j] / (math.Abs(grad[j]) + 1e-8)
		if got := p1[j] - p0; math.Abs(got-want) > 1e-9*lr {
			t.Errorf("param %d: first step %g, want %g (gradient %g)", j, got, want, grad[j])
		}
	}
}

// separable returns n rows of a 3-class problem for b that a small network separates:
// images carry a bright horizontal band in the third of the rows named by the class;
// tabular rows are Gaussian blobs around class-dependent corners. Noise σ = 0.3.
func separable(r *rand.Rand, b Backbone, n int) ([]float64, []int) {
	a, _ := ParseArch(b.Arch())
	in := b.InDim()
	xs, labels := make([]float64, n*in), make([]int, n)
	for i := range labels {
		y := i % 3
		labels[i] = y
		row := xs[i*in : (i+1)*in]
		for k := range row {
			row[k] = 0.3 * r.NormFloat64()
			if a.Kind == "convnet" {
				if h := (k / a.W) % a.H; h*3/a.H == y {
					row[k]++
				}
			} else {
				row[k] += float64((y + k) % 3)
			}
		}
	}
	return xs, labels
}

// TestTrainLearns: a few epochs on a separable synthetic problem take each kind of backbone
// from near chance (3 classes) to at least 95% accuracy on fresh rows of the same problem.
func TestTrainLearns(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, tc := range []struct {
		spec   string
		epochs int
	}{
		{"mlp:4-16-3", 10},
		{"resmlp:4-16x2-3", 10},
		{"convnet:1x9x9-4-8-3", 10},
	} {
		b, err := NewBackbone(tc.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		xs, labels := separable(r, b, 300)
		txs, tlabels := separable(r, b, 300)
		p, err := Train(context.Background(), b, xs, labels, TrainOptions{Epochs: tc.epochs, Batch: 16, LR: 1e-2, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		tb, _ := FromParams(tc.spec, p)
		if a0, a := Accuracy(b, txs, tlabels), Accuracy(tb, txs, tlabels); a < 0.95 {
			t.Errorf("%s: held-out accuracy %.3f after %d epochs (%.3f before), want ≥ 0.95", tc.spec, a, tc.epochs, a0)
		}
	}
}

// TestTrainDeterministic: two runs give the same bits, and so does a run on one thread
// (the reduction order is fixed by the batch and the worker count, not by scheduling).
func TestTrainDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	b, _ := NewBackbone("convnet:1x9x9-4-8-3", 2)
	xs, labels := separable(r, b, 100)
	opt := TrainOptions{Epochs: 3, Batch: 10, LR: 1e-2, Seed: 5, Workers: 3}
	p1, err := Train(context.Background(), b, xs, labels, opt)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := Train(context.Background(), b, xs, labels, opt)
	prev := runtime.GOMAXPROCS(1)
	p3, _ := Train(context.Background(), b, xs, labels, opt)
	runtime.GOMAXPROCS(prev)
	for j := range p1 {
		if math.Float64bits(p1[j]) != math.Float64bits(p2[j]) || math.Float64bits(p1[j]) != math.Float64bits(p3[j]) {
			t.Fatalf("parameter %d differs between runs: %v, %v, %v (one thread)", j, p1[j], p2[j], p3[j])
		}
	}
	opt.Seed = 6
	if p4, _ := Train(context.Background(), b, xs, labels, opt); p4[0] == p1[0] && p4[1] == p1[1] {
		t.Error("another shuffling seed gave the same parameters")
	}
}

// TestTrainRejects: bad options and data are errors that wrap ErrTrain, and a cancelled
// context stops training.
func TestTrainRejects(t *testing.T) {
	b, _ := NewBackbone("mlp:2-3-2", 1)
	xs, labels := []float64{1, 2, 3, 4}, []int{0, 1}
	ok := TrainOptions{Epochs: 1, Batch: 1, LR: 1e-3}
	for _, tc := range []struct {
		name   string
		xs     []float64
		labels []int
		opt    TrainOptions
	}{
		{"epochs", xs, labels, TrainOptions{Epochs: 0, Batch: 1, LR: 1e-3}},
		{"batch", xs, labels, TrainOptions{Epochs: 1, Batch: 0, LR: 1e-3}},
		{"lr", xs, labels, TrainOptions{Epochs: 1, Batch: 1, LR: math.NaN()}},
		{"workers", xs, labels, TrainOptions{Epochs: 1, Batch: 1, LR: 1e-3, Workers: -1}},
		{"lengths", xs, []int{0}, ok},
		{"empty", nil, nil, ok},
		{"label", xs, []int{0, 2}, ok},
	} {
		if _, err := Train(context.Background(), b, tc.xs, tc.labels, tc.opt); !errors.Is(err, ErrTrain) {
			t.Errorf("%s: %v, want ErrTrain", tc.name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Train(ctx, b, xs, labels, ok); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestTrainLeave: Leave with no row marked gives the bits of no Leave; with full-batch
// steps (Batch ≥ n, so no order to keep) leaving rows out is training on the others
// (to 1e-9 relative: only the summation order differs); with minibatches it differs
// from both; and a Leave of the wrong length is an error.
func TestTrainLeave(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	b, _ := NewBackbone("mlp:6-5-3", 2)
	xs, labels := separable(r, b, 40)
	in := b.InDim()
	opt := TrainOptions{Epochs: 4, Batch: 8, LR: 1e-2, Seed: 7, Workers: 2}
	train := func(xs []float64, labels []int, opt TrainOptions) []float64 {
		t.Helper()
		p, err := Train(context.Background(), b, xs, labels, opt)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := train(xs, labels, opt)
	none := opt
	none.Leave = make([]bool, len(labels))
	for j, x := range train(xs, labels, none) {
		if math.Float64bits(x) != math.Float64bits(plain[j]) {
			t.Fatalf("Leave marking nothing: parameter %d is %v, want %v", j, x, plain[j])
		}
	}
	leave := make([]bool, len(labels))
	var subX []float64
	var subY []int
	for i := range labels {
		if leave[i] = i%5 == 2; !leave[i] {
			subX, subY = append(subX, xs[i*in:(i+1)*in]...), append(subY, labels[i])
		}
	}
	full := opt
	full.Batch, full.Leave = len(labels), leave
	subOpt := opt
	subOpt.Batch = len(labels)
	got, want := train(xs, labels, full), train(subX, subY, subOpt)
	for j := range got {
		if d := math.Abs(got[j] - want[j]); d > 1e-9*(1+math.Abs(want[j])) {
			t.Fatalf("full batch: parameter %d is %v leaving rows out, %v training on the rest (diff %.3g)", j, got[j], want[j], d)
		}
	}
	mini := opt
	mini.Leave = leave
	pm := train(xs, labels, mini)
	if pm[0] == plain[0] || pm[0] == train(subX, subY, opt)[0] {
		t.Error("minibatch Leave equals training on all rows or a reshuffled subset")
	}
	bad := opt
	bad.Leave = make([]bool, 3)
	if _, err := Train(context.Background(), b, xs, labels, bad); !errors.Is(err, ErrTrain) {
		t.Errorf("Leave of 3 entries for %d rows: %v, want ErrTrain", len(labels), err)
	}
}
