package entk

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// Query is the per-query hot path of a served answer: for one input x it computes the
// sketched features ψ(x) of its Sketch and the exact diagonal k*(x, x) = ||J_x||_F²/d
// (paper eq. composed and, for the diagonal, the conservative variance bound
// eq. conservative-variance, which needs it exactly).
//
// Both come from the same Jacobian: ψ's head VJPs are J_xᵀw_j and the diagonal is
// (1/d) Σ_i ||J_xᵀe_i||². Query shares one Forward between them and splits the backward
// work over the caller's goroutine and at most one helper goroutine (when GOMAXPROCS > 1),
// which it joins before FeaturesDiagTo returns.
//
//   - ConvNet: one Forward, then all d rows J_xᵀe_i of the convolutional part in one
//     multi-column backward sweep (rank-one updates of d×K blocks, the columns split between
//     the two goroutines), the heads as J_xᵀw_j = Σ_i w_ji J_xᵀe_i (an h×d by d×P_conv
//     product) and the Linear head's part in closed form (J_xᵀe_i restricted to the Linear
//     is e_i ⊗ a_L, so its share of ||J_x||_F² is d(||a_L||² + 1)). The d backward rows
//     thus replace d + h backward passes and one Forward replaces two.
//   - Other backbones (mlp, resmlp): each goroutine runs its own Forward and its share of the
//     h head VJPs and d unit VJPs through Backbone.Backward. For dense layers a backward
//     pass costs about 2P multiply–adds, less than forming h combinations of d rows (h·d·P),
//     so the head VJPs are computed directly, exactly as FeaturesTo does.
//
// The SRHT of each head transforms only the blocks that hold parameters and evaluates only
// the s kept rows (srhtPlan). ψ equals FeaturesTo's up to rounding (the same sums in
// another order: Σ_i w_ji J_xᵀe_i, the pruned transform) and k*(x, x) equals ExactDiag's
// up to rounding; neither is approximated.
//
// A Query is not safe for concurrent use: make one per goroutine with Sketch.NewQuery. In
// steady state FeaturesDiagTo allocates nothing.
type Query struct {
	sk    *Sketch // nil for an exact-only Query (NewExactQuery)
	b     Backbone
	split bool // use a helper goroutine (GOMAXPROCS > 1 when the Query was made)
	c     float64
	plan  srhtPlan
	half  [2]*queryHalf
	conv  *convQuery // non-nil for a ConvNet backbone

	// ExactTo's sizes, fixed by the backbone: len φ, the final Linear's input width A and
	// the body parameter count P − d·A − d.
	exDim, exA, exBody int

	// The helper goroutine runs helperFn (built once, so that starting it allocates
	// nothing), which reads the current call's arguments below and runs half[1] if it
	// claims it first; otherwise the caller's goroutine runs it.
	wg       sync.WaitGroup
	claim    atomic.Bool
	helperFn func()
	phase    int
	dst, x   []float64
	fwdIn    []float64 // input of the conv layer fwdLayer (phaseConvForward)
	fwdLayer int
}

// queryHalf is the scratch of one of the two goroutines of a Query.
type queryHalf struct {
	ws   *Workspace // backbone workspace (generic path: each half runs its own Forward)
	out  []float64  // f(x), len d
	grad []float64  // one VJP, len P
	work []float64  // SRHT scratch
	unit []float64  // e_i, len d
	sq   float64    // this half's share of Σ_i ||J_xᵀe_i||²

	// job ranges: heads [h0, h1) and unit vectors (Jacobian rows) [i0, i1); ExactTo's
	// unit vectors on the generic path [e0, e1)
	h0, h1, i0, i1, e0, e1 int

	// ConvNet path, per conv layer l: dcols[l] (l ≥ 1) holds the input-patch gradients of
	// this half's columns, position-major (np × m × K); gp[l] (l < L−1) the gradients of
	// layer l's pooled outputs for this half's columns (output-major, nq × m).
	dcols, gp [][]float64
	// backwardCols's term lists for accGatherTo (offsets into the gradient columns, and
	// rows of cols or of W), long enough for any channel's or window's actives.
	goffs, grows []int32
	// ConvNet Forward, per conv layer: the active pooled outputs of this half's rows and
	// their window maxima, concatenated into the workspace after the layer.
	fact, fpos [][]int32
}

// NewQuery allocates the scratch of FeaturesDiagTo. It decides once, from GOMAXPROCS,
// whether calls use a helper goroutine.
func (sk *Sketch) NewQuery() *Query { return newQuery(sk.b, sk, runtime.GOMAXPROCS(0) > 1) }

