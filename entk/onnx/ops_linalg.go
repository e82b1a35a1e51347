package onnx

import (
	"runtime"
	"slices"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/cairnhq/cairn/internal/base/gemm"
)

// dgemm adds alpha·op(A)·op(B) to C (m×n, row-major, ldc). Products of at least
// gemmParallel multiply-adds run in internal/base/gemm (blocked, FMA micro-kernels, its row
// blocks spread over GOMAXPROCS goroutines: a few small allocations per call for their
// closures) while fewer goroutines than GOMAXPROCS are inside a pass (busy), and in its
// blocked path on this goroutine alone once every core already runs one (a batch of
// examples, one per core: helper goroutines would only add their joins); smaller ones from 2^10 on in its blocked path on this goroutine alone
// (gemm.DgemmSerial: the examples of a batch already run one per core), the smallest,
// and every one on machines without AVX2/FMA, in gonum's Dgemm on blocks of at most
// gemmBlock rows and columns, which keeps it serial and allocation-free. Either way the
// result is a function of the arguments alone.
func dgemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	if vectorProduct(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc) {
		return
	}
	if m*n*k >= gemmParallel && int(busy.Load()) < runtime.GOMAXPROCS(0) {
		gemm.Implementation{}.Dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 1, c, ldc)
		return
	}
	if gemm.DgemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, 1, c, ldc) {
		return
	}
	impl := gonum.Implementation{}
	for r0 := 0; r0 < m; r0 += gemmBlock {
		for c0 := 0; c0 < n; c0 += gemmBlock {
			ao, bo := r0*lda, c0
			if tA {
				ao = r0
			}
			if tB {
				bo = c0 * ldb
			}
			impl.Dgemm(ta, tb, min(gemmBlock, m-r0), min(gemmBlock, n-c0), k, alpha, a[ao:], lda, b[bo:], ldb, 1, c[r0*ldc+c0:], ldc)
		}
	}
}

// dgemmSet is dgemm into a C (m×n, ldc) whose contents are not used: C = alpha·op(A)·op(B),
// the bits of clearing C and calling dgemm. Where dgemm would take internal/base/gemm's
// blocked path it passes beta = 0, which writes C's first block without reading or
// clearing it.
func dgemmSet(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	if m > 1 && n > 1 && k > 1 {
		ta, tb := blas.NoTrans, blas.NoTrans
		if tA {
			ta = blas.Trans
		}
		if tB {
			tb = blas.Trans
		}
		if m*n*k >= gemmParallel && int(busy.Load()) < runtime.GOMAXPROCS(0) {
			gemm.Implementation{}.Dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
			return
		}
		if gemm.DgemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc) {
			return
		}
	}
	for i := range m {
		clear(c[i*ldc : i*ldc+n])
	}
	dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
}

// vectorProduct computes dgemm's product when one of its dimensions is 1, where a matrix
// product degenerates (a Linear layer on one example): k = 1 is the rank-one update
// C += α·op(A)[:,0]·op(B)[0,:] (Dger), m = 1 and n = 1 are matrix–vector products
// (Dgemv), all serial and allocation-free. It reports false for the other shapes.
func vectorProduct(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) bool {
	impl := gonum.Implementation{}
	// op(A)[i, p] = a[i·lda + p], or a[p·lda + i] when tA; likewise op(B)[p, j].
	incA, incB := 1, ldb // along p in a row of op(A), along p in a column of op(B)
	if tA {
		incA = lda
	}
	if tB {
		incB = 1
	}
	switch {
	case k == 1:
		incX, incY := lda, 1 // op(A)[:, 0] and op(B)[0, :]
		if tA {
			incX = 1
		}
		if tB {
			incY = ldb
		}
		impl.Dger(m, n, alpha, a, incX, b, incY, c, ldc)
	case m == 1 && tB: // c[j] += α Σ_p B[j, p]·op(A)[0, p]
		impl.Dgemv(blas.NoTrans, n, k, alpha, b, ldb, a, incA, 1, c, 1)
	case m == 1: // c[j] += α Σ_p B[p, j]·op(A)[0, p]
		impl.Dgemv(blas.Trans, k, n, alpha, b, ldb, a, incA, 1, c, 1)
	case n == 1 && tA: // c[i] += α Σ_p A[p, i]·op(B)[p, 0]
		impl.Dgemv(blas.Trans, k, m, alpha, a, lda, b, incB, 1, c, ldc)
	case n == 1:
		impl.Dgemv(blas.NoTrans, m, k, alpha, a, lda, b, incB, 1, c, ldc)
	default:
		return false
	}
	return true
}

