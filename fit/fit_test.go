package fit

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/linsvm"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// synthetic builds a separable problem with a nuisance: points have a class signal in two
// coordinates (4 classes at the corners of a square, spread 0.3) and 8 nuisance
// coordinates of spread 1. The two views share the signal (plus noise 0.05) and redraw the
// nuisance independently, so invariance between views can only be learned by
// down-weighting the nuisance. The kernel is Gaussian (bandwidth² = 8) against M
// landmarks drawn the same way. Val and test are clean points with labels.
func synthetic(seed uint64, n, m, nv, nt int) *Problem { return syntheticP(seed, n, m, nv, nt, 1, 8) }

func syntheticP(seed uint64, n, m, nv, nt int, nuis, bw float64) *Problem {
	rnd := rand.New(rand.NewPCG(seed, 7))
	const dSig, dNuis = 2, 8
	corner := [][2]float64{{1, 1}, {1, -1}, {-1, 1}, {-1, -1}}
	point := func(c int, sig []float64) []float64 {
		x := make([]float64, dSig+dNuis)
		if sig == nil {
			x[0] = corner[c][0] + 0.3*rnd.NormFloat64()
			x[1] = corner[c][1] + 0.3*rnd.NormFloat64()
		} else {
			x[0] = sig[0] + 0.05*rnd.NormFloat64()
			x[1] = sig[1] + 0.05*rnd.NormFloat64()
		}
		for j := dSig; j < dSig+dNuis; j++ {
			x[j] = nuis * rnd.NormFloat64()
		}
		return x
	}
	lm := make([][]float64, m)
	for i := range lm {
		lm[i] = point(rnd.IntN(4), nil)
	}
	kern := func(x, y []float64) float64 {
		var d float64
		for i := range x {
			d += (x[i] - y[i]) * (x[i] - y[i])
		}
		return math.Exp(-d / bw)
	}
	row := func(dst *mat.Dense, i int, x []float64) {
		for l := range m {
			dst.Set(i, l, kern(x, lm[l]))
		}
	}
	p := &Problem{KA: mat.NewDense(n, m, nil), KB: mat.NewDense(n, m, nil), Kmm: mat.NewDense(m, m, nil)}
	for i := range n {
		base := point(rnd.IntN(4), nil)
		row(p.KA, i, point(0, base[:2]))
		row(p.KB, i, point(0, base[:2]))
		p.IDs = append(p.IDs, "pt-"+strconv.Itoa(i))
	}
	for i := range m {
		row(p.Kmm, i, lm[i])
	}
	for _, s := range []struct {
		sp *Split
		r  int
	}{{&p.Val, nv}, {&p.Test, nt}} {
		s.sp.K = mat.NewDense(s.r, m, nil)
		for i := range s.r {
			c := rnd.IntN(4)
			row(s.sp.K, i, point(c, nil))
			s.sp.Labels = append(s.sp.Labels, c)
		}
	}
	return p
}

// TestParamGradient checks ∂L/∂Ã and ∂L/∂b of the batch step (chain rule through
// z = KÃ + 1bᵀ) against central differences; tolerance as in TestLossGradients. Under
// BYOL θ also holds the predictor (W, c), checked the same way, and the target is an
// independent random draw held fixed by the differences: the stop-gradient derivative.
func TestParamGradient(t *testing.T) {
	p := synthetic(3, 6, 5, 2, 2)
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg, BYOL} {
		md := newModel(5, 3)
		rnd := rand.New(rand.NewPCG(4, 4))
		for i := range md.theta {
			md.theta[i] = rnd.NormFloat64()
		}
		if loss == BYOL {
			md = byolModel(5, 3, 4)
		}
		rows := []int{4, 0, 2, 5}
		md.gather(p, rows)
		lp := DefaultLossParams()
		md.lossGrad(loss, lp)
		grad := append([]float64(nil), md.grad...)
		const h = 1e-5
		for i := range md.theta {
			x := md.theta[i]
			md.theta[i] = x + h
			fp := md.lossGrad(loss, lp)
			md.theta[i] = x - h
			fm := md.lossGrad(loss, lp)
			md.theta[i] = x
			want := (fp - fm) / (2 * h)
			if math.Abs(grad[i]-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%v ∂L/∂θ[%d]: got %.10g, want %.10g", loss, i, grad[i], want)
			}
		}
	}
}

