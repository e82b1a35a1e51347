package gemm

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Implementation is gonum's pure-Go BLAS with Dgemm replaced, on AVX2/FMA machines and
// for products of at least smallWork multiply-adds, by a blocked GEMM with an AVX2/FMA
// micro-kernel. Every other routine, and Dgemm elsewhere, is gonum's.
type Implementation struct{ gonum.Implementation }

// Block sizes (Goto's algorithm as in BLIS): a kc×nc block of op(B) is packed into
// panels of nr columns (kc·nc·8 bytes = 4 MiB, for the large shared cache), an mc×kc
// block of op(A) into panels of mr rows (240 KiB, for L2), and the mr×nr micro-kernel
// keeps its 48 sums in 12 vector registers while it streams one panel of each (kc·(mr+nr)·8
// bytes = 28 KiB, for L1).
const (
	mr, nr    = 6, 8
	kc        = 256
	mc        = 20 * mr
	nc        = 256 * nr
	smallWork = 1 << 18 // m·n·k below this: gonum's Dgemm (packing would dominate)
)

// Dgemm computes C = alpha·op(A)·op(B) + beta·C (row-major, as blas.Float64 documents)
// and panics, as gonum does, on invalid arguments.
//
// Each C entry is first scaled by beta (set to 0 when beta = 0), then, for each block of
// kc indices p in order, gets alpha·Σ_p op(A)_ip·op(B)_pj added, the sum formed in order by
// fused multiply-adds. Which entries lie on the matrix's partial edge tiles (added through
// a scratch tile) depends only on m and n, so the result is a function of the arguments:
// independent of GOMAXPROCS and of how the row blocks are shared among goroutines.
func (impl Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !hasAVX2FMA || m*n*k < smallWork {
		impl.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, runtime.GOMAXPROCS(0))
}

// dgemm is Dgemm's blocked path on up to workers goroutines (joined before it returns).
func dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, workers int) {
	check(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 1:
		case 0:
			clear(row)
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
	if alpha == 0 || k == 0 {
		return
	}
	aT, bT := tA != blas.NoTrans, tB != blas.NoTrans
	nblk := (m + mc - 1) / mc
	w := max(1, min(workers, nblk))
	ws := getWorkspace(w)
	defer putWorkspace(ws)
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			packB(ws.b, b, ldb, bT, pc, kb, jc, nb)
			block := func(wi int) {
				ap := ws.a[wi]
				for ib := wi; ib < nblk; ib += w {
					ic := ib * mc
					mb := min(mc, m-ic)
					packA(ap, a, lda, aT, ic, mb, pc, kb)
					macro(c, ldc, ap, ws.b, ic, mb, jc, nb, kb, alpha)
				}
			}
			if w == 1 {
				block(0)
				continue
			}
			var wg sync.WaitGroup
			for wi := 1; wi < w; wi++ {
				wg.Go(func() { block(wi) })
			}
			block(0)
			wg.Wait()
		}
	}
}

// macro multiplies the packed mb×kb block of op(A) by the packed kb×nb block of op(B) into
// C[ic:ic+mb, jc:jc+nb], tile by tile.
func macro(c []float64, ldc int, ap, bp []float64, ic, mb, jc, nb, kb int, alpha float64) {
	var tile [mr * nr]float64
	for jr := 0; jr < nb; jr += nr {
		bpan := bp[(jr/nr)*kb*nr : (jr/nr+1)*kb*nr]
		for ir := 0; ir < mb; ir += mr {
			apan := ap[(ir/mr)*kb*mr : (ir/mr+1)*kb*mr]
			if ir+mr <= mb && jr+nr <= nb {
				off := (ic+ir)*ldc + jc + jr
				kern6x8(kb, apan, bpan, c[off:off+(mr-1)*ldc+nr], ldc, alpha)
				continue
			}
			clear(tile[:])
			kern6x8(kb, apan, bpan, tile[:], nr, alpha)
			for i := 0; i < min(mr, mb-ir); i++ {
				row := c[(ic+ir+i)*ldc+jc+jr:]
				for j := 0; j < min(nr, nb-jr); j++ {
					row[j] += tile[i*nr+j]
				}
			}
		}
	}
}

// packA writes the mb×kb block of op(A) at (ic, pc) as panels of mr rows, each k-major
// (ap[panel·kb·mr + p·mr + i] = op(A)[ic+panel·mr+i, pc+p]), rows past mb as zeros.
func packA(ap, a []float64, lda int, aT bool, ic, mb, pc, kb int) {
	for r := 0; r < mb; r += mr {
		pan := ap[(r/mr)*kb*mr : (r/mr+1)*kb*mr]
		rows := min(mr, mb-r)
		if rows < mr {
			clear(pan)
		}
		for i := 0; i < rows; i++ {
			if aT {
				for p := 0; p < kb; p++ {
					pan[p*mr+i] = a[(pc+p)*lda+ic+r+i]
				}
				continue
			}
			src := a[(ic+r+i)*lda+pc : (ic+r+i)*lda+pc+kb]
			for p, v := range src {
				pan[p*mr+i] = v
			}
		}
	}
}

// packB writes the kb×nb block of op(B) at (pc, jc) as panels of nr columns, each
// k-major (bp[panel·kb·nr + p·nr + j] = op(B)[pc+p, jc+panel·nr+j]), columns past nb as
// zeros.
func packB(bp, b []float64, ldb int, bT bool, pc, kb, jc, nb int) {
	for s := 0; s < nb; s += nr {
		pan := bp[(s/nr)*kb*nr : (s/nr+1)*kb*nr]
		cols := min(nr, nb-s)
		if cols < nr {
			clear(pan)
		}
		if bT {
			for j := 0; j < cols; j++ {
				src := b[(jc+s+j)*ldb+pc : (jc+s+j)*ldb+pc+kb]
				for p, v := range src {
					pan[p*nr+j] = v
				}
			}
			continue
		}
		for p := 0; p < kb; p++ {
			copy(pan[p*nr:p*nr+cols], b[(pc+p)*ldb+jc+s:(pc+p)*ldb+jc+s+cols])
		}
	}
}

// workspace holds the packing buffers of one dgemm call: one op(B) block, and one
// op(A) block per goroutine.
type workspace struct {
	b []float64
	a [][]float64
}

var workspaces = sync.Pool{New: func() any { return &workspace{b: make([]float64, kc*nc)} }}

func getWorkspace(w int) *workspace {
	ws := workspaces.Get().(*workspace)
	for len(ws.a) < w {
		ws.a = append(ws.a, make([]float64, mc*kc))
	}
	return ws
}

func putWorkspace(ws *workspace) { workspaces.Put(ws) }

// check panics on the arguments gonum's Dgemm rejects, with its kind of message.
func check(tA, tB blas.Transpose, m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
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
	case ar > 0 && ac > 0 && len(a) < (ar-1)*lda+ac:
		panic(fmt.Sprintf("gemm: short A: len %d for %d×%d, lda %d", len(a), ar, ac, lda))
	case br > 0 && bc > 0 && len(b) < (br-1)*ldb+bc:
		panic(fmt.Sprintf("gemm: short B: len %d for %d×%d, ldb %d", len(b), br, bc, ldb))
	case m > 0 && n > 0 && len(c) < (m-1)*ldc+n:
		panic(fmt.Sprintf("gemm: short C: len %d for %d×%d, ldc %d", len(c), m, n, ldc))
	}
}
