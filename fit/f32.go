package fit

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/gemm"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// The float32 batch products (Options.Float32).
//
// An Adam step's cost is four matrix products per batch: the latents [K_A; K_B]·Ã, their
// gradient [K_A; K_B]ᵀ·G and, under SimCLR, the similarities U·Uᵀ and the gradient
// (W+Wᵀ)·U, each of 2B×M×k or (2B)²×k multiply-adds (at B = 512, M = 512, k = 256 about
// 0.8·10⁹ per batch). In float32 they run on twice the vector lanes, so a step costs
// about half. Everything else stays float64: the parameters θ, Adam's moments, the loss
// and its gradient with respect to the latents, the softmax of SimCLR, the validation
// embeddings and ω. The products use whatever blas.Float32 the command installed
// (blas32.Use; cairnd and cairnctl install internal/base/gemm's AVX-512/AVX2 Sgemm), and are
// deterministic like it: a replay on the same machine gives the same bits.
//
// Rounding: each product entry is a sum of at most 2B or M terms formed by float32 fused
// multiply-adds, relative error about (terms)·2⁻²⁴ of the sum of magnitudes in the worst
// case and √terms·2⁻²⁴ typically, so ~10⁻⁶ of the gradient. TestFloat32Gradient checks
// the gradient of a batch against the float64 one to 10⁻⁴ of its norm, for every loss
// that uses it; TestFloat32Fit checks that whole fits in float32 end within 3 points of
// the float64 fits' test accuracy. BYOL keeps float64 products: its target and predictor
// products read the float64 batch rows.

// products32 is the float32 workspace of one model: the gathered batch rows, Ã, the
// latents, their gradient and ∂L/∂Ã.
type products32 struct {
	kcat, a, z, g, ga []float32
}

// sgemm sets C = op(A)·op(B) (row-major, C m×n, op(A) m×k) with the installed
// blas.Float32. C is zeroed here, rows in chunks side by side, and the product added to
// it (β = 1): a Sgemm with β = 0 clears C on the calling goroutine before its parallel
// part, and adding to zeros gives its bits (each entry's first sum enters as
// fma(sum, 1, +0) either way; TestSgemmZeroed).
//
// With internal/base/gemm installed (as cairnd installs it) the product runs on team's
// workers (gemm's SgemmOn: the same bits as its Sgemm); a nil team is par.For's.
func sgemm(team *par.Team, tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	team.For(m, rowChunk, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
	})
	if g, ok := blas32.Implementation().(gemm.Implementation); ok {
		g.SgemmOn(team, ta, tb, m, n, k, 1, a, lda, b, ldb, 1, c, ldc)
		return
	}
	blas32.Implementation().Sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 1, c, ldc)
}

func ensure32(v []float32, n int) []float32 {
	if cap(v) >= n {
		return v[:n]
	}
	return make([]float32, n)
}

// gather32 converts rows rows of KA then of KB into md.p32.kcat (2B×M, float32), the
// batch rows in chunks of rowChunk/2 side by side (internal/base/par: 16 chunks of B =
// 512 rows).
func (md *model) gather32(p *Problem, rows []int) {
	bs, m := len(rows), md.m
	kcat := ensure32(md.p32.kcat, 2*bs*m)
	md.p32.kcat = kcat
	md.team.For(bs, rowChunk/2, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			for h, src := range [2][]float64{p.KA.RawRowView(rows[i]), p.KB.RawRowView(rows[i])} {
				dst := kcat[(h*bs+i)*m : (h*bs+i+1)*m]
				for j, v := range src {
					dst[j] = float32(v)
				}
			}
		}
	})
}

// rowChunk is the row count of one chunk of the fits' parallel row loops: 64 rows of k
// = 256 latents or M = 512 kernel columns, 16 chunks in a batch of 2B = 1,024 rows.
const rowChunk = 64

// to32RowsTo writes float32(src) into dst (both r rows of c), rows in chunks of
// rowChunk/2 side by side (16 chunks of Ã's M = 512 rows).
func to32RowsTo(team *par.Team, dst []float32, src []float64, r, c int) {
	team.For(r, rowChunk/2, func(_, lo, hi int) {
		d, s := dst[lo*c:hi*c], src[lo*c:hi*c]
		for i, v := range s {
			d[i] = float32(v)
		}
	})
}

// to64RowsTo writes float64(src) into dst (both r rows of c), rows in chunks of
// rowChunk/2 side by side.
func to64RowsTo(team *par.Team, dst []float64, src []float32, r, c int) {
	team.For(r, rowChunk/2, func(_, lo, hi int) {
		d, s := dst[lo*c:hi*c], src[lo*c:hi*c]
		for i, v := range s {
			d[i] = float64(v)
		}
	})
}

// colSumsTo sets dst[j] = Σ_i g[i·c+j] over the r rows of g (r×c), each sum in row
// order, as the plain loop over rows adding each row forms it; chunks of columns side
// by side.
func colSumsTo(team *par.Team, dst, g []float64, r, c int) {
	const cols = 16 // k = 256: 16 chunks, one per core of a 16-core machine
	team.For(c, cols, func(_, lo, hi int) {
		d := dst[lo:hi]
		clear(d)
		for i := range r {
			floats64AddTo(d, g[i*c+lo:i*c+hi])
		}
	})
}

