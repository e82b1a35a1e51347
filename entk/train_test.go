package entk

import (
	"context"
	"math"
	"math/rand/v2"
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

// TestTrainGradient: Adam's first step moves every parameter by −lr·g/(|g| + ε), so with
// a full batch its sign is −sign(∇L). The test compares it with central finite
// differences of the plain reference loss (step 1e-6; parameters whose derivative is
// below 1e-6 in magnitude are skipped, where the difference quotient's error of about
// 1e-9 could flip the sign) on an mlp, a resmlp and a convnet.
func TestTrainGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 7))
	for _, spec := range []string{"mlp:5-6-3", "resmlp:4-5x2-3", "convnet:1x6x6-2-3"} {
		b, err := NewBackbone(spec, 3)
		if err != nil {
			t.Fatal(err)
		}
		const n = 7
		in := b.InDim()
		xs := make([]float64, n*in)
		for i := range xs {
			xs[i] = r.NormFloat64()
		}
		labels := make([]int, n)
		for i := range labels {
			labels[i] = r.IntN(b.OutDim())
		}
		const lr = 1e-7
		p1, err := Train(context.Background(), b, xs, labels, TrainOptions{Epochs: 1, Batch: n, LR: lr, Seed: 1, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		p0 := b.Params()
		checked := 0
		for j := range p0 {
			q := append([]float64(nil), p0...)
			const h = 1e-6
			q[j] = p0[j] + h
			bp, _ := FromParams(spec, q)
			q[j] = p0[j] - h
			bm, _ := FromParams(spec, q)
			g := (meanLoss(bp, xs, labels) - meanLoss(bm, xs, labels)) / (2 * h)
			if math.Abs(g) < 1e-6 {
				continue
			}
			checked++
			step := p1[j] - p0[j]
			if want := -lr * g / (math.Abs(g) + 1e-8); math.Abs(step-want) > 1e-3*lr {
				t.Errorf("%s param %d: first Adam step %g, want %g from the finite-difference gradient %g", spec, j, step, want, g)
			}
		}
		if checked < len(p0)/3 {
			t.Errorf("%s: only %d of %d parameters checked", spec, checked, len(p0))
		}
	}
}

// TestTrainLearnsAndIsDeterministic: on two Gaussian blobs per class a small mlp reaches
// at least 95% training accuracy (the seeded network starts near chance), and two runs
// give the same bits.
func TestTrainLearnsAndIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const n, d = 300, 4
	xs, labels := make([]float64, n*d), make([]int, n)
	for i := range labels {
		labels[i] = i % 3
		for k := range d {
			xs[i*d+k] = r.NormFloat64()*0.5 + float64((labels[i]+k)%3)
		}
	}
	b, _ := NewBackbone("mlp:4-16-3", 1)
	opt := TrainOptions{Epochs: 20, Batch: 32, LR: 1e-2, Seed: 5, Workers: 2}
	p1, err := Train(context.Background(), b, xs, labels, opt)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := Train(context.Background(), b, xs, labels, opt)
	for j := range p1 {
		if math.Float64bits(p1[j]) != math.Float64bits(p2[j]) {
			t.Fatalf("parameter %d differs between two runs: %v, %v", j, p1[j], p2[j])
		}
	}
	tb, _ := FromParams("mlp:4-16-3", p1)
	if a0, a := Accuracy(b, xs, labels), Accuracy(tb, xs, labels); a < 0.95 {
		t.Errorf("training accuracy %.3f after training (%.3f before), want ≥ 0.95", a, a0)
	}
	if _, err := Train(context.Background(), b, xs, []int{3}, opt); err == nil {
		t.Error("mismatched labels accepted")
	}
	if _, err := Train(context.Background(), b, xs[:d], []int{3}, opt); err == nil {
		t.Error("a label outside [0, d) accepted")
	}
}
