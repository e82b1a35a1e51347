package entk

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
)

// This file holds the multi-column backward of the ConvNet's convolutional layers, shared
// by Query (the d Jacobian rows J_xᵀe_i, backwardHalf) and ConvNet.BackwardHeads (the h
// head VJPs J_xᵀw_j of a Sketch). groupByChannel, backwardHalf and gatherTo were moved here
// from query.go; backwardHalf's loop became backwardCols, which takes the last layer's
// gradient columns and the output layout as arguments, and keeps only a ring of four
// position rows of the input-patch gradients live (gathering behind the windows), with
// the same arithmetic in the same order, so Query's results are unchanged bit for bit.

// groupByChannel fills byCh, rank and chStart from ws's active lists by a counting sort,
// and colsT0.
func (cq *convQuery) groupByChannel(ws *Workspace) {
	for l := range cq.n.convs {
		c := &cq.n.convs[l]
		Q := int32(c.hp * c.wp)
		st := cq.chStart[l]
		clear(st)
		act := ws.actOut[l]
		for _, o := range act {
			st[o/Q+1]++
		}
		for ch := 1; ch < len(st); ch++ {
			st[ch] += st[ch-1]
		}
		by, rank := cq.byCh[l][:len(act)], cq.rank[l][:len(act)]
		for idx, o := range act {
			ch := o / Q
			by[st[ch]] = int32(idx)
			rank[idx] = int32(st[ch])
			st[ch]++
		}
		// st[ch] now ends channel ch; shift back to starts.
		copy(st[1:], st[:len(st)-1])
		st[0] = 0
	}
	c0 := &cq.n.convs[0]
	K, n0 := c0.k, len(ws.actOut[0])
	cols, pos := ws.cols[0], ws.actPos[0]
	for r, idx := range cq.byCh[0][:n0] {
		row := cols[int(pos[idx])*K : (int(pos[idx])+1)*K]
		for k, v := range row {
			cq.colsT0[k*n0+r] = v
		}
	}
}

// colsOut is where backwardCols writes the parameter gradients of its m columns: for conv
// layer l, output channel c, column i and patch entry k,
//
//	weight (c, i, k) at w[l][c·wc + i·wi + k],   bias (c, i) at b[l][c·bc + i·bi]
//
// with, in the query layout (Jacobian rows i0 ≤ i0+i < i1 into convQuery.jw/jb),
// w[l] = jw[l][i0·K:], wc = d·K, wi = K, b[l] = jb[l][i0:], bc = d, bi = 1; and in the heads
// layout (h×P row-major VJPs), w[l] = b[l] = dst, offset by the layer's wOff/bOff,
// wc = K, wi = P, bc = 1, bi = P.
type colsOut struct {
	jw, jb [][]float64 // query layout when non-nil
	d, i0  int
	flat   []float64 // heads layout otherwise
	p      int
}

// layer returns layer l's weight and bias bases and strides (see colsOut).
func (o *colsOut) layer(l int, c *convLayer) (w []float64, wc, wi int, b []float64, bc, bi int) {
	if o.jw != nil {
		return o.jw[l][o.i0*c.k:], o.d * c.k, c.k, o.jb[l][o.i0:], o.d, 1
	}
	return o.flat[c.wOff:], c.k, o.p, o.flat[c.bOff:], 1, o.p
}

// backwardHalf computes the Jacobian rows i0 ≤ i < i1 of the convolutional parameters for
// the Forward cached in ws (read only, so both halves share it) into cq.jw and cq.jb, and
// h.sq = their squared norms: backwardCols on the columns e_i, whose last-layer gradients
// are the rows i of W_fc.
func (cq *convQuery) backwardHalf(h *queryHalf, ws *Workspace) {
	n, d := cq.n, cq.d
	i0, i1 := h.i0, h.i1
	h.sq = 0
	if i1 == i0 {
		return
	}
	out := colsOut{jw: cq.jw, jb: cq.jb, d: d, i0: i0}
	cq.backwardCols(h, ws, i1-i0, n.fc.w[i0*n.fc.in:], n.fc.in, &out)
	for l := len(n.convs) - 1; l >= 0; l-- {
		c := &n.convs[l]
		K := c.k
		jw, jb := cq.jw[l], cq.jb[l]
		for ch := 0; ch < c.cout; ch++ {
			blk := jw[(ch*d+i0)*K : (ch*d+i1)*K]
			bias := jb[ch*d+i0 : ch*d+i1]
			h.sq += floats.Dot(blk, blk) + floats.Dot(bias, bias)
		}
	}
}

