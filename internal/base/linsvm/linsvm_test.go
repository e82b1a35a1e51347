package linsvm

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// primalNewton is the slow reference: it minimizes
// P(w) = ½‖w‖² + Σᵢ Cᵢ max(0, 1 − yᵢ wᵀx̃ᵢ)² by the finite Newton method (Keerthi & DeCoste
// 2005): P is strongly convex and piecewise quadratic, its generalized Hessian on the
// active set A = {i : yᵢ wᵀx̃ᵢ < 1} is I + 2 Σ_A Cᵢ x̃ᵢx̃ᵢᵀ, and a step-halving line search on
// P makes every step a descent. It stops when ‖∇P‖ < 1e-13.
func primalNewton(t *testing.T, xt *mat.Dense, y, c []float64) []float64 {
	t.Helper()
	n, d := xt.Dims()
	w := make([]float64, d)
	obj := func(w []float64) float64 {
		s := 0.0
		for _, v := range w {
			s += v * v / 2
		}
		for i := range n {
			if m := 1 - y[i]*mat.Dot(mat.NewVecDense(d, w), xt.RowView(i)); m > 0 {
				s += c[i] * m * m
			}
		}
		return s
	}
	for it := 0; it < 200; it++ {
		g := mat.NewVecDense(d, append([]float64(nil), w...))
		h := mat.NewSymDense(d, nil)
		for j := range d {
			h.SetSym(j, j, 1)
		}
		for i := range n {
			xi := xt.RowView(i)
			m := 1 - y[i]*mat.Dot(mat.NewVecDense(d, w), xi)
			if m <= 0 {
				continue
			}
			g.AddScaledVec(g, -2*c[i]*m*y[i], xi)
			h.SymRankOne(h, 2*c[i], xi)
		}
		if mat.Norm(g, 2) < 1e-13 {
			return w
		}
		var step mat.VecDense
		if err := step.SolveVec(h, g); err != nil {
			t.Fatalf("reference Newton solve: %v", err)
		}
		f0 := obj(w)
		for s := 1.0; ; s /= 2 {
			cand := make([]float64, d)
			for j := range d {
				cand[j] = w[j] - s*step.AtVec(j)
			}
			if f := obj(cand); f <= f0 || s < 1e-12 {
				w = cand
				break
			}
		}
	}
	t.Fatalf("reference Newton did not converge")
	return nil
}

// problem draws n rows in d dimensions with labels from `classes` Gaussian clusters of
// unequal sizes that overlap, so the hinge is active on many rows.
func problem(rnd *rand.Rand, n, d, classes int) (*mat.Dense, []int) {
	x := mat.NewDense(n, d, nil)
	labels := make([]int, n)
	centres := mat.NewDense(classes, d, nil)
	for c := range classes {
		for j := range d {
			centres.Set(c, j, rnd.NormFloat64())
		}
	}
	for i := range n {
		// Class sizes proportional to 1, 2, …, classes.
		u := rnd.IntN(classes * (classes + 1) / 2)
		l := 0
		for acc := 1; u >= acc; acc += l + 2 {
			l++
		}
		labels[i] = l
		for j := range d {
			x.Set(i, j, centres.At(l, j)+1.2*rnd.NormFloat64())
		}
	}
	return x, labels
}

func augmented(x *mat.Dense) *mat.Dense {
	n, d := x.Dims()
	xt := mat.NewDense(n, d+1, nil)
	for i := range n {
		for j := range d {
			xt.Set(i, j, x.At(i, j))
		}
		xt.Set(i, d, 1)
	}
	return xt
}