// TestAdamStep compares two Adam steps with a hand computation (β₁ = 0.9, β₂ = 0.999,
// ε = 1e-8, weight decay 0.01, lr 0.1).
func TestAdamStep(t *testing.T) {
	a := newAdam(1, 0.01, false)
	th := []float64{1}
	a.step(th, []float64{0.5}, 0.1)
	// g = 0.5 + 0.01·1 = 0.51; m̂ = 0.51, v̂ = 0.51² → θ = 1 − 0.1·0.51/(0.51 + 1e-8).
	want := 1 - 0.1*0.51/(0.51+1e-8)
	if math.Abs(th[0]-want) > 1e-15 {
		t.Fatalf("step 1: got %.17g, want %.17g", th[0], want)
	}
	// Step 2 with g = −0.2: g' = −0.2 + 0.01θ₁.
	g2 := -0.2 + 0.01*th[0]
	m := 0.9*0.1*0.51 + 0.1*g2
	v := 0.999*0.001*0.51*0.51 + 0.001*g2*g2
	mh, vh := m/(1-0.81), v/(1-0.999*0.999)
	want = th[0] - 0.05*mh/(math.Sqrt(vh)+1e-8)
	a.step(th, []float64{-0.2}, 0.05)
	if math.Abs(th[0]-want) > 1e-15 {
		t.Fatalf("step 2: got %.17g, want %.17g", th[0], want)
	}
}

// TestAdamWStep checks the decoupled form against a hand computation: the moments see the
// loss gradient alone and the weight shrinks by lr·wd·θ after the Adam step. A coordinate
// with zero gradient then decays geometrically by (1 − lr·wd), where the coupled form
// would normalize the lone wd·θ into a full step of ≈ lr toward zero.
func TestAdamWStep(t *testing.T) {
	a := newAdam(2, 0.01, true)
	th := []float64{1, 3}
	a.step(th, []float64{0.5, 0}, 0.1)
	// Coordinate 0: m̂ = 0.5, v̂ = 0.25 → θ = 1 − 0.1·0.5/(0.5 + 1e-8) − 0.1·0.01·1.
	want := 1 - 0.1*0.5/(0.5+1e-8) - 0.001
	if math.Abs(th[0]-want) > 1e-15 {
		t.Fatalf("step 1, θ[0]: got %.17g, want %.17g", th[0], want)
	}
	// Coordinate 1: m = v = 0, so only the shrink acts: θ = 3·(1 − 0.001).
	if want := 3 * (1 - 0.001); math.Abs(th[1]-want) > 1e-15 {
		t.Fatalf("step 1, θ[1]: got %.17g, want %.17g", th[1], want)
	}
	t1 := th[0]
	m := 0.9*0.1*0.5 + 0.1*(-0.2)
	v := 0.999*0.001*0.25 + 0.001*0.04
	mh, vh := m/(1-0.81), v/(1-0.999*0.999)
	want = t1 - 0.05*mh/(math.Sqrt(vh)+1e-8) - 0.05*0.01*t1
	a.step(th, []float64{-0.2, 0}, 0.05)
	if math.Abs(th[0]-want) > 1e-15 {
		t.Fatalf("step 2, θ[0]: got %.17g, want %.17g", th[0], want)
	}
	if want := 3 * (1 - 0.001) * (1 - 0.0005); math.Abs(th[1]-want) > 1e-15 {
		t.Fatalf("step 2, θ[1]: got %.17g, want %.17g", th[1], want)
	}
	// The coupled form moves the gradient-free coordinate by ≈ lr on the first step.
	c := newAdam(1, 0.01, false)
	tc := []float64{3}
	c.step(tc, []float64{0}, 0.1)
	// The step is lr·g/(g + ε) with g = wd·θ = 0.03, i.e. lr up to a relative ε/g ≈ 3e-7.
	if got := 3 - tc[0]; math.Abs(got-0.1) > 1e-6 {
		t.Fatalf("coupled step on a zero gradient moved θ by %.12g, want ≈ lr = 0.1", got)
	}
}