// NewExactQuery allocates a Query without a sketch, for ExactTo only (FeaturesDiagTo
// panics on it). It uses a helper goroutine per call when GOMAXPROCS > 1.
func NewExactQuery(b Backbone) *Query { return newQuery(b, nil, runtime.GOMAXPROCS(0) > 1) }

// newQuery builds a Query for b with sketch sk (nil: exact rows only).
func newQuery(b Backbone, sk *Sketch, split bool) *Query {
	d, p := b.OutDim(), b.NumParams()
	heads, workLen := 0, 0
	q := &Query{sk: sk, b: b, split: split, exA: lastInDim(b)}
	q.exBody = p - d*q.exA - d
	q.exDim = d*q.exBody + q.exA + 1
	if sk != nil {
		heads, workLen = sk.h, sk.srht.WorkLen()
		q.c = 1 / math.Sqrt(float64(sk.h))
		q.plan = newSRHTPlan(sk.srht)
	}
	for k := range q.half {
		q.half[k] = &queryHalf{
			out:  make([]float64, d),
			grad: make([]float64, p),
			work: make([]float64, workLen),
			unit: make([]float64, d),
		}
	}
	// Heads are split evenly; so are the Jacobian rows.
	hm, dm := (heads+1)/2, (d+1)/2
	q.half[0].h0, q.half[0].h1, q.half[1].h0, q.half[1].h1 = 0, hm, hm, heads
	q.half[0].i0, q.half[0].i1, q.half[1].i0, q.half[1].i1 = 0, dm, dm, d
	q.half[0].e0, q.half[0].e1, q.half[1].e0, q.half[1].e1 = 0, dm, dm, d
	if n, ok := b.(*ConvNet); ok {
		q.conv = newConvQuery(n)
		for _, h := range q.half {
			q.conv.initHalf(h)
		}
		q.half[0].ws = b.NewWorkspace() // the one Forward
	} else {
		// The generic path balances the h + d backward passes by count: half 0 takes the
		// first ⌈(h+d)/2⌉ of the sequence heads, then units.
		n0 := (heads + d + 1) / 2
		h0 := min(n0, heads)
		q.half[0].h0, q.half[0].h1 = 0, h0
		q.half[1].h0, q.half[1].h1 = h0, heads
		q.half[0].i0, q.half[0].i1 = 0, n0-h0
		q.half[1].i0, q.half[1].i1 = n0-h0, d
		for _, h := range q.half {
			h.ws = b.NewWorkspace()
		}
	}
	q.helperFn = func() {
		defer q.wg.Done()
		if q.claim.CompareAndSwap(false, true) {
			q.runHalf(1)
		}
	}
	return q
}

// FeaturesDiagTo writes ψ(x) into dst (len sk.Dim()) and returns k*(x, x) = ||J_x||_F²/d.
// x (len InDim) is not modified. It panics on wrong lengths.
func (q *Query) FeaturesDiagTo(dst, x []float64) (kxx float64) {
	sk := q.sk
	if sk == nil {
		panic("entk: FeaturesDiagTo on an exact-only Query (NewExactQuery)")
	}
	if len(dst) != sk.Dim() || len(x) != sk.b.InDim() {
		panic(fmt.Sprintf("entk: Query.FeaturesDiagTo lengths dst %d, x %d; want %d, %d",
			len(dst), len(x), sk.Dim(), sk.b.InDim()))
	}
	q.dst, q.x = dst, x
	defer func() { q.dst, q.x = nil, nil }()
	d := float64(sk.b.OutDim())
	if q.conv == nil {
		q.phase = phaseGeneric
		q.both()
		return (q.half[0].sq + q.half[1].sq) / d
	}
	cq, h0 := q.conv, q.half[0]
	q.convRows(x)
	q.phase = phaseConvHeads
	q.both()
	a := h0.ws.pooled[len(cq.n.convs)-1]
	fcSq := d * (floats.Dot(a, a) + 1)
	return (q.half[0].sq + q.half[1].sq + fcSq) / d
}

// convRows runs the ConvNet's one Forward of x and the backward sweep that leaves the d
// Jacobian rows of the conv parameters in q.conv.jw, jb (both halves).
func (q *Query) convRows(x []float64) {
	h0 := q.half[0]
	q.convForward(h0.out, x, h0.ws)
	q.conv.groupByChannel(h0.ws)
	q.phase = phaseConvBackward
	q.both()
}

const (
	phaseGeneric = iota
	phaseConvForward
	phaseConvBackward
	phaseConvHeads
	phaseGenericExact
)

