package entk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// queryCases straddle the ConvNet path's edges: odd spatial sizes (a floored pooling row
// and column), one and three conv layers, a first layer with several input channels, d = 1
// (the second half has no Jacobian row) and odd d (uneven halves), h = 1 (the second half
// has no head), s = 0 (no sketch); plus the generic path on mlp (with and without hidden
// layers) and resmlp. The MNIST convnet and mlp:30-40-5 use the pruned SRHT.
var queryCases = []struct {
	arch string
	h, s int
}{
	{"mlp:7-5-3", 4, 16},
	{"mlp:5-3", 3, 0},
	{"mlp:6-9-4-1", 1, 8},
	{"mlp:30-40-5", 4, 64}, // P = 1445: the pruned SRHT transforms 12 blocks of 128, not 2048
	{"resmlp:6-5x2-3", 4, 32},
	{"resmlp:4-3x1-2", 2, 0},
	{"convnet:1x28x28-16-32-10", 4, 1024},
	{"convnet:2x9x7-3-5-3", 3, 64},
	{"convnet:1x5x5-2-1", 1, 0},
	{"convnet:3x11x10-4-3-2-5", 2, 128},
	{"convnet:1x6x6-3-4", 5, 16},
}

// TestQueryMatchesReference checks FeaturesDiagTo against the two slow references it
// replaces, Sketch.FeaturesTo and ExactDiag, on several inputs in sequence with the same
// Query (so state left over from one call would show in the next), with and without the
// helper goroutine.
//
// Tolerance: both sides evaluate the same sums of products in a different order (the
// heads as Σ_i w_ji J_xᵀe_i instead of one backward pass with w_j; the diagonal's Linear
// part in closed form; im2col's adjoint gathered rather than scattered). Each entry is a
// sum of at most a few thousand float64 products, so the forward error is within
// γ_n·Σ|terms| ≈ 1e-13·Σ|terms| and, the networks being random with no systematic
// cancellation, within 1e-12 of the norm; the FWHT is orthogonal up to its √(P/s) scaling
// and does not amplify it. A wrong or missing term would instead be an O(1) relative error.
// The diagonal is a sum of squares (no cancellation), so the same 1e-12 bounds its
// relative error.
func TestQueryMatchesReference(t *testing.T) {
	const tol = 1e-12
	for _, tc := range queryCases {
		for _, split := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/h=%d/s=%d/split=%v", tc.arch, tc.h, tc.s, split), func(t *testing.T) {
				b, err := NewBackbone(tc.arch, 7)
				if err != nil {
					t.Fatal(err)
				}
				sk, err := NewSketch(b, tc.h, tc.s, 3, "eval")
				if err != nil {
					t.Fatal(err)
				}
				q := sk.NewQuery()
				q.split = split
				sws := sk.NewWorkspace()
				ws := b.NewWorkspace()
				r := rand.New(rand.NewPCG(1, 1))
				x := make([]float64, b.InDim())
				got := make([]float64, sk.Dim())
				want := make([]float64, sk.Dim())
				for trial := 0; trial < 4; trial++ {
					for i := range x {
						x[i] = r.NormFloat64()
					}
					xc := append([]float64(nil), x...)
					gotDiag := q.FeaturesDiagTo(got, x)
					if !floats.Equal(x, xc) {
						t.Fatalf("trial %d: FeaturesDiagTo modified x", trial)
					}
					sk.FeaturesTo(want, x, sws)
					wantDiag := ExactDiag(b, x, ws)
					diff := make([]float64, len(got))
					floats.SubTo(diff, got, want)
					if e, n := floats.Norm(diff, 2), floats.Norm(want, 2); !(e <= tol*n) {
						t.Errorf("trial %d: ||ψ − ψ_ref|| = %.3g, want ≤ %.0e·||ψ_ref|| = %.3g", trial, e, tol, tol*n)
					}
					if !(math.Abs(gotDiag-wantDiag) <= tol*wantDiag) || wantDiag <= 0 {
						t.Errorf("trial %d: k*(x,x) got %.17g, want %.17g (ExactDiag)", trial, gotDiag, wantDiag)
					}
				}
			})
		}
	}
}