func TestCosineSchedule(t *testing.T) {
	for _, tc := range []struct {
		t, total int
		want     float64
	}{
		{0, 100, 1}, {50, 100, 0.5}, {25, 100, (1 + math.Sqrt2/2) / 2}, {75, 100, (1 - math.Sqrt2/2) / 2}, {99, 100, (1 + math.Cos(math.Pi*0.99)) / 2},
	} {
		if got := cosineLR(1, tc.t, tc.total); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("cosineLR(1, %d, %d) = %.17g, want %.17g", tc.t, tc.total, got, tc.want)
		}
	}
}

func TestClipNorm(t *testing.T) {
	for _, tc := range []struct {
		g, want []float64
		c, norm float64
	}{
		{[]float64{3, 4}, []float64{0.6, 0.8}, 1, 5},
		{[]float64{0.3, 0.4}, []float64{0.3, 0.4}, 1, 0.5},
		{[]float64{0, 0}, []float64{0, 0}, 1, 0},
		{[]float64{-6, 8}, []float64{-1.2, 1.6}, 2, 10},
	} {
		g := append([]float64(nil), tc.g...)
		n := clipNorm(nil, g, tc.c)
		if n != tc.norm {
			t.Errorf("clipNorm(%v) returned %v, want %v", tc.g, n, tc.norm)
		}
		for i := range g {
			if math.Abs(g[i]-tc.want[i]) > 1e-15 {
				t.Errorf("clipNorm(%v, %v) = %v, want %v", tc.g, tc.c, g, tc.want)
				break
			}
		}
	}
}

func TestBatchOrder(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	perm := []int{3, 0, 7, 5, 1, 6, 2, 4}
	pids := make([]string, len(ids))
	for i, j := range perm {
		pids[i] = ids[j]
	}
	o1 := batchOrder(nil, ids, hashIDs(ids), 9, 1)
	o2 := batchOrder(nil, pids, hashIDs(pids), 9, 1)
	for i := range o1 {
		if ids[o1[i]] != pids[o2[i]] {
			t.Fatalf("order depends on row order: %v vs %v", o1, o2)
		}
	}
	same := true
	o3 := batchOrder(nil, ids, hashIDs(ids), 9, 2)
	for i := range o1 {
		same = same && o1[i] == o3[i]
	}
	if same {
		t.Errorf("epochs 1 and 2 give the same order %v", o1)
	}
	for _, tc := range []struct{ n, size, nb int }{{10, 512, 1}, {1024, 512, 2}, {1500, 512, 2}, {1535, 512, 2}, {1536, 512, 3}} {
		b := batchBounds(tc.n, tc.size)
		if len(b)-1 != tc.nb || b[0] != 0 || b[len(b)-1] != tc.n {
			t.Errorf("batchBounds(%d, %d) = %v, want %d batches covering [0, %d)", tc.n, tc.size, b, tc.nb, tc.n)
		}
	}
}

func smallOptions(l Loss) Options {
	o := DefaultOptions(l)
	o.Epochs, o.BatchSize = 4, 64
	o.KNN = 5
	o.Seed = 11
	return o
}

