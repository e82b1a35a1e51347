package onnx

import (
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/internal/base/gemm"
)

// headsScratch: the weight gradients of h heads (h·M·K), the output gradients of h heads
// side by side (M×hP) and a block of their column gradients (K×colBlock), or, where
// gxByProduct may run, the larger of that and its W', padded planes and band; none for
// a batch of several examples, which runs per head.
func (k *convKernel) headsScratch(h int) int {
	if k.n != 1 {
		return 0
	}
	if v := k.inv; v != nil {
		return h*k.m*k.K + max(k.m*k.K+k.m*v.plane+k.K/len(v.off)*v.bnd, k.m*h*k.P+k.K*k.colBlock(h*k.P))
	}
	return h*k.m*k.K + h*k.m*k.P + k.K*k.colBlock(h*k.P)
}

// backwardHeads is backward for h heads of a one-example batch in two matrix products
// over the cached im2col matrix cols (P×K), with G_j = g_j (M×P) the heads' output
// gradients:
//
//	[gW_1; …; gW_h] = [G_1; …; G_h]·cols          ((hM)×K, one Dgemm)
//	[gC_1 … gC_h]   = Wᵀ·[G_1 … G_h]              (K×(hP); gC_j = gcols_jᵀ)
//	gx_j[colsT map[r, p]] += gC_j[r, p]            (col2im per head)
//
// the second product in blocks of columns (colBlock), each added to gx while in cache.
// A stride-1 convolution (inv) forms gx_j instead by gxByProduct, where its GEMM path
// exists; the lines above are then its fallback.
//
//	gbias_j[m]      += Σ_p G_j[m, p]
//
// always dense: the sparse path of backward pays only for one head's few non-zeros.
func (k *convKernel) backwardHeads(h int, gin, gout, in, _ [][]float64, gstr []int, scr, hscr []float64) bool {
	if k.n != 1 {
		return false
	}
	gx, gw, gb := gin[0], gin[1], get(gin, 2)
	M, K, P := k.m, k.K, k.P
	MP, MK, hP := M*P, M*K, h*P
	g, cols := gout[0][:h*MP], scr[:K*P]
	if gb != nil {
		for j := range h {
			for m := range M {
				s := 0.0
				for _, v := range g[j*MP+m*P : j*MP+(m+1)*P] {
					s += v
				}
				gb[j*gstr[2]+m] += s
			}
		}
	}
	if gw != nil {
		tw := hscr[:h*MK]
		dgemmSet(false, false, h*M, K, P, 1, g, P, cols, K, tw, K)
		for j := range h {
			if k.setW {
				setTo(gw[j*gstr[1]:j*gstr[1]+MK], tw[j*MK:(j+1)*MK])
				continue
			}
			addTo(gw[j*gstr[1]:j*gstr[1]+MK], tw[j*MK:(j+1)*MK])
		}
	}
	if gx == nil {
		return true
	}
	if k.inv != nil && k.gxByProduct(h, gx, gstr[0], g, in[1], hscr[h*MK:]) {
		return true
	}
	gs, gc := hscr[h*MK:h*MK+M*hP], hscr[h*MK+M*hP:]
	sideBySide(gs, g, h, M, P)
	nb := k.colBlock(hP)
	for c0 := 0; c0 < hP; c0 += nb {
		w := min(nb, hP-c0)
		blk := gc[:K*w]
		dgemmSet(true, false, K, w, M, 1, in[1], K, gs[c0:], hP, blk, w)
		k.col2imHeads(gx, gstr[0], blk, c0, w)
	}
	return true
}

// gxByProduct is backwardHeads' input gradient for a stride-1 convolution (convInv) as
// one product per head over the im2col matrix of the head's padded output gradient
// instead of col2im over the column gradients. With C = K/A input channels, for the band
// of input rows at the padded width (band column i ↔ input (i/wp, i%wp) for i%wp < W)
//
//	band_j (C×H·wp) = W' (C×A·M) · B_j,  W'[c, e·M + m] = W[m, c·A + e],
//	                                     B_j[e·M + m, i] = Gpad_j[m, i + off_e]
//	gx_j[c, y, x] += band_j[c, y·wp + x]   (x < W)
//
// B_j's rows are contiguous stretches of the padded planes, copied straight into the
// GEMM's packed panels (packPadded, gemm.DgemmSerialFunc, on the calling goroutine): a
// product over A·M terms where col2im's ran over M, and no column gradients to clear,
// write and add back. It reports false, having written nothing, where that GEMM path is
// not available (no AVX2/FMA).
func (k *convKernel) gxByProduct(h int, gx []float64, stride int, g, w, scr []float64) bool {
	v, M, P, K := k.inv, k.m, k.P, k.K
	A := len(v.off)
	C, MA := K/A, M*A
	wt, gp, band := scr[:C*MA], scr[C*MA:C*MA+M*v.plane], scr[C*MA+M*v.plane:C*MA+M*v.plane+C*v.bnd]
	for m := range M {
		for c := range C {
			for e := range A {
				wt[c*MA+e*M+m] = w[m*K+c*A+e]
			}
		}
	}
	clear(gp)
	ho := P / v.wo
	for j := range h {
		gj := g[j*M*P : (j+1)*M*P]
		for m := range M {
			for y := range ho {
				o := m*v.plane + (y+v.ty)*v.wp + v.tx
				copy(gp[o:o+v.wo], gj[m*P+y*v.wo:m*P+(y+1)*v.wo])
			}
		}
		pack := func(bp []float64, pc, kb, jc, nb, nr int) { k.packPadded(bp, gp, pc, kb, jc, nb, nr) }
		if !gemm.DgemmSerialFunc(blas.NoTrans, C, v.bnd, MA, 1, wt, MA, pack, 0, band, v.bnd) {
			return false
		}
		xj := gx[j*stride : j*stride+C*v.h*v.w]
		for c := range C {
			for y := range v.h {
				addTo(xj[(c*v.h+y)*v.w:(c*v.h+y+1)*v.w], band[c*v.bnd+y*v.wp:c*v.bnd+y*v.wp+v.w])
			}
		}
	}
	return true
}

