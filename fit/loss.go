package fit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/par"
)

// Loss names a self-supervised objective on the two views' latents z_A, z_B (B×k each).
// BYOL's also depends on a predictor and a target encoder that live inside an Adam fit
// (byol.go), so it is not a function of (z_A, z_B) alone.
type Loss int

const (
	// BarlowTwins is the cross-correlation objective of Zbontar et al. (2021).
	BarlowTwins Loss = iota + 1
	// SimCLR is the NT-Xent contrastive objective of Chen et al. (2020).
	SimCLR
	// VICReg is the variance–invariance–covariance objective of Bardes et al. (2022).
	VICReg
	// BYOL is the bootstrap objective of Grill et al. (2020): a predictor on the online
	// encoder regresses an EMA target encoder's latent of the other view (byol.go). Adam
	// fits it; Krepes and LossGradTo do not accept it.
	BYOL
)

// String returns the command-line name of l.
func (l Loss) String() string {
	switch l {
	case BarlowTwins:
		return "bt"
	case SimCLR:
		return "simclr"
	case VICReg:
		return "vicreg"
	case BYOL:
		return "byol"
	}
	return fmt.Sprintf("Loss(%d)", int(l))
}

// ParseLoss maps "bt", "simclr", "vicreg" and "byol" to a Loss.
func ParseLoss(s string) (Loss, error) {
	for _, l := range []Loss{BarlowTwins, SimCLR, VICReg, BYOL} {
		if l.String() == s {
			return l, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want bt, simclr, vicreg or byol)", ErrLoss, s)
}

// LossParams are the objectives' constants (paper Table hparams).
type LossParams struct {
	// BTOffDiag is the Barlow Twins off-diagonal weight (35).
	BTOffDiag float64
	// Temperature is the SimCLR temperature τ (0.107).
	Temperature float64
	// VICLambda, VICMu, VICNu are VICReg's invariance, variance and covariance weights
	// (1.85, 1.61, 0.161).
	VICLambda, VICMu, VICNu float64
	// BYOLTauBase is BYOL's base target decay τ_base in [0, 1] (0.996, Grill et al. 2020;
	// the paper's Table hparams has no BYOL row): the target's EMA rate starts there and
	// rises to 1 along a cosine over the fit's steps (emaTau). 1 freezes the target at the
	// initialization.
	BYOLTauBase float64
}

// DefaultLossParams returns the values of paper Table hparams, and BYOL's own τ_base.
func DefaultLossParams() LossParams {
	return LossParams{BTOffDiag: 35, Temperature: 0.107, VICLambda: 1.85, VICMu: 1.61, VICNu: 0.161, BYOLTauBase: 0.996}
}

const (
	// bnEps is the variance floor of Barlow Twins' batch normalization (PyTorch
	// BatchNorm1d's default, which the reference implementation uses).
	bnEps = 1e-5
	// vicEps is the variance floor inside VICReg's standard deviation (reference code).
	vicEps = 1e-4
	// normEps is the norm floor of SimCLR's row normalization (F.normalize's default).
	normEps = 1e-12
)

// lossWS holds the buffers of one loss evaluation; reused across batches so the hot loop
// allocates only when the batch shape grows.
type lossWS struct {
	xa, xb, gxa, gxb, c, d *mat.Dense
	sa, sb                 []float64
	u, s, w, gu            *mat.Dense
	r                      []float64
	// simclr32's: the per-row softmax scales and loss terms and the float32 U, S (then
	// W + Wᵀ) and (W+Wᵀ)U.
	rowScale, rowLoss []float64
	u32, s32, gu32    []float32
	// team runs simclr32's loops (the fit's; nil: par.For's goroutines).
	team *par.Team
}

// ensure returns m resized to r×c, reusing its storage when large enough. Contents are
// unspecified.
func ensure(m *mat.Dense, r, c int) *mat.Dense {
	if m != nil && cap(m.RawMatrix().Data) >= r*c {
		return mat.NewDense(r, c, m.RawMatrix().Data[:r*c])
	}
	return mat.NewDense(r, c, nil)
}

func ensureVec(v []float64, n int) []float64 {
	if cap(v) >= n {
		return v[:n]
	}
	return make([]float64, n)
}

// LossGradTo writes ∂L/∂z_A into ga and ∂L/∂z_B into gb and returns L(z_A, z_B) for one
// batch. za and zb are B×k and are not modified; ga and gb must be B×k and must not alias
// them. It allocates its workspace; the fitting loop uses a reused one. loss must be
// BarlowTwins, SimCLR or VICReg: BYOL's loss needs the predictor and target of a running
// fit, and LossGradTo panics on it (a programmer error, like a wrong shape).
func LossGradTo(ga, gb *mat.Dense, loss Loss, p LossParams, za, zb *mat.Dense) float64 {
	var ws lossWS
	return ws.grad(ga, gb, loss, p, za, zb)
}

func (ws *lossWS) grad(ga, gb *mat.Dense, loss Loss, p LossParams, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	if r, c := zb.Dims(); r != br || c != k {
		panic(fmt.Sprintf("fit: z_A is %d×%d, z_B is %d×%d", br, k, r, c))
	}
	for _, g := range []*mat.Dense{ga, gb} {
		if r, c := g.Dims(); r != br || c != k {
			panic(fmt.Sprintf("fit: gradient is %d×%d, latents %d×%d", r, c, br, k))
		}
	}
	switch loss {
	case BarlowTwins:
		return ws.barlow(ga, gb, p.BTOffDiag, za, zb)
	case SimCLR:
		return ws.simclr(ga, gb, p.Temperature, za, zb)
	case VICReg:
		return ws.vicreg(ga, gb, p, za, zb)
	case BYOL:
		panic("fit: the BYOL loss depends on the fit's predictor and target, not on (z_A, z_B) alone")
	}
	panic(fmt.Sprintf("fit: unknown loss %d", int(loss)))
}

// bnForward writes the batch-normalized columns of z into x and the columns' σ into s:
//
//	x[i,j] = (z[i,j] − μ_j)/σ_j,  σ_j = sqrt(mean_i (z[i,j] − μ_j)² + bnEps)
func bnForward(x *mat.Dense, s []float64, z *mat.Dense) {
	br, k := z.Dims()
	for j := range k {
		var mu float64
		for i := range br {
			mu += z.At(i, j)
		}
		mu /= float64(br)
		var v float64
		for i := range br {
			d := z.At(i, j) - mu
			v += d * d
		}
		s[j] = math.Sqrt(v/float64(br) + bnEps)
		for i := range br {
			x.Set(i, j, (z.At(i, j)-mu)/s[j])
		}
	}
}

// bnBackwardTo writes into dz the gradient through batch normalization of the gradient g
// with respect to its output x, column by column:
//
//	dz[:,j] = (g[:,j] − mean(g[:,j]) − x[:,j]·mean(g[:,j]∘x[:,j])) / σ_j
//
// (differentiate x_i = (z_i − μ)/σ with dσ/dz_i = (z_i − μ)/(Bσ)). dz may alias g.
func bnBackwardTo(dz, g, x *mat.Dense, s []float64) {
	br, k := g.Dims()
	for j := range k {
		var mg, mgx float64
		for i := range br {
			gi := g.At(i, j)
			mg += gi
			mgx += gi * x.At(i, j)
		}
		mg /= float64(br)
		mgx /= float64(br)
		for i := range br {
			dz.Set(i, j, (g.At(i, j)-mg-x.At(i, j)*mgx)/s[j])
		}
	}
}

// barlow is Barlow Twins with both terms normalized to means (our documented choice; the
// paper gives only the weight, 35):
//
//	x_A = BN(z_A), x_B = BN(z_B),  C = x_Aᵀ x_B / B
//	L = (1/k) Σ_i (1 − C_ii)² + λ/(k(k−1)) Σ_{i≠j} C_ij²
//
// With the reference implementation's sums instead of means, λ = 35 would weight the
// k(k−1) = 65280 off-diagonal entries (k = 256) about 4500:1 against the k diagonal ones
// at initialization and the invariance term would not matter; with means the off-diagonal
// term is ≈ 35/B ≈ 0.07 at random, the same order as the invariance term.
func (ws *lossWS) barlow(ga, gb *mat.Dense, lam float64, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	ws.xa, ws.xb = ensure(ws.xa, br, k), ensure(ws.xb, br, k)
	ws.gxa, ws.gxb = ensure(ws.gxa, br, k), ensure(ws.gxb, br, k)
	ws.c, ws.d = ensure(ws.c, k, k), ensure(ws.d, k, k)
	ws.sa, ws.sb = ensureVec(ws.sa, k), ensureVec(ws.sb, k)
	bnForward(ws.xa, ws.sa, za)
	bnForward(ws.xb, ws.sb, zb)
	ws.c.Mul(ws.xa.T(), ws.xb)
	ws.c.Scale(1/float64(br), ws.c)
	kf := float64(k)
	off := 0.0
	if k > 1 {
		off = lam / (kf * (kf - 1))
	}
	var on, offSum float64
	for i := range k {
		for j := range k {
			c := ws.c.At(i, j)
			if i == j {
				on += (1 - c) * (1 - c)
				ws.d.Set(i, j, -2*(1-c)/kf)
			} else {
				offSum += c * c
				ws.d.Set(i, j, 2*off*c)
			}
		}
	}
	// ∂L/∂x_A = x_B Dᵀ / B, ∂L/∂x_B = x_A D / B.
	ws.gxa.Mul(ws.xb, ws.d.T())
	ws.gxa.Scale(1/float64(br), ws.gxa)
	ws.gxb.Mul(ws.xa, ws.d)
	ws.gxb.Scale(1/float64(br), ws.gxb)
	bnBackwardTo(ga, ws.gxa, ws.xa, ws.sa)
	bnBackwardTo(gb, ws.gxb, ws.xb, ws.sb)
	return on/kf + off*offSum
}

// symTile is the tile of simclr's in-place symmetrization: 64×64 float64 (32 KiB) of the
// rows and as much of the columns stay in L1/L2 while the tile is walked.
const symTile = 64

// simclr is NT-Xent over the 2B rows u = [z_A; z_B] normalized to unit length, with
// positives i ↔ i±B and every other row a negative:
//
//	S = U Uᵀ/τ,  ℓ_i = −S_{i,p(i)} + log Σ_{j≠i} exp S_ij,  L = (1/2B) Σ_i ℓ_i
//
// Gradient: W_ij = (softmax_{j≠i}(S_i)_j − [j = p(i)])/(2B), ∂L/∂U = (W + Wᵀ)U/τ, then
// through u = z/||z||: ∂L/∂z = (g − u(u·g))/||z||.
func (ws *lossWS) simclr(ga, gb *mat.Dense, tau float64, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	n := 2 * br
	ws.u = ensure(ws.u, n, k)
	ws.s = ensure(ws.s, n, n)
	ws.w = ensure(ws.w, n, n)
	ws.gu = ensure(ws.gu, n, k)
	ws.r = ensureVec(ws.r, n)
	ws.normRows(za, zb)
	ws.s.Mul(ws.u, ws.u.T())
	var total float64
	scale, invTau := 1/float64(n), 1/tau
	for i := range n {
		p := (i + br) % n
		srow := ws.s.RawRowView(i)
		wrow := ws.w.RawRowView(i)
		mx := math.Inf(-1)
		for j, v := range srow { // S ← S/τ in the same pass as its row maximum
			v *= invTau
			srow[j] = v
			if j != i && v > mx {
				mx = v
			}
		}
		z := expRow(wrow, srow, i, mx)
		total += -srow[p] + mx + math.Log(z)
		for j := range wrow {
			if j == i {
				wrow[j] = 0
				continue
			}
			wrow[j] = wrow[j] / z * scale
		}
		wrow[p] -= scale
	}
	symmetrize(ws.w)
	ws.gu.Mul(ws.w, ws.u)
	ws.simclrGrad(ga, gb, tau)
	return total * scale
}

// normRows writes the rows of z = [z_A; z_B] into ws.u, each divided by its norm
// r_i = max(‖z_i‖, normEps), and r_i into ws.r (both sized by the caller).
func (ws *lossWS) normRows(za, zb *mat.Dense) {
	br, k := za.Dims()
	for i := range 2 * br {
		src, ii := stackedRow(za, zb, br, i)
		row := ws.u.RawRowView(i)
		var ss float64
		for j := range k {
			v := src.At(ii, j)
			row[j] = v
			ss += v * v
		}
		r := math.Max(math.Sqrt(ss), normEps)
		ws.r[i] = r
		for j := range row {
			row[j] /= r
		}
	}
}

// expRow writes exp(s_j − mx) into dst[j] for every j ≠ i and returns their sum (dst[i]
// is left as it was): the softmax numerators of row i of S/τ without its diagonal. simclr
// and the HVP's softmax (simclrAt) both form them here, so P = dst/sum has the forward
// pass's bits.
func expRow(dst, s []float64, i int, mx float64) float64 {
	var z float64
	for j, v := range s {
		if j == i {
			continue
		}
		e := math.Exp(v - mx)
		dst[j] = e
		z += e
	}
	return z
}

// stackedRow returns the matrix and row index of row i of [a; b], a having br rows.
func stackedRow(a, b *mat.Dense, br, i int) (*mat.Dense, int) {
	if i >= br {
		return b, i - br
	}
	return a, i
}

// symmetrize sets W ← W + Wᵀ in place (upper and lower halves together), on the raw rows
// in tiles of symTile×symTile so both the row and the column walk stay in cache.
func symmetrize(w *mat.Dense) {
	n, _ := w.Dims()
	wd, ld := w.RawMatrix().Data, w.RawMatrix().Stride
	for i0 := 0; i0 < n; i0 += symTile {
		for j0 := i0; j0 < n; j0 += symTile {
			for i := i0; i < min(i0+symTile, n); i++ {
				for j := max(j0, i+1); j < min(j0+symTile, n); j++ {
					v := wd[i*ld+j] + wd[j*ld+i]
					wd[i*ld+j], wd[j*ld+i] = v, v
				}
			}
		}
	}
}

// simclrGrad writes SimCLR's gradient in z into (ga, gb) from ws.u, ws.r and
// ws.gu = (W + Wᵀ)U: g_i = (gU_i − u_i(u_i·gU_i))/(τ r_i).
func (ws *lossWS) simclrGrad(ga, gb *mat.Dense, tau float64) {
	br, k := ga.Dims()
	for i := range 2 * br {
		dst, ii := stackedRow(ga, gb, br, i)
		g := ws.gu.RawRowView(i)
		u := ws.u.RawRowView(i)
		var ug float64
		for j := range k {
			ug += u[j] * g[j]
		}
		inv := 1 / (tau * ws.r[i])
		for j := range k {
			dst.Set(ii, j, (g[j]-u[j]*ug)*inv)
		}
	}
}

// vicreg follows the reference implementation of Bardes et al. (2022):
//
//	L = λ·mean((z_A − z_B)²)
//	  + μ·(mean_j relu(1 − σ_A,j) + mean_j relu(1 − σ_B,j))/2,  σ_j = sqrt(var_j + 1e-4)
//	  + ν·(Σ_{i≠j} Cov_A,ij² + Σ_{i≠j} Cov_B,ij²)/k
//
// with unbiased variances and covariances (divisor B−1) of column-centered latents. B ≥ 2.
func (ws *lossWS) vicreg(ga, gb *mat.Dense, p LossParams, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	bf, kf := float64(br), float64(k)
	var repr float64
	for i := range br {
		for j := range k {
			d := za.At(i, j) - zb.At(i, j)
			repr += d * d
			g := 2 * p.VICLambda * d / (bf * kf)
			ga.Set(i, j, g)
			gb.Set(i, j, -g)
		}
	}
	loss := p.VICLambda * repr / (bf * kf)
	ws.xa = ensure(ws.xa, br, k)
	ws.c, ws.d = ensure(ws.c, k, k), ensure(ws.d, k, k)
	ws.gxa = ensure(ws.gxa, br, k)
	for _, v := range []struct{ z, g *mat.Dense }{{za, ga}, {zb, gb}} {
		xc := ws.xa
		for j := range k {
			var mu float64
			for i := range br {
				mu += v.z.At(i, j)
			}
			mu /= bf
			var ss float64
			for i := range br {
				d := v.z.At(i, j) - mu
				xc.Set(i, j, d)
				ss += d * d
			}
			sd := math.Sqrt(ss/(bf-1) + vicEps)
			if sd < 1 {
				loss += p.VICMu * (1 - sd) / (2 * kf)
				// ∂σ_j/∂z_ij = xc_ij/((B−1)σ_j); the centering term vanishes since Σ_i xc_ij = 0.
				c := -p.VICMu / (2 * kf) / ((bf - 1) * sd)
				for i := range br {
					v.g.Set(i, j, v.g.At(i, j)+c*xc.At(i, j))
				}
			}
		}
		ws.c.Mul(xc.T(), xc)
		ws.c.Scale(1/(bf-1), ws.c)
		for i := range k {
			for j := range k {
				if i == j {
					ws.d.Set(i, j, 0)
					continue
				}
				c := ws.c.At(i, j)
				loss += p.VICNu * c * c / kf
				ws.d.Set(i, j, 2*p.VICNu*c/kf)
			}
		}
		// ∂/∂xc = 2 xc D/(B−1) (D symmetric); its column means are zero, so centering
		// passes it through unchanged.
		ws.gxa.Mul(xc, ws.d)
		addScaled(v.g, 2/(bf-1), ws.gxa)
	}
	return loss
}

// addScaled computes dst += alpha·src row by row (either may be a strided view).
func addScaled(dst *mat.Dense, alpha float64, src *mat.Dense) {
	r, _ := dst.Dims()
	for i := range r {
		floats.AddScaled(dst.RawRowView(i), alpha, src.RawRowView(i))
	}
}