// TestAdamDeterministicAndRowOrder checks that two fits with the same inputs are
// bit-identical, and that permuting the training rows (with their ids) changes nothing.
func TestAdamDeterministicAndRowOrder(t *testing.T) {
	p := synthetic(5, 200, 24, 40, 40)
	in, err := Initialize(PCI, p, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg, BYOL} {
		opt := smallOptions(loss)
		r1, err := Adam(p, in.A0, opt)
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := Adam(p, in.A0, opt)
		n, m := p.KA.Dims()
		perm := rand.New(rand.NewPCG(8, 8)).Perm(n)
		q := *p
		q.KA, q.KB, q.IDs = mat.NewDense(n, m, nil), mat.NewDense(n, m, nil), make([]string, n)
		for i, j := range perm {
			q.KA.SetRow(i, p.KA.RawRowView(j))
			q.KB.SetRow(i, p.KB.RawRowView(j))
			q.IDs[i] = p.IDs[j]
		}
		r3, _ := Adam(&q, in.A0, opt)
		for _, r := range []*Result{r2, r3} {
			if !mat.Equal(r1.A, r.A) || r1.B[0] != r.B[0] || r1.BestEpoch != r.BestEpoch {
				t.Errorf("%v: fits differ (rerun or permuted rows)", loss)
			}
		}
		opt.Seed++
		r4, _ := Adam(p, in.A0, opt)
		if mat.Equal(r1.A, r4.A) {
			t.Errorf("%v: a different seed gave an identical fit", loss)
		}
	}
}

// TestAdamBeatsInit fits the separable-with-nuisance set of syntheticP (400 training
// points, 64 landmarks, nuisance spread 0.7, bandwidth² 4; k = 8, Kaiming init, 10 epochs,
// batches of 100) and requires the selected checkpoint's test k-NN accuracy to exceed the
// initialization's, for three data seeds. Barlow Twins' off-diagonal weight is scaled to
// keep the paper's per-entry off/on ratio at k = 256 (35/255): λ = 35·(k−1)/255; λ = 35
// itself at k = 8 weighs each off-diagonal entry 5× a diagonal one and decorrelation wins
// over invariance at this tiny width.
func TestAdamBeatsInit(t *testing.T) {
	for _, seed := range []uint64{2, 3, 4} {
		p := syntheticP(seed, 400, 64, 120, 200, 0.7, 4)
		const k = 8
		for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg, BYOL} {
			in, err := Initialize(Kaiming, p, k, 3)
			if err != nil {
				t.Fatal(err)
			}
			opt := smallOptions(loss)
			opt.Params.BTOffDiag = 35 * (k - 1) / 255.0
			opt.Epochs, opt.BatchSize, opt.Patience = 10, 100, 10
			r, err := Adam(p, in.A0, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d %v: init %.3f → fit %.3f (epoch %d, %s)", seed, loss, r.InitEval.Accuracy, r.TestEval.Accuracy, r.BestEpoch, r.SelectedBy)
			if !(r.TestEval.Accuracy > r.InitEval.Accuracy) {
				t.Errorf("seed %d %v: accuracy %.3f does not beat init %.3f", seed, loss, r.TestEval.Accuracy, r.InitEval.Accuracy)
			}
			if r.SelectedBy != SelectedByValAccuracy {
				t.Errorf("SelectedBy = %q, want %q", r.SelectedBy, SelectedByValAccuracy)
			}
		}
	}
}

func newRand(s uint64) *rand.Rand { return rand.New(rand.NewPCG(s, s)) }

