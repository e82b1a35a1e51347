package fit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// hvpWS holds the buffers of exact Hessian-vector products in z.
type hvpWS struct {
	lossWS
	ga, gb, dxa, dxb, dc, dd, t1, t2 *mat.Dense
	du, ds, dw, dgu                  *mat.Dense
	dr                               []float64
	tmp1, tmp2                       *mat.Dense // product scratch
	p                                *mat.Dense // SimCLR's softmax P at z (zero diagonal), when not kept in at
	// at, when not nil, holds SimCLR's P and (W + Wᵀ)U at this call's z: simclrHVP reads
	// them instead of the forward pass, or stores them there on the first call. The
	// caller (gn) keeps one per batch, since its z is fixed across the CG iterations.
	at *simclrPoint
}

// simclrPoint is what simclrHVP needs of the loss at a fixed z beyond z itself: the
// softmax P (2B×2B, zero diagonal) and (W + Wᵀ)U (2B×k). Everything else (U, r, W + Wᵀ,
// the gradient) follows from them in O(B·k + B²) with the forward pass's own operations,
// so a call that reads them returns the bits of one that recomputes them.
type simclrPoint struct {
	p, gu *mat.Dense
}

// hessVecTo writes H·(da, db) into (ha, hb), H the Hessian of the batch loss in (z_A, z_B),
// exactly: each is the forward-mode derivative (directional derivative along (da, db)) of
// the analytic gradient of loss.go, differentiated by hand line by line. Inputs are not
// modified; ha, hb must not alias them. BYOL is not accepted (panic): Krepes, the only
// caller, returns ErrUnsupported for it first.
func (ws *hvpWS) hessVecTo(ha, hb *mat.Dense, loss Loss, p LossParams, za, zb, da, db *mat.Dense) {
	br, k := za.Dims()
	ws.ga, ws.gb = ensure(ws.ga, br, k), ensure(ws.gb, br, k)
	switch loss {
	case BarlowTwins:
		ws.barlowHVP(ha, hb, p.BTOffDiag, za, zb, da, db)
	case SimCLR:
		ws.simclrHVP(ha, hb, p.Temperature, za, zb, da, db)
	case VICReg:
		ws.vicregHVP(ha, hb, p, za, zb, da, db)
	case BYOL:
		panic("fit: BYOL has no Hessian in z (stop-gradient target); Krepes rejects it")
	default:
		panic(fmt.Sprintf("fit: unknown loss %d", int(loss)))
	}
}

// bnTangentTo writes into dg the derivative of g = BNback(gx; x, σ) (bnBackwardTo) along
// the input tangent dz, given the output-gradient tangent dgx and dx = BN'(z)·dz:
//
//	dσ = mean(x∘dz)
//	dg = (dgx − mean(dgx) − dx·mean(gx∘x) − x·mean(dgx∘x + gx∘dx))/σ − g·dσ/σ
func bnTangentTo(dg, g, gx, dgx, x, dx, dz *mat.Dense, s []float64) {
	br, k := g.Dims()
	bf := float64(br)
	for j := range k {
		var mdz, mgx, mdgx, mmix float64
		for i := range br {
			xi := x.At(i, j)
			mdz += xi * dz.At(i, j)
			mgx += gx.At(i, j) * xi
			mdgx += dgx.At(i, j)
			mmix += dgx.At(i, j)*xi + gx.At(i, j)*dx.At(i, j)
		}
		mdz /= bf
		mgx /= bf
		mdgx /= bf
		mmix /= bf
		for i := range br {
			v := (dgx.At(i, j) - mdgx - dx.At(i, j)*mgx - x.At(i, j)*mmix) / s[j]
			dg.Set(i, j, v-g.At(i, j)*mdz/s[j])
		}
	}
}

