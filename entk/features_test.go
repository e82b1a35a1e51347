package entk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// testPolyNet is a tiny backbone whose eNTK is known in closed form. With W the d×D
// parameter matrix (row-major, P = d·D) and z = W x:
//
//   - linear (quad false): f(x) = z, so ∂f_i/∂W_ab = δ_ia x_b, J_xᵀ w = vec(w xᵀ),
//     J_x J_yᵀ = (x·y) I_d and k*(x, y) = x·y;
//   - quadratic (quad true): f_i(x) = z_i²/2, so ∂f_i/∂W_ab = δ_ia z_a x_b,
//     (J_xᵀ w)_ab = w_a z_a x_b, J_x J_yᵀ = diag(z_i(x) z_i(y)) (x·y) and
//     k*(x, y) = (x·y)/d · Σ_i z_i(x) z_i(y).
//
// It keeps what Backward needs (x and z) per workspace in a map keyed by the workspace, so
// it depends on nothing inside Workspace.
type testPolyNet struct {
	d, in int
	quad  bool
	w     []float64
	cache sync.Map // *Workspace → *testPolyCache
}

type testPolyCache struct{ x, z []float64 }

func newTestPolyNet(d, in int, quad bool, seed uint64) *testPolyNet {
	r := rand.New(rand.NewPCG(seed, 99))
	return &testPolyNet{d: d, in: in, quad: quad, w: randVec(r, d*in)}
}

func (n *testPolyNet) Arch() string      { return fmt.Sprintf("testpoly:%d-%d-%v", n.in, n.d, n.quad) }
func (n *testPolyNet) InDim() int        { return n.in }
func (n *testPolyNet) OutDim() int       { return n.d }
func (n *testPolyNet) NumParams() int    { return n.d * n.in }
func (n *testPolyNet) Params() []float64 { return n.w }

func (n *testPolyNet) NewWorkspace() *Workspace {
	ws := &Workspace{}
	n.cache.Store(ws, &testPolyCache{x: make([]float64, n.in), z: make([]float64, n.d)})
	return ws
}

func (n *testPolyNet) state(ws *Workspace) *testPolyCache {
	c, ok := n.cache.Load(ws)
	if !ok {
		panic("testPolyNet: foreign workspace")
	}
	return c.(*testPolyCache)
}

func (n *testPolyNet) zTo(z, x []float64) {
	for i := range z {
		z[i] = dot(n.w[i*n.in:(i+1)*n.in], x)
	}
}

func (n *testPolyNet) Forward(out, x []float64, ws *Workspace) {
	c := n.state(ws)
	copy(c.x, x)
	n.zTo(c.z, x)
	for i, z := range c.z {
		if n.quad {
			out[i] = z * z / 2
		} else {
			out[i] = z
		}
	}
}

func (n *testPolyNet) Backward(dst, w []float64, ws *Workspace) {
	c := n.state(ws)
	for a := 0; a < n.d; a++ {
		g := w[a]
		if n.quad {
			g *= c.z[a]
		}
		for b := 0; b < n.in; b++ {
			dst[a*n.in+b] = g * c.x[b]
		}
	}
}

// exact is the closed-form k*(x, y) above.
func (n *testPolyNet) exact(x, y []float64) float64 {
	if !n.quad {
		return dot(x, y)
	}
	zx, zy := make([]float64, n.d), make([]float64, n.d)
	n.zTo(zx, x)
	n.zTo(zy, y)
	return dot(x, y) * dot(zx, zy) / float64(n.d)
}

// crossDiag is the diagonal of M = J_x J_yᵀ (M is diagonal for both variants).
func (n *testPolyNet) crossDiag(x, y []float64) []float64 {
	zx, zy := make([]float64, n.d), make([]float64, n.d)
	n.zTo(zx, x)
	n.zTo(zy, y)
	m := make([]float64, n.d)
	for i := range m {
		m[i] = dot(x, y)
		if n.quad {
			m[i] *= zx[i] * zy[i]
		}
	}
	return m
}

// testHeadsNet adds a BackwardHeads to testPolyNet (one Backward per head) and counts its
// calls, to check that the sketch uses the multi-head path when it exists.
type testHeadsNet struct {
	*testPolyNet
	calls atomic.Int64
}

func (n *testHeadsNet) BackwardHeads(dst, w []float64, h int, ws *Workspace) {
	n.calls.Add(1)
	p, d := n.NumParams(), n.OutDim()
	for j := 0; j < h; j++ {
		n.Backward(dst[j*p:(j+1)*p], w[j*d:(j+1)*d], ws)
	}
}

