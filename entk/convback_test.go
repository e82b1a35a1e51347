package entk

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// convHeadsArchs straddle the multi-column backward's edges: the MNIST convnet (the
// daemon's, whose SRHT is pruned), odd spatial sizes (a floored pooling row and column),
// one conv layer (its first layer is also the last, so it takes the rank-one path), three
// layers, several input channels, d = 1, and a map so small that some inputs leave no
// pooled output active.
var convHeadsArchs = []string{
	"convnet:1x28x28-16-32-10",
	"convnet:2x9x7-3-5-3",
	"convnet:3x11x10-4-3-2-5",
	"convnet:1x5x5-2-1",
	"convnet:1x6x6-3-4",
	"convnet:1x2x3-2-2",
}

// maxAbs is max_k |v_k|.
func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// TestConvNetBackwardHeads checks each row of BackwardHeads against Backward with the same
// head (the one-column sweep the multi-column one replaces), for several h on the same
// workspace and several inputs in sequence, so that scratch left over from another input
// or another h would show.
//
// Tolerance: both sides evaluate the same sums of products in another order (channel by
// channel; the first layer's weight gradient as dot products instead of axpys; im2col's
// adjoint gathered as a tree of nine instead of scattered). An entry is a sum of at most a
// few thousand products, so each side is within γ_n·Σ|terms| ≈ n·2^-53·Σ|terms| of the exact
// value; with random networks and no systematic cancellation Σ|terms| stays within a small
// factor of the row's largest entry, so 1e-12·max|row| bounds the difference with a wide
// margin. A wrong or missing term is an O(1) relative error.
func TestConvNetBackwardHeads(t *testing.T) {
	const tol = 1e-12
	for _, arch := range convHeadsArchs {
		t.Run(arch, func(t *testing.T) {
			bb, err := NewBackbone(arch, 3)
			if err != nil {
				t.Fatal(err)
			}
			n := bb.(*ConvNet)
			p, d := n.NumParams(), n.OutDim()
			r := rand.New(rand.NewPCG(8, 1))
			ws := n.NewWorkspace()
			out := make([]float64, d)
			want := make([]float64, p)
			for trial := 0; trial < 3; trial++ {
				x := randVec(r, n.InDim())
				n.Forward(out, x, ws)
				for _, h := range []int{4, 1, 3, 4, 7} {
					w := randVec(r, h*d)
					got := make([]float64, h*p)
					for i := range got {
						got[i] = math.NaN() // every entry must be written
					}
					n.BackwardHeads(got, w, h, ws)
					for j := 0; j < h; j++ {
						n.Backward(want, w[j*d:(j+1)*d], ws)
						g := got[j*p : (j+1)*p]
						bound := tol * (1 + maxAbs(want))
						for k := range want {
							if !(math.Abs(g[k]-want[k]) <= bound) {
								t.Fatalf("trial %d h %d head %d: param %d = %v, want %v (Backward; tol %.3g)", trial, h, j, k, g[k], want[k], bound)
							}
						}
					}
				}
			}
		})
	}
}

// refFeaturesTo is the slow reference for ψ on any backbone, the computation FeaturesTo
// replaced: per head j a full VJP (Forward and Backward) and the unpruned SRHT.ApplyTo,
// then the 1/√h scaling: dst[j·q:(j+1)·q] = h^{-1/2} · S · J_xᵀ w_j.
func refFeaturesTo(sk *Sketch, dst, x []float64) {
	b := sk.Backbone()
	p, d, q := b.NumParams(), b.OutDim(), sk.SRHT().OutLen()
	ws := b.NewWorkspace()
	g := make([]float64, p)
	work := make([]float64, sk.SRHT().WorkLen())
	c := 1 / math.Sqrt(float64(sk.H()))
	for j := 0; j < sk.H(); j++ {
		VJP(b, g, x, sk.Heads()[j*d:(j+1)*d], ws)
		blk := dst[j*q : (j+1)*q]
		sk.SRHT().ApplyTo(blk, g, work)
		for i := range blk {
			blk[i] *= c
		}
	}
}