// gemmParallel is internal/base/gemm's own threshold (2^18 multiply-adds), below which it
// would call gonum anyway; gemmBlock keeps gonum's Dgemm serial (it spawns goroutines
// from 4 blocks of 64×64 on), as entk's ConvNet does.
const (
	gemmParallel = 1 << 18
	gemmBlock    = 64
)

// opGemm: Y = alpha·op(A)·op(B) + beta·C, A and B 2-D, C broadcast to [M, N].
func opGemm(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 3, "alpha", "beta", "transA", "transB"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0, 1, 2); err != nil {
		return nil, nil, err
	}
	var vals [4]int64
	for i, name := range []string{"transA", "transB"} {
		v, err := x.attrInt(name, 0)
		if err != nil {
			return nil, nil, err
		}
		vals[i] = v
	}
	alpha, err := x.attrFloat("alpha", 1)
	if err != nil {
		return nil, nil, err
	}
	beta, err := x.attrFloat("beta", 1)
	if err != nil {
		return nil, nil, err
	}
	as, bs := x.in[0].shape, x.in[1].shape
	if len(as) != 2 || len(bs) != 2 {
		return nil, nil, errf(ErrShape, "Gemm of %v and %v (want 2-D)", as, bs)
	}
	k := &gemmKernel{transA: vals[0] != 0, transB: vals[1] != 0, alpha: alpha, beta: beta}
	k.m, k.k = as[0], as[1]
	if k.transA {
		k.m, k.k = as[1], as[0]
	}
	kb := bs[0]
	k.n = bs[1]
	if k.transB {
		kb, k.n = bs[1], bs[0]
	}
	if kb != k.k {
		return nil, nil, errf(ErrShape, "Gemm inner dimensions %d and %d (A %v, B %v, transA %d, transB %d)", k.k, kb, as, bs, vals[0], vals[1])
	}
	shape := []int{k.m, k.n}
	if c := x.opt(2); c != nil {
		if bc, ok := broadcastShapes(c.shape, shape); !ok || !slices.Equal(bc, shape) {
			return nil, nil, errf(ErrShape, "Gemm C %v does not broadcast to %v", c.shape, shape)
		}
		if numel(c.shape) != k.m*k.n {
			k.cb = bcastMap(c.shape, shape)
		}
	}
	return []outSpec{{dt: dtFloat, shape: shape}}, k, nil
}

// gemmKernel is Gemm with op(A) M×K, op(B) K×N; cb maps C to [M, N] (nil: C has M·N
// elements in order).
type gemmKernel struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float64
	cb             []int32
}

func (k *gemmKernel) scratch() int { return 0 }

// ld returns the leading dimensions of A and B as stored.
func (k *gemmKernel) ld() (lda, ldb int) {
	lda, ldb = k.k, k.n
	if k.transA {
		lda = k.m
	}
	if k.transB {
		ldb = k.k
	}
	return lda, ldb
}

func (k *gemmKernel) forward(out, in [][]float64, _ []float64) {
	y, a, b, c := out[0][:k.m*k.n], in[0], in[1], get(in, 2)
	for i := range y {
		y[i] = 0
		if c != nil {
			y[i] = k.beta * c[at(k.cb, i)]
		}
	}
	lda, ldb := k.ld()
	dgemm(k.transA, k.transB, k.m, k.n, k.k, k.alpha, a, lda, b, ldb, y, k.n)
}