// TestTestPolyNetFiniteDifferences checks the test backbone itself: (J_xᵀ w)_k must equal
// the derivative of w·f(θ) in θ_k. f is at most quadratic in θ, so the central difference
// is exact up to rounding (≈ ε·|f|/step = 1e-16·10/1e-3 ≈ 1e-12; tolerance 1e-8).
func TestTestPolyNetFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	for _, quad := range []bool{false, true} {
		n := newTestPolyNet(3, 5, quad, 1)
		x, w := randVec(r, 5), randVec(r, 3)
		ws := n.NewWorkspace()
		got := make([]float64, n.NumParams())
		VJP(n, got, x, w, ws)
		out := make([]float64, 3)
		wf := func() float64 {
			m := &testPolyNet{d: 3, in: 5, quad: quad, w: n.w}
			ws := m.NewWorkspace()
			m.Forward(out, x, ws)
			return dot(w, out)
		}
		const step = 1e-3
		for k := range n.w {
			orig := n.w[k]
			n.w[k] = orig + step
			fp := wf()
			n.w[k] = orig - step
			fm := wf()
			n.w[k] = orig
			if want := (fp - fm) / (2 * step); math.Abs(got[k]-want) > 1e-8 {
				t.Errorf("quad %v: (J_xᵀw)[%d] = %v, want %v", quad, k, got[k], want)
			}
		}
	}
}

func TestNewSketchRejects(t *testing.T) {
	n := newTestPolyNet(3, 5, true, 1) // P = 15, padded 16
	for _, c := range []struct{ h, s int }{{0, 4}, {-1, 4}, {2, -1}, {2, 17}} {
		if _, err := NewSketch(n, c.h, c.s, 1, "t"); !errors.Is(err, ErrSketchSize) {
			t.Errorf("NewSketch(h = %d, s = %d): got %v, want ErrSketchSize", c.h, c.s, err)
		}
	}
}

func TestSketchShape(t *testing.T) {
	n := newTestPolyNet(3, 5, true, 1)
	for _, c := range []struct{ h, s, dim int }{{1, 0, 15}, {4, 0, 60}, {2, 1, 2}, {3, 16, 48}} {
		sk, err := NewSketch(n, c.h, c.s, 1, "t")
		if err != nil {
			t.Fatal(err)
		}
		if sk.Dim() != c.dim || sk.H() != c.h || sk.S() != c.s || sk.PaddedP() != 16 || len(sk.Heads()) != c.h*3 {
			t.Errorf("h = %d, s = %d: Dim %d H %d S %d PaddedP %d len(Heads) %d; want %d, %d, %d, 16, %d",
				c.h, c.s, sk.Dim(), sk.H(), sk.S(), sk.PaddedP(), len(sk.Heads()), c.dim, c.h, c.s, 3*c.h)
		}
	}
}

// naiveFeatures computes ψ(x) from the sketch's public draw by the definition: for each
// head, the dense VJP J_xᵀ w_j from the closed form, then the dense S (or identity).
func naiveFeatures(n *testPolyNet, sk *Sketch, x []float64) []float64 {
	p, d := n.NumParams(), n.OutDim()
	ws := n.NewWorkspace()
	g := make([]float64, p)
	var out []float64
	var s []float64
	if sk.S() > 0 {
		s = denseSRHT(sk.SRHT())
	}
	for j := 0; j < sk.H(); j++ {
		VJP(n, g, x, sk.Heads()[j*d:(j+1)*d], ws)
		if s == nil {
			for _, v := range g {
				out = append(out, v/math.Sqrt(float64(sk.H())))
			}
			continue
		}
		for i := 0; i < sk.S(); i++ {
			out = append(out, dot(s[i*p:(i+1)*p], g)/math.Sqrt(float64(sk.H())))
		}
	}
	return out
}