// TestAdamInitVal checks Result.InitVal, the validation score of (Ã₀, b₀), against a
// brute-force leave-one-out cosine k-NN written out here (sort all other validation rows
// by cosine similarity, majority vote over the first k, a count tie going to the class
// met first). Both sides count the same integer votes on the same float64 similarities,
// so they must agree exactly; a continuous synthetic set makes similarity ties (where the
// two orderings could legitimately differ) a probability-zero event.
func TestAdamInitVal(t *testing.T) {
	p := synthetic(9, 200, 24, 60, 40)
	in, err := Initialize(PCI, p, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := smallOptions(BarlowTwins)
	opt.Epochs = 1
	r, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	nv, _ := p.Val.K.Dims()
	_, k := in.A0.Dims()
	z := mat.NewDense(nv, k, nil)
	z.Mul(p.Val.K, in.A0)
	for i := range nv {
		row := z.RawRowView(i)
		var ss float64
		for j := range row {
			row[j] += opt.BiasInit
			ss += row[j] * row[j]
		}
		for j := range row {
			row[j] /= math.Sqrt(ss)
		}
	}
	correct := 0
	for i := range nv {
		type nb struct {
			s float64
			j int
		}
		var all []nb
		for j := range nv {
			if j != i {
				all = append(all, nb{mat.Dot(z.RowView(i), z.RowView(j)), j})
			}
		}
		sort.Slice(all, func(a, b int) bool { return all[a].s > all[b].s })
		counts := map[int]int{}
		first := map[int]int{}
		for rank, x := range all[:opt.KNN] {
			l := p.Val.Labels[x.j]
			if _, ok := first[l]; !ok {
				first[l] = rank
			}
			counts[l]++
		}
		best := -1
		for l, c := range counts {
			if best < 0 || c > counts[best] || (c == counts[best] && first[l] < first[best]) {
				best = l
			}
		}
		if best == p.Val.Labels[i] {
			correct++
		}
	}
	if want := float64(correct) / float64(nv); r.InitVal != want {
		t.Errorf("InitVal = %v, want %v (brute-force leave-one-out k-NN of the initialization)", r.InitVal, want)
	}
	kr, err := Krepes(p, in.A0, KrepesOptions{Options: opt, Damping: 1e-3, MaxIter: 2, Tol: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(kr.InitVal) {
		t.Errorf("Krepes InitVal = %v, want NaN (not scored)", kr.InitVal)
	}
}

// TestProbeWiring checks Result.InitProbe and Result.TestProbe against the probe computed
// here from its definition: embed the validation and test splits with (Ã₀, b₀) and with
// the selected (Ã, b), normalize rows, fit linsvm (tested against a Newton reference in its
// own package) on validation and score the test split. Same inputs and seed, so the
// accuracies must agree exactly. Without Options.Probe, and when the splits' label sets
// differ, the fields are NaN.
func TestProbeWiring(t *testing.T) {
	p := synthetic(12, 200, 24, 60, 80)
	in, err := Initialize(PCI, p, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(a *mat.Dense, b []float64, seed uint64) float64 {
		embed := func(k *mat.Dense) *mat.Dense {
			r, _ := k.Dims()
			_, c := a.Dims()
			z := mat.NewDense(r, c, nil)
			z.Mul(k, a)
			for i := range r {
				row := z.RawRowView(i)
				var ss float64
				for j := range row {
					row[j] += b[j]
					ss += row[j] * row[j]
				}
				for j := range row {
					row[j] /= math.Sqrt(ss)
				}
			}
			return z
		}
		o := linsvm.DefaultOptions()
		o.Seed = rng.Seed(seed, "fit/probe")
		m, err := linsvm.Train(embed(p.Val.K), p.Val.Labels, o)
		if err != nil {
			t.Fatal(err)
		}
		pred := make([]int, len(p.Test.Labels))
		m.PredictTo(pred, embed(p.Test.K))
		right := 0
		for i, l := range pred {
			if l == p.Test.Labels[i] {
				right++
			}
		}
		return float64(right) / float64(len(pred))
	}
	opt := smallOptions(VICReg)
	opt.Probe = true
	check := func(solver string, r *Result) {
		t.Helper()
		if got, want := r.InitProbe.Accuracy, ref(r.A0, r.B0, opt.Seed); got != want {
			t.Errorf("%s InitProbe: got %v, want %v", solver, got, want)
		}
		if got, want := r.TestProbe.Accuracy, ref(r.A, r.B, opt.Seed); got != want {
			t.Errorf("%s TestProbe: got %v, want %v", solver, got, want)
		}
	}
	r, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	check("Adam", r)
	ko := DefaultKrepesOptions(VICReg)
	ko.Options = opt
	ko.MaxIter = 3
	kr, err := Krepes(p, in.A0, ko)
	if err != nil {
		t.Fatal(err)
	}
	check("KREPES", &kr.Result)

	opt.Probe = false
	if r, err := Adam(p, in.A0, opt); err != nil || !math.IsNaN(r.TestProbe.Accuracy) || !math.IsNaN(r.InitProbe.Accuracy) {
		t.Errorf("Probe off: got %v, %v (err %v), want NaN", r.InitProbe, r.TestProbe, err)
	}
	opt.Probe = true
	q := *p
	q.Test.Labels = slices.Clone(p.Test.Labels)
	q.Test.Labels[0] = 7 // a class the validation split does not have
	if r, err := Adam(&q, in.A0, opt); err != nil || !math.IsNaN(r.TestProbe.Accuracy) {
		t.Errorf("label sets differ: got %v (err %v), want NaN", r.TestProbe, err)
	}
}

// TestAdamTrace checks Options.TraceEvery: tracing changes nothing in the fit (bit-identical
// Ã, b and selection), records one point per TraceEvery steps with increasing steps and
// non-decreasing times, and at one point per epoch the selected epoch's point is exactly
// the reported TestEval (the same evaluation of the same parameters). A negative value is
// an option error.
func TestAdamTrace(t *testing.T) {
	p := synthetic(14, 200, 24, 40, 60)
	in, err := Initialize(PCI, p, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := smallOptions(VICReg)
	plain, err := Adam(p, in.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Trace != nil {
		t.Errorf("TraceEvery = 0: Trace has %d points, want none", len(plain.Trace))
	}
	n, _ := p.KA.Dims()
	nb := len(batchBounds(n, opt.BatchSize)) - 1
	for _, every := range []int{1, 2, nb} {
		o := opt
		o.TraceEvery = every
		r, err := Adam(p, in.A0, o)
		if err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(r.A, plain.A) || !slices.Equal(r.B, plain.B) || r.BestEpoch != plain.BestEpoch || r.Epochs != plain.Epochs {
			t.Errorf("TraceEvery = %d changed the fit", every)
		}
		if got, want := len(r.Trace), r.Epochs*nb/every; got != want {
			t.Fatalf("TraceEvery = %d: %d trace points, want %d (%d epochs × %d steps)", every, got, want, r.Epochs, nb)
		}
		for i, tp := range r.Trace {
			if tp.Step != (i+1)*every || tp.Epoch != (tp.Step-1)/nb+1 {
				t.Errorf("TraceEvery = %d: point %d at step %d epoch %d, want step %d epoch %d", every, i, tp.Step, tp.Epoch, (i+1)*every, i*every/nb+1)
			}
			if i > 0 && tp.Seconds < r.Trace[i-1].Seconds {
				t.Errorf("TraceEvery = %d: time goes back at point %d", every, i)
			}
			if !(tp.Test.Accuracy >= 0 && tp.Test.Accuracy <= 1) {
				t.Errorf("TraceEvery = %d: point %d accuracy %v", every, i, tp.Test.Accuracy)
			}
		}
		if every == nb {
			if got := r.Trace[r.BestEpoch-1].Test; got != r.TestEval {
				t.Errorf("trace at the selected epoch %d = %+v, want TestEval %+v", r.BestEpoch, got, r.TestEval)
			}
		}
	}
	opt.TraceEvery = -1
	if _, err := Adam(p, in.A0, opt); !errors.Is(err, ErrOption) {
		t.Errorf("TraceEvery = -1: got %v, want ErrOption", err)
	}
}
