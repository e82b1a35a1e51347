package entk

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// convLayer is Conv2d(cin, cout, 3, padding=1) → ReLU → MaxPool2d(2) on an h×w input.
type convLayer struct {
	cin, cout, h, w int
	hp, wp          int // pooled size ⌊h/2⌋ × ⌊w/2⌋
	k               int // 9·cin, the im2col patch length
	wt, b           []float64
	wT              []float64 // wt transposed (k×cout), for convAccRowsTo
	wOff, bOff      int
}

// ConvNet is the backbone "convnet:CxHxW-c1-…-cL-d": L blocks of
// Conv2d(3×3, padding 1) → ReLU → MaxPool2d(2), then Flatten (CHW order) and Linear.
//
// Conventions: ReLU'(0) = 0; the max-pool gradient goes to the first maximal element of
// each 2×2 window in row-major window order (top-left, top-right, bottom-left,
// bottom-right); odd spatial sizes are floored as in PyTorch, so the last row/column of an
// odd-sized map never reaches the output and gets zero gradient. Inputs must be finite
// (the daemon validates them): a NaN is never a window maximum here, where PyTorch would
// propagate it.
//
// Implementation: the convolution is an im2col matrix product (gonum Dgemm, in blocks small
// enough that gonum stays serial: the caller owns the parallelism). Backward exploits that
// after ReLU+MaxPool only the pooled outputs that are positive pass a gradient, each from
// one conv position, so it touches Cout·⌊H/2⌋·⌊W/2⌋ patches instead of Cout·H·W, and it
// never forms the gradient with respect to the network input.
type ConvNet struct {
	arch   Arch
	params []float64
	convs  []convLayer
	fc     linear
}

func newConvNet(a Arch, params []float64) *ConvNet {
	ts := a.Tensors()
	n := &ConvNet{arch: a, params: params}
	cin, h, w := a.C, a.H, a.W
	for l, cout := range a.Channels {
		wt, bt := ts[2*l], ts[2*l+1]
		n.convs = append(n.convs, convLayer{
			cin: cin, cout: cout, h: h, w: w, hp: h / 2, wp: w / 2, k: 9 * cin,
			wt: params[wt.Offset : wt.Offset+wt.Size], b: params[bt.Offset : bt.Offset+bt.Size],
			wOff: wt.Offset, bOff: bt.Offset,
		})
		c := &n.convs[l]
		c.wT = make([]float64, c.k*cout)
		for ch := 0; ch < cout; ch++ {
			for k, v := range c.wt[ch*c.k : (ch+1)*c.k] {
				c.wT[k*cout+ch] = v
			}
		}
		cin, h, w = cout, h/2, w/2
	}
	m := len(ts)
	n.fc = newLinear(params, ts[m-2], ts[m-1])
	return n
}

func (n *ConvNet) Arch() string      { return n.arch.Spec }
func (n *ConvNet) InDim() int        { return n.arch.In }
func (n *ConvNet) OutDim() int       { return n.arch.Out }
func (n *ConvNet) NumParams() int    { return len(n.params) }
func (n *ConvNet) Params() []float64 { return n.params }
func (n *ConvNet) String() string    { return fmt.Sprintf("entk.ConvNet(%s)", n.arch.Spec) }

func (n *ConvNet) NewWorkspace() *Workspace {
	ws := &Workspace{owner: n}
	L := len(n.convs)
	ws.cols = make([][]float64, L)
	ws.z = make([][]float64, L)
	ws.pooled = make([][]float64, L)
	ws.dcols = make([][]float64, L)
	ws.dpooled = make([][]float64, L)
	ws.actOut = make([][]int32, L)
	ws.actPos = make([][]int32, L)
	for l, c := range n.convs {
		np := c.h * c.w
		nq := c.cout * c.hp * c.wp
		ws.cols[l] = make([]float64, np*c.k)
		ws.z[l] = make([]float64, np*c.cout)
		ws.pooled[l] = make([]float64, nq)
		ws.dpooled[l] = make([]float64, nq)
		ws.actOut[l] = make([]int32, 0, nq)
		ws.actPos[l] = make([]int32, 0, nq)
		if l > 0 {
			ws.dcols[l] = make([]float64, np*c.k)
		}
	}
	return ws
}

