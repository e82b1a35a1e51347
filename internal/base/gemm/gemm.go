package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Implementation is gonum's pure-Go BLAS with Dgemm and Sgemm replaced, on AVX2/FMA
// machines and for products of at least smallWork multiply-adds, by a blocked GEMM with an
// AVX-512 or AVX2/FMA micro-kernel. Every other routine, and both elsewhere, are gonum's.
type Implementation struct{ gonum.Implementation }

// Block sizes (Goto's algorithm as in BLIS): a kc×nc block of op(B) is packed into
// panels of nr columns (kc·nc·8 bytes = 4 MiB in float64, for the large shared cache), an
// mc×kc block of op(A) into panels of mr rows (240 KiB in float64, for L2), and the mr×nr
// micro-kernel keeps its sums in 12 vector registers while it streams one panel of each
// (kc·(mr+nr) entries, 28 to 44 KiB, for L1).
const (
	mr        = 6
	maxNR     = 32 // the widest tile: float32 in AVX-512 registers
	kc        = 256
	mc        = 20 * mr
	nc        = 2048    // a multiple of every nr
	smallWork = 1 << 18 // m·n·k below this: gonum's routine (packing would dominate)
	// serialWork is DgemmSerial's threshold. On one goroutine nothing is spawned or
	// allocated, and packing pays from a few thousand multiply-adds down: the ONNX ViT's
	// products of 17 tokens run 4–10× gonum's rate (68×48×144, 48×576×17) and its
	// attention heads' (17×17×12, 3,468) about 2× (BenchmarkDgemmSerial); its ψ ran
	// 1.09–1.11× as fast with 2^10 as with 2^12.
	serialWork = 1 << 10
)

// scalar is the element type of a product: Dgemm's float64 or Sgemm's float32.
type scalar interface{ float32 | float64 }

// micro is one micro-kernel: its tile width nr (mr = 6 rows in all) and its code. For
// i < mr, j < nr it sets c[i·ldc+j] = fma(Σ_{p<kc} a[p·mr+i]·b[p·nr+j], alpha, c[i·ldc+j]),
// the sum over p in order by fused multiply-adds from 0 (a and b packed as packA and
// packB pack them). Every C entry thus gets the same operations in the same order
// whatever the kernel, so the kernels of one type give the same bits (tested).
type micro[T scalar] struct {
	nr   int
	kern func(kc int, a, b, c []T, ldc int, alpha T)
	// kernZ, where there is one, is kern on a tile whose C holds +0: C not read, the same
	// bits (beta = 0's first block of p, which then needs no clearing first).
	kernZ func(kc int, a, b, c []T, ldc int, alpha T)
}

var (
	avx2    = micro[float64]{nr: 8, kern: kern6x8}                     // 6×8 tiles in 256-bit registers
	avx512  = micro[float64]{nr: 16, kern: kern6x16, kernZ: kern6x16z} // 6×16 tiles in 512-bit registers: twice the work per instruction
	avx2s   = micro[float32]{nr: 16, kern: kern6x16s}                  // float32: 6×16 tiles in 256-bit registers
	avx512s = micro[float32]{nr: 32, kern: kern6x32s}                  // float32: 6×32 tiles in 512-bit registers
)

// best and bestS are the widest micro-kernels the machine runs (only called when
// hasAVX2FMA).
func best() micro[float64] {
	if hasAVX512 {
		return avx512
	}
	return avx2
}

func bestS() micro[float32] {
	if hasAVX512 {
		return avx512s
	}
	return avx2s
}