// backward: with dop(A) = α·g·op(B)ᵀ and dop(B) = α·op(A)ᵀ·g, gA gets dop(A) (or its
// transpose when transA), gB likewise, and gC gets β·g summed over C's broadcast.
func (k *gemmKernel) backward(gin, gout, in, _ [][]float64, _ []float64) {
	g, a, b := gout[0][:k.m*k.n], in[0], in[1]
	lda, ldb := k.ld()
	if ga := gin[0]; ga != nil {
		if !k.transA {
			dgemm(false, !k.transB, k.m, k.k, k.n, k.alpha, g, k.n, b, ldb, ga, k.k)
		} else {
			dgemm(k.transB, true, k.k, k.m, k.n, k.alpha, b, ldb, g, k.n, ga, k.m)
		}
	}
	if gb := gin[1]; gb != nil {
		if !k.transB {
			dgemm(!k.transA, false, k.k, k.n, k.m, k.alpha, a, lda, g, k.n, gb, k.n)
		} else {
			dgemm(true, k.transA, k.n, k.k, k.m, k.alpha, g, k.n, a, lda, gb, k.k)
		}
	}
	if gc := get(gin, 2); gc != nil {
		for i, gi := range g {
			gc[at(k.cb, i)] += k.beta * gi
		}
	}
}

// opMatMul: numpy matmul: 1-D operands are promoted (and the added dimension dropped
// from the result), batch dimensions broadcast.
func opMatMul(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0, 1); err != nil {
		return nil, nil, err
	}
	as, bs := x.in[0].shape, x.in[1].shape
	if len(as) == 0 || len(bs) == 0 {
		return nil, nil, errf(ErrShape, "MatMul of a scalar (%v, %v)", as, bs)
	}
	a1, b1 := len(as) == 1, len(bs) == 1
	if a1 {
		as = []int{1, as[0]}
	}
	if b1 {
		bs = []int{bs[0], 1}
	}
	k := &matmulKernel{m: as[len(as)-2], k: as[len(as)-1], n: bs[len(bs)-1]}
	if bs[len(bs)-2] != k.k {
		return nil, nil, errf(ErrShape, "MatMul of %v and %v: inner dimensions differ", x.in[0].shape, x.in[1].shape)
	}
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	batch, ok := broadcastShapes(ab, bb)
	if !ok {
		return nil, nil, errf(ErrShape, "MatMul batch dimensions %v and %v do not broadcast", ab, bb)
	}
	if _, err := checkedNumel(ints64(append(slices.Clone(batch), k.m, k.n)), x.c.budget); err != nil {
		return nil, nil, errf(ErrShape, "MatMul: %v", err)
	}
	if numel(bb) == 1 && slices.Equal(ab, batch) {
		k.m *= numel(batch) // B is shared: one product with the batch folded into rows
		k.offA, k.offB = []int{0}, []int{0}
		if t := x.in[1].t2; t != nil && x.in[1].c == nil && !b1 {
			// B = Tᵀ computed at run time (an exported Linear's weight, transposed for
			// the MatMul): read T in place, so that neither the transpose nor its
			// gradient is ever formed; the Transpose step, now unread, is dropped as dead.
			x.in[1], k.transB = t, true
		}
	} else {
		for _, o := range stridedMap(batch, alignedStrides(ab, batch), 0) {
			k.offA = append(k.offA, int(o)*k.m*k.k)
		}
		for _, o := range stridedMap(batch, alignedStrides(bb, batch), 0) {
			k.offB = append(k.offB, int(o)*k.k*k.n)
		}
	}
	shape := slices.Clone(batch)
	if !a1 {
		shape = append(shape, as[len(as)-2])
	}
	if !b1 {
		shape = append(shape, k.n)
	}
	return []outSpec{{dt: dtFloat, shape: shape}}, k, nil
}