// barlowHVP differentiates barlow: dx = BN'·dz (the BN Jacobian is symmetric, so it is
// bnBackwardTo applied to dz), dC = (dx_Aᵀx_B + x_Aᵀdx_B)/B, dD = f'(C)∘dC,
// d(∂L/∂x_A) = (dx_B Dᵀ + x_B dDᵀ)/B, d(∂L/∂x_B) = (dx_A D + x_A dD)/B, then bnTangentTo.
func (ws *hvpWS) barlowHVP(ha, hb *mat.Dense, lam float64, za, zb, da, db *mat.Dense) {
	br, k := za.Dims()
	ws.barlow(ws.ga, ws.gb, lam, za, zb) // leaves x_A, x_B, σ, C, D, ∂L/∂x in lossWS
	ws.dxa, ws.dxb = ensure(ws.dxa, br, k), ensure(ws.dxb, br, k)
	ws.dc, ws.dd = ensure(ws.dc, k, k), ensure(ws.dd, k, k)
	ws.t1, ws.t2 = ensure(ws.t1, br, k), ensure(ws.t2, br, k)
	bnBackwardTo(ws.dxa, da, ws.xa, ws.sa)
	bnBackwardTo(ws.dxb, db, ws.xb, ws.sb)
	ws.dc.Mul(ws.dxa.T(), ws.xb)
	ws.tmp1 = ensure(ws.tmp1, k, k)
	ws.tmp1.Mul(ws.xa.T(), ws.dxb)
	ws.dc.Add(ws.dc, ws.tmp1)
	ws.dc.Scale(1/float64(br), ws.dc)
	kf := float64(k)
	off := 0.0
	if k > 1 {
		off = lam / (kf * (kf - 1))
	}
	for i := range k {
		for j := range k {
			if i == j {
				ws.dd.Set(i, j, 2*ws.dc.At(i, j)/kf)
			} else {
				ws.dd.Set(i, j, 2*off*ws.dc.At(i, j))
			}
		}
	}
	// t1 = d(∂L/∂x_A), t2 = d(∂L/∂x_B).
	ws.tmp2 = ensure(ws.tmp2, br, k)
	ws.t1.Mul(ws.dxb, ws.d.T())
	ws.tmp2.Mul(ws.xb, ws.dd.T())
	ws.t1.Add(ws.t1, ws.tmp2)
	ws.t1.Scale(1/float64(br), ws.t1)
	ws.t2.Mul(ws.dxa, ws.d)
	ws.tmp2.Mul(ws.xa, ws.dd)
	ws.t2.Add(ws.t2, ws.tmp2)
	ws.t2.Scale(1/float64(br), ws.t2)
	bnTangentTo(ha, ws.ga, ws.gxa, ws.t1, ws.xa, ws.dxa, da, ws.sa)
	bnTangentTo(hb, ws.gb, ws.gxb, ws.t2, ws.xb, ws.dxb, db, ws.sb)
}