// TestFeaturesMatchNaive checks ψ against the definition, and <ψ(x), ψ(y)> against
// (1/h) Σ_j <S J_xᵀ w_j, S J_yᵀ w_j> computed from the dense pieces.
func TestFeaturesMatchNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2))
	for _, quad := range []bool{false, true} {
		n := newTestPolyNet(3, 5, quad, 2)
		for _, c := range []struct{ h, s int }{{1, 0}, {3, 0}, {3, 1}, {3, 4}, {5, 11}, {2, 16}} {
			sk, err := NewSketch(n, c.h, c.s, 7, "fit")
			if err != nil {
				t.Fatal(err)
			}
			x, y := randVec(r, 5), randVec(r, 5)
			ws := sk.NewWorkspace()
			px, py := make([]float64, sk.Dim()), make([]float64, sk.Dim())
			sk.FeaturesTo(px, x, ws)
			sk.FeaturesTo(py, y, ws)
			wx, wy := naiveFeatures(n, sk, x), naiveFeatures(n, sk, y)
			for i := range px {
				if math.Abs(px[i]-wx[i]) > 1e-12*(1+math.Abs(wx[i])) {
					t.Fatalf("quad %v h %d s %d: ψ(x)[%d] = %v, want %v", quad, c.h, c.s, i, px[i], wx[i])
				}
			}
			// The naive kernel: (1/h) Σ_j <S g_j(x), S g_j(y)>, from unscaled per-head blocks.
			q := sk.Dim() / c.h
			var want float64
			for j := 0; j < c.h; j++ {
				want += dot(wx[j*q:(j+1)*q], wy[j*q:(j+1)*q]) * float64(c.h)
			}
			want /= float64(c.h)
			if got := dot(px, py); math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
				t.Errorf("quad %v h %d s %d: <ψ(x),ψ(y)> = %v, want %v", quad, c.h, c.s, got, want)
			}
		}
	}
}

func TestSketchDeterminism(t *testing.T) {
	n := newTestPolyNet(4, 6, true, 3)
	x := randVec(rand.New(rand.NewPCG(5, 3)), 6)
	feat := func(seed uint64, name string) []float64 {
		sk, err := NewSketch(n, 3, 8, seed, name)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, sk.Dim())
		sk.FeaturesTo(out, x, sk.NewWorkspace())
		return out
	}
	base := feat(1, "fit")
	if !slices.Equal(base, feat(1, "fit")) {
		t.Error("same seed and name gave different features")
	}
	for _, c := range []struct {
		seed uint64
		name string
	}{{1, "eval"}, {2, "fit"}, {1, "cli"}} {
		if slices.Equal(base, feat(c.seed, c.name)) {
			t.Errorf("seed %d name %q gave the same features as seed 1 name \"fit\"", c.seed, c.name)
		}
	}
	a, _ := NewSketch(n, 3, 8, 1, "fit")
	b, _ := NewSketch(n, 3, 8, 1, "eval")
	if slices.Equal(a.Heads(), b.Heads()) || slices.Equal(a.SRHT().Rows(), b.SRHT().Rows()) && slices.Equal(a.SRHT().Signs(), b.SRHT().Signs()) {
		t.Error("draws \"fit\" and \"eval\" share heads or SRHT")
	}
}

// TestSketchFullWidthEqualsUnsketched: the heads stream does not depend on s, and at s = P
// the SRHT is an exact rotation, so K_{h,P} equals K_{h,0} up to rounding.
func TestSketchFullWidthEqualsUnsketched(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 4))
	n := newTestPolyNet(3, 5, true, 4)
	const m = 4
	xs := randVec(r, m*5)
	k0, kp := make([]float64, m*m), make([]float64, m*m)
	s0, _ := NewSketch(n, 6, 0, 9, "eval")
	sp, _ := NewSketch(n, 6, 16, 9, "eval")
	s0.KernelTo(k0, xs, m)
	sp.KernelTo(kp, xs, m)
	for i := range k0 {
		if math.Abs(k0[i]-kp[i]) > 1e-12*(1+math.Abs(k0[i])) {
			t.Errorf("K[%d]: s = P gives %v, s = 0 gives %v", i, kp[i], k0[i])
		}
	}
}

// TestSketchConvergesToExact: without a sketch, K_{h,0}(x, y) = (1/h) Σ_j w_jᵀ M w_j with
// M = J_x J_yᵀ, an average of h i.i.d. terms of mean tr(M)/d = k*(x, y) and, by Prop.
// two-axis (output axis), variance 2||M̄||_F²/(h d²). M is diagonal here (see testPolyNet),
// so ||M̄||_F² = Σ M_ii². We require |K − k*| within 5 standard deviations, for h = 20000.
func TestSketchConvergesToExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, quad := range []bool{false, true} {
		n := newTestPolyNet(3, 5, quad, 5)
		const h, m = 20000, 3
		sk, err := NewSketch(n, h, 0, 11, "fit")
		if err != nil {
			t.Fatal(err)
		}
		xs := randVec(r, m*5)
		k := make([]float64, m*m)
		sk.KernelTo(k, xs, m)
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				x, y := xs[a*5:(a+1)*5], xs[b*5:(b+1)*5]
				diag := n.crossDiag(x, y)
				sd := math.Sqrt(2 * dot(diag, diag) / (h * 9))
				if want := n.exact(x, y); math.Abs(k[a*m+b]-want) > 5*sd {
					t.Errorf("quad %v: K(%d,%d) = %v, want k* = %v ± %v", quad, a, b, k[a*m+b], want, 5*sd)
				}
			}
		}
	}
}