// Forward runs conv → ReLU → pool per layer, then the Linear, caching im2col matrices and
// the positive pooled outputs with their argmax positions.
func (n *ConvNet) Forward(out, x []float64, ws *Workspace) {
	ws.check(n)
	if len(x) != n.arch.In || len(out) != n.arch.Out {
		panic(fmt.Sprintf("entk: ConvNet.Forward: len(x)=%d len(out)=%d, want %d and %d", len(x), len(out), n.arch.In, n.arch.Out))
	}
	in := x
	for l := range n.convs {
		c := &n.convs[l]
		im2colTo(ws.cols[l], in, c.cin, c.h, c.w)
		c.convTo(ws.z[l], ws.cols[l])
		ws.actOut[l], ws.actPos[l] = c.reluPoolTo(ws.pooled[l], ws.actOut[l][:0], ws.actPos[l][:0], ws.z[l])
		in = ws.pooled[l]
	}
	n.fc.forwardTo(out, in)
	ws.cached = true
}

// Backward computes J_xᵀ w for the cached x:
//
//	Linear: d fc = w ⊗ a_L, g_L = fcᵀ w
//	conv l, for each positive pooled output (c, q) with window argmax p and g = g_l[c, q]:
//	        db[c] += g;  dW[c, :] += g · cols_l[p, :];  dcols_l[p, :] += g · W[c, :]
//	        then g_{l-1} = col2im(dcols_l)   (skipped for l = 0)
func (n *ConvNet) Backward(dst, w []float64, ws *Workspace) {
	ws.check(n)
	ws.checkCached()
	if len(dst) != len(n.params) || len(w) != n.arch.Out {
		panic(fmt.Sprintf("entk: ConvNet.Backward: len(dst)=%d len(w)=%d, want %d and %d", len(dst), len(w), len(n.params), n.arch.Out))
	}
	L := len(n.convs)
	n.fc.paramGradTo(dst, w, ws.pooled[L-1])
	n.fc.inputGradTo(ws.dpooled[L-1], w)
	for l := L - 1; l >= 0; l-- {
		c := &n.convs[l]
		K, Q := c.k, c.hp*c.wp
		dW := dst[c.wOff : c.wOff+c.cout*K]
		db := dst[c.bOff : c.bOff+c.cout]
		clear(dW)
		clear(db)
		g := ws.dpooled[l]
		cols := ws.cols[l]
		pos := ws.actPos[l]
		if l == 0 {
			for i, o := range ws.actOut[l] {
				gv := g[o]
				if gv == 0 {
					continue
				}
				ch, p := int(o)/Q, int(pos[i])
				db[ch] += gv
				axpyTo(dW[ch*K:(ch+1)*K], gv, cols[p*K:(p+1)*K])
			}
			break
		}
		dc := ws.dcols[l]
		clear(dc)
		for i, o := range ws.actOut[l] {
			gv := g[o]
			if gv == 0 {
				continue
			}
			ch, p := int(o)/Q, int(pos[i])
			db[ch] += gv
			axpyTo(dW[ch*K:(ch+1)*K], gv, cols[p*K:(p+1)*K])
			axpyTo(dc[p*K:(p+1)*K], gv, c.wt[ch*K:(ch+1)*K])
		}
		col2imTo(ws.dpooled[l-1], dc, c.cin, c.h, c.w)
	}
}

// im2colTo writes the 3×3, padding-1 patches of the CHW image in (cin×h×w) into cols,
// position-major:
//
//	for y, x { p := y*w+x; for ci, ky, kx {
//	    cols[p*9cin + ci*9+ky*3+kx] = in[ci, y+ky-1, x+kx-1]  (0 outside the image) } }
func im2colTo(cols, in []float64, cin, h, w int) { im2colRowsTo(cols, in, cin, h, w, 0, h) }