// TestQueryDetectsWrongInput guards the test above against a vacuous pass: features and
// diagonal of a different input must differ from the reference by far more than its
// tolerance.
func TestQueryDetectsWrongInput(t *testing.T) {
	b, err := NewBackbone("convnet:2x9x7-3-5-3", 7)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSketch(b, 3, 64, 3, "eval")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	x, y := make([]float64, b.InDim()), make([]float64, b.InDim())
	for i := range x {
		x[i], y[i] = r.NormFloat64(), r.NormFloat64()
	}
	got, want := make([]float64, sk.Dim()), make([]float64, sk.Dim())
	kyy := sk.NewQuery().FeaturesDiagTo(got, y)
	sk.FeaturesTo(want, x, sk.NewWorkspace())
	kxx := ExactDiag(b, x, b.NewWorkspace())
	diff := make([]float64, len(got))
	floats.SubTo(diff, got, want)
	if e, n := floats.Norm(diff, 2), floats.Norm(want, 2); e < 1e-3*n {
		t.Errorf("ψ(y) vs ψ(x): relative difference %.3g, want ≫ 1e-12", e/n)
	}
	if math.Abs(kyy-kxx) < 1e-6*kxx {
		t.Errorf("k*(y,y) = %v vs k*(x,x) = %v: want different", kyy, kxx)
	}
}

// TestKernelRowTo compares KernelRowTo with the plain loop of its doc comment, within the
// error bound of a length-q dot product, γ_q·Σ_k|lf_k f_k| with γ_q = q·u/(1−q·u), u = 2^-53,
// for each side (so 2γ_q for their difference); and with one Dgemv over all rows, which it
// must equal bit for bit however it splits the rows. Sizes straddle rowSplitMin (600·64
// splits, 3·64 does not), make m/2 a multiple of four and not, q = 0, and lf longer than
// m·q.
func TestKernelRowTo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct{ m, q, extra int }{
		{0, 8, 0}, {1, 5, 0}, {3, 64, 7}, {600, 64, 0}, {513, 97, 97}, {2, 1 << 15, 0},
		{9, 1 << 13, 0}, {8, 1 << 13, 3}, {5, 0, 0},
	} {
		lf := make([]float64, tc.m*tc.q+tc.extra)
		f := make([]float64, tc.q)
		for i := range lf {
			lf[i] = r.NormFloat64()
		}
		for i := range f {
			f[i] = r.NormFloat64()
		}
		lfc, fc := append([]float64(nil), lf...), append([]float64(nil), f...)
		got := make([]float64, tc.m)
		for i := range got {
			got[i] = math.NaN() // every entry must be written
		}
		KernelRowTo(got, lf, f)
		if !floats.Equal(lf, lfc) || !floats.Equal(f, fc) {
			t.Fatalf("m=%d q=%d: KernelRowTo modified its inputs", tc.m, tc.q)
		}
		u := math.Ldexp(1, -53)
		gq := float64(tc.q) * u / (1 - float64(tc.q)*u)
		for l := range got {
			// Split or not, every entry is the unsplit dot of its row.
			if one := vec.Dot(lf[l*tc.q:(l+1)*tc.q], f); got[l] != one {
				t.Errorf("m=%d q=%d: dst[%d] = %v, want vec.Dot's %v", tc.m, tc.q, l, got[l], one)
			}
			row := lf[l*tc.q : (l+1)*tc.q]
			var sum, abs float64
			for k, v := range row {
				sum += v * f[k]
				abs += math.Abs(v * f[k])
			}
			if !(math.Abs(got[l]-sum) <= 2*gq*abs) {
				t.Errorf("m=%d q=%d: dst[%d] = %v, plain loop %v, beyond 2γ_q·Σ|·| = %.3g", tc.m, tc.q, l, got[l], sum, 2*gq*abs)
			}
		}
	}
}

