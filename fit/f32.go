package fit

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/vec"
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
// (blas32.Use; cairnd and cairnctl install internal/gemm's AVX-512/AVX2 Sgemm), and are
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
// blas.Float32.
func sgemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	blas32.Implementation().Sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
}

func ensure32(v []float32, n int) []float32 {
	if cap(v) >= n {
		return v[:n]
	}
	return make([]float32, n)
}

// gather32 converts rows rows of KA then of KB into md.p32.kcat (2B×M, float32).
func (md *model) gather32(p *Problem, rows []int) {
	bs := len(rows)
	md.p32.kcat = ensure32(md.p32.kcat, 2*bs*md.m)
	for i, r := range rows {
		for h, src := range [2][]float64{p.KA.RawRowView(r), p.KB.RawRowView(r)} {
			dst := md.p32.kcat[(h*bs+i)*md.m : (h*bs+i+1)*md.m]
			for j, v := range src {
				dst[j] = float32(v)
			}
		}
	}
}

// lossGrad32 is lossGrad with the latents and ∂L/∂Ã formed by float32 products from the
// rows gather32 converted (loss BarlowTwins, SimCLR or VICReg).
func (md *model) lossGrad32(loss Loss, lp LossParams) float64 {
	p := &md.p32
	m, k := md.m, md.k
	r := len(p.kcat) / m
	bs := r / 2
	p.a = ensure32(p.a, m*k)
	for i, v := range md.theta[:m*k] {
		p.a[i] = float32(v)
	}
	p.z = ensure32(p.z, r*k)
	sgemm(false, false, r, k, m, p.kcat, m, p.a, k, p.z, k)
	md.z = ensure(md.z, r, k)
	md.g = ensure(md.g, r, k)
	zd := md.z.RawMatrix().Data
	for i := range r {
		row, src := zd[i*k:(i+1)*k], p.z[i*k:(i+1)*k]
		for j, v := range src {
			row[j] = float64(v) + md.b[j]
		}
	}
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
	for i, v := range gd {
		p.g[i] = float32(v)
	}
	p.ga = ensure32(p.ga, m*k)
	sgemm(true, false, m, k, r, p.kcat, m, p.g, k, p.ga, k)
	for i, v := range p.ga {
		md.grad[i] = float64(v)
	}
	gbias := md.grad[m*k : m*k+k]
	clear(gbias)
	for i := range r {
		floats64AddTo(gbias, gd[i*k:(i+1)*k])
	}
	return l
}

// simclr32 is simclr (the same loss and gradient, see there) with U·Uᵀ and (W+Wᵀ)·U
// formed by float32 products; the normalization and the loss are float64. Each row's
// softmax is formed as e_ij = exp((S_ij − max_{j≠i} S_ij)/τ) in float32 (vec.ExpShift32,
// within 2 ulp, sums in float64) with the scale
// c_i = 1/(2B·Σ_{j≠i} e_ij) kept aside, so W + Wᵀ is formed in one pass,
// e_ij·c_i + e_ji·c_j, and the positives' −1/(2B) from both sides added after it.
func (ws *lossWS) simclr32(ga, gb *mat.Dense, tau float64, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	n := 2 * br
	ws.u = ensure(ws.u, n, k)
	ws.r = ensureVec(ws.r, n)
	ws.rowScale = ensureVec(ws.rowScale, n)
	ws.u32 = ensure32(ws.u32, n*k)
	ws.s32 = ensure32(ws.s32, n*n)
	ws.gu32 = ensure32(ws.gu32, n*k)
	for i := range n {
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
	sgemm(false, true, n, n, k, ws.u32, k, ws.u32, k, ws.s32, n)
	var total float64
	scale, invTau := 1/float64(n), 1/tau
	invTau32 := float32(invTau)
	// s32 holds S and is overwritten, row by row, by the unnormalized e (diagonal 0).
	for i := range n {
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
		total += -(sp-m64)*invTau + math.Log(z)
		ws.rowScale[i] = scale / z
	}
	// W + Wᵀ in place, tile by tile (see symTile), scaled per row.
	for i0 := 0; i0 < n; i0 += symTile32 {
		for j0 := i0; j0 < n; j0 += symTile32 {
			for i := i0; i < min(i0+symTile32, n); i++ {
				ci := ws.rowScale[i]
				ri := ws.s32[i*n : (i+1)*n]
				for j := max(j0, i+1); j < min(j0+symTile32, n); j++ {
					v := float32(float64(ri[j])*ci + float64(ws.s32[j*n+i])*ws.rowScale[j])
					ri[j], ws.s32[j*n+i] = v, v
				}
			}
		}
	}
	for i := range br {
		v := ws.s32[i*n+i+br] - float32(2*scale)
		ws.s32[i*n+i+br], ws.s32[(i+br)*n+i] = v, v
	}
	sgemm(false, false, n, k, n, ws.s32, n, ws.u32, k, ws.gu32, k)
	for i := range n {
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
	return total * scale
}

// rowOf is row i of [a; b] (a and b with the same row count).
func rowOf(a, b *mat.Dense, i int) []float64 {
	if r, _ := a.Dims(); i >= r {
		return b.RawRowView(i - r)
	}
	return a.RawRowView(i)
}

// symTile32 is simclr32's symmetrization tile: 64×64 float32 (16 KiB).
const symTile32 = 64