// simclrHVP differentiates simclr: du = (dz − u(u·dz))/r, dr = u·dz,
// dS = (dU Uᵀ + U dUᵀ)/τ, dP_ij = P_ij(dS_ij − Σ_l P_il dS_il), dW = dP/(2B),
// dgU = ((dW + dWᵀ)U + (W + Wᵀ)dU)/τ, and
// dg = (dgU − du(u·gU) − u(du·gU + u·dgU))/r − g·dr/r.
func (ws *hvpWS) simclrHVP(ha, hb *mat.Dense, tau float64, za, zb, da, db *mat.Dense) {
	br, k := za.Dims()
	n := 2 * br
	p := ws.simclrAt(tau, za, zb)
	ws.du = ensure(ws.du, n, k)
	ws.ds = ensure(ws.ds, n, n)
	ws.dw = ensure(ws.dw, n, n)
	ws.dgu = ensure(ws.dgu, n, k)
	ws.dr = ensureVec(ws.dr, n)
	for i := range n {
		src, ii := da, i
		if i >= br {
			src, ii = db, i-br
		}
		u := ws.u.RawRowView(i)
		var ud float64
		for j := range k {
			ud += u[j] * src.At(ii, j)
		}
		ws.dr[i] = ud
		row := ws.du.RawRowView(i)
		for j := range k {
			row[j] = (src.At(ii, j) - u[j]*ud) / ws.r[i]
		}
	}
	ws.ds.Mul(ws.du, ws.u.T())
	// dS = (dU Uᵀ + U dUᵀ)/τ: symmetrize dU Uᵀ.
	for i := range n {
		for j := i; j < n; j++ {
			v := (ws.ds.At(i, j) + ws.ds.At(j, i)) / tau
			ws.ds.Set(i, j, v)
			ws.ds.Set(j, i, v)
		}
	}
	scale := 1 / float64(n)
	for i := range n {
		prow := p.RawRowView(i)
		dsrow := ws.ds.RawRowView(i)
		dwrow := ws.dw.RawRowView(i)
		var pds float64
		for j, pj := range prow {
			if j != i {
				pds += pj * dsrow[j]
			}
		}
		for j, pj := range prow {
			if j == i {
				dwrow[j] = 0
				continue
			}
			dwrow[j] = pj * (dsrow[j] - pds) * scale
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			v := ws.dw.At(i, j) + ws.dw.At(j, i)
			ws.dw.Set(i, j, v)
			ws.dw.Set(j, i, v)
		}
	}
	ws.dgu.Mul(ws.dw, ws.u)
	ws.tmp2 = ensure(ws.tmp2, n, k)
	ws.tmp2.Mul(ws.w, ws.du)
	ws.dgu.Add(ws.dgu, ws.tmp2)
	ws.dgu.Scale(1/tau, ws.dgu)
	// ws.gu holds (W + Wᵀ)U without the 1/τ factor.
	for i := range n {
		dst, g, ii := ha, ws.ga, i
		if i >= br {
			dst, g, ii = hb, ws.gb, i-br
		}
		u, du, dgu, gu := ws.u.RawRowView(i), ws.du.RawRowView(i), ws.dgu.RawRowView(i), ws.gu.RawRowView(i)
		var ugu, dugu, udgu float64
		for j := range k {
			ugu += u[j] * gu[j] / tau
			dugu += du[j] * gu[j] / tau
			udgu += u[j] * dgu[j]
		}
		for j := range k {
			v := (dgu[j] - du[j]*ugu - u[j]*(dugu+udgu)) / ws.r[i]
			dst.Set(ii, j, v-g.At(ii, j)*ws.dr[i]/ws.r[i])
		}
	}
}

// simclrAt sets ws.u, ws.r, ws.w = W + Wᵀ, ws.gu = (W + Wᵀ)U, ws.ga, ws.gb (the
// gradient) for SimCLR at z = [z_A; z_B] and returns the softmax P (read only): from
// ws.at when it holds them, else by the forward pass (then kept in ws.at, when set).
func (ws *hvpWS) simclrAt(tau float64, za, zb *mat.Dense) *mat.Dense {
	br, k := za.Dims()
	n := 2 * br
	if ws.at == nil || ws.at.p == nil {
		ws.simclr(ws.ga, ws.gb, tau, za, zb) // leaves u, r, S/τ, W + Wᵀ, (W + Wᵀ)U
		// P from S/τ, as simclr forms it: exp(S_ij − max_{l≠i} S_il) over its row sum.
		ws.p = ensure(ws.p, n, n)
		for i := range n {
			srow, prow := ws.s.RawRowView(i), ws.p.RawRowView(i)
			mx := math.Inf(-1)
			for j, v := range srow {
				if j != i && v > mx {
					mx = v
				}
			}
			z := expRow(prow, srow, i, mx)
			for j := range prow {
				prow[j] /= z
			}
			prow[i] = 0
		}
		if ws.at == nil {
			return ws.p
		}
		ws.at.p, ws.at.gu = mat.DenseCopyOf(ws.p), mat.DenseCopyOf(ws.gu)
		return ws.at.p
	}
	p := ws.at.p
	ws.u, ws.w, ws.gu = ensure(ws.u, n, k), ensure(ws.w, n, n), ensure(ws.gu, n, k)
	ws.r = ensureVec(ws.r, n)
	ws.normRows(za, zb)
	// W as simclr forms it from P (wrow = P·(1/2B), minus 1/2B at the positive pair), then
	// W + Wᵀ by the same additions.
	scale := 1 / float64(n)
	for i := range n {
		prow, wrow := p.RawRowView(i), ws.w.RawRowView(i)
		for j, pj := range prow {
			wrow[j] = pj * scale
		}
		wrow[i] = 0
		wrow[(i+br)%n] -= scale
	}
	symmetrize(ws.w)
	ws.gu.Copy(ws.at.gu)
	ws.simclrGrad(ws.ga, ws.gb, tau)
	return p
}