// lossGrad32 is lossGrad with the latents and ∂L/∂Ã formed by float32 products from the
// rows gather32 converted (loss BarlowTwins, SimCLR or VICReg). Every row loop runs in
// chunks side by side (internal/base/par) and gives each entry the serial loop's bits.
func (md *model) lossGrad32(loss Loss, lp LossParams) float64 {
	p := &md.p32
	m, k := md.m, md.k
	r := len(p.kcat) / m
	bs := r / 2
	p.a = ensure32(p.a, m*k)
	to32RowsTo(md.team, p.a, md.theta[:m*k], m, k)
	p.z = ensure32(p.z, r*k)
	sgemm(md.team, false, false, r, k, m, p.kcat, m, p.a, k, p.z, k)
	md.z = ensure(md.z, r, k)
	md.g = ensure(md.g, r, k)
	zd, z32, b := md.z.RawMatrix().Data, p.z, md.b
	md.team.For(r, rowChunk, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			row, src := zd[i*k:(i+1)*k], z32[i*k:(i+1)*k]
			for j, v := range src {
				row[j] = float64(v) + b[j]
			}
		}
	})
	za := md.z.Slice(0, bs, 0, k).(*mat.Dense)
	zb := md.z.Slice(bs, r, 0, k).(*mat.Dense)
	ga := md.g.Slice(0, bs, 0, k).(*mat.Dense)
	gb := md.g.Slice(bs, r, 0, k).(*mat.Dense)
	var l float64
	if loss == SimCLR {
		l = md.loss.simclr32(ga, gb, lp.Temperature, za, zb)
	} else {
		l = md.loss.grad(ga, gb, loss, lp, za, zb)
	}
	gd := md.g.RawMatrix().Data
	p.g = ensure32(p.g, r*k)
	to32RowsTo(md.team, p.g, gd, r, k)
	p.ga = ensure32(p.ga, m*k)
	sgemm(md.team, true, false, m, k, r, p.kcat, m, p.g, k, p.ga, k)
	to64RowsTo(md.team, md.grad[:m*k], p.ga, m, k)
	colSumsTo(md.team, md.grad[m*k:m*k+k], gd, r, k)
	return l
}

// simclr32 is simclr (the same loss and gradient, see there) with U·Uᵀ and (W+Wᵀ)·U
// formed by float32 products; the normalization and the loss are float64. Each row's
// softmax is formed as e_ij = exp((S_ij − max_{j≠i} S_ij)/τ) in float32 (vec.ExpShift32,
// within 2 ulp, sums in float64) with the scale
// c_i = 1/(2B·Σ_{j≠i} e_ij) kept aside, so W + Wᵀ is formed in one pass,
// e_ij·c_i + e_ji·c_j, and the positives' −1/(2B) from both sides added after it.
// The row loops and the tiles of W + Wᵀ run in chunks side by side (internal/base/par); the
// rows' loss terms are summed in row order after them, so the bits are the serial
// loops'.
func (ws *lossWS) simclr32(ga, gb *mat.Dense, tau float64, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	n := 2 * br
	ws.u = ensure(ws.u, n, k)
	ws.r = ensureVec(ws.r, n)
	ws.rowScale = ensureVec(ws.rowScale, n)
	ws.rowLoss = ensureVec(ws.rowLoss, n)
	ws.u32 = ensure32(ws.u32, n*k)
	ws.s32 = ensure32(ws.s32, n*n)
	ws.gu32 = ensure32(ws.gu32, n*k)
	team := ws.team
	team.For(n, rowChunk, func(_, lo, hi int) { ws.normalizeRows(za, zb, lo, hi) })
	sgemm(team, false, true, n, n, k, ws.u32, k, ws.u32, k, ws.s32, n)
	scale := 1 / float64(n)
	// s32 holds S and is overwritten, row by row, by the unnormalized e (diagonal 0).
	team.For(n, rowChunk, func(_, lo, hi int) { ws.softmaxRows(br, tau, lo, hi) })
	var total float64
	for _, v := range ws.rowLoss {
		total += v
	}
	// W + Wᵀ in place, tile by tile (see symTile), scaled per row: the tile (i0, j0),
	// j0 ≥ i0, touches only the pairs (i, j), i < j, with i in tile row i0 and j in tile
	// column j0, so the tiles run side by side.
	// tile rows run side by side. The tiles are handed out one by one, not a tile row
	// at a time: the first tile row holds n/symTile32 tiles and the last one, so rows
	// would leave most goroutines waiting on the first.
	tr := par.Chunks(n, symTile32)
	tiles := tr * (tr + 1) / 2
	team.For(tiles, 1, func(_, t, _ int) {
		i0, j0 := upperTile(t, tr)
		ws.symmetrizeTile(n, i0*symTile32, j0*symTile32)
	})
	for i := range br {
		v := ws.s32[i*n+i+br] - float32(2*scale)
		ws.s32[i*n+i+br], ws.s32[(i+br)*n+i] = v, v
	}
	sgemm(team, false, false, n, k, n, ws.s32, n, ws.u32, k, ws.gu32, k)
	team.For(n, rowChunk, func(_, lo, hi int) { ws.gradRows(ga, gb, tau, lo, hi) })
	return total * scale
}