// both runs the current phase's two halves, half 1 on the helper goroutine when split.
func (q *Query) both() {
	if !q.split {
		q.runHalf(0)
		q.runHalf(1)
		return
	}
	q.claim.Store(false)
	q.wg.Add(1)
	go q.helperFn()
	q.runHalf(0)
	if q.claim.CompareAndSwap(false, true) {
		// The helper has not started (on a loaded machine its thread may wait for a
		// core): run its half here rather than wait for it; it will find nothing to do.
		q.runHalf(1)
	}
	q.wg.Wait()
}

func (q *Query) runHalf(k int) {
	h := q.half[k]
	switch q.phase {
	case phaseGeneric:
		q.genericHalf(h)
	case phaseConvForward:
		q.conv.forwardHalf(h, k, q.half[0].ws, q.fwdIn, q.fwdLayer)
	case phaseConvBackward:
		q.conv.backwardHalf(h, q.half[0].ws)
	case phaseConvHeads:
		q.convHeadsHalf(h)
	case phaseGenericExact:
		q.genericExactHalf(h)
	}
}

// genericHalf runs one Forward on h's workspace, then its heads (ψ blocks, exactly as
// FeaturesTo) and its unit vectors (the diagonal's terms ||J_xᵀe_i||², as ExactDiag).
func (q *Query) genericHalf(h *queryHalf) {
	sk := q.sk
	b := sk.b
	d, qq := b.OutDim(), sk.srht.OutLen()
	h.sq = 0
	if h.h0 == h.h1 && h.i0 == h.i1 {
		return
	}
	b.Forward(h.out, q.x, h.ws)
	for j := h.h0; j < h.h1; j++ {
		b.Backward(h.grad, sk.heads[j*d:(j+1)*d], h.ws)
		q.plan.applyScaledTo(q.dst[j*qq:(j+1)*qq], h.grad, h.work, q.c)
	}
	e := h.unit
	clear(e)
	for i := h.i0; i < h.i1; i++ {
		e[i] = 1
		b.Backward(h.grad, e, h.ws)
		e[i] = 0
		h.sq += floats.Dot(h.grad, h.grad)
	}
}

// convHeadsHalf assembles h's heads J_xᵀw_j from the Jacobian rows and sketches them:
//
//	conv weights, per layer and channel c:  g[wOff+c·K+k] = Σ_i w_ji · jw[c][i][k]
//	conv biases:                            g[bOff+c]     = Σ_i w_ji · jb[c][i]
//	Linear (weight [d, in], bias):          g = w_j ⊗ a_L, w_j       (paramGradTo)
//
// then dst block j = h^{-1/2} S g.
func (q *Query) convHeadsHalf(h *queryHalf) {
	sk, cq := q.sk, q.conv
	n := cq.n
	d, qq := cq.d, sk.srht.OutLen()
	impl := blas64.Implementation()
	ws := q.half[0].ws
	for j := h.h0; j < h.h1; j++ {
		w := sk.heads[j*d : (j+1)*d]
		g := h.grad
		for l := range n.convs {
			c := &n.convs[l]
			K := c.k
			jw, jb := cq.jw[l], cq.jb[l]
			for ch := 0; ch < c.cout; ch++ {
				impl.Dgemv(blas.Trans, d, K, 1, jw[ch*d*K:(ch+1)*d*K], K, w, 1, 0, g[c.wOff+ch*K:c.wOff+(ch+1)*K], 1)
				g[c.bOff+ch] = floats.Dot(w, jb[ch*d:(ch+1)*d])
			}
		}
		n.fc.paramGradTo(g, w, ws.pooled[len(n.convs)-1])
		q.plan.applyScaledTo(q.dst[j*qq:(j+1)*qq], g, h.work, q.c)
	}
}

// convQuery is the ConvNet part of a Query: the Jacobian rows of the convolutional
// parameters, shared by the two halves (each writes only its own rows), and the active
// pooled outputs of the last Forward grouped by channel.
type convQuery struct {
	n *ConvNet
	d int
	// Per conv layer l: jw[l] holds, for each output channel c, the d×K block
	// jw[l][(c·d+i)·K + k] = (J_xᵀe_i)[wOff + c·K + k], and jb[l][c·d+i] = (J_xᵀe_i)[bOff+c].
	jw, jb [][]float64
	// Per conv layer l, for the Forward of the current call: byCh[l] lists the indices into
	// ws.actOut[l] ordered by channel (a stable counting sort), channel c occupying ranks
	// chStart[l][c] ≤ r < chStart[l][c+1], and rank[l][idx] is the rank of index idx. Working
	// channel by channel keeps a channel's d×K block in L1 while its patches are added.
	byCh, rank [][]int32
	chStart    [][]int
	// colsT0 is the first layer's im2col rows of the active outputs, transposed and in rank
	// order: colsT0[k·n₀ + r] = cols_0[p_r·K + k] (n₀ active outputs).
	colsT0 []float64
}