// im2colRowsTo is im2colTo for the output rows y0 ≤ y < y1 only (Query splits a forward
// pass by rows over two goroutines; every row is written exactly as im2colTo writes it).
func im2colRowsTo(cols, in []float64, cin, h, w, y0, y1 int) {
	K := 9 * cin
	hw := h * w
	for y := y0; y < y1; y++ {
		for x := 0; x < w; x++ {
			row := cols[(y*w+x)*K : (y*w+x+1)*K]
			interior := y > 0 && y < h-1 && x > 0 && x < w-1
			for ci := 0; ci < cin; ci++ {
				src := in[ci*hw : (ci+1)*hw]
				r := row[ci*9 : ci*9+9]
				if interior {
					o := (y-1)*w + x - 1
					r[0], r[1], r[2] = src[o], src[o+1], src[o+2]
					o += w
					r[3], r[4], r[5] = src[o], src[o+1], src[o+2]
					o += w
					r[6], r[7], r[8] = src[o], src[o+1], src[o+2]
					continue
				}
				for ky := 0; ky < 3; ky++ {
					iy := y + ky - 1
					for kx := 0; kx < 3; kx++ {
						ix := x + kx - 1
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							r[ky*3+kx] = 0
						} else {
							r[ky*3+kx] = src[iy*w+ix]
						}
					}
				}
			}
		}
	}
}

// col2imTo is the adjoint of im2colTo: it sums each patch entry back onto the image pixel
// it was copied from, writing dx (cin×h×w, CHW) from dcols.
func col2imTo(dx, dcols []float64, cin, h, w int) {
	clear(dx)
	K := 9 * cin
	hw := h * w
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			row := dcols[(y*w+x)*K : (y*w+x+1)*K]
			interior := y > 0 && y < h-1 && x > 0 && x < w-1
			for ci := 0; ci < cin; ci++ {
				d := dx[ci*hw : (ci+1)*hw]
				r := row[ci*9 : ci*9+9]
				if interior {
					o := (y-1)*w + x - 1
					d[o] += r[0]
					d[o+1] += r[1]
					d[o+2] += r[2]
					o += w
					d[o] += r[3]
					d[o+1] += r[4]
					d[o+2] += r[5]
					o += w
					d[o] += r[6]
					d[o+1] += r[7]
					d[o+2] += r[8]
					continue
				}
				for ky := 0; ky < 3; ky++ {
					iy := y + ky - 1
					if iy < 0 || iy >= h {
						continue
					}
					for kx := 0; kx < 3; kx++ {
						ix := x + kx - 1
						if ix < 0 || ix >= w {
							continue
						}
						d[iy*w+ix] += r[ky*3+kx]
					}
				}
			}
		}
	}
}

// gemmBlock bounds the row and column blocks of one Dgemm call so that gonum's Dgemm runs
// serially (it spawns goroutines from 4 blocks of 64×64 on).
const gemmBlock = 64

// convTo computes the pre-activation z (position-major, z[p*cout+c]) from cols:
//
//	for p, c { z[p*cout+c] = b[c] + Σ_k cols[p*K+k] W[c*K+k] }
func (c *convLayer) convTo(z, cols []float64) { c.convRowsTo(z, cols, 0, c.h*c.w) }

// convRowsTo is convTo for the positions p0 ≤ p < p1 only; each z entry is computed as
// convTo computes it (the Dgemm blocks start at p0, and a row's result does not depend
// on the rows beside it in a block).
func (c *convLayer) convRowsTo(z, cols []float64, p0, p1 int) {
	K := c.k
	for p := p0; p < p1; p++ {
		copy(z[p*c.cout:(p+1)*c.cout], c.b)
	}
	if hasAVX2FMA {
		// The same loop with one fused multiply-add per term, register-blocked over 2
		// positions × 16 channels (simd.go).
		convAccRowsTo(z, cols, c.wT, K, c.cout, p0, p1)
		return
	}
	c.convAccPortableTo(z, cols, p0, p1)
}

