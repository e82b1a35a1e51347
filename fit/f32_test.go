package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
)

// TestFloat32Gradient compares one batch's loss and ∂L/∂θ with float32 products against
// the float64 step (itself checked by central differences in TestParamGradient), for
// every loss that uses them, at the same random θ. Tolerances: 10⁻⁵ of the loss and 10⁻⁴
// of the gradient's norm, some hundred times the float32 rounding of sums of 64 terms
// (f32.go), and far below any error of the formulas (a sign or a missing term moves the
// gradient by a sizeable fraction of its norm).
func TestFloat32Gradient(t *testing.T) {
	const n, m, k = 64, 24, 8
	p := synthetic(3, n, m, 2, 2)
	rows := rand.New(rand.NewPCG(5, 5)).Perm(n)[:32]
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		md64, md32 := newModel(m, k), newModel(m, k)
		rnd := rand.New(rand.NewPCG(4, 4))
		for i := range md64.theta {
			md64.theta[i] = 0.3 * rnd.NormFloat64()
		}
		copy(md32.theta, md64.theta)
		md32.f32 = true
		lp := DefaultLossParams()
		md64.gather(p, rows)
		md32.gather(p, rows)
		l64 := md64.lossGrad(loss, lp)
		l32 := md32.lossGrad(loss, lp)
		if d := math.Abs(l32 - l64); !(d <= 1e-5*math.Max(1, math.Abs(l64))) {
			t.Errorf("%v: loss %.12g in float32, %.12g in float64", loss, l32, l64)
		}
		diff := make([]float64, len(md64.grad))
		floats.SubTo(diff, md32.grad, md64.grad)
		if d, g := floats.Norm(diff, 2), floats.Norm(md64.grad, 2); !(d <= 1e-4*g) {
			t.Errorf("%v: ‖∂L/∂θ₃₂ − ∂L/∂θ₆₄‖ = %.3g, ‖∂L/∂θ₆₄‖ = %.3g", loss, d, g)
		}
	}
}

// TestFloat32Fit runs whole fits with float32 and float64 products from the same start:
// both beat the start's test accuracy, and they end within 3 points of each other (the
// trajectories part after the first rounding difference, so agreement is statistical:
// 3 points is about 2 standard errors of an accuracy on 200 test points).
func TestFloat32Fit(t *testing.T) {
	p := syntheticP(2, 400, 64, 120, 200, 0.7, 4)
	const k = 8
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		in, err := Initialize(Kaiming, p, k, 3)
		if err != nil {
			t.Fatal(err)
		}
		var acc [2]float64
		for i, f32 := range []bool{false, true} {
			opt := smallOptions(loss)
			opt.Params.BTOffDiag = 35 * (k - 1) / 255.0
			opt.Epochs, opt.BatchSize, opt.Patience = 10, 100, 10
			opt.Float32 = f32
			r, err := Adam(p, in.A0, opt)
			if err != nil {
				t.Fatal(err)
			}
			acc[i] = r.TestEval.Accuracy
			if !(r.TestEval.Accuracy > r.InitEval.Accuracy) {
				t.Errorf("%v float32=%v: accuracy %.3f does not beat init %.3f", loss, f32, r.TestEval.Accuracy, r.InitEval.Accuracy)
			}
		}
		t.Logf("%v: test accuracy %.3f in float64, %.3f in float32", loss, acc[0], acc[1])
		if math.Abs(acc[0]-acc[1]) > 0.03 {
			t.Errorf("%v: float32 fit reaches %.3f, float64 %.3f", loss, acc[1], acc[0])
		}
	}
}