// backwardCols is ConvNet.Backward run on m columns at once, for the Forward cached in ws
// (read only) and grouped by cq.groupByChannel, with h's dcols and gp (sized for at least
// m columns by initHalf; gp laid out as there for m, dcols used as a ring of framed rows,
// see below) as scratch. Column i's gradient of the
// last conv layer's pooled output o is last[o + i·inc]. With G[o][i] the gradient of
// pooled output o of layer l for column i, for each active pooled output o of channel c
// whose window maximum is at position p
//
//	dW[c][i][:] += G[o][i] · cols_l[p, :]     db[c][i] += G[o][i]
//	dcols[p][i][:] += G[o][i] · W_l[c, :]     (l ≥ 1)
//
// each a rank-one update (Dger) of an m×K block — for the first layer, whose patches are
// short, dW[c][i][k] is instead one dot product over the channel's active outputs — and
// then, for the active pooled outputs o' = (ci, y, x) of layer l−1 only,
//
//	G'[o'][i] = Σ_{ky,kx} dcols[(y−ky+1, x−kx+1)][i][ci·9 + ky·3 + kx],
//
// the adjoint of im2col restricted to the outputs that pass a gradient. dW and db are
// written (not accumulated) where out says.
func (cq *convQuery) backwardCols(h *queryHalf, ws *Workspace, m int, last []float64, inc int, out *colsOut) {
	n := cq.n
	L := len(n.convs)
	lastSrc, lastInc := last, inc
	for l := L - 1; l >= 0; l-- {
		act, rank := ws.actOut[l], cq.rank[l]
		na := len(act)
		// The gradient column (G[o][0], …, G[o][m−1]) of the active output with index
		// idx is src[at(idx) : at(idx)+(m−1)·inc+1] with stride inc.
		last := l == L-1
		var src []float64
		var inc int
		if last {
			src, inc = lastSrc, lastInc
		} else {
			src, inc = h.gp[l][:m*na], na
		}
		at := func(idx int) int {
			if last {
				return int(act[idx])
			}
			return int(rank[idx])
		}
		cq.weightGrads(h, ws, l, m, src, inc, at, last, out)
		if l == 0 {
			break
		}
		cq.inputGrads(h, ws, l, m, src, inc, at)
	}
}

// weightGrads writes layer l's dW and db (where out says) from the gradients G of its
// active pooled outputs (src, inc, at as in backwardCols): for the first layer, when
// it is not also the last, one dot product over each channel's actives per weight;
// otherwise rank-one updates gathered per channel (accGatherTo).
func (cq *convQuery) weightGrads(h *queryHalf, ws *Workspace, l, m int, src []float64, inc int, at func(int) int, last bool, out *colsOut) {
	c := &cq.n.convs[l]
	K := c.k
	na, pos := len(ws.actOut[l]), ws.actPos[l]
	jw, wc, wi, jb, bc, bi := out.layer(l, c)
	st := cq.chStart[l]
	if l == 0 && !last {
		// dW[c][i][k] = Σ_{r in c} G[r][i] · colsT0[k][r], db[c][i] = Σ_{r in c} G[r][i].
		for ch := 0; ch < c.cout; ch++ {
			r0, r1 := st[ch], st[ch+1]
			for i := 0; i < m; i++ {
				g := src[i*na+r0 : i*na+r1]
				row := jw[ch*wc+i*wi : ch*wc+i*wi+K]
				for k := range row {
					row[k] = floats.Dot(g, cq.colsT0[k*na+r0:k*na+r1])
				}
				jb[ch*bc+i*bi] = floats.Sum(g)
			}
		}
		return
	}
	cols, by := ws.cols[l], cq.byCh[l]
	for ch := 0; ch < c.cout; ch++ {
		blk := jw[ch*wc : ch*wc+(m-1)*wi+K]
		for i := 0; i < m; i++ {
			clear(blk[i*wi : i*wi+K])
			jb[ch*bc+i*bi] = 0
		}
		offs, rows := h.goffs[:0], h.grows[:0]
		for _, idx := range by[st[ch]:st[ch+1]] {
			a := at(int(idx))
			offs, rows = append(offs, int32(a)), append(rows, pos[idx])
			for i := 0; i < m; i++ {
				jb[ch*bc+i*bi] += src[a+i*inc]
			}
		}
		accGatherTo(blk, wi, m, src, inc, offs, rows, cols, K)
	}
}