// convAccPortableTo adds the convolution terms to the rows p0 ≤ p < p1 of z (already
// holding the bias) without the assembly kernel: unrolled for Cin = 1, plain dot products
// for other short patches, gonum Dgemm otherwise.
func (c *convLayer) convAccPortableTo(z, cols []float64, p0, p1 int) {
	K := c.k
	if K == 9 {
		// Cin = 1, the usual first layer: the loop below with the patch unrolled, in the
		// same order (s = b, then s += v_k·w_k for k = 0..8), so bit for bit the same, at
		// about half the time (no loop or bounds checks per term).
		for p := p0; p < p1; p++ {
			v := (*[9]float64)(cols[p*9 : p*9+9])
			zr := z[p*c.cout : (p+1)*c.cout]
			for ch := range zr {
				w := (*[9]float64)(c.wt[ch*9 : ch*9+9])
				s := zr[ch]
				s += v[0] * w[0]
				s += v[1] * w[1]
				s += v[2] * w[2]
				s += v[3] * w[3]
				s += v[4] * w[4]
				s += v[5] * w[5]
				s += v[6] * w[6]
				s += v[7] * w[7]
				s += v[8] * w[8]
				zr[ch] = s
			}
		}
		return
	}
	if K < 16 {
		// First layers (Cin = 1): dot products of length 9 are too short for Dgemm's
		// per-call overhead.
		for p := p0; p < p1; p++ {
			row := cols[p*K : (p+1)*K]
			zr := z[p*c.cout : (p+1)*c.cout]
			for ch := range zr {
				w := c.wt[ch*K : (ch+1)*K]
				s := zr[ch]
				for k, v := range row {
					s += v * w[k]
				}
				zr[ch] = s
			}
		}
		return
	}
	impl := blas64.Implementation()
	for r0 := p0; r0 < p1; r0 += gemmBlock {
		m := min(gemmBlock, p1-r0)
		for c0 := 0; c0 < c.cout; c0 += gemmBlock {
			nn := min(gemmBlock, c.cout-c0)
			impl.Dgemm(blas.NoTrans, blas.Trans, m, nn, K, 1,
				cols[r0*K:], K, c.wt[c0*K:], K, 1, z[r0*c.cout+c0:], c.cout)
		}
	}
}

// reluPoolTo writes pooled = MaxPool2d(2)(relu(z)) in CHW order and appends to outs/poss
// the pooled index c*Q+q and conv position p of every positive output, p being the first
// maximum of its window in row-major order (strict > over the window in that order). The
// channel loop is innermost so z (position-major) is read contiguously.
func (c *convLayer) reluPoolTo(pooled []float64, outs, poss []int32, z []float64) ([]int32, []int32) {
	return c.reluPoolRowsTo(pooled, outs, poss, z, 0, c.hp)
}

// reluPoolRowsTo is reluPoolTo for the pooled rows qy0 ≤ qy < qy1 only.
func (c *convLayer) reluPoolRowsTo(pooled []float64, outs, poss []int32, z []float64, qy0, qy1 int) ([]int32, []int32) {
	Q, C := c.hp*c.wp, c.cout
	for qy := qy0; qy < qy1; qy++ {
		for qx := 0; qx < c.wp; qx++ {
			q := qy*c.wp + qx
			p0 := 2*qy*c.w + 2*qx
			p1, p2, p3 := p0+1, p0+c.w, p0+c.w+1
			z0, z1 := z[p0*C:(p0+1)*C], z[p1*C:(p1+1)*C]
			z2, z3 := z[p2*C:(p2+1)*C], z[p3*C:(p3+1)*C]
			z1, z2, z3 = z1[:C], z2[:C], z3[:C]
			for ch, v0 := range z0 {
				// The first maximum in window order, as a tree: the first maximum of each
				// pair, then the first pair on a tie. Which element wins is data-dependent
				// and unpredictable, so it is selected without branches (max, and b2i
				// compiled to SETcc): the same value and position as the chain
				// best, bp := z0, p0; if z1 > best {…}; if z2 > best {…}; if z3 > best {…}
				// (z is finite; a tie of +0 and −0 only matters for a best ≤ 0, which passes
				// no gradient).
				v1, v2, v3 := z1[ch], z2[ch], z3[ch]
				b01, b23 := max(v0, v1), max(v2, v3)
				i01 := p0 + b2i(v1 > v0)
				i23 := p2 + b2i(v3 > v2)
				hi := b2i(b23 > b01)
				best := max(b01, b23)
				bp := i01 + hi*(i23-i01)
				o := ch*Q + q
				if best > 0 {
					pooled[o] = best
					outs = append(outs, int32(o))
					poss = append(poss, int32(bp))
				} else {
					pooled[o] = 0
				}
			}
		}
	}
	return outs, poss
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