// vicregHVP differentiates vicreg term by term: the invariance term is quadratic; the
// variance hinge, on its active columns (σ_j < 1), gives d(c_j xc) = c_j(dxc − xc·dσ_j/σ_j)
// with dσ_j = Σ_i xc_ij dxc_ij/((B−1)σ_j); the covariance term gives
// d(2 xc D/(B−1)) = 2(dxc D + xc dD)/(B−1), dD = (2ν/k)·offdiag(dCov),
// dCov = (dxcᵀxc + xcᵀdxc)/(B−1).
func (ws *hvpWS) vicregHVP(ha, hb *mat.Dense, p LossParams, za, zb, da, db *mat.Dense) {
	br, k := za.Dims()
	bf, kf := float64(br), float64(k)
	for i := range br {
		for j := range k {
			g := 2 * p.VICLambda * (da.At(i, j) - db.At(i, j)) / (bf * kf)
			ha.Set(i, j, g)
			hb.Set(i, j, -g)
		}
	}
	ws.xa, ws.dxa = ensure(ws.xa, br, k), ensure(ws.dxa, br, k)
	ws.c, ws.d, ws.dc = ensure(ws.c, k, k), ensure(ws.d, k, k), ensure(ws.dc, k, k)
	ws.t1 = ensure(ws.t1, br, k)
	for _, v := range []struct{ z, dz, h *mat.Dense }{{za, da, ha}, {zb, db, hb}} {
		xc, dxc := ws.xa, ws.dxa
		for j := range k {
			var mu, dmu float64
			for i := range br {
				mu += v.z.At(i, j)
				dmu += v.dz.At(i, j)
			}
			mu /= bf
			dmu /= bf
			var ss, sd float64
			for i := range br {
				x := v.z.At(i, j) - mu
				dx := v.dz.At(i, j) - dmu
				xc.Set(i, j, x)
				dxc.Set(i, j, dx)
				ss += x * x
				sd += x * dx
			}
			s := math.Sqrt(ss/(bf-1) + vicEps)
			if s < 1 {
				c := -p.VICMu / (2 * kf) / ((bf - 1) * s)
				ds := sd / ((bf - 1) * s)
				for i := range br {
					v.h.Set(i, j, v.h.At(i, j)+c*(dxc.At(i, j)-xc.At(i, j)*ds/s))
				}
			}
		}
		ws.c.Mul(xc.T(), xc)
		ws.c.Scale(1/(bf-1), ws.c)
		ws.dc.Mul(dxc.T(), xc)
		for i := range k {
			for j := range k {
				if i == j {
					ws.d.Set(i, j, 0)
					continue
				}
				ws.d.Set(i, j, 2*p.VICNu*ws.c.At(i, j)/kf)
			}
		}
		// dCov = (E + Eᵀ)/(B−1) with E = dxcᵀ xc; dD its off-diagonal times 2ν/k.
		ws.dd = ensure(ws.dd, k, k)
		dd := ws.dd
		for i := range k {
			for j := range k {
				dd.Set(i, j, 0)
				if i != j {
					dd.Set(i, j, 2*p.VICNu*(ws.dc.At(i, j)+ws.dc.At(j, i))/((bf-1)*kf))
				}
			}
		}
		ws.tmp2 = ensure(ws.tmp2, br, k)
		ws.t1.Mul(dxc, ws.d)
		ws.tmp2.Mul(xc, dd)
		ws.t1.Add(ws.t1, ws.tmp2)
		addScaled(v.h, 2/(bf-1), ws.t1)
	}
}