// oldFeaturesTo is FeaturesTo as it was before BackwardHeads and the pruned SRHT: one
// Forward (for a ConvNet, oldConvForward, the Forward of that time), then per head one
// Backward and the full SRHT. It is the benchmark's baseline.
func oldFeaturesTo(sk *Sketch, dst, x []float64, ws *SketchWorkspace) {
	b := sk.b
	d, q := b.OutDim(), sk.srht.OutLen()
	c := 1 / math.Sqrt(float64(sk.h))
	if n, ok := b.(*ConvNet); ok {
		oldConvForward(n, ws.out, x, ws.bws)
	} else {
		b.Forward(ws.out, x, ws.bws)
	}
	g := ws.grad[:b.NumParams()]
	for j := 0; j < sk.h; j++ {
		b.Backward(g, sk.heads[j*d:(j+1)*d], ws.bws)
		sk.srht.applyScaledTo(dst[j*q:(j+1)*q], g, ws.work, c)
	}
}

// oldFeaturesBatchTo runs oldFeaturesTo over the rows of xs on len(wss) goroutines, as
// FeaturesBatchTo does.
func oldFeaturesBatchTo(sk *Sketch, dst, xs []float64, n int, wss []*SketchWorkspace) {
	q, in := sk.Dim(), sk.b.InDim()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, ws := range wss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				oldFeaturesTo(sk, dst[i*q:(i+1)*q], xs[i*in:(i+1)*in], ws)
			}
		}()
	}
	wg.Wait()
}

// TestFeaturesMatchReference checks ψ on ConvNets, where FeaturesTo takes BackwardHeads
// and the pruned SRHT, and on the dense backbones (pruned SRHT only), against
// refFeaturesTo, for several inputs in sequence
// on one workspace; h = 7 makes FeaturesTo call BackwardHeads with chunks of 4 and 3
// heads (maxHeadsChunk).
//
// Tolerance, relative to the largest entry of each head's block (entries of S g have the
// typical size ||g||₂/√s, and the largest exceeds it): (1) the head VJPs differ from
// Backward's by rounding only (TestConvNetBackwardHeads), and S maps an error vector e to
// entries of size about ||e||₂/√s, the same relative size; (2) the pruned transform and
// ApplyTo each are within (log₂P+1)·u·Σ_k|g_k|/√s of the exact entry (TestSRHTPlan),
// u = 2^-53, and Σ|g_k| ≤ √P·||g||₂ (Cauchy–Schwarz), so they differ by at most
// 2·16·1.1e-16·√(2^15) ≈ 6e-13 of the typical entry at P ≤ 2^15. Both fit in 1e-12·max.
// A wrong head, row or sign is an O(1) relative error.
func TestFeaturesMatchReference(t *testing.T) {
	const tol = 1e-12
	cases := []struct {
		arch string
		h, s int
	}{
		{"convnet:1x28x28-16-32-10", 4, 1024},
		{"convnet:1x28x28-16-32-10", 7, 64},
		{"convnet:1x28x28-16-32-10", 2, 0},
		{"convnet:2x9x7-3-5-3", 3, 64},
		{"convnet:3x11x10-4-3-2-5", 5, 128},
		{"convnet:1x5x5-2-1", 1, 0},
		{"convnet:1x6x6-3-4", 4, 16},
		{"mlp:30-40-5", 4, 64}, // dense: no BackwardHeads; P = 1445, the SRHT is pruned
		{"mlp:7-5-3", 3, 16},
		{"resmlp:6-5x2-3", 4, 32},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/h=%d/s=%d", tc.arch, tc.h, tc.s), func(t *testing.T) {
			b, err := NewBackbone(tc.arch, 5)
			if err != nil {
				t.Fatal(err)
			}
			sk, err := NewSketch(b, tc.h, tc.s, 9, "fit")
			if err != nil {
				t.Fatal(err)
			}
			if _, conv := b.(*ConvNet); conv != (sk.hb != nil) {
				t.Fatalf("the sketch uses BackwardHeads: %v, want %v", sk.hb != nil, conv)
			}
			r := rand.New(rand.NewPCG(8, 2))
			ws := sk.NewWorkspace()
			got, want := make([]float64, sk.Dim()), make([]float64, sk.Dim())
			q := sk.SRHT().OutLen()
			for trial := 0; trial < 3; trial++ {
				x := randVec(r, b.InDim())
				sk.FeaturesTo(got, x, ws)
				refFeaturesTo(sk, want, x)
				for j := 0; j < tc.h; j++ {
					g, w := got[j*q:(j+1)*q], want[j*q:(j+1)*q]
					bound := tol * (1e-300 + maxAbs(w))
					for i := range w {
						if !(math.Abs(g[i]-w[i]) <= bound) {
							t.Fatalf("trial %d head %d: ψ[%d] = %v, want %v (tol %.3g)", trial, j, j*q+i, g[i], w[i], bound)
						}
					}
				}
			}
		})
	}
}