// TestSketchUnbiased: over N independent draws (names "mc/i"), the mean of K_{h,s}(x, y)
// must be k*(x, y). The variance of one draw is bounded by eq. conservative-variance,
// 2||M̄||_F²/(h d²) + (P−s)/((P−1)s)·(2 + 4/h)·a·b/d² with a = ||J_x||_F², b = ||J_y||_F²
// (here a = tr(J_x J_xᵀ)); the tolerance is 5 times the standard error that this bound
// implies, so it is conservative.
func TestSketchUnbiased(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := newTestPolyNet(3, 5, true, 6)
	const h, s, N = 2, 4, 3000
	x, y := randVec(r, 5), randVec(r, 5)
	var sum float64
	px, py := make([]float64, h*s), make([]float64, h*s)
	for i := 0; i < N; i++ {
		sk, err := NewSketch(n, h, s, 3, fmt.Sprintf("mc/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ws := sk.NewWorkspace()
		sk.FeaturesTo(px, x, ws)
		sk.FeaturesTo(py, y, ws)
		sum += dot(px, py)
	}
	mean := sum / N
	mxy := n.crossDiag(x, y)
	var a, b float64
	for _, v := range n.crossDiag(x, x) {
		a += v
	}
	for _, v := range n.crossDiag(y, y) {
		b += v
	}
	const d, P = 3.0, 16.0
	bound := 2*dot(mxy, mxy)/(h*d*d) + (P-s)/((P-1)*s)*(2+4.0/h)*a*b/(d*d)
	if want, se := n.exact(x, y), math.Sqrt(bound/N); math.Abs(mean-want) > 5*se {
		t.Errorf("mean K_{h,s} = %v over %d draws, want k* = %v ± %v", mean, N, want, 5*se)
	}
}

func TestFeaturesBatchMatchesSingle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // several workers even on small machines
	r := rand.New(rand.NewPCG(5, 7))
	n := newTestPolyNet(3, 7, true, 7)
	sk, err := NewSketch(n, 3, 8, 1, "fit")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{0, 1, 3, 13} {
		xs := randVec(r, m*7)
		orig := slices.Clone(xs)
		got := make([]float64, m*sk.Dim())
		for rep := 0; rep < 2; rep++ { // the second call reuses the pooled workspaces
			sk.FeaturesBatchTo(got, xs, m)
			if !slices.Equal(xs, orig) {
				t.Fatal("FeaturesBatchTo modified xs")
			}
			ws := sk.NewWorkspace()
			want := make([]float64, sk.Dim())
			for i := 0; i < m; i++ {
				sk.FeaturesTo(want, xs[i*7:(i+1)*7], ws)
				if g := got[i*sk.Dim() : (i+1)*sk.Dim()]; !slices.Equal(g, want) {
					t.Fatalf("n = %d call %d row %d: batch %v, single %v", m, rep, i, g, want)
				}
			}
		}
	}
}

// TestFeaturesConcurrentBatches runs batches from several goroutines on one sketch (for
// the race detector) and checks each against the sequential result.
func TestFeaturesConcurrentBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	n := newTestPolyNet(3, 7, false, 8)
	sk, _ := NewSketch(n, 2, 4, 1, "fit")
	const m = 9
	xs := randVec(r, m*7)
	want := make([]float64, m*sk.Dim())
	sk.FeaturesBatchTo(want, xs, m)
	var wg sync.WaitGroup
	errs := make([]bool, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]float64, m*sk.Dim())
			sk.FeaturesBatchTo(got, xs, m)
			errs[g] = !slices.Equal(got, want)
		}()
	}
	wg.Wait()
	for g, bad := range errs {
		if bad {
			t.Errorf("goroutine %d: batch differs from the sequential result", g)
		}
	}
}

