package gemm

import (
	"sync"

	"gonum.org/v1/gonum/blas"

	"github.com/cairnhq/cairn/internal/base/par"
)

// SgemmOn is Sgemm with its parallel loops on team's workers (par.Team: started once for
// a run of many products, an optimizer's steps) instead of goroutines started for each
// block. The same bits as Sgemm: each C entry's operations do not depend on how the rows
// are shared (see Dgemm). A nil team is Sgemm's GOMAXPROCS goroutines, through par.For.
func (impl Implementation) SgemmOn(team *par.Team, tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !hasAVX2FMA || m*n*k < smallWork {
		impl.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemmOn(bestS(), &pools32, team, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmOn is gemm with each block's two parts as loops of team: op(B)'s panels packed a
// panel per chunk, then C's rows multiplied in chunks of whole mr-row panels, each chunk
// packing its rows of op(A) into its worker's buffer. The chunks are handed out as the
// workers come, so a worker that starts late delays no one (gemm's fixed shares wait
// for the last goroutine twice per block: at the packing and at the join).
func gemmOn[T scalar](mk micro[T], pool *sync.Pool, team *par.Team, tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	check(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	panels := (m + mr - 1) / mr
	rowsChunk := rowPanelsPerChunk(panels, team.Size())
	if beta != 1 {
		team.For(m, rowsChunk*mr, func(_, lo, hi int) { scaleRows(c, ldc, n, beta, lo, hi) })
	}
	if alpha == 0 || k == 0 {
		return
	}
	aT, bT := tA != blas.NoTrans, tB != blas.NoTrans
	ws := pool.Get().(*workspace[T])
	defer pool.Put(ws)
	ws.reserve(team.Size())
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		bPanels := (nb + mk.nr - 1) / mk.nr
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			team.For(bPanels, 1, func(_, lo, hi int) {
				for s := lo; s < hi; s++ {
					packB(ws.b, b, ldb, bT, pc, kb, jc, nb, mk.nr, s, bPanels)
				}
			})
			team.For(m, rowsChunk*mr, func(w, lo, hi int) {
				ap := ws.a[w]
				for ic := lo; ic < hi; ic += mc {
					mb := min(mc, hi-ic)
					packA(ap, a, lda, aT, ic, mb, pc, kb)
					macro(mk, c, ldc, ap, ws.b, ic, mb, jc, nb, kb, alpha, ws.tiles[w], false)
				}
			})
		}
	}
}

// rowPanelsPerChunk is the mr-row panels of one chunk of gemmOn's rows: about two chunks
// per worker, at most an op(A) block (mc rows), at least one panel.
func rowPanelsPerChunk(panels, workers int) int {
	return max(1, min(mc/mr, (panels+2*workers-1)/(2*workers)))
}