// TestTrainMatchesPrimalNewton compares every binary problem's (w, bias) with the Newton
// reference, for two and for four classes, with and without balanced weights, on sizes
// that leave many rows on the active side. Tolerance: the dual is strongly convex with
// modulus min Dᵢᵢ = 1/(2 max Cᵢ) ≥ 1/8 here, so stopping at |PG| < 1e-11 leaves
// ‖α − α*‖ ≤ 8·√n·1e-11 and ‖w − w*‖ ≤ ‖X̃‖₂·‖α − α*‖ < 1e-7 for these sizes (‖X̃‖₂ < 60).
func TestTrainMatchesPrimalNewton(t *testing.T) {
	for _, tc := range []struct {
		n, d, classes int
		balanced      bool
		cost          float64
	}{
		{60, 3, 2, false, 1}, {60, 3, 2, true, 1}, {90, 5, 4, true, 1}, {90, 5, 4, false, 0.3}, {41, 7, 3, true, 2},
	} {
		rnd := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.classes)))
		x, labels := problem(rnd, tc.n, tc.d, tc.classes)
		opt := Options{C: tc.cost, Balanced: tc.balanced, Tol: 1e-11, MaxEpochs: 100000, Seed: 3}
		m, err := Train(x, labels, opt)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		count := make([]float64, tc.classes)
		for _, l := range labels {
			count[l]++
		}
		weight := func(l int) float64 {
			if !tc.balanced {
				return 1
			}
			return float64(tc.n) / (float64(tc.classes) * count[l])
		}
		xt := augmented(x)
		probs := tc.classes
		if tc.classes == 2 {
			probs = 1
		}
		for p := range probs {
			y, c := make([]float64, tc.n), make([]float64, tc.n)
			for i, l := range labels {
				switch {
				case tc.classes == 2 && l == 1, tc.classes > 2 && l == p:
					y[i], c[i] = 1, tc.cost*weight(l)
				case tc.classes == 2:
					y[i], c[i] = -1, tc.cost*weight(l)
				default:
					y[i], c[i] = -1, tc.cost
				}
			}
			want := primalNewton(t, xt, y, c)
			got := m.W.RawRowView(p)
			for j := range want {
				if math.Abs(got[j]-want[j]) > 1e-7 {
					t.Errorf("%+v problem %d w[%d]: got %.12g, want %.12g", tc, p, j, got[j], want[j])
				}
			}
		}
	}
}

// TestPredict checks PredictTo against decision values computed here, and that a
// separable two-class set is classified without error.
func TestPredict(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 5))
	x, labels := problem(rnd, 120, 4, 3)
	m, err := Train(x, labels, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int, 120)
	m.PredictTo(got, x)
	for i := range 120 {
		best, arg := math.Inf(-1), -1
		for p := range 3 {
			w := m.W.RawRowView(p)
			v := w[4]
			for j := range 4 {
				v += w[j] * x.At(i, j)
			}
			if v > best {
				best, arg = v, p
			}
		}
		if got[i] != arg {
			t.Errorf("row %d: got class %d, want %d", i, got[i], arg)
		}
	}

	// Two well-separated clusters on either side of x₀ = 0.
	sep := mat.NewDense(40, 2, nil)
	sl := make([]int, 40)
	for i := range 40 {
		sl[i] = i % 2
		sep.Set(i, 0, float64(2*sl[i]-1)*(3+rnd.Float64()))
		sep.Set(i, 1, rnd.NormFloat64())
	}
	ms, err := Train(sep, sl, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	pred := make([]int, 40)
	ms.PredictTo(pred, sep)
	for i := range 40 {
		if pred[i] != sl[i] {
			t.Errorf("separable row %d: got %d, want %d", i, pred[i], sl[i])
		}
	}
}

// TestAbsentClassNeverPredicted: labels 0 and 2 only; class 1 has no row and no problem.
func TestAbsentClassNeverPredicted(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	x, labels := problem(rnd, 80, 3, 2)
	for i := range labels {
		labels[i] *= 2
	}
	m, err := Train(x, labels, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	pred := make([]int, 80)
	m.PredictTo(pred, x)
	for i, p := range pred {
		if p != 0 && p != 2 {
			t.Fatalf("row %d predicted class %d, which has no training row", i, p)
		}
	}
}

func TestTrainDeterministic(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 9))
	x, labels := problem(rnd, 100, 6, 4)
	a, err := Train(x, labels, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train(x, labels, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(a.W, b.W) {
		t.Fatal("two trainings with the same seed differ")
	}
}

func TestTrainErrors(t *testing.T) {
	x := mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 6})
	for _, tc := range []struct {
		name   string
		labels []int
		opt    Options
		want   error
	}{
		{"one class", []int{1, 1, 1}, DefaultOptions(), ErrLabel},
		{"negative", []int{0, -1, 1}, DefaultOptions(), ErrLabel},
		{"C", []int{0, 1, 1}, Options{C: 0, Tol: 1, MaxEpochs: 1}, ErrOption},
		{"tol", []int{0, 1, 1}, Options{C: 1, Tol: math.NaN(), MaxEpochs: 1}, ErrOption},
		{"epochs", []int{0, 1, 1}, Options{C: 1, Tol: 1, MaxEpochs: 0}, ErrOption},
		{"not converged", []int{0, 1, 0}, Options{C: 1, Tol: 1e-300, MaxEpochs: 2}, ErrNotConverged},
	} {
		if _, err := Train(x, tc.labels, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