// TestFeaturesConvnetDeterministic: a row of FeaturesBatchTo is bit for bit FeaturesTo of
// that row on a fresh workspace, whatever the batch size, the row's position in it and what
// the workspaces computed before (the daemon caches ψ by fingerprint and relies on this).
func TestFeaturesConvnetDeterministic(t *testing.T) {
	b, err := NewBackbone("convnet:2x9x7-3-5-3", 4)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSketch(b, 4, 64, 2, "fit")
	if err != nil {
		t.Fatal(err)
	}
	in, q := b.InDim(), sk.Dim()
	r := rand.New(rand.NewPCG(8, 3))
	const n = 9
	xs := randVec(r, n*in)
	single := make([]float64, n*q)
	for i := 0; i < n; i++ {
		sk.FeaturesTo(single[i*q:(i+1)*q], xs[i*in:(i+1)*in], sk.NewWorkspace())
	}
	for _, m := range []int{n, 1, 4} {
		for off := 0; off+m <= n; off += m {
			got := make([]float64, m*q)
			sk.FeaturesBatchTo(got, xs[off*in:(off+m)*in], m)
			if !slices.Equal(got, single[off*q:(off+m)*q]) {
				t.Errorf("batch of %d rows from row %d differs from FeaturesTo", m, off)
			}
		}
	}
	// Reversed order on one workspace: each row's history differs.
	ws := sk.NewWorkspace()
	one := make([]float64, q)
	for i := n - 1; i >= 0; i-- {
		sk.FeaturesTo(one, xs[i*in:(i+1)*in], ws)
		if !slices.Equal(one, single[i*q:(i+1)*q]) {
			t.Errorf("row %d after rows %d..%d on one workspace differs from a fresh workspace", i, i+1, n-1)
		}
	}
}

// TestFeaturesConvnetAllocs: FeaturesTo on a ConvNet allocates nothing, from the first
// call on a new workspace (the BackwardHeads scratch is made by NewWorkspace), also when
// the heads come in two chunk sizes.
func TestFeaturesConvnetAllocs(t *testing.T) {
	for _, h := range []int{4, 7} {
		b, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
		if err != nil {
			t.Fatal(err)
		}
		sk, err := NewSketch(b, h, 64, 1, "fit")
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(rand.New(rand.NewPCG(8, 4)), b.InDim())
		dst := make([]float64, sk.Dim())
		ws := sk.NewWorkspace()
		if a := testing.AllocsPerRun(2, func() { sk.FeaturesTo(dst, x, ws) }); a != 0 {
			t.Errorf("h = %d: FeaturesTo allocates %v times per call, want 0", h, a)
		}
	}
}

// TestConvNetBackwardHeadsPanics: wrong lengths and h < 1 are programmer errors.
func TestConvNetBackwardHeadsPanics(t *testing.T) {
	b, _ := NewBackbone("convnet:1x6x6-3-4", 1)
	n := b.(*ConvNet)
	p, d := n.NumParams(), n.OutDim()
	ws := n.NewWorkspace()
	n.Forward(make([]float64, d), make([]float64, n.InDim()), ws)
	for _, c := range []struct {
		name    string
		dst, w  int
		h       int
		panicky bool
	}{
		{"ok", 2 * p, 2 * d, 2, false},
		{"short dst", 2*p - 1, 2 * d, 2, true},
		{"short w", 2 * p, 2*d - 1, 2, true},
		{"h = 0", 0, 0, 0, true},
	} {
		func() {
			defer func() {
				if got := recover() != nil; got != c.panicky {
					t.Errorf("%s: panicked %v, want %v", c.name, got, c.panicky)
				}
			}()
			n.BackwardHeads(make([]float64, c.dst), make([]float64, c.w), c.h, ws)
		}()
	}
}

// stridedPlanApply is srhtPlan.applyScaledTo as it was before the block-major loop and the
// short last block: all nb blocks transformed in full, then each kept row gathered from
// them at a stride of B.
func stridedPlanApply(pl *srhtPlan, dst, v, work []float64, c float64) {
	t := pl.t
	B := 1 << pl.lb
	u := work[:pl.nb*B]
	for k, x := range v {
		u[k] = t.signs[k] * x
	}
	clear(u[len(v):])
	for j := 0; j < pl.nb; j++ {
		fwht(u[j*B:(j+1)*B], 1)
	}
	c /= math.Sqrt(float64(t.s))
	for i, r := range t.rows {
		rh, rl := r>>pl.lb, r&(B-1)
		s := 0.0
		for j := 0; j < pl.nb; j++ {
			sg := 1 - 2*float64(bits.OnesCount(uint(j&rh))&1)
			s += sg * u[j*B+rl]
		}
		dst[i] = c * s
	}
}