func TestFeaturesAllocs(t *testing.T) {
	n := newTestPolyNet(3, 7, true, 9)
	sk, _ := NewSketch(n, 3, 8, 1, "fit")
	x := randVec(rand.New(rand.NewPCG(5, 9)), 7)
	dst := make([]float64, sk.Dim())
	ws := sk.NewWorkspace()
	if a := testing.AllocsPerRun(10, func() { sk.FeaturesTo(dst, x, ws) }); a != 0 {
		t.Errorf("FeaturesTo allocates %v times per call, want 0", a)
	}
	// Per-call allocations of the batch (goroutines, the worker list) must not grow with n.
	allocs := func(m int) float64 {
		xs, out := make([]float64, m*7), make([]float64, m*sk.Dim())
		sk.FeaturesBatchTo(out, xs, m) // warm the workspace pool
		return testing.AllocsPerRun(10, func() { sk.FeaturesBatchTo(out, xs, m) })
	}
	if a4, a64 := allocs(4), allocs(64); a64 > a4 {
		t.Errorf("FeaturesBatchTo allocations grow with n: %v at n = 4, %v at n = 64", a4, a64)
	}
}

func TestFeaturesUseBackwardHeads(t *testing.T) {
	base := newTestPolyNet(3, 5, true, 10)
	hn := &testHeadsNet{testPolyNet: base}
	x := randVec(rand.New(rand.NewPCG(5, 10)), 5)
	for _, s := range []int{0, 8} {
		a, _ := NewSketch(base, 4, s, 2, "fit")
		b, _ := NewSketch(hn, 4, s, 2, "fit")
		fa, fb := make([]float64, a.Dim()), make([]float64, b.Dim())
		a.FeaturesTo(fa, x, a.NewWorkspace())
		before := hn.calls.Load()
		b.FeaturesTo(fb, x, b.NewWorkspace())
		if hn.calls.Load() != before+1 {
			t.Errorf("s = %d: BackwardHeads called %d times, want 1", s, hn.calls.Load()-before)
		}
		if !slices.Equal(fa, fb) {
			t.Errorf("s = %d: features with BackwardHeads %v, without %v", s, fb, fa)
		}
	}
}

func TestKernelToMatchesFeatures(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	n := newTestPolyNet(2, 4, true, 11)
	sk, _ := NewSketch(n, 3, 4, 5, "fit")
	const m = 5
	xs := randVec(r, m*4)
	k := make([]float64, m*m)
	sk.KernelTo(k, xs, m)
	ws := sk.NewWorkspace()
	fa, fb := make([]float64, sk.Dim()), make([]float64, sk.Dim())
	for a := 0; a < m; a++ {
		for b := 0; b < m; b++ {
			sk.FeaturesTo(fa, xs[a*4:(a+1)*4], ws)
			sk.FeaturesTo(fb, xs[b*4:(b+1)*4], ws)
			if want := dot(fa, fb); math.Abs(k[a*m+b]-want) > 1e-13*(1+math.Abs(want)) || k[a*m+b] != k[b*m+a] {
				t.Errorf("K[%d,%d] = %v (transpose %v), want %v", a, b, k[a*m+b], k[b*m+a], want)
			}
		}
	}
}

// crossJacobian returns M = J_x J_yᵀ (d×d) of a backbone from 2d VJPs with unit heads:
// M_ab = <J_xᵀ e_a, J_yᵀ e_b>. Slow and obviously correct.
func crossJacobian(b Backbone, x, y []float64) []float64 {
	d, p := b.OutDim(), b.NumParams()
	ws := b.NewWorkspace()
	jx, jy := make([]float64, d*p), make([]float64, d*p)
	e := make([]float64, d)
	for a := 0; a < d; a++ {
		e[a] = 1
		VJP(b, jx[a*p:(a+1)*p], x, e, ws)
		VJP(b, jy[a*p:(a+1)*p], y, e, ws)
		e[a] = 0
	}
	m := make([]float64, d*d)
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			m[a*d+c] = dot(jx[a*p:(a+1)*p], jy[c*p:(c+1)*p])
		}
	}
	return m
}

