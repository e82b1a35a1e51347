package fit

import (
	"errors"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// byolModel returns a BYOL model (M = m, k) whose online encoder, predictor and target
// are all distinct random draws, so a gradient that wrongly used the online encoder as the
// target, or dropped the predictor, would not match the differences.
func byolModel(m, k int, seed uint64) *model {
	md := newModel(m, k)
	md.addBYOL(seed)
	rnd := newRand(seed)
	for i := range md.theta {
		md.theta[i] = rnd.NormFloat64()
	}
	for i := range md.byol.target {
		md.byol.target[i] = rnd.NormFloat64()
	}
	return md
}

// TestBYOLLossGradient checks ∂L/∂q_A and ∂L/∂q_B of byolLossTo against central
// differences, on batches including B = 1 and rows of small and large norm. With
// h = 1e-5 the truncation error is h²/6·|∂³L| ≲ 1e-9 for row norms ≥ 0.3 (∂³ of a cosine
// scales as ||q||⁻³) and the rounding error ε_mach·|L|/h ≲ 1e-10 (L ≤ 8), so
// 1e-6·max(1, |g|) leaves two orders of margin while a wrong term (O(1) relative) fails.
// The same differences taken in the targets are not all zero, so the loss does depend on
// them and their absence from the gradient is the stop-gradient, not an accident.
func TestBYOLLossGradient(t *testing.T) {
	rnd := newRand(21)
	for _, tc := range []struct {
		b, k  int
		scale float64
	}{{5, 4, 1}, {1, 3, 2}, {3, 2, 0.3}, {6, 8, 1}} {
		qa, qb := randDense(rnd, tc.b, tc.k, tc.scale, 0.1), randDense(rnd, tc.b, tc.k, tc.scale, 0.1)
		ta, tb := randDense(rnd, tc.b, tc.k, 1, 0.2), randDense(rnd, tc.b, tc.k, 1, 0.2)
		ga, gb := mat.NewDense(tc.b, tc.k, nil), mat.NewDense(tc.b, tc.k, nil)
		byolLossTo(ga, gb, qa, qb, ta, tb)
		value := func() float64 {
			return byolLossTo(mat.NewDense(tc.b, tc.k, nil), mat.NewDense(tc.b, tc.k, nil), qa, qb, ta, tb)
		}
		diff := func(m *mat.Dense, i, j int) float64 {
			const h = 1e-5
			x := m.At(i, j)
			m.Set(i, j, x+h)
			fp := value()
			m.Set(i, j, x-h)
			fm := value()
			m.Set(i, j, x)
			return (fp - fm) / (2 * h)
		}
		var targetDep float64
		for _, v := range []struct {
			name string
			q, g *mat.Dense
			t    *mat.Dense
		}{{"q_A", qa, ga, ta}, {"q_B", qb, gb, tb}} {
			for i := range tc.b {
				for j := range tc.k {
					want := diff(v.q, i, j)
					if got := v.g.At(i, j); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
						t.Errorf("B=%d k=%d ∂L/∂%s[%d,%d] = %.10g, want %.10g", tc.b, tc.k, v.name, i, j, got, want)
					}
					targetDep = math.Max(targetDep, math.Abs(diff(v.t, i, j)))
				}
			}
		}
		if !(targetDep > 1e-3) {
			t.Errorf("B=%d k=%d: the loss does not depend on the targets (max |∂L/∂t| = %g)", tc.b, tc.k, targetDep)
		}
	}
}

// TestBYOLLossClosedForms checks values by hand: a prediction parallel to its target
// costs 0 whatever the norms, an orthogonal one 2, an opposite one 4, per term; and the
// gradient of an aligned pair is 0 (a minimum).
func TestBYOLLossClosedForms(t *testing.T) {
	for _, tc := range []struct {
		name           string
		qa, qb, ta, tb []float64
		want           float64
	}{
		{"parallel", []float64{2, 0}, []float64{0, 3}, []float64{0, 0.5}, []float64{7, 0}, 0},
		{"orthogonal", []float64{1, 0}, []float64{1, 0}, []float64{0, 1}, []float64{0, 2}, 4},
		{"opposite and parallel", []float64{1, 1}, []float64{1, 2}, []float64{2, 4}, []float64{-3, -3}, 4},
	} {
		m := func(v []float64) *mat.Dense { return mat.NewDense(1, 2, slices.Clone(v)) }
		ga, gb := mat.NewDense(1, 2, nil), mat.NewDense(1, 2, nil)
		if got := byolLossTo(ga, gb, m(tc.qa), m(tc.qb), m(tc.ta), m(tc.tb)); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%s: L = %.17g, want %g", tc.name, got, tc.want)
		}
		if tc.want == 0 && (mat.Norm(ga, 2) > 1e-16 || mat.Norm(gb, 2) > 1e-16) {
			t.Errorf("%s: gradient %v, %v at the minimum, want 0", tc.name, ga.RawMatrix().Data, gb.RawMatrix().Data)
		}
	}
}