// TestSRHTPlanSameAsStrided: the block-major srhtPlan gives exactly (==) the values of the
// strided loop it replaced, so Query's ψ is unchanged. Exact because each output is the
// same chain of additions: a butterfly stage that pairs an entry with a zero of the padded
// last block only copies or negates it (x ± 0 = x, 0 − x = −x exactly), and negation
// commutes with rounding, so transforming the T-entry prefix of that block gives the same
// values as transforming all B entries. (Equality with ==, which does not tell +0 from −0.)
func TestSRHTPlanSameAsStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 5))
	short := 0
	for _, tc := range []struct{ p, s int }{
		{20490, 1024}, {1445, 64}, {5000, 512}, {70000, 300}, {1025, 1}, {100, 7}, {2049, 64}, {3 * 2048, 100},
	} {
		tr, err := NewSRHT(tc.p, tc.s, r)
		if err != nil {
			t.Fatal(err)
		}
		pl := newSRHTPlan(tr)
		if pl.nb<<pl.lb == tr.PaddedLen() {
			continue // not pruned: both take SRHT.applyScaledTo
		}
		if pl.tail < 1<<pl.lb {
			short++
		}
		v := randVec(r, tc.p)
		got, want := make([]float64, tc.s), make([]float64, tc.s)
		work := make([]float64, tr.WorkLen())
		pl.applyScaledTo(got, v, work, 0.7)
		for i := range work {
			work[i] = math.NaN() // the plan must not read stale work
		}
		stridedPlanApply(&pl, want, v, make([]float64, tr.WorkLen()), 0.7)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("p=%d s=%d (B=%d, nb=%d, T=%d): [%d] got %v, want %v", tc.p, tc.s, 1<<pl.lb, pl.nb, pl.tail, i, got[i], want[i])
				break
			}
		}
		pl.applyScaledTo(got, v, work, 0.7) // NaN-filled work
		if !slices.Equal(got, want) {
			t.Errorf("p=%d s=%d: result depends on the work buffer's contents", tc.p, tc.s)
		}
	}
	if short < 2 {
		t.Errorf("only %d cases have a short last block; the test no longer exercises it", short)
	}
}

// TestReluPoolTies checks reluPoolTo's branch-free selection against the chain of strict
// comparisons it replaced (the first maximum in window order wins), on pre-activations
// drawn from {−2, −1, −0, 0, 1, 2} so that most windows hold ties, and on odd sizes (the
// floored row and column must be ignored).
func TestReluPoolTies(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 6))
	vals := []float64{-2, -1, math.Copysign(0, -1), 0, 1, 2}
	for _, c := range []convLayer{
		{cout: 3, h: 6, w: 6, hp: 3, wp: 3},
		{cout: 5, h: 7, w: 5, hp: 3, wp: 2},
		{cout: 1, h: 2, w: 2, hp: 1, wp: 1},
	} {
		z := make([]float64, c.h*c.w*c.cout)
		for trial := 0; trial < 20; trial++ {
			for i := range z {
				z[i] = vals[r.IntN(len(vals))]
			}
			Q := c.hp * c.wp
			got := make([]float64, c.cout*Q)
			outs, poss := c.reluPoolTo(got, nil, nil, z)
			want := make([]float64, c.cout*Q)
			var wOuts, wPoss []int32
			for q := 0; q < Q; q++ {
				qy, qx := q/c.wp, q%c.wp
				p0 := 2*qy*c.w + 2*qx
				for ch := 0; ch < c.cout; ch++ {
					best, bp := z[p0*c.cout+ch], p0
					for _, p := range []int{p0 + 1, p0 + c.w, p0 + c.w + 1} {
						if v := z[p*c.cout+ch]; v > best {
							best, bp = v, p
						}
					}
					if best > 0 {
						want[ch*Q+q] = best
						wOuts = append(wOuts, int32(ch*Q+q))
						wPoss = append(wPoss, int32(bp))
					}
				}
			}
			if !slices.Equal(got, want) || !slices.Equal(outs, wOuts) || !slices.Equal(poss, wPoss) {
				t.Fatalf("%dx%dx%d trial %d: pooled %v outs %v poss %v; want %v %v %v", c.cout, c.h, c.w, trial, got, outs, poss, want, wOuts, wPoss)
			}
		}
	}
}