// TestSketchRealBackbones runs the sketch on the real architectures: batch equals
// per-example bit for bit; s = P equals s = 0 (exact rotation, same heads) to rounding; and
// at s = 0 with h = 4000 heads K_{h,0}(x, y) is within 5 standard deviations of
// k*(x, y) = tr(M)/d, M = J_x J_yᵀ from unit-head VJPs, the standard deviation being the
// output axis of Prop. two-axis, sqrt(2||M̄||_F²/(h d²)), M̄ = (M + Mᵀ)/2.
func TestSketchRealBackbones(t *testing.T) {
	for _, spec := range []string{"mlp:6-8-4", "resmlp:5-6x2-3", "convnet:2x6x6-3-4-3"} {
		t.Run(spec, func(t *testing.T) {
			b, err := NewBackbone(spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(6, 1))
			const m = 3
			in := b.InDim()
			xs := randVec(r, m*in)

			sk, err := NewSketch(b, 3, 16, 2, "fit")
			if err != nil {
				t.Fatal(err)
			}
			batch := make([]float64, m*sk.Dim())
			sk.FeaturesBatchTo(batch, xs, m)
			one := make([]float64, sk.Dim())
			ws := sk.NewWorkspace()
			for i := 0; i < m; i++ {
				sk.FeaturesTo(one, xs[i*in:(i+1)*in], ws)
				if !slices.Equal(one, batch[i*sk.Dim():(i+1)*sk.Dim()]) {
					t.Fatalf("row %d: batch differs from FeaturesTo", i)
				}
			}

			s0, _ := NewSketch(b, 3, 0, 2, "fit")
			sp, _ := NewSketch(b, 3, PaddedLen(b.NumParams()), 2, "fit")
			k0, kp := make([]float64, m*m), make([]float64, m*m)
			s0.KernelTo(k0, xs, m)
			sp.KernelTo(kp, xs, m)
			for i := range k0 {
				if math.Abs(k0[i]-kp[i]) > 1e-10*(1+math.Abs(k0[i])) {
					t.Errorf("K[%d]: s = P gives %v, s = 0 gives %v", i, kp[i], k0[i])
				}
			}

			const h = 4000
			big, _ := NewSketch(b, h, 0, 3, "fit")
			k := make([]float64, m*m)
			big.KernelTo(k, xs, m)
			d := b.OutDim()
			for a := 0; a < m; a++ {
				for c := 0; c < m; c++ {
					mm := crossJacobian(b, xs[a*in:(a+1)*in], xs[c*in:(c+1)*in])
					var tr, fro float64
					for i := 0; i < d; i++ {
						tr += mm[i*d+i]
						for j := 0; j < d; j++ {
							s := (mm[i*d+j] + mm[j*d+i]) / 2
							fro += s * s
						}
					}
					want := tr / float64(d)
					sd := math.Sqrt(2 * fro / (h * float64(d*d)))
					if math.Abs(k[a*m+c]-want) > 5*sd {
						t.Errorf("K(%d,%d) = %v, want k* = %v ± %v", a, c, k[a*m+c], want, 5*sd)
					}
				}
			}
		})
	}
}

// TestFeaturesBackwardHeadsChunks: with P just above 2^19, the multi-head buffer bound
// (2^21 floats) allows 3 heads per BackwardHeads call, so h = 7 takes calls of 3, 3 and 1
// heads; the features must equal the one-head-at-a-time path exactly.
func TestFeaturesBackwardHeadsChunks(t *testing.T) {
	base := newTestPolyNet(2, 1<<18+3, false, 12)
	hn := &testHeadsNet{testPolyNet: base}
	x := randVec(rand.New(rand.NewPCG(5, 12)), base.in)
	a, _ := NewSketch(base, 7, 0, 2, "fit")
	b, _ := NewSketch(hn, 7, 0, 2, "fit")
	if got := b.headsChunk(); got != 3 {
		t.Fatalf("headsChunk = %d, want 3", got)
	}
	fa, fb := make([]float64, a.Dim()), make([]float64, b.Dim())
	a.FeaturesTo(fa, x, a.NewWorkspace())
	b.FeaturesTo(fb, x, b.NewWorkspace())
	if c := hn.calls.Load(); c != 3 {
		t.Errorf("BackwardHeads called %d times, want 3", c)
	}
	if !slices.Equal(fa, fb) {
		t.Error("chunked BackwardHeads features differ from the one-head path")
	}
}

func ExampleNewSketch() {
	b, err := NewBackbone("mlp:6-8-4", 1) // P = 92 parameters, padded to 128
	if err != nil {
		panic(err)
	}
	sk, err := NewSketch(b, 4, 16, 1, "eval") // h = 4 heads, SRHT width s = 16
	if err != nil {
		panic(err)
	}
	x := []float64{0.1, -0.2, 0.3, 0.4, -0.5, 0.6}
	psi := make([]float64, sk.Dim())
	sk.FeaturesTo(psi, x, sk.NewWorkspace())
	fmt.Println("dim", sk.Dim(), "padded P", sk.PaddedP(), "rows kept", len(sk.SRHT().Rows()))
	// Output: dim 64 padded P 128 rows kept 16
}