// inputGrads writes the gradients of layer l−1's active pooled outputs into h.gp[l−1]:
// the updates dcols[p][i][:] += G[o][i]·W_l[c, :] into a ring of framed rows, each
// input row gathered (gatherTo) as soon as it is final.
//
// dc holds the framed h×w grid of positions (one zero position on each side, so
// every patch of the gather is inside it) as a ring of R = min(4, h+2) rows of
// w+2 positions: framed row fy lives in slot fy mod R. The windows come row by
// row (actives q-major, as reluPoolTo lists them); window row qy writes framed
// rows 2qy+1 and 2qy+2, after which the input rows y ≤ 2qy, which read framed rows
// y..y+2, are final and gathered. So only four rows are live (the rows 2qy−1 and
// 2qy still to be gathered, and the two being written): a quarter of a megabyte
// at the MNIST convnet's second layer with four columns, instead of 1.2 MB for
// the whole grid, which left the cache between the updates and the gather.
// Each window's four blocks are cleared just before its updates, while they are
// hot; the frame columns and a floored odd last column are never written and stay
// zero from allocation; the rows that hold no window (the top and bottom frame, a
// floored odd last row) are cleared when they enter the ring.
func (cq *convQuery) inputGrads(h *queryHalf, ws *Workspace, l, m int, src []float64, inc int, at func(int) int) {
	c := &cq.n.convs[l]
	K, Q := c.k, c.hp*c.wp
	act, pos := ws.actOut[l], ws.actPos[l]
	dc := h.dcols[l]
	mK, wp := m*K, c.w+2
	ring := min(4, c.h+2)
	rowLen := wp * mK
	row := func(fy int) []float64 {
		s := fy % ring
		return dc[s*rowLen : (s+1)*rowLen]
	}
	clear(row(0))
	idx, next := 0, 0
	for qy := 0; qy < c.hp; qy++ {
		r1, r2 := row(2*qy+1), row(2*qy+2)
		for qx := 0; qx < c.wp; qx++ {
			q := qy*c.wp + qx
			fx := 2*qx + 1 // framed column of the window's left
			clear(r1[fx*mK : (fx+2)*mK])
			clear(r2[fx*mK : (fx+2)*mK])
			// The window's actives, position by position (each block of dcols
			// sees its terms in the order of act, as one update per active would).
			i0 := idx
			for idx < len(act) && int(act[idx])%Q == q {
				idx++
			}
			p0 := 2*qy*c.w + 2*qx
			for _, p := range [4]int{p0, p0 + 1, p0 + c.w, p0 + c.w + 1} {
				offs, chs := h.goffs[:0], h.grows[:0]
				for j := i0; j < idx; j++ {
					if int(pos[j]) == p {
						offs, chs = append(offs, int32(at(j))), append(chs, act[j]/int32(Q))
					}
				}
				if len(offs) > 0 {
					pc := p%c.w + 1
					accGatherTo(row(p/c.w + 1)[pc*mK:(pc+1)*mK], K, m, src, inc, offs, chs, c.wt, K)
				}
			}
		}
		next = cq.gatherTo(h.gp[l-1], row, ws, l, m, next, 2*qy+1)
	}
	if idx != len(act) {
		panic("entk: active outputs not in window order") // reluPoolTo's order changed
	}
	for fy := 2*c.hp + 1; fy <= c.h+1; fy++ {
		clear(row(fy))
	}
	cq.gatherTo(h.gp[l-1], row, ws, l, m, next, c.h)
}

// gatherTo writes, for the active pooled outputs o' = (ci, y, x) of layer l−1 (the input
// of conv layer l, cin×h×w) from index from on whose row y is below yEnd (they come
// row-major, as reluPoolTo lists them), with rank r, and each of the m columns i,
//
//	gp[i·n + r] = Σ_{ky,kx} dc[fy = y−ky+2][fx = x−kx+2][i][ci·9 + ky·3 + kx]
//
// (n active outputs; dc the framed grid of backwardCols, whose framed row fy is
// row(fy), position-major within the row with blocks of m·K): im2col's adjoint,
// evaluated only where a gradient passes. The nine terms are summed as a tree, which
// halves the chain of dependent additions. It returns the index of the first output not
// gathered.
func (cq *convQuery) gatherTo(gp []float64, row func(int) []float64, ws *Workspace, l, m, from, yEnd int) int {
	c := &cq.n.convs[l]
	K, w := c.k, c.w
	hw, mK := c.h*w, m*K
	act, rank := ws.actOut[l-1], cq.rank[l-1]
	n := len(act)
	// Within a framed row, the entry (ci, ky, kx) of column i at framed column x−kx+2 is
	// at x·mK + ci·9 + (2−kx)·mK + i·K + ky·3 + kx; e[ky·3+kx] = (2−kx)·mK + ky·3 + kx.
	e0, e1, e2 := 2*mK, mK+1, 2
	e3, e4, e5 := 2*mK+3, mK+4, 5
	e6, e7, e8 := 2*mK+6, mK+7, 8
	span := 2*mK + 9 + (m-1)*K // past the largest offset, e6 + (m−1)·K
	idx := from
	y0 := -1
	var ra, rb, rc []float64 // framed rows y+2 (ky = 0), y+1 (ky = 1), y (ky = 2)
	for ; idx < n; idx++ {
		o := int(act[idx])
		ci, pix := o/hw, o%hw
		y, x := pix/w, pix%w
		if y >= yEnd {
			break
		}
		if y != y0 {
			y0 = y
			ra, rb, rc = row(y+2), row(y+1), row(y)
		}
		base := x*mK + ci*9
		a, b, cc := ra[base:base+span], rb[base:base+span], rc[base:base+span]
		gr := gp[int(rank[idx]):]
		for i, k := 0, 0; i < m; i, k = i+1, k+K {
			gr[i*n] = ((a[k+e0] + a[k+e1]) + (a[k+e2] + b[k+e3])) +
				((b[k+e4] + b[k+e5]) + (cc[k+e6] + cc[k+e7])) + cc[k+e8]
		}
	}
	return idx
}