// packPadded writes the kb×nb block at (pc, jc) of B_j (gxByProduct) from the padded
// planes gp as gemm.DgemmSerialFunc's panels of nr columns: bp[panel·kb·nr + p·nr + i] =
// B_j[pc+p, jc+panel·nr+i], zeros past nb.
func (k *convKernel) packPadded(bp, gp []float64, pc, kb, jc, nb, nr int) {
	v, M := k.inv, k.m
	if nb%nr != 0 {
		clear(bp[(nb/nr)*kb*nr : (nb/nr+1)*kb*nr])
	}
	for p := range kb {
		e, m := (pc+p)/M, (pc+p)%M
		src := gp[m*v.plane+v.off[e]+jc:]
		full := nb / nr
		gemm.MoveRows(bp[p*nr:], kb*nr, src, nr, full, nr)
		if s := full * nr; s < nb {
			o := p*nr + full*kb*nr
			copy(bp[o:o+nb-s], src[s:nb])
		}
	}
}

// colBlock is the number of columns of [G_1 … G_h] (hP of them) whose column gradients
// backwardHeads forms at a time: K·nb values of at most colBytes, so that col2im reads
// them from cache, but enough for a product of internal/base/gemm's size (gemmParallel).
func (k *convKernel) colBlock(hP int) int {
	nb := max(colBytes/8/k.K, (gemmParallel+k.K*k.m-1)/(k.K*k.m), 16)
	return min(hP, (nb+15)/16*16)
}

// colBytes bounds the block of column gradients of convKernel.backwardHeads: half of a
// 512 KiB L2 cache.
const colBytes = 256 << 10

// col2imHeads adds the K×w block blk of column gradients, columns c0… of [gC_1 … gC_h]
// (head j's column p is column j·P + p), to the heads of gx (head j at gx[j·stride:]):
// gx_j[colsT[r·P + p]] += gC_j[r, p], by runs of consecutive entries where k has them.
// Either way each entry of gx gets the same additions in the same order (r, then p).
func (k *convKernel) col2imHeads(gx []float64, stride int, blk []float64, c0, w int) {
	K, P := k.K, k.P
	for a := c0; a < c0+w; {
		j, p0 := a/P, a%P
		n := min(P-p0, c0+w-a)
		xb := gx[j*stride : j*stride+k.plane]
		for r := range K {
			row := blk[r*w+a-c0 : r*w+a-c0+n]
			if k.runs != nil {
				k.addRuns(xb, row, r, p0)
				continue
			}
			for i, v := range row {
				if c := k.colsT[r*P+p0+i]; c >= 0 {
					xb[c] += v
				}
			}
		}
		a += n
	}
}

// addRuns adds row, the gradients of positions p0 … p0+len(row)−1 of row r of colsT, to
// xb run by run: xb[c+i] += row[p−p0+i] for each run (p, n, c) outside the padding.
func (k *convKernel) addRuns(xb, row []float64, r, p0 int) {
	p1 := p0 + len(row)
	runs := k.runs[k.runAt[r]:k.runAt[r+1]]
	// The first run that ends after p0 (runs are in order of p and cover the row).
	i := sort.Search(len(runs), func(i int) bool { return int(runs[i].p+runs[i].n) > p0 })
	for _, u := range runs[i:] {
		if int(u.p) >= p1 {
			break
		}
		lo, hi := max(int(u.p), p0), min(int(u.p+u.n), p1)
		if u.c < 0 {
			continue
		}
		c := int(u.c) + lo - int(u.p)
		floats.Add(xb[c:c+hi-lo], row[lo-p0:hi-p0])
	}
}