// Dgemm computes C = alpha·op(A)·op(B) + beta·C (row-major, as blas.Float64 documents)
// and panics, as gonum does, on invalid arguments.
//
// Each C entry is first scaled by beta (set to 0 when beta = 0), then, for each block of
// kc indices p in order, gets alpha·Σ_p op(A)_ip·op(B)_pj added, the sum formed in order by
// fused multiply-adds, and that sum enters as fma(sum, alpha, C_ij), on edge tiles too
// (macro). So the result is a function of the arguments: independent of GOMAXPROCS, of
// how the row blocks are shared among goroutines, and of the micro-kernel.
func (impl Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !hasAVX2FMA || m*n*k < smallWork {
		impl.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemm(best(), &pools64, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, runtime.GOMAXPROCS(0))
}

// DgemmSerial computes what Dgemm computes, on the calling goroutine alone, by the
// blocked path for every product of at least serialWork multiply-adds: for a product of
// at least smallWork, the same bits as Dgemm (the blocked path's result does not depend on
// how its rows are shared). It reports false and leaves C untouched for smaller products
// and on machines without AVX2/FMA, where the caller uses a serial routine of its own. It
// is for callers that already keep every core busy with one product per goroutine (the
// ONNX backbone's examples), where Dgemm's goroutines would only add their cost.
func DgemmSerial(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) bool {
	if !hasAVX2FMA || m*n*k < serialWork {
		return false
	}
	gemm(best(), &pools64, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1)
	return true
}

// DgemmSerialFunc is DgemmSerial for C = alpha·op(A)·B + beta·C with B (k×n) given by the function
// that packs it: pack(bp, pc, kb, jc, nb, nr) writes the kb×nb block of B at (pc, jc) into
// bp as panels of nr columns, each k-major (bp[panel·kb·nr + p·nr + j] = B[pc+p,
// jc+panel·nr+j]), the columns past nb of the last panel as zeros. B need not exist as a
// matrix (the ONNX convolution's im2col of a gradient is gathered straight into the
// panels). The same bits as DgemmSerial on the B that pack describes. It reports false
// and leaves C untouched where DgemmSerial would.
func DgemmSerialFunc(tA blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, pack func(bp []float64, pc, kb, jc, nb, nr int), beta float64, c []float64, ldc int) bool {
	if !hasAVX2FMA || m*n*k < serialWork {
		return false
	}
	check(tA, blas.NoTrans, m, n, k, len(a), lda, n*k, n, len(c), ldc)
	mk := best()
	store := storesFirst(mk, alpha, beta, k)
	if !store {
		scaleRows(c, ldc, n, beta, 0, m)
	}
	if m == 0 || n == 0 || alpha == 0 || k == 0 {
		return true
	}
	ws := pools64.Get().(*workspace[float64])
	defer pools64.Put(ws)
	ws.reserve(1)
	serial(mk, ws, tA != blas.NoTrans, m, n, k, alpha, a, lda, c, ldc, store, pack)
	return true
}

// Sgemm is Dgemm in float32 (as blas.Float32 documents): the same blocked algorithm with
// float32 micro-kernels of twice the lanes, so about twice Dgemm's multiply-adds per
// second, and the same guarantees: every sum formed in order by fused multiply-adds in
// float32, a function of the arguments alone. Below the size threshold and on machines
// without AVX2/FMA it is gonum's Sgemm.
func (impl Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !hasAVX2FMA || m*n*k < smallWork {
		impl.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemm(bestS(), &pools32, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, runtime.GOMAXPROCS(0))
}

// gemm is the blocked path of Dgemm and Sgemm with micro-kernel mk on up to workers
// goroutines (joined before it returns).
func gemm[T scalar](mk micro[T], pool *sync.Pool, tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, workers int) {
	check(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	store := storesFirst(mk, alpha, beta, k)
	if !store {
		scaleRows(c, ldc, n, beta, 0, m)
	}
	if alpha == 0 || k == 0 {
		return
	}
	aT, bT := tA != blas.NoTrans, tB != blas.NoTrans
	panels := (m + mr - 1) / mr
	w := max(1, min(workers, panels))
	ws := pool.Get().(*workspace[T])
	defer pool.Put(ws)
	ws.reserve(w)
	if w == 1 {
		serial(mk, ws, aT, m, n, k, alpha, a, lda, c, ldc, store, func(bp []T, pc, kb, jc, nb, nr int) {
			packB(bp, b, ldb, bT, pc, kb, jc, nb, nr, 0, 1)
		})
		return
	}
	// Goroutine wi takes the rows [lo(wi), lo(wi+1)): equal shares in whole mr-row
	// panels, each walked in blocks of up to mc rows.
	lo := func(wi int) int { return min(m, wi*panels/w*mr) }
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			// Each goroutine packs its share of op(B)'s panels, waits for the others'
			// (packed), then multiplies its rows: the packing, a copy, no longer runs on
			// one goroutine while the others wait for it.
			var packed, wg sync.WaitGroup
			packed.Add(w)
			run := func(wi int) {
				packB(ws.b, b, ldb, bT, pc, kb, jc, nb, mk.nr, wi, w)
				packed.Done()
				packed.Wait()
				ap := ws.a[wi]
				for ic := lo(wi); ic < lo(wi+1); ic += mc {
					mb := min(mc, lo(wi+1)-ic)
					packA(ap, a, lda, aT, ic, mb, pc, kb)
					macro(mk, c, ldc, ap, ws.b, ic, mb, jc, nb, kb, alpha, ws.tiles[wi], store && pc == 0)
				}
			}
			for wi := 1; wi < w; wi++ {
				wg.Go(func() { run(wi) })
			}
			run(0)
			wg.Wait()
		}
	}
}

// serial is gemm's blocked path on the calling goroutine, with nothing allocated (the
// products of the ONNX backbone's examples, many per second each), op(B)'s blocks packed
// by pack as packB packs them (pack does not escape: a closure of the caller's stays on
// its stack).
func serial[T scalar](mk micro[T], ws *workspace[T], aT bool, m, n, k int, alpha T, a []T, lda int, c []T, ldc int, store bool, pack func(bp []T, pc, kb, jc, nb, nr int)) {
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			pack(ws.b, pc, kb, jc, nb, mk.nr)
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				packA(ws.a[0], a, lda, aT, ic, mb, pc, kb)
				macro(mk, c, ldc, ws.a[0], ws.b, ic, mb, jc, nb, kb, alpha, ws.tiles[0], store && pc == 0)
			}
		}
	}
}