// normalizeRows sets, for rows lo ≤ i < hi of [za; zb], r_i = max(||z_i||, normEps) and
// u_i = z_i/r_i in ws.u and, rounded, in ws.u32.
func (ws *lossWS) normalizeRows(za, zb *mat.Dense, lo, hi int) {
	_, k := za.Dims()
	for i := lo; i < hi; i++ {
		src := rowOf(za, zb, i)
		var ss float64
		for _, v := range src {
			ss += v * v
		}
		r := math.Max(math.Sqrt(ss), normEps)
		ws.r[i] = r
		row, row32 := ws.u.RawRowView(i), ws.u32[i*k:(i+1)*k]
		for j, v := range src {
			u := v / r
			row[j] = u
			row32[j] = float32(u)
		}
	}
}

// softmaxRows overwrites rows lo ≤ i < hi of S (ws.s32, n×n with n = 2·br) by their
// unnormalized softmax e_ij (e_ii = 0) and sets ws.rowScale[i] = c_i and ws.rowLoss[i],
// row i's term of the loss before the 1/n.
func (ws *lossWS) softmaxRows(br int, tau float64, lo, hi int) {
	n := 2 * br
	invTau := 1 / tau
	invTau32 := float32(invTau)
	scale := 1 / float64(n)
	for i := lo; i < hi; i++ {
		row := ws.s32[i*n : (i+1)*n]
		p := (i + br) % n
		mx := float32(math.Inf(-1))
		for j, v := range row {
			if j != i && v > mx {
				mx = v
			}
		}
		m64 := float64(mx)
		sp := float64(row[p])
		z := vec.ExpShift32(row[:i], mx, invTau32) + vec.ExpShift32(row[i+1:], mx, invTau32)
		row[i] = 0
		ws.rowLoss[i] = -(sp-m64)*invTau + math.Log(z)
		ws.rowScale[i] = scale / z
	}
}

// symmetrizeTile replaces e_ij and e_ji by e_ij·c_i + e_ji·c_j for every pair i < j with
// i in the tile row [i0, i0+symTile32) and j in the tile column [j0, j0+symTile32), in
// blocks of symBlock×symBlock pairs: the rows of S lie n floats apart (4 KiB at 2B =
// 1,024, the same L1 set for every row), so a block's transposed reads must touch few
// rows to stay in the cache. Each pair gets the same operations in any order.
func (ws *lossWS) symmetrizeTile(n, i0, j0 int) {
	i1, j1 := min(i0+symTile32, n), min(j0+symTile32, n)
	for ib := i0; ib < i1; ib += symBlock {
		for jb := max(j0, ib); jb < j1; jb += symBlock {
			for i := ib; i < min(ib+symBlock, i1); i++ {
				ci := ws.rowScale[i]
				ri := ws.s32[i*n : (i+1)*n]
				for j := max(jb, i+1); j < min(jb+symBlock, j1); j++ {
					v := float32(float64(ri[j])*ci + float64(ws.s32[j*n+i])*ws.rowScale[j])
					ri[j], ws.s32[j*n+i] = v, v
				}
			}
		}
	}
}

// upperTile is the t-th tile (i0, j0), j0 ≥ i0, of the upper triangle of tr×tr tiles,
// row by row: (0, 0), (0, 1), …, (0, tr−1), (1, 1), ….
func upperTile(t, tr int) (i0, j0 int) {
	for t >= tr-i0 {
		t -= tr - i0
		i0++
	}
	return i0, i0 + t
}

// gradRows writes rows lo ≤ i < hi of ∂L/∂z into [ga; gb] from (W+Wᵀ)U in ws.gu32: the
// projection of row i off u_i, over τ·r_i.
func (ws *lossWS) gradRows(ga, gb *mat.Dense, tau float64, lo, hi int) {
	_, k := ga.Dims()
	for i := lo; i < hi; i++ {
		dst := rowOf(ga, gb, i)
		g32 := ws.gu32[i*k : (i+1)*k]
		u := ws.u.RawRowView(i)
		var ug float64
		for j, v := range g32 {
			ug += u[j] * float64(v)
		}
		inv := 1 / (tau * ws.r[i])
		for j, v := range g32 {
			dst[j] = (float64(v) - u[j]*ug) * inv
		}
	}
}

// rowOf is row i of [a; b] (a and b with the same row count).
func rowOf(a, b *mat.Dense, i int) []float64 {
	if r, _ := a.Dims(); i >= r {
		return b.RawRowView(i - r)
	}
	return a.RawRowView(i)
}

// symTile32 is simclr32's symmetrization tile: 64×64 float32 (16 KiB), handed out whole
// to a goroutine; symBlock is the side of the blocks it is walked in.
const (
	symTile32 = 64
	symBlock  = 8
)