func newConvQuery(n *ConvNet) *convQuery {
	d, L := n.arch.Out, len(n.convs)
	cq := &convQuery{
		n: n, d: d,
		jw: make([][]float64, L), jb: make([][]float64, L),
		byCh: make([][]int32, L), rank: make([][]int32, L), chStart: make([][]int, L),
	}
	for l, c := range n.convs {
		nq := c.cout * c.hp * c.wp
		cq.jw[l] = make([]float64, c.cout*d*c.k)
		cq.jb[l] = make([]float64, c.cout*d)
		cq.byCh[l] = make([]int32, nq)
		cq.rank[l] = make([]int32, nq)
		cq.chStart[l] = make([]int, c.cout+1)
	}
	c0 := n.convs[0]
	cq.colsT0 = make([]float64, c0.k*c0.cout*c0.hp*c0.wp)
	return cq
}

// initHalf allocates h's per-layer gradient buffers for its m = i1 − i0 columns:
// dcols[l] (l ≥ 1) is position-major on the h×w grid framed by one zero position on each
// side, dcols[l][(((y+1)·(w+2) + x+1)·m + i)·K + k]; gp[l] (l < L−1) holds
// the gradients of layer l's active pooled outputs transposed and in rank order,
// gp[l][i·n_l + r].
func (cq *convQuery) initHalf(h *queryHalf) {
	L, m := len(cq.n.convs), h.i1-h.i0
	h.dcols = make([][]float64, L)
	h.gp = make([][]float64, L)
	h.fact = make([][]int32, L)
	h.fpos = make([][]int32, L)
	most := 0
	for _, c := range cq.n.convs {
		most = max(most, c.cout, c.hp*c.wp)
	}
	h.goffs, h.grows = make([]int32, 0, most), make([]int32, 0, most)
	for l, c := range cq.n.convs {
		h.fact[l] = make([]int32, 0, c.cout*c.hp*c.wp)
		h.fpos[l] = make([]int32, 0, c.cout*c.hp*c.wp)
		if l > 0 {
			h.dcols[l] = make([]float64, (c.h+2)*(c.w+2)*m*c.k)
		}
		if l < L-1 {
			h.gp[l] = make([]float64, c.cout*c.hp*c.wp*m)
		}
	}
}

// convForward is ConvNet.Forward with each conv layer split by rows between the two
// halves, and leaves the same caches in ws (bit for bit: every entry is computed by the
// same operations in the same order, see forwardHalf), so ws is also valid for
// ConvNet.Backward.
func (q *Query) convForward(out, x []float64, ws *Workspace) {
	n := q.conv.n
	in := x
	for l := range n.convs {
		q.fwdIn, q.fwdLayer = in, l
		q.phase = phaseConvForward
		q.both()
		h0, h1 := q.half[0], q.half[1]
		ws.actOut[l] = append(append(ws.actOut[l][:0], h0.fact[l]...), h1.fact[l]...)
		ws.actPos[l] = append(append(ws.actPos[l][:0], h0.fpos[l]...), h1.fpos[l]...)
		in = ws.pooled[l]
	}
	q.fwdIn = nil
	n.fc.forwardTo(out, in)
	ws.cached = true
}

// forwardRows returns the conv output rows [y0, y1) and pooled rows [qy0, qy1) of half k
// for a layer of h rows: half 0 takes the first 2·⌈⌊h/2⌋/2⌉ rows, so each half pools only
// rows it computed.
func forwardRows(c *convLayer, k int) (y0, y1, qy0, qy1 int) {
	ys := 2 * ((c.hp + 1) / 2)
	if k == 0 {
		return 0, ys, 0, ys / 2
	}
	return ys, c.h, ys / 2, c.hp
}

// forwardHalf computes half k's rows of conv layer l on input in (cin×h×w): the im2col
// rows, the pre-activations z (by convRowsTo, whose entries do not depend on where the
// row range starts), and the pooled outputs with their active list (as reluPoolTo, in the same
// qy-major order, so half 0's list followed by half 1's is the serial list).
func (cq *convQuery) forwardHalf(h *queryHalf, k int, ws *Workspace, in []float64, l int) {
	c := &cq.n.convs[l]
	y0, y1, qy0, qy1 := forwardRows(c, k)
	cols, z := ws.cols[l], ws.z[l]
	im2colRowsTo(cols, in, c.cin, c.h, c.w, y0, y1)
	c.convRowsTo(z, cols, y0*c.w, y1*c.w)
	h.fact[l], h.fpos[l] = c.reluPoolRowsTo(ws.pooled[l], h.fact[l][:0], h.fpos[l][:0], z, qy0, qy1)
}