// storesFirst says whether a product with beta = 0 writes its first block of p without
// clearing C first (mk has a kernZ): the result is the same bits as clearing it.
func storesFirst[T scalar](mk micro[T], alpha, beta T, k int) bool {
	return beta == 0 && alpha != 0 && k > 0 && mk.kernZ != nil
}

// scaleRows sets rows lo ≤ i < hi of C (n columns) to beta·C: zeros for beta = 0
// (whatever C held), untouched for beta = 1.
func scaleRows[T scalar](c []T, ldc, n int, beta T, lo, hi int) {
	if beta == 1 {
		return
	}
	for i := lo; i < hi; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// macro multiplies the packed mb×kb block of op(A) by the packed kb×nb block of op(B) into
// C[ic:ic+mb, jc:jc+nb], tile by tile with mk. A tile on the partial edge of the block is
// copied to the scratch tile (mr·maxNR entries, the caller's), updated there by the
// same kernel and copied back, so its entries get the same operations as interior ones.
// With store, C's block holds nothing yet: interior tiles by mk.kernZ, edge tiles from a
// cleared scratch tile, the bits of a cleared C.
func macro[T scalar](mk micro[T], c []T, ldc int, ap, bp []T, ic, mb, jc, nb, kb int, alpha T, tile []T, store bool) {
	nr := mk.nr
	for jr := 0; jr < nb; jr += nr {
		bpan := bp[(jr/nr)*kb*nr : (jr/nr+1)*kb*nr]
		for ir := 0; ir < mb; ir += mr {
			apan := ap[(ir/mr)*kb*mr : (ir/mr+1)*kb*mr]
			if ir+mr <= mb && jr+nr <= nb {
				off := (ic+ir)*ldc + jc + jr
				if store {
					mk.kernZ(kb, apan, bpan, c[off:off+(mr-1)*ldc+nr], ldc, alpha)
					continue
				}
				mk.kern(kb, apan, bpan, c[off:off+(mr-1)*ldc+nr], ldc, alpha)
				continue
			}
			rows, cols := min(mr, mb-ir), min(nr, nb-jr)
			clear(tile[:mr*nr])
			for i := range rows {
				if store {
					break
				}
				off := (ic+ir+i)*ldc + jc + jr
				copy(tile[i*nr:i*nr+cols], c[off:off+cols])
			}
			mk.kern(kb, apan, bpan, tile[:mr*nr], nr, alpha)
			for i := range rows {
				off := (ic+ir+i)*ldc + jc + jr
				copy(c[off:off+cols], tile[i*nr:i*nr+cols])
			}
		}
	}
}

// packA writes the mb×kb block of op(A) at (ic, pc) as panels of mr rows, each k-major
// (ap[panel·kb·mr + p·mr + i] = op(A)[ic+panel·mr+i, pc+p]), rows past mb as zeros.
func packA[T scalar](ap, a []T, lda int, aT bool, ic, mb, pc, kb int) {
	for r := 0; r < mb; r += mr {
		pan := ap[(r/mr)*kb*mr : (r/mr+1)*kb*mr]
		rows := min(mr, mb-r)
		if rows < mr {
			clear(pan)
		}
		if aT { // op(A)'s rows are A's columns: read A's rows, mr entries at a time
			if rows == mr {
				MoveRows(pan, mr, a[pc*lda+ic+r:], lda, kb, mr)
				continue
			}
			for p := 0; p < kb; p++ {
				off := (pc+p)*lda + ic + r
				copy(pan[p*mr:p*mr+rows], a[off:off+rows])
			}
			continue
		}
		if rows == mr { // six rows read side by side, the panel written in order
			off := (ic+r)*lda + pc
			r0, r1, r2 := a[off:off+kb], a[off+lda:off+lda+kb], a[off+2*lda:off+2*lda+kb]
			r3, r4, r5 := a[off+3*lda:off+3*lda+kb], a[off+4*lda:off+4*lda+kb], a[off+5*lda:off+5*lda+kb]
			for p := range kb {
				d := pan[p*mr : p*mr+mr : p*mr+mr]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
			continue
		}
		for i := 0; i < rows; i++ {
			src := a[(ic+r+i)*lda+pc : (ic+r+i)*lda+pc+kb]
			for p, v := range src {
				pan[p*mr+i] = v
			}
		}
	}
}

// MoveRows sets dst[r·ldd+j] = src[r·lds+j] for r < n, j < w, where w entries are 24, 48,
// 64 or 128 bytes (six float32s or float64s, or a panel row of nr): what a copy per row
// does, without a call of memmove for each (on amd64, SSE2 moves). It panics on short
// slices or another width.
func MoveRows[T scalar](dst []T, ldd int, src []T, lds, n, w int) {
	if n == 0 {
		return
	}
	_, _ = dst[(n-1)*ldd+w-1], src[(n-1)*lds+w-1] // bounds, checked once
	sz := unsafe.Sizeof(dst[0])
	switch uintptr(w) * sz {
	case 24, 48, 64, 128:
	default:
		panic(fmt.Sprintf("gemm: MoveRows of %d-byte rows", uintptr(w)*sz))
	}
	moveRows(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), uintptr(n), uintptr(ldd)*sz, uintptr(lds)*sz, uintptr(w)*sz)
}

// packB writes the kb×nb block of op(B) at (pc, jc) as panels of nr columns, each
// k-major (bp[panel·kb·nr + p·nr + j] = op(B)[pc+p, jc+panel·nr+j]), columns past nb as
// zeros: share wi of w, the panels [wi·P/w, (wi+1)·P/w) of the P panels.
func packB[T scalar](bp, b []T, ldb int, bT bool, pc, kb, jc, nb, nr, wi, w int) {
	panels := (nb + nr - 1) / nr
	for s := wi * panels / w * nr; s < (wi+1)*panels/w*nr; s += nr {
		pan := bp[(s/nr)*kb*nr : (s/nr+1)*kb*nr]
		cols := min(nr, nb-s)
		if cols < nr {
			clear(pan)
		}
		if bT {
			p0 := 0
			if cols == 16 && nr == 16 && hasAVX512 && unsafe.Sizeof(b[0]) == 8 && kb >= 8 {
				// 8×8 blocks turned in registers (packBT16), the rest as below
				src := b[(jc+s)*ldb+pc:]
				_, _ = pan[kb*16-1], src[15*ldb+kb-1]
				p0 = kb &^ 7
				packBT16(unsafe.Pointer(&pan[0]), unsafe.Pointer(&src[0]), uintptr(ldb)*8, uintptr(kb/8))
			}
			for j := 0; j < cols; j++ {
				src := b[(jc+s+j)*ldb+pc+p0 : (jc+s+j)*ldb+pc+kb]
				for p, v := range src {
					pan[(p0+p)*nr+j] = v
				}
			}
			continue
		}
		if cols == nr {
			MoveRows(pan, nr, b[pc*ldb+jc+s:], ldb, kb, nr)
			continue
		}
		for p := 0; p < kb; p++ {
			copy(pan[p*nr:p*nr+cols], b[(pc+p)*ldb+jc+s:(pc+p)*ldb+jc+s+cols])
		}
	}
}

// workspace holds the packing buffers of one call: one op(B) block, and one op(A) block
// and one edge tile per goroutine; pools64 and pools32 keep them between calls.
type workspace[T scalar] struct {
	b     []T
	a     [][]T
	tiles [][]T
}

// reserve gives ws the op(A) blocks and edge tiles of w goroutines.
func (ws *workspace[T]) reserve(w int) {
	for len(ws.a) < w {
		ws.a = append(ws.a, make([]T, mc*kc))
		ws.tiles = append(ws.tiles, make([]T, mr*maxNR))
	}
}

var (
	pools64 = sync.Pool{New: func() any { return &workspace[float64]{b: make([]float64, kc*nc)} }}
	pools32 = sync.Pool{New: func() any { return &workspace[float32]{b: make([]float32, kc*nc)} }}
)

// check panics on the arguments gonum's Dgemm rejects, with its kind of message.
func check(tA, tB blas.Transpose, m, n, k int, la, lda, lb, ldb, lc, ldc int) {
	okT := func(t blas.Transpose) bool { return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans }
	switch {
	case !okT(tA):
		panic(fmt.Sprintf("gemm: bad transpose %v", tA))
	case !okT(tB):
		panic(fmt.Sprintf("gemm: bad transpose %v", tB))
	case m < 0 || n < 0 || k < 0:
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	switch {
	case lda < max(1, ac):
		panic(fmt.Sprintf("gemm: bad lda %d for %d columns", lda, ac))
	case ldb < max(1, bc):
		panic(fmt.Sprintf("gemm: bad ldb %d for %d columns", ldb, bc))
	case ldc < max(1, n):
		panic(fmt.Sprintf("gemm: bad ldc %d for %d columns", ldc, n))
	case ar > 0 && ac > 0 && la < (ar-1)*lda+ac:
		panic(fmt.Sprintf("gemm: short A: len %d for %d×%d, lda %d", la, ar, ac, lda))
	case br > 0 && bc > 0 && lb < (br-1)*ldb+bc:
		panic(fmt.Sprintf("gemm: short B: len %d for %d×%d, ldb %d", lb, br, bc, ldb))
	case m > 0 && n > 0 && lc < (m-1)*ldc+n:
		panic(fmt.Sprintf("gemm: short C: len %d for %d×%d, ldc %d", lc, m, n, ldc))
	}
}