// TestQueryAllocs checks that FeaturesDiagTo and KernelRowTo allocate nothing in steady
// state, on both paths and with the helper goroutine.
func TestQueryAllocs(t *testing.T) {
	for _, arch := range []string{"convnet:1x12x12-4-6-10", "mlp:20-16-10"} {
		b, err := NewBackbone(arch, 1)
		if err != nil {
			t.Fatal(err)
		}
		sk, err := NewSketch(b, 4, 64, 1, "eval")
		if err != nil {
			t.Fatal(err)
		}
		q := sk.NewQuery()
		x := make([]float64, b.InDim())
		for i := range x {
			x[i] = float64(i%7) / 7
		}
		dst := make([]float64, sk.Dim())
		if n := testing.AllocsPerRun(20, func() { q.FeaturesDiagTo(dst, x) }); n != 0 {
			t.Errorf("%s: FeaturesDiagTo allocates %v times per call, want 0", arch, n)
		}
	}
	lf, f, row := make([]float64, 512*128), make([]float64, 128), make([]float64, 512)
	if n := testing.AllocsPerRun(20, func() { KernelRowTo(row, lf, f) }); n != 0 {
		t.Errorf("KernelRowTo allocates %v times per call, want 0", n)
	}
}

// TestQueryConcurrent runs one Query per goroutine on a shared Sketch (the documented use);
// under -race it checks that the halves of one Query and different Queries share nothing
// writable.
func TestQueryConcurrent(t *testing.T) {
	b, err := NewBackbone("convnet:1x10x10-3-4-6", 5)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSketch(b, 3, 32, 5, "eval")
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, b.InDim())
	for i := range x {
		x[i] = math.Sin(float64(i))
	}
	want := make([]float64, sk.Dim())
	wantDiag := sk.NewQuery().FeaturesDiagTo(want, x)
	errs := make(chan string, 3)
	done := make(chan struct{})
	for g := 0; g < 3; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			q := sk.NewQuery()
			got := make([]float64, sk.Dim())
			for k := 0; k < 5; k++ {
				if d := q.FeaturesDiagTo(got, x); d != wantDiag || !floats.Equal(got, want) {
					errs <- fmt.Sprintf("goroutine result differs: diag %v vs %v", d, wantDiag)
					return
				}
			}
		}()
	}
	for g := 0; g < 3; g++ {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestSRHTPlan compares the pruned SRHT with SRHT.ApplyTo. Entry i of S v is
// (1/√s)·Σ_k ±v_k; both sides sum the same terms in different association orders (log₂P
// butterfly levels, resp. log₂B levels then at most P/B gathered terms, never more than
// log₂P + 1 rounded additions on a term's path, plus the final scaling), so each side is
// within (log₂P+1)·u·Σ_k|v_k|/√s of the exact value, u = 2^-53, and they differ by at most
// twice that. Sizes make the plan prune (nb·B < P) and not.
func TestSRHTPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	pruned := 0
	for _, tc := range []struct{ p, s int }{
		{3, 2}, {5, 8}, {100, 7}, {1000, 64}, {1025, 1}, {1025, 2048}, {5000, 512}, {20490, 1024}, {70000, 300},
	} {
		tr, err := NewSRHT(tc.p, tc.s, r)
		if err != nil {
			t.Fatal(err)
		}
		pl := newSRHTPlan(tr)
		if pl.nb<<pl.lb < tr.PaddedLen() {
			pruned++
		}
		v := make([]float64, tc.p)
		abs := 0.0
		for i := range v {
			v[i] = r.NormFloat64()
			abs += math.Abs(v[i])
		}
		want := make([]float64, tr.OutLen())
		got := make([]float64, tr.OutLen())
		work := make([]float64, tr.WorkLen())
		tr.ApplyTo(want, v, work)
		pl.applyScaledTo(got, v, work, 1)
		lg := math.Log2(float64(tr.PaddedLen()))
		tol := 2 * (lg + 1) * math.Ldexp(1, -53) * abs / math.Sqrt(float64(tc.s))
		for i := range got {
			if math.Abs(got[i]-want[i]) > tol {
				t.Errorf("p=%d s=%d (B=%d, nb=%d): [%d] got %v, want %v (tol %.3g)", tc.p, tc.s, 1<<pl.lb, pl.nb, i, got[i], want[i], tol)
				break
			}
		}
	}
	if pruned < 4 {
		t.Errorf("only %d cases pruned; the test no longer exercises the pruned path", pruned)
	}
}