// convHeadsScratch is the scratch of ConvNet.BackwardHeads for one number of heads h: the
// grouping of the Forward's actives (a convQuery without Jacobian rows), the multi-column
// buffers of one queryHalf with columns [0, h), and the heads' last-layer gradients.
type convHeadsScratch struct {
	cq   *convQuery
	half *queryHalf
	gL   []float64 // h×in: row j = W_fcᵀ w_j
}

func newConvHeadsScratch(n *ConvNet, h int) *convHeadsScratch {
	L := len(n.convs)
	cq := &convQuery{
		n: n, d: n.arch.Out,
		byCh: make([][]int32, L), rank: make([][]int32, L), chStart: make([][]int, L),
	}
	for l, c := range n.convs {
		nq := c.cout * c.hp * c.wp
		cq.byCh[l] = make([]int32, nq)
		cq.rank[l] = make([]int32, nq)
		cq.chStart[l] = make([]int, c.cout+1)
	}
	c0 := n.convs[0]
	cq.colsT0 = make([]float64, c0.k*c0.cout*c0.hp*c0.wp)
	half := &queryHalf{i0: 0, i1: h}
	cq.initHalf(half)
	return &convHeadsScratch{cq: cq, half: half, gL: make([]float64, h*n.fc.in)}
}

// BackwardHeads writes J_xᵀ w_j for the h heads w_j (rows of w, h×d row-major) and the
// cached x into the rows of dst (h×P row-major): the Linear's part and its input
// gradient W_fcᵀ w_j per head exactly as Backward computes them, then the convolutional
// part of all h heads in one multi-column sweep (backwardCols, shared with Query), which
// visits each active pooled output and each gather once for all heads. Each row equals
// Backward's up to rounding (the same sums of products in another order: channel by
// channel, the first layer's as dot products, im2col's adjoint gathered). It allocates
// only on the first call with a given h on ws, and panics on wrong lengths.
func (n *ConvNet) BackwardHeads(dst, w []float64, h int, ws *Workspace) {
	ws.check(n)
	ws.checkCached()
	p, d := len(n.params), n.arch.Out
	if h < 1 || len(dst) != h*p || len(w) != h*d {
		panic(fmt.Sprintf("entk: ConvNet.BackwardHeads: len(dst)=%d len(w)=%d h=%d, want %d and %d, h ≥ 1", len(dst), len(w), h, h*p, h*d))
	}
	sc := ws.convHeads(n, h)
	L, in := len(n.convs), n.fc.in
	a := ws.pooled[L-1]
	for j := 0; j < h; j++ {
		wj := w[j*d : (j+1)*d]
		n.fc.paramGradTo(dst[j*p:(j+1)*p], wj, a)
		n.fc.inputGradTo(sc.gL[j*in:(j+1)*in], wj)
	}
	sc.cq.groupByChannel(ws)
	out := colsOut{flat: dst, p: p}
	sc.cq.backwardCols(sc.half, ws, h, sc.gL, in, &out)
}

// convHeads returns ws's BackwardHeads scratch for h heads, allocating it on first use.
func (ws *Workspace) convHeads(n *ConvNet, h int) *convHeadsScratch {
	if len(ws.heads) <= h {
		ws.heads = append(ws.heads, make([]*convHeadsScratch, h+1-len(ws.heads))...)
	}
	sc := ws.heads[h]
	if sc == nil {
		sc = newConvHeadsScratch(n, h)
		ws.heads[h] = sc
	}
	return sc
}
