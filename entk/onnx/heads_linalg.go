package onnx

// sideBySide writes the h head-major rows×cols matrices of g (head j at g[j·rows·cols:])
// next to each other into dst, a rows×(h·cols) matrix: dst[r, j·cols + c] = g_j[r, c].
func sideBySide(dst, g []float64, h, rows, cols int) {
	hc, rc := h*cols, rows*cols
	for j := range h {
		for r := range rows {
			copy(dst[r*hc+j*cols:r*hc+(j+1)*cols], g[j*rc+r*cols:j*rc+(r+1)*cols])
		}
	}
}

// addHeads adds the rows×(h·cols) matrix src, the h heads side by side, to the heads of
// gin (head j at gin[j·stride:]): gin_j[r, c] += src[r, j·cols + c], or, when trans,
// gin_j[c, r] += src[r, j·cols + c].
func addHeads(gin []float64, stride int, src []float64, h, rows, cols int, trans bool) {
	hc := h * cols
	for j := range h {
		g := gin[j*stride : j*stride+rows*cols]
		for r := range rows {
			s := src[r*hc+j*cols : r*hc+(j+1)*cols]
			if !trans {
				addTo(g[r*cols:(r+1)*cols], s)
				continue
			}
			for c, v := range s {
				g[c*rows+r] += v
			}
		}
	}
}

// headsScratch: the output gradients side by side (M×hN) and the product with op(A)ᵀ
// (K×hN).
func (k *gemmKernel) headsScratch(h int) int { return h*k.m*k.n + h*k.k*k.n }

// backwardHeads is backward for h heads with the heads stacked into two products (G_j
// the heads' M×N output gradients):
//
//	[dop(A)_1; …; dop(A)_h] = α·[G_1; …; G_h]·op(B)ᵀ      ((hM)×K, one product)
//	[dop(B)_1 … dop(B)_h]   = α·op(A)ᵀ·[G_1 … G_h]        (K×(hN), one product)
//
// It declines transA and an A gradient whose heads are not contiguous (a parameter).
func (k *gemmKernel) backwardHeads(h int, gin, gout, in, _ [][]float64, gstr []int, _, hscr []float64) bool {
	mn, mk := k.m*k.n, k.m*k.k
	if k.transA || gin[0] != nil && gstr[0] != mk {
		return false
	}
	g, a, b := gout[0][:h*mn], in[0], in[1]
	lda, ldb := k.ld()
	if ga := gin[0]; ga != nil {
		dgemm(false, !k.transB, h*k.m, k.k, k.n, k.alpha, g, k.n, b, ldb, ga, k.k)
	}
	if gb := gin[1]; gb != nil {
		hn := h * k.n
		gs, t := hscr[:k.m*hn], hscr[k.m*hn:k.m*hn+k.k*hn]
		sideBySide(gs, g, h, k.m, k.n)
		dgemmSet(true, false, k.k, hn, k.m, k.alpha, a, lda, gs, hn, t, hn)
		addHeads(gb, gstr[1], t, h, k.k, k.n, k.transB)
	}
	if gc := get(gin, 2); gc != nil {
		for j := range h {
			c := gc[j*gstr[2]:]
			for i, gi := range g[j*mn : (j+1)*mn] {
				c[at(k.cb, i)] += k.beta * gi
			}
		}
	}
	return true
}

// headsScratch: none; each head's B gradient is its own product (backwardHeads).
func (k *matmulKernel) headsScratch(int) int { return 0 }

// backwardHeads is backward for h heads when B is one matrix shared by the whole batch
// (folded into M: a Linear on a sequence): the A gradients of the h heads in one product
// ([G_1; …; G_h]·op(B)ᵀ, (hM)×K), and each head's B gradient by a product of its own
// straight into that head's rows (gradB), which are contiguous and, for a parameter, P
// apart. It declines batched products and an A gradient whose heads are not contiguous.
func (k *matmulKernel) backwardHeads(h int, gin, gout, in, _ [][]float64, gstr []int, _, _ []float64) bool {
	mn, mk := k.m*k.n, k.m*k.k
	if len(k.offA) != 1 || gin[0] != nil && gstr[0] != mk {
		return false
	}
	g, a, b := gout[0][:h*mn], in[0], in[1]
	if ga := gin[0]; ga != nil {
		k.product(0, false, !k.transB, h*k.m, k.k, k.n, g, k.n, b, k.ldb(), ga, k.k)
	}
	if gb := gin[1]; gb != nil {
		for j := range h {
			k.gradB(gb[j*gstr[1]:], a, g[j*mn:])
		}
	}
	return true
}