// TestQueryConvForward checks that the row-split Forward of the ConvNet path leaves
// exactly (bit for bit) the caches and output of ConvNet.Forward: both compute every
// entry by the same operations in the same order, only on different goroutines.
func TestQueryConvForward(t *testing.T) {
	for _, arch := range []string{"convnet:1x28x28-16-32-10", "convnet:2x9x7-3-5-3", "convnet:3x11x10-4-3-2-5", "convnet:1x5x5-2-1", "convnet:1x2x3-2-2"} {
		for _, split := range []bool{true, false} {
			b, err := NewBackbone(arch, 9)
			if err != nil {
				t.Fatal(err)
			}
			sk, err := NewSketch(b, 2, 0, 9, "eval")
			if err != nil {
				t.Fatal(err)
			}
			n := b.(*ConvNet)
			q := sk.NewQuery()
			q.split = split
			r := rand.New(rand.NewPCG(5, 5))
			ref := b.NewWorkspace()
			got, want := make([]float64, b.OutDim()), make([]float64, b.OutDim())
			x := make([]float64, b.InDim())
			for trial := 0; trial < 3; trial++ {
				for i := range x {
					x[i] = r.NormFloat64()
				}
				ws := q.half[0].ws
				q.convForward(got, x, ws)
				n.Forward(want, x, ref)
				name := fmt.Sprintf("%s split=%v trial %d", arch, split, trial)
				if !floats.Same(got, want) {
					t.Errorf("%s: out %v, want %v", name, got, want)
				}
				for l := range n.convs {
					if !floats.Same(ws.pooled[l], ref.pooled[l]) || !floats.Same(ws.z[l], ref.z[l]) || !floats.Same(ws.cols[l], ref.cols[l]) {
						t.Errorf("%s: layer %d caches differ from ConvNet.Forward", name, l)
					}
					if fmt.Sprint(ws.actOut[l], ws.actPos[l]) != fmt.Sprint(ref.actOut[l], ref.actPos[l]) {
						t.Errorf("%s: layer %d active lists differ from ConvNet.Forward", name, l)
					}
				}
			}
		}
	}
}

// BenchmarkQueryConvnet times FeaturesDiagTo for the MNIST convnet at h = 4, s = 1024
// against what it replaces, FeaturesTo followed by ExactDiag on one goroutine, interleaved
// in the same loop so both see the same machine load; x_ref is the ratio of the two.
// "serial" runs the Query without its helper goroutine, which isolates the saving in work
// from the gain of the second core.
func BenchmarkQueryConvnet(b *testing.B) {
	for _, split := range []bool{true, false} {
		b.Run(fmt.Sprintf("split=%v", split), func(b *testing.B) {
			bb, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
			if err != nil {
				b.Fatal(err)
			}
			sk, err := NewSketch(bb, 4, 1024, 1, "eval")
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			x := make([]float64, bb.InDim())
			for i := range x {
				x[i] = r.Float64()
			}
			q := sk.NewQuery()
			q.split = split
			sws, ws := sk.NewWorkspace(), bb.NewWorkspace()
			dst, ref := make([]float64, sk.Dim()), make([]float64, sk.Dim())
			var tq, tr time.Duration
			var sink float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				sink += q.FeaturesDiagTo(dst, x)
				t1 := time.Now()
				sk.FeaturesTo(ref, x, sws)
				sink += ExactDiag(bb, x, ws)
				tr += time.Since(t1)
				tq += t1.Sub(t0)
			}
			b.ReportMetric(float64(tq.Microseconds())/1000/float64(b.N), "query-ms")
			b.ReportMetric(float64(tr.Microseconds())/1000/float64(b.N), "ref-ms")
			b.ReportMetric(float64(tq)/float64(tr), "x_ref")
			fwhtSink = sink + dst[0] + ref[0]
		})
	}
}