// KernelRowTo writes the kernel row of a query against m = len(dst) landmarks whose
// features are the rows of lf (row-major, row length q = len(f); len(lf) ≥ m·q):
//
//	for l := range dst { dst[l] = Σ_k lf[l*q+k] * f[k] }
//
// Each entry is vec.Dot(lf_l, f), computed by vec.DotsTo (on AVX2/FMA machines four rows
// at a time in registers, reading f a quarter as often as separate dots). The row
// streams all of lf once and is memory-bound, so when GOMAXPROCS > 1 and the row is large
// the landmarks from a multiple of four near m/2 on go to one helper goroutine, joined
// before return; every entry has vec.Dot's bits however the rows are blocked, so the
// result is bit for bit the same whether or not, and wherever, it is split. It
// allocates nothing in steady state (the helper's state comes from a sync.Pool, which a
// garbage collection may empty, costing one allocation), does not modify lf or f and
// panics on wrong lengths.
func KernelRowTo(dst, lf, f []float64) {
	m, q := len(dst), len(f)
	if len(lf) < m*q {
		panic(fmt.Sprintf("entk: KernelRowTo: len(lf) = %d < len(dst)·len(f) = %d·%d", len(lf), m, q))
	}
	mid := (m / 2) &^ 3
	if mid == 0 || m*q < rowSplitMin || runtime.GOMAXPROCS(0) < 2 {
		kernelRowRange(dst, lf, f, 0, m)
		return
	}
	splitRows(dst, lf, nil, f, mid)
}

// splitRows computes rows [0, mid) of a kernel row on the caller's goroutine and rows
// [mid, len(dst)) on a pooled helper, joined before it returns (rowRange on each part).
func splitRows(dst, lf []float64, lf32 []float32, f []float64, mid int) {
	m := len(dst)
	s := rowSplits.Get().(*rowSplit)
	s.dst, s.lf, s.lf32, s.f, s.lo, s.hi = dst, lf, lf32, f, mid, m
	s.claim.Store(false)
	s.wg.Add(1)
	go s.run()
	rowRange(dst, lf, lf32, f, 0, mid)
	if s.claim.CompareAndSwap(false, true) {
		rowRange(dst, lf, lf32, f, mid, m) // the helper has not started
	}
	s.wg.Wait()
	s.dst, s.lf, s.lf32, s.f = nil, nil, nil, nil
	rowSplits.Put(s)
}

// rowRange writes dst[lo:hi] from the float32 rows lf32 when they are given (ExactRowTo),
// else from the float64 rows lf (KernelRowTo).
func rowRange(dst, lf []float64, lf32 []float32, f []float64, lo, hi int) {
	if lf32 == nil {
		kernelRowRange(dst, lf, f, lo, hi)
		return
	}
	q := len(f)
	vec.Dots32To(dst[lo:hi], f, lf32[lo*q:], q, q)
}

// rowSplitMin is the row size (m·q float64s) below which KernelRowTo stays on one
// goroutine: starting and joining a helper costs a few microseconds, the time of about
// 2^15 multiply–adds.
const rowSplitMin = 1 << 15

// kernelRowRange writes dst[lo:hi] = lf[lo·q : hi·q] · f.
func kernelRowRange(dst, lf, f []float64, lo, hi int) {
	q := len(f)
	if lo == hi || q == 0 {
		clear(dst[lo:hi]) // empty sums
		return
	}
	vec.DotsTo(dst[lo:hi], 1, f, q, 1, lf[lo*q:hi*q], q, hi-lo, q)
}

// rowSplit is the helper half of one KernelRowTo or ExactRowTo call; run is bound once
// per rowSplit so that starting the helper allocates nothing.
type rowSplit struct {
	wg      sync.WaitGroup
	claim   atomic.Bool // set by whichever goroutine runs the second half
	dst, lf []float64
	lf32    []float32
	f       []float64
	lo, hi  int
	run     func()
}

var rowSplits = sync.Pool{New: func() any {
	s := &rowSplit{}
	s.run = func() {
		defer s.wg.Done()
		if s.claim.CompareAndSwap(false, true) {
			rowRange(s.dst, s.lf, s.lf32, s.f, s.lo, s.hi)
		}
	}
	return s
}}