// matmulKernel computes, for each batch element i, Y_i = A[offA[i]:] · B[offB[i]:] (M×K by
// K×N); VJP gA_i += g_i·B_iᵀ, gB_i += A_iᵀ·g_i, summing over broadcast batches. With
// transB (the one-product form only) the input holds Bᵀ (N×K) and gets (gB)ᵀ = gᵀ·A.
type matmulKernel struct {
	m, n, k    int
	offA, offB []int
	transB     bool
	set        [2]bool // setsGrad: the products set gin[j] instead of adding to it
}

// setsGrad: an input whose products' gradients tile it, each entry written by exactly one
// product (distinct offsets, one per batch element, covering size), is set by them.
func (k *matmulKernel) setsGrad(j, size int) bool {
	offs, block := k.offA, k.m*k.k
	if j == 1 {
		offs, block = k.offB, k.k*k.n
	}
	if j > 1 || len(offs)*block != size {
		return false
	}
	seen := make(map[int]bool, len(offs))
	for _, o := range offs {
		if o%block != 0 || seen[o] {
			return false
		}
		seen[o] = true
	}
	k.set[j] = true
	return true
}

// product is dgemm, or dgemmSet when the kernel sets input j's gradient.
func (k *matmulKernel) product(j int, tA, tB bool, m, n, kk int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	if k.set[j] {
		dgemmSet(tA, tB, m, n, kk, 1, a, lda, b, ldb, c, ldc)
		return
	}
	dgemm(tA, tB, m, n, kk, 1, a, lda, b, ldb, c, ldc)
}

func (k *matmulKernel) scratch() int { return 0 }

// ldb is the leading dimension of B as stored.
func (k *matmulKernel) ldb() int {
	if k.transB {
		return k.k
	}
	return k.n
}

func (k *matmulKernel) forward(out, in [][]float64, _ []float64) {
	mn := k.m * k.n
	y := out[0][:len(k.offA)*mn]
	for i, oa := range k.offA { // the products tile y: each sets its block
		dgemmSet(false, k.transB, k.m, k.n, k.k, 1, in[0][oa:], k.k, in[1][k.offB[i]:], k.ldb(), y[i*mn:], k.n)
	}
}

func (k *matmulKernel) backward(gin, gout, in, _ [][]float64, _ []float64) {
	mn := k.m * k.n
	for i, oa := range k.offA {
		g, ob := gout[0][i*mn:], k.offB[i]
		if gin[0] != nil {
			k.product(0, false, !k.transB, k.m, k.k, k.n, g, k.n, in[1][ob:], k.ldb(), gin[0][oa:], k.k)
		}
		if gin[1] != nil {
			k.gradB(gin[1][ob:], in[0][oa:], g)
		}
	}
}

// gradB adds Aᵀ·g (K×N) to gb, or its transpose gᵀ·A (N×K) when transB, for one
// product's A (M×K) and output gradient g (M×N); it sets gb when set[1].
func (k *matmulKernel) gradB(gb, a, g []float64) {
	if k.transB {
		k.product(1, true, false, k.n, k.k, k.m, g, k.n, a, k.k, gb, k.k)
		return
	}
	k.product(1, true, false, k.k, k.n, k.m, a, k.k, g, k.n, gb, k.n)
}

// busy counts the goroutines inside a Forward, Backward or BackwardHeads of any Model of
// this process (enter/leave): dgemm's measure of whether the cores are already taken. It
// only picks between two paths of internal/base/gemm that give the same bits, so a stale
// count costs time, never a different result.
var busy atomic.Int32

// enter and leave bracket a pass: defer leave(enter()).
func enter() struct{} { busy.Add(1); return struct{}{} }
func leave(struct{})  { busy.Add(-1) }