func TestEMATau(t *testing.T) {
	for _, tc := range []struct {
		base     float64
		s, total int
		want     float64
	}{
		{0.996, 0, 100, 0.996},
		{0.996, 50, 100, 1 - 0.004/2},
		{0.996, 25, 100, 1 - 0.004*(1+math.Sqrt2/2)/2},
		{0.9, 99, 100, 1 - 0.1*(1+math.Cos(math.Pi*0.99))/2},
		{1, 7, 10, 1},
		{0, 0, 10, 0},
	} {
		if got := emaTau(tc.base, tc.s, tc.total); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("emaTau(%v, %d, %d) = %.17g, want %.17g", tc.base, tc.s, tc.total, got, tc.want)
		}
	}
}

// TestBYOLTargetEMA runs the fit's own step (md.update: clip, Adam, EMA) for n steps of a
// BYOL model on real batches and compares the target with the EMA's closed form over the
// recorded online parameters θ_1..θ_n (θ_s after step s−1),
//
//	ξ_n = (Π_{s<n} τ_s) ξ_0 + Σ_{s<n} (1 − τ_s)(Π_{s<r<n} τ_r) θ_{s+1},
//
// evaluated as a sum rather than the recursion the code runs. The two orders differ by
// O(n·ε_mach) relative, so 1e-12 relative to the largest |θ| is a wide margin; taking the
// schedule one step late (τ_{s+1} for τ_s) changes ξ by ≈ n·(1−τ_base)·π/(2T)·|θ| ≈ 1e-4
// at these settings. With τ_base = 1 the target must stay bit-identical to θ₀ while θ
// moves: the target receives no gradient.
func TestBYOLTargetEMA(t *testing.T) {
	p := synthetic(17, 60, 6, 2, 2)
	in, err := Initialize(Kaiming, p, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []float64{0.9, 0.996, 1} {
		opt := smallOptions(BYOL)
		opt.Params.BYOLTauBase = base
		opt.BatchSize = 10
		md, _, err := startModel(p, in.A0, opt.BiasInit)
		if err != nil {
			t.Fatal(err)
		}
		md.addBYOL(opt.Seed)
		ne := md.m*md.k + md.k
		xi0 := slices.Clone(md.byol.target)
		if !slices.Equal(xi0, md.theta[:ne]) {
			t.Fatalf("τ_base %v: the target does not start as a copy of (Ã₀, b₀)", base)
		}
		if got, want := len(md.theta), ne+md.k*md.k+md.k; got != want {
			t.Fatalf("trained vector has %d entries, want %d (Ã, b, W, c; never the target)", got, want)
		}
		ad := newAdam(len(md.theta), opt.WeightDecay, false)
		order := batchOrder(nil, p.IDs, hashIDs(p.IDs), opt.Seed, 1)
		bounds := batchBounds(len(p.IDs), opt.BatchSize)
		const n, total = 6, 12
		var thetas [][]float64
		for s := range n {
			md.gather(p, order[bounds[s]:bounds[s+1]])
			before := slices.Clone(md.byol.target)
			md.lossGrad(BYOL, opt.Params)
			if !slices.Equal(before, md.byol.target) {
				t.Fatalf("τ_base %v step %d: computing the gradient changed the target", base, s)
			}
			md.update(ad, opt, s, total)
			thetas = append(thetas, slices.Clone(md.theta[:ne]))
		}
		var scale float64
		for i := range ne {
			want := xi0[i]
			for s := range n {
				want *= emaTau(base, s, total)
			}
			for s := range n {
				w := 1 - emaTau(base, s, total)
				for r := s + 1; r < n; r++ {
					w *= emaTau(base, r, total)
				}
				want += w * thetas[s][i]
				scale = math.Max(scale, math.Abs(thetas[s][i]))
			}
			if got := md.byol.target[i]; math.Abs(got-want) > 1e-12*math.Max(1, scale) {
				t.Errorf("τ_base %v: ξ[%d] = %.17g, want %.17g", base, i, got, want)
			}
		}
		if base == 1 {
			if !slices.Equal(md.byol.target, xi0) {
				t.Errorf("τ_base 1: the target moved")
			}
			if slices.Equal(md.theta[:ne], xi0) {
				t.Errorf("τ_base 1: the online encoder did not move either; the test proves nothing")
			}
		}
	}
}

// TestBYOLValLoss checks the BYOL validation criterion (no labels, a second validation
// view) at the initialization against a plain-loop reference: the target is a copy of
// (Ã₀, b₀), the predictor W₀ = I + 0.1·R with R drawn here from the stream
// "fit/byol/predictor" (N(0, 1/k) truncated at ±2σ, row-major), c₀ = 0, and
// L = mean_i [(2 − 2cos(q(z_A,i), z_B,i)) + (2 − 2cos(q(z_B,i), z_A,i))]. The two sides
// sum the same terms in different orders, hence 1e-12.
func TestBYOLValLoss(t *testing.T) {
	p := synthetic(19, 80, 10, 9, 5)
	p.Val.Labels = nil
	p.Val.KB = mat.DenseCopyOf(p.Val.K)
	rv, m := p.Val.K.Dims()
	for i := range rv {
		for l := range m {
			p.Val.KB.Set(i, l, p.Val.K.At(i, l)*(1+0.3*math.Sin(float64(3*i+l))))
		}
	}
	in, err := Initialize(Kaiming, p, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	opt := smallOptions(BYOL)
	opt.Epochs = 2
	r, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.SelectedBy != SelectedByValLoss {
		t.Fatalf("SelectedBy = %q, want %q", r.SelectedBy, SelectedByValLoss)
	}
	k := 5
	src := rng.New(opt.Seed, "fit/byol/predictor")
	w := make([][]float64, k)
	for i := range w {
		w[i] = make([]float64, k)
		for j := range w[i] {
			x := src.NormFloat64()
			for math.Abs(x) > 2 {
				x = src.NormFloat64()
			}
			w[i][j] = 0.1 * x / math.Sqrt(float64(k))
		}
		w[i][i]++
	}
	embed := func(kr *mat.Dense, i int) []float64 {
		z := make([]float64, k)
		for j := range k {
			z[j] = opt.BiasInit
			for l := range m {
				z[j] += kr.At(i, l) * in.A0.At(l, j)
			}
		}
		return z
	}
	predict := func(z []float64) []float64 {
		q := make([]float64, k)
		for j := range k {
			for i := range k {
				q[j] += z[i] * w[i][j]
			}
		}
		return q
	}
	cos := func(a, b []float64) float64 {
		var ab, aa, bb float64
		for j := range a {
			ab += a[j] * b[j]
			aa += a[j] * a[j]
			bb += b[j] * b[j]
		}
		return ab / math.Sqrt(aa*bb)
	}
	var want float64
	for i := range rv {
		za, zb := embed(p.Val.K, i), embed(p.Val.KB, i)
		want += (2 - 2*cos(predict(za), zb)) + (2 - 2*cos(predict(zb), za))
	}
	want /= float64(rv)
	if math.Abs(r.InitVal-want) > 1e-12*want {
		t.Errorf("InitVal = %.15g, want the BYOL loss of the initialization %.15g", r.InitVal, want)
	}
	for i, h := range r.History {
		if !(h.ValMetric >= 0 && h.ValMetric <= 8) {
			t.Errorf("epoch %d: validation loss %v outside [0, 8]", i+1, h.ValMetric)
		}
	}
}

// TestBYOLFit checks a BYOL fit end to end on a small problem: the same inputs give
// bit-identical results (every parameter, the whole history), another seed gives another
// fit (it redraws the predictor: checked with a single batch per epoch, where the order
// cannot make a difference beyond rounding), and training lowers
// the epoch-mean loss by at least a fifth from the first epoch to the last (measured
// 1.845 → 1.248, ×0.68; with the gradient's sign flipped it rose 2.67 → 5.96, and with
// lr = 1e-12 it stays at 2.097).
func TestBYOLFit(t *testing.T) {
	p := synthetic(23, 200, 24, 40, 40)
	in, err := Initialize(Kaiming, p, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := smallOptions(BYOL)
	opt.Epochs, opt.Patience = 10, 10
	r1, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(r1.A, r2.A) || !slices.Equal(r1.B, r2.B) || r1.BestEpoch != r2.BestEpoch || len(r1.History) != len(r2.History) {
		t.Fatal("two BYOL fits with the same inputs differ")
	}
	for i := range r1.History {
		a, b := r1.History[i], r2.History[i]
		if math.Float64bits(a.TrainLoss) != math.Float64bits(b.TrainLoss) || math.Float64bits(a.ValMetric) != math.Float64bits(b.ValMetric) {
			t.Errorf("epoch %d: history differs: %+v vs %+v", i+1, a, b)
		}
	}
	first, last := r1.History[0].TrainLoss, r1.History[len(r1.History)-1].TrainLoss
	t.Logf("BYOL train loss %.4f → %.4f, test accuracy %.3f → %.3f", first, last, r1.InitEval.Accuracy, r1.TestEval.Accuracy)
	if !(last < 0.8*first) {
		t.Errorf("train loss %.4f → %.4f, want the last epoch below 0.8× the first", first, last)
	}
	one := opt
	one.BatchSize = 400 // one batch per epoch: the order cannot change, only the predictor
	one.Epochs = 2
	ra, err := Adam(p, in.A0, one)
	if err != nil {
		t.Fatal(err)
	}
	one.Seed++
	rb, err := Adam(p, in.A0, one)
	if err != nil {
		t.Fatal(err)
	}
	// The seed also reorders the rows inside the one batch, which changes the sums'
	// rounding (≈ 1e-16 relative); a redrawn predictor changes Ã by O(lr) = O(1e-2).
	var d mat.Dense
	d.Sub(ra.A, rb.A)
	if got := mat.Norm(&d, math.Inf(1)); !(got > 1e-6) {
		t.Errorf("a different seed changed the one-batch BYOL fit by %g: the predictor is not seeded by it", got)
	}
}

// TestBYOLRejected: BYOL everywhere a fixed loss of (z_A, z_B) is required is refused
// clearly: Krepes returns ErrUnsupported before any work, and the z-level entry points
// (LossGradTo, the Hessian-vector product) panic, being programmer errors.
func TestBYOLRejected(t *testing.T) {
	p := synthetic(3, 20, 5, 2, 2)
	in, err := Initialize(Kaiming, p, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Krepes(p, in.A0, DefaultKrepesOptions(BYOL)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Krepes(byol) error = %v, want ErrUnsupported", err)
	}
	z := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	g := func() *mat.Dense { return mat.NewDense(2, 3, nil) }
	for name, f := range map[string]func(){
		"LossGradTo": func() { LossGradTo(g(), g(), BYOL, DefaultLossParams(), z, z) },
		"hessVecTo":  func() { var ws hvpWS; ws.hessVecTo(g(), g(), BYOL, DefaultLossParams(), z, z, z, z) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(BYOL) did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestBYOLOptions(t *testing.T) {
	if l, err := ParseLoss("byol"); err != nil || l != BYOL || l.String() != "byol" {
		t.Errorf(`ParseLoss("byol") = %v, %v; want BYOL`, l, err)
	}
	if _, err := ParseLoss("BYOL"); !errors.Is(err, ErrLoss) {
		t.Errorf(`ParseLoss("BYOL") error = %v, want ErrLoss (names are lower case)`, err)
	}
	for _, tc := range []struct {
		tau float64
		ok  bool
	}{{0.996, true}, {0, true}, {1, true}, {-0.1, false}, {1.5, false}, {math.NaN(), false}} {
		o := DefaultOptions(BYOL)
		o.Params.BYOLTauBase = tc.tau
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("BYOLTauBase = %v: Validate() = %v, want ok = %v", tc.tau, err, tc.ok)
		}
	}
	o := DefaultOptions(SimCLR)
	o.Params.BYOLTauBase = 2 // not BYOL: ignored
	if err := o.Validate(); err != nil {
		t.Errorf("SimCLR with BYOLTauBase 2: %v, want nil", err)
	}
	o = DefaultOptions(BYOL + 1)
	if err := o.Validate(); !errors.Is(err, ErrOption) {
		t.Errorf("Loss %d: Validate() = %v, want ErrOption", int(o.Loss), err)
	}
}