// oldConvForward is ConvNet.Forward before the unrolled first-layer convolution and the
// branch-free pooling (the same values bit for bit, see TestOldConvForward), for the
// benchmark's baseline.
func oldConvForward(n *ConvNet, out, x []float64, ws *Workspace) {
	in := x
	for l := range n.convs {
		c := &n.convs[l]
		im2colTo(ws.cols[l], in, c.cin, c.h, c.w)
		if c.k < 16 {
			np, K := c.h*c.w, c.k
			z, cols := ws.z[l], ws.cols[l]
			for p := 0; p < np; p++ {
				copy(z[p*c.cout:(p+1)*c.cout], c.b)
			}
			for p := 0; p < np; p++ {
				row := cols[p*K : (p+1)*K]
				zr := z[p*c.cout : (p+1)*c.cout]
				for ch := range zr {
					w := c.wt[ch*K : (ch+1)*K]
					s := zr[ch]
					for k, v := range row {
						s += v * w[k]
					}
					zr[ch] = s
				}
			}
		} else {
			np := c.h * c.w
			for p := 0; p < np; p++ {
				copy(ws.z[l][p*c.cout:(p+1)*c.cout], c.b)
			}
			c.convAccPortableTo(ws.z[l], ws.cols[l], 0, np)
		}
		ws.actOut[l], ws.actPos[l] = oldReluPoolTo(c, ws.pooled[l], ws.actOut[l][:0], ws.actPos[l][:0], ws.z[l])
		in = ws.pooled[l]
	}
	n.fc.forwardTo(out, in)
	ws.cached = true
}

// oldReluPoolTo is reluPoolTo as the chain of strict comparisons.
func oldReluPoolTo(c *convLayer, pooled []float64, outs, poss []int32, z []float64) ([]int32, []int32) {
	Q, C := c.hp*c.wp, c.cout
	for qy := 0; qy < c.hp; qy++ {
		for qx := 0; qx < c.wp; qx++ {
			q := qy*c.wp + qx
			p0 := 2*qy*c.w + 2*qx
			p1, p2, p3 := p0+1, p0+c.w, p0+c.w+1
			z0, z1 := z[p0*C:(p0+1)*C], z[p1*C:(p1+1)*C]
			z2, z3 := z[p2*C:(p2+1)*C], z[p3*C:(p3+1)*C]
			for ch := 0; ch < C; ch++ {
				best, bp := z0[ch], p0
				if v := z1[ch]; v > best {
					best, bp = v, p1
				}
				if v := z2[ch]; v > best {
					best, bp = v, p2
				}
				if v := z3[ch]; v > best {
					best, bp = v, p3
				}
				o := ch*Q + q
				if best > 0 {
					pooled[o] = best
					outs = append(outs, int32(o))
					poss = append(poss, int32(bp))
				} else {
					pooled[o] = 0
				}
			}
		}
	}
	return outs, poss
}

// TestOldConvForward: the benchmark's baseline Forward leaves the same output and caches,
// bit for bit, as ConvNet.Forward without the assembly kernels (same operations in the
// same order).
func TestOldConvForward(t *testing.T) {
	defer portable()()
	for _, arch := range convHeadsArchs {
		b, err := NewBackbone(arch, 2)
		if err != nil {
			t.Fatal(err)
		}
		n := b.(*ConvNet)
		x := randVec(rand.New(rand.NewPCG(8, 7)), n.InDim())
		w1, w2 := n.NewWorkspace(), n.NewWorkspace()
		o1, o2 := make([]float64, n.OutDim()), make([]float64, n.OutDim())
		n.Forward(o1, x, w1)
		oldConvForward(n, o2, x, w2)
		if !slices.Equal(o1, o2) {
			t.Errorf("%s: output %v, want %v", arch, o2, o1)
		}
		for l := range n.convs {
			if !slices.Equal(w1.z[l], w2.z[l]) || !slices.Equal(w1.pooled[l], w2.pooled[l]) ||
				!slices.Equal(w1.actOut[l], w2.actOut[l]) || !slices.Equal(w1.actPos[l], w2.actPos[l]) {
				t.Errorf("%s: layer %d caches differ", arch, l)
			}
		}
	}
}
