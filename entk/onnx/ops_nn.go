package onnx

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/blas/gonum"
)

// geom is the sliding-window geometry of Conv and the pools over 1 or 2 spatial
// dimensions (1-D is H = 1), dimension 0 being H.
type geom struct {
	in, k, out, stride, dil, padB, padE [2]int
}

// window reads auto_pad, pads, strides and dilations for spatial input dims in and kernel
// dims k (ceil: ceil_mode of the pools, with PyTorch's rule that the last window must
// start inside the input or its leading padding).
func (x *nodeCtx) window(in, k []int, ceil bool) (geom, error) {
	var g geom
	s := len(in)
	if s < 1 || s > 2 || len(k) != s {
		return g, errf(ErrUnsupported, "%d spatial dimensions (kernel %v); 1 or 2 are supported", s, k)
	}
	autoPad, err := x.attrString("auto_pad", "NOTSET")
	if err != nil {
		return g, err
	}
	var lists [3][]int64
	for i, name := range []string{"pads", "strides", "dilations"} {
		if lists[i], err = x.attrInts(name); err != nil {
			return g, err
		}
	}
	pads, strd, dil := lists[0], lists[1], lists[2]
	if pads != nil && len(pads) != 2*s || strd != nil && len(strd) != s || dil != nil && len(dil) != s {
		return g, errf(ErrShape, "pads %v, strides %v, dilations %v for %d spatial dimensions", pads, strd, dil, s)
	}
	for i := range 2 {
		g.in[i], g.k[i], g.out[i], g.stride[i], g.dil[i] = 1, 1, 1, 1, 1
	}
	for i := range s {
		j := i + 2 - s // 1-D uses dimension 1 (W)
		g.in[j], g.k[j] = in[i], k[i]
		if strd != nil {
			g.stride[j] = int(min(max(strd[i], 0), 1<<20))
		}
		if dil != nil {
			g.dil[j] = int(min(max(dil[i], 0), 1<<20))
		}
		if pads != nil {
			g.padB[j], g.padE[j] = int(min(max(pads[i], -1), 1<<20)), int(min(max(pads[i+s], -1), 1<<20))
		}
		if g.stride[j] < 1 || g.dil[j] < 1 || g.padB[j] < 0 || g.padE[j] < 0 || g.k[j] < 1 {
			return g, errf(ErrShape, "kernel %v, strides %v, dilations %v, pads %v", k, strd, dil, pads)
		}
		span := g.dil[j]*(g.k[j]-1) + 1
		switch autoPad {
		case "NOTSET":
		case "VALID":
			g.padB[j], g.padE[j] = 0, 0
		case "SAME_UPPER", "SAME_LOWER":
			o := (g.in[j] + g.stride[j] - 1) / g.stride[j]
			t := max(0, (o-1)*g.stride[j]+span-g.in[j])
			g.padB[j], g.padE[j] = t/2, t-t/2
			if autoPad == "SAME_LOWER" {
				g.padB[j], g.padE[j] = t-t/2, t/2
			}
		default:
			return g, errf(ErrUnsupported, "auto_pad %q", autoPad)
		}
		ext := g.in[j] + g.padB[j] + g.padE[j] - span
		if ext < 0 {
			return g, errf(ErrShape, "kernel %v larger than the padded input %v", k, in)
		}
		g.out[j] = ext/g.stride[j] + 1
		if ceil && ext%g.stride[j] != 0 {
			g.out[j]++
			if (g.out[j]-1)*g.stride[j] >= g.in[j]+g.padB[j] {
				g.out[j]--
			}
		}
	}
	return g, nil
}

// fits checks that c copies of the window tables (c·kh·kw·Ho·Wo entries) fit the budget
// before they are built.
func (g geom) fits(x *nodeCtx, c int) error {
	if _, err := checkedNumel([]int64{int64(c), int64(g.k[0]), int64(g.k[1]), int64(g.out[0]), int64(g.out[1])}, x.c.budget); err != nil {
		return errf(ErrShape, "window tables: %v", err)
	}
	return nil
}

// positions is Ho·Wo and area kh·kw.
func (g geom) positions() int { return g.out[0] * g.out[1] }
func (g geom) area() int      { return g.k[0] * g.k[1] }

// offsets returns, for output position p and kernel element e, off[e·P + p] = the input
// offset iy·W + ix within a plane, or -1 outside the input; and padded[e·P + p] whether
// the element lies inside the padded input (AveragePool's count_include_pad).
func (g geom) offsets() (off []int32, padded []bool) {
	P, A := g.positions(), g.area()
	off, padded = make([]int32, A*P), make([]bool, A*P)
	for ky := 0; ky < g.k[0]; ky++ {
		for kx := 0; kx < g.k[1]; kx++ {
			e := ky*g.k[1] + kx
			for oy := 0; oy < g.out[0]; oy++ {
				iy := oy*g.stride[0] - g.padB[0] + ky*g.dil[0]
				for ox := 0; ox < g.out[1]; ox++ {
					ix := ox*g.stride[1] - g.padB[1] + kx*g.dil[1]
					i := e*P + oy*g.out[1] + ox
					off[i] = -1
					if iy >= 0 && iy < g.in[0] && ix >= 0 && ix < g.in[1] {
						off[i] = int32(iy*g.in[1] + ix)
					}
					padded[i] = iy < g.in[0]+g.padE[0] && ix < g.in[1]+g.padE[1]
				}
			}
		}
	}
	return off, padded
}

// outShape is [N, C, spatial out…] for an input of the given rank.
func (g geom) outShape(n, c, rank int) []int {
	if rank == 3 {
		return []int{n, c, g.out[1]}
	}
	return []int{n, c, g.out[0], g.out[1]}
}

// opConv: 1-D or 2-D convolution, group 1, with pads, strides, dilations and auto_pad.
func opConv(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 3, "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0, 1, 2); err != nil {
		return nil, nil, err
	}
	if g, err := x.attrInt("group", 1); err != nil || g != 1 {
		if err == nil {
			err = errf(ErrUnsupported, "Conv group = %d (only 1)", g)
		}
		return nil, nil, err
	}
	xs, ws := x.in[0].shape, x.in[1].shape
	if len(xs) < 3 || len(ws) != len(xs) || ws[1] != xs[1] {
		return nil, nil, errf(ErrShape, "Conv input %v with weight %v", xs, ws)
	}
	if ks, err := x.attrInts("kernel_shape"); err != nil || ks != nil && !slices.Equal(ints64(ws[2:]), ks) {
		if err == nil {
			err = errf(ErrShape, "kernel_shape %v, weight %v", ks, ws)
		}
		return nil, nil, err
	}
	if b := x.opt(2); b != nil && numel(b.shape) != ws[0] {
		return nil, nil, errf(ErrShape, "Conv bias %v for %d channels", b.shape, ws[0])
	}
	g, err := x.window(xs[2:], ws[2:], false)
	if err != nil {
		return nil, nil, err
	}
	if err := g.fits(x, xs[1]); err != nil {
		return nil, nil, err
	}
	off, _ := g.offsets()
	P, A, C := g.positions(), g.area(), xs[1]
	k := &convKernel{n: xs[0], m: ws[0], K: C * A, P: P, plane: numel(xs[1:]), cols: make([]int32, C*A*P)}
	hw := g.in[0] * g.in[1]
	for c := 0; c < C; c++ {
		for e := 0; e < A; e++ {
			for p := 0; p < P; p++ {
				o := off[e*P+p]
				if o >= 0 {
					o += int32(c * hw)
				}
				k.cols[p*k.K+c*A+e] = o
			}
		}
	}
	if err := x.c.spend(len(k.cols), "im2col maps"); err != nil {
		return nil, nil, err
	}
	k.colsT = make([]int32, len(k.cols))
	for p := 0; p < P; p++ {
		for r := 0; r < k.K; r++ {
			k.colsT[r*P+p] = k.cols[p*k.K+r]
		}
	}
	k.findRuns()
	k.findInv(off, A, g.in[0], g.in[1], g.out[1])
	return []outSpec{{dt: dtFloat, shape: g.outShape(xs[0], ws[0], len(xs))}}, k, nil
}

// convKernel is a convolution as a matrix product (im2col, position-major): per batch
// element b,
//
//	cols[p, r] = x_b[cols map[p·K + r]] (0 in the padding),  r = c·A + e
//	y_b[m, p]  = bias[m] + Σ_r W[m, r] · cols[p, r]          (y_b = W·colsᵀ, one Dgemm)
//
// and its VJP gW += g_b·cols, gbias[m] += Σ_p g_b[m, p], gx_b += col2im(g_bᵀ·W). When at
// most one in sparseFrac of g_b's entries is non-zero (a ReLU and a max-pool downstream
// pass few gradients), the two products run as one axpy of length K per non-zero entry
// instead: gW[m, :] += g·cols[p, :] and gcols[p, :] += g·W[m, :].
type convKernel struct {
	n, m, K, P, plane int
	cols              []int32 // P×K
	colsT             []int32 // K×P: colsT[r·P + p] = cols[p·K + r] (backwardHeads' col2im)
	// runs[runAt[r]:runAt[r+1]] cover row r of colsT in order of p, each a stretch that
	// maps consecutive positions to consecutive input entries (a stride-1 convolution's
	// output row) or lies in the padding; nil when the stretches are too short to pay
	// (findRuns).
	runs  []convRun
	runAt []int32
	setW  bool // backward sets the weight's gradient (setter: its only writer)
	inv   *convInv
}

// convInv describes a stride-1 convolution's input gradient as one product over a
// padded copy of the output gradient (gxByProduct). Element e of the kernel reads input
// (iy, ix) at output (iy + dy_e, ix + dx_e). The output gradient's planes are copied into
// planes of hp×wp (row ty, column tx holding output row 0, column 0; zeros around), so
// that, for the band of input rows 0 … H−1 at width wp (H·wp columns, those at ix ≥ W
// discarded), element e's gradient term of band column i is padded entry i + off[e]: a
// row of that band is a contiguous stretch of the padded plane.
type convInv struct {
	h, w, wo   int   // input rows and columns, output columns
	hp, wp     int   // padded plane
	ty, tx     int   // where output (0, 0) sits in it
	off        []int // per element
	plane, bnd int   // padded plane with slack (hp·wp + wp), band H·wp
}

func (k *convKernel) setsGrad(j, _ int) bool {
	k.setW = k.setW || j == 1
	return j == 1
}

// convRun is a stretch of one row of colsT: colsT[r·P + p + i] = c + i for i < n, or −1
// (the padding) for every i when c < 0.
type convRun struct{ p, n, c int32 }

// minRunLen is the mean run length from which col2imHeads adds runs as slices: a strided
// convolution's runs have length 1, where the element loop is faster.
const minRunLen = 4

// findRuns splits each row of colsT into runs (convKernel.runs), or leaves runs nil when
// they average under minRunLen entries.
func (k *convKernel) findRuns() {
	var runs []convRun
	at := make([]int32, 0, k.K+1)
	for r := range k.K {
		at = append(at, int32(len(runs)))
		row := k.colsT[r*k.P : (r+1)*k.P]
		for p := 0; p < len(row); {
			n := 1
			for p+n < len(row) && (row[p] < 0 && row[p+n] < 0 || row[p] >= 0 && row[p+n] == row[p]+int32(n)) {
				n++
			}
			runs = append(runs, convRun{p: int32(p), n: int32(n), c: max(row[p], -1)})
			p += n
		}
	}
	if len(runs)*minRunLen > len(k.colsT) {
		return
	}
	k.runs, k.runAt = runs, append(at, int32(len(runs)))
}

// findInv sets k.inv (convInv) when every element reads at a fixed shift of the output
// position (stride 1 in both dimensions): off[e·P + p] is the input position, in an H×W
// plane, that output position p of a ·×wo output reads through element e, or −1.
func (k *convKernel) findInv(off []int32, A, H, W, wo int) {
	dy, dx := make([]int, A), make([]int, A)
	for e := range A {
		set := false
		for p, q := range off[e*k.P : (e+1)*k.P] {
			if q < 0 {
				continue
			}
			y, x := p/wo-int(q)/W, p%wo-int(q)%W
			if !set {
				dy[e], dx[e], set = y, x, true
			} else if y != dy[e] || x != dx[e] {
				return
			}
		}
		if !set {
			return
		}
	}
	v := &convInv{h: H, w: W, wo: wo, off: make([]int, A)}
	v.ty, v.tx = -slices.Min(dy), -slices.Min(dx)
	ho := k.P / wo
	v.hp = max(H+slices.Max(dy), ho) + v.ty
	v.wp = max(W+slices.Max(dx), wo) + v.tx
	for e := range A {
		v.off[e] = (dy[e]+v.ty)*v.wp + dx[e] + v.tx
	}
	v.plane, v.bnd = v.hp*v.wp+v.wp, H*v.wp
	k.inv = v
}

// sparseFrac: the sparse backward runs when nnz(g_b)·sparseFrac ≤ M·P. The dense products
// run in internal/base/gemm's FMA kernel at several times the speed of an axpy per term, so the
// sparse path only pays when it skips most of the terms.
const sparseFrac = 2

// scratch holds the n im2col matrices (for the weight gradient), one gradient of cols
// and one example's input behind a zero (forward's gather reads pad[map+1], so the
// padding, map −1, reads the zero without a branch).
func (k *convKernel) scratch() int { return (k.n+1)*k.K*k.P + k.plane + 1 }

func (k *convKernel) forward(out, in [][]float64, scr []float64) {
	y, xin, w, bias := out[0], in[0], in[1], get(in, 2)
	KP, MP := k.K*k.P, k.m*k.P
	pad := scr[(k.n+1)*KP : (k.n+1)*KP+k.plane+1]
	pad[0] = 0
	for b := 0; b < k.n; b++ {
		cols, yb := scr[b*KP:(b+1)*KP], y[b*MP:(b+1)*MP]
		copy(pad[1:], xin[b*k.plane:(b+1)*k.plane])
		for i, j := range k.cols {
			cols[i] = pad[j+1]
		}
		for m := 0; m < k.m; m++ {
			row := yb[m*k.P : (m+1)*k.P]
			v := 0.0
			if bias != nil {
				v = bias[m]
			}
			for p := range row {
				row[p] = v
			}
		}
		dgemm(false, true, k.m, k.P, k.K, 1, w, k.K, cols, k.K, yb, k.P)
	}
}

func (k *convKernel) backward(gin, gout, in, _ [][]float64, scr []float64) {
	gx, gw, gb, w := gin[0], gin[1], get(gin, 2), in[1]
	KP, MP := k.K*k.P, k.m*k.P
	gcols := scr[k.n*KP : (k.n+1)*KP]
	if k.setW && gw != nil {
		clear(gw[:k.m*k.K])
	}
	for b := 0; b < k.n; b++ {
		g, cols := gout[0][b*MP:(b+1)*MP], scr[b*KP:(b+1)*KP]
		nnz := 0
		for m := 0; m < k.m; m++ {
			s := 0.0
			for _, v := range g[m*k.P : (m+1)*k.P] {
				s += v
				if v != 0 {
					nnz++
				}
			}
			if gb != nil {
				gb[m] += s
			}
		}
		if gx != nil {
			clear(gcols)
		}
		if nnz*sparseFrac <= MP {
			k.sparseBackward(gx != nil, gw, gcols, g, cols, w)
		} else {
			if gw != nil {
				dgemm(false, false, k.m, k.K, k.P, 1, g, k.P, cols, k.K, gw, k.K)
			}
			if gx != nil {
				dgemm(true, false, k.P, k.K, k.m, 1, g, k.P, w, k.K, gcols, k.K)
			}
		}
		if gx != nil {
			xb := gx[b*k.plane : (b+1)*k.plane]
			for i, j := range k.cols {
				if j >= 0 {
					xb[j] += gcols[i]
				}
			}
		}
	}
}

// sparseBackward adds the terms of the non-zero entries of g: gW[m, :] += g[m,p]·cols[p, :]
// (gw non-nil) and, when dx, gcols[p, :] += g[m,p]·W[m, :].
func (k *convKernel) sparseBackward(dx bool, gw, gcols, g, cols, w []float64) {
	impl := gonum.Implementation{}
	for m := 0; m < k.m; m++ {
		for p, v := range g[m*k.P : (m+1)*k.P] {
			if v == 0 {
				continue
			}
			if gw != nil {
				impl.Daxpy(k.K, v, cols[p*k.K:(p+1)*k.K], 1, gw[m*k.K:(m+1)*k.K], 1)
			}
			if dx {
				impl.Daxpy(k.K, v, w[m*k.K:(m+1)*k.K], 1, gcols[p*k.K:(p+1)*k.K], 1)
			}
		}
	}
}

// opPool compiles MaxPool (max = true) and AveragePool.
func opPool(isMax bool) opFunc {
	return func(x *nodeCtx) ([]outSpec, kernel, error) {
		attrs := []string{"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "dilations"}
		if isMax {
			attrs = append(attrs, "storage_order")
		} else {
			attrs = append(attrs, "count_include_pad")
		}
		if err := x.check(1, 1, attrs...); err != nil {
			return nil, nil, err
		}
		if err := x.floatIn(0); err != nil {
			return nil, nil, err
		}
		xs := x.in[0].shape
		ks, err := x.attrInts("kernel_shape")
		if err != nil {
			return nil, nil, err
		}
		if len(xs) < 3 || len(ks) != len(xs)-2 {
			return nil, nil, errf(ErrShape, "pool input %v with kernel_shape %v", xs, ks)
		}
		kd := make([]int, len(ks))
		for i, v := range ks {
			kd[i] = int(min(max(v, 0), 1<<20))
		}
		ceil, err := x.attrInt("ceil_mode", 0)
		if err != nil {
			return nil, nil, err
		}
		incl, err := x.attrInt("count_include_pad", 0)
		if err != nil {
			return nil, nil, err
		}
		g, err := x.window(xs[2:], kd, ceil != 0)
		if err != nil {
			return nil, nil, err
		}
		if err := g.fits(x, 1); err != nil {
			return nil, nil, err
		}
		k := &poolKernel{max: isMax, planes: xs[0] * xs[1], hw: g.in[0] * g.in[1], P: g.positions(), A: g.area()}
		var padded []bool
		k.off, padded = g.offsets()
		if !isMax {
			k.div = make([]float64, k.P)
			for p := range k.P {
				for e := range k.A {
					if k.off[e*k.P+p] >= 0 || incl != 0 && padded[e*k.P+p] {
						k.div[p]++
					}
				}
			}
		}
		if err := x.c.spend(len(k.off)/2+len(k.div), "pool map"); err != nil {
			return nil, nil, err
		}
		return []outSpec{{dt: dtFloat, shape: g.outShape(xs[0], xs[1], len(xs))}}, k, nil
	}
}

var (
	opMaxPool     = opPool(true)
	opAveragePool = opPool(false)
)

// poolKernel pools every plane (n·c of them) of hw values into P outputs over windows of A
// elements (off as geom.offsets). MaxPool: y = the first maximum in row-major window order
// (strict >), its gradient to that element; a window wholly in the padding gives -Inf.
// AveragePool: y = Σ valid / div[p], div counting the padding when count_include_pad.
type poolKernel struct {
	max        bool
	planes, hw int
	P, A       int
	off        []int32
	div        []float64
}

// scratch is MaxPool's argmax per output (as a float64; -1 for none).
func (k *poolKernel) scratch() int {
	if k.max {
		return k.planes * k.P
	}
	return 0
}

func (k *poolKernel) forward(out, in [][]float64, scr []float64) {
	for c := 0; c < k.planes; c++ {
		x, y := in[0][c*k.hw:(c+1)*k.hw], out[0][c*k.P:(c+1)*k.P]
		for p := range y {
			if !k.max {
				s := 0.0
				for e := 0; e < k.A; e++ {
					if j := k.off[e*k.P+p]; j >= 0 {
						s += x[j]
					}
				}
				y[p] = s / k.div[p]
				continue
			}
			best, arg := math.Inf(-1), -1
			for e := 0; e < k.A; e++ {
				if j := int(k.off[e*k.P+p]); j >= 0 && (arg < 0 || x[j] > best) {
					best, arg = x[j], j
				}
			}
			y[p] = best
			scr[c*k.P+p] = float64(arg)
		}
	}
}

func (k *poolKernel) backward(gin, gout, _, _ [][]float64, scr []float64) {
	for c := 0; c < k.planes; c++ {
		gx, g := gin[0][c*k.hw:(c+1)*k.hw], gout[0][c*k.P:(c+1)*k.P]
		for p, gp := range g {
			if k.max {
				if j := int(scr[c*k.P+p]); j >= 0 {
					gx[j] += gp
				}
				continue
			}
			d := gp / k.div[p]
			for e := 0; e < k.A; e++ {
				if j := k.off[e*k.P+p]; j >= 0 {
					gx[j] += d
				}
			}
		}
	}
}

// opGlobalAveragePool is the mean over all spatial positions per (n, c).
func opGlobalAveragePool(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1); err != nil {
		return nil, nil, err
	}
	xs := x.in[0].shape
	if len(xs) < 3 {
		return nil, nil, errf(ErrShape, "GlobalAveragePool of %v", xs)
	}
	shape := slices.Clone(xs)
	for i := 2; i < len(shape); i++ {
		shape[i] = 1
	}
	hw := numel(xs[2:])
	off := make([]int32, hw)
	for i := range off {
		off[i] = int32(i)
	}
	div := []float64{float64(hw)}
	if hw == 0 {
		return nil, nil, errf(ErrShape, "GlobalAveragePool of an empty plane %v", xs)
	}
	return []outSpec{{dt: dtFloat, shape: shape}}, &poolKernel{planes: xs[0] * xs[1], hw: hw, P: 1, A: hw, off: off, div: div}, nil
}

// opBatchNorm: the inference form y = (x − mean)/√(var + ε)·scale + B per channel (axis
// 1); mean and var never receive a gradient (they are running statistics).
func opBatchNorm(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(5, 5, "epsilon", "momentum", "training_mode"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0, 1, 2, 3, 4); err != nil {
		return nil, nil, err
	}
	if t, err := x.attrInt("training_mode", 0); err != nil || t != 0 {
		if err == nil {
			err = errf(ErrUnsupported, "BatchNormalization training_mode = 1: export the module in eval mode")
		}
		return nil, nil, err
	}
	eps, err := x.attrFloat("epsilon", float64(float32(1e-5)))
	if err != nil {
		return nil, nil, err
	}
	xs := x.in[0].shape
	if len(xs) < 2 {
		return nil, nil, errf(ErrShape, "BatchNormalization of %v", xs)
	}
	for k := 1; k < 5; k++ {
		if numel(x.in[k].shape) != xs[1] {
			return nil, nil, errf(ErrShape, "BatchNormalization input %d shape %v for %d channels", k, x.in[k].shape, xs[1])
		}
	}
	k := &bnKernel{n: xs[0], c: xs[1], inner: numel(xs[2:]), eps: eps}
	return []outSpec{{dt: dtFloat, shape: xs}}, k, nil
}

// bnKernel is BatchNormalization on x [n, c, inner].
type bnKernel struct {
	n, c, inner int
	eps         float64
	set         bool // backward sets x's gradient (setter)
}

func (k *bnKernel) setsGrad(j, _ int) bool {
	k.set = k.set || j == 0
	return j == 0
}

func (k *bnKernel) scratch() int { return 0 }

func (k *bnKernel) forward(out, in [][]float64, _ []float64) {
	x, scale, bias, mean, vr := in[0], in[1], in[2], in[3], in[4]
	for b := 0; b < k.n; b++ {
		for c := 0; c < k.c; c++ {
			o := (b*k.c + c) * k.inner
			sd := math.Sqrt(vr[c] + k.eps)
			for i, v := range x[o : o+k.inner] {
				out[0][o+i] = (v-mean[c])/sd*scale[c] + bias[c]
			}
		}
	}
}

// bnSums is Σ g_i and Σ g_i·(x_i − mean), each in four interleaved partial sums (i mod 4,
// added in order at the end) so that the additions do not wait on one another.
func bnSums(g, x []float64, mean float64) (sg, sgx float64) {
	x = x[:len(g)]
	var s [4]float64
	var t [4]float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		s[0] += g[i]
		s[1] += g[i+1]
		s[2] += g[i+2]
		s[3] += g[i+3]
		t[0] += g[i] * (x[i] - mean)
		t[1] += g[i+1] * (x[i+1] - mean)
		t[2] += g[i+2] * (x[i+2] - mean)
		t[3] += g[i+3] * (x[i+3] - mean)
	}
	for ; i < len(g); i++ {
		s[i%4] += g[i]
		t[i%4] += g[i] * (x[i] - mean)
	}
	return s[0] + s[1] + s[2] + s[3], t[0] + t[1] + t[2] + t[3]
}

func (k *bnKernel) backward(gin, gout, in, _ [][]float64, _ []float64) {
	x, scale, mean, vr := in[0], in[1], in[3], in[4]
	gx, gs, gbias := gin[0], gin[1], gin[2]
	for b := 0; b < k.n; b++ {
		for c := 0; c < k.c; c++ {
			o := (b*k.c + c) * k.inner
			sd := math.Sqrt(vr[c] + k.eps)
			g := gout[0][o : o+k.inner]
			sg, sgx := bnSums(g, x[o:o+k.inner], mean[c])
			sgx /= sd // once, not per entry: a division is several multiplications' time
			if gs != nil {
				gs[c] += sgx
			}
			if gbias != nil {
				gbias[c] += sg
			}
			if gx != nil {
				f := scale[c] / sd
				if k.set {
					for i, gi := range g {
						gx[o+i] = zero + gi*f
					}
					continue
				}
				for i, gi := range g {
					gx[o+i] += gi * f
				}
			}
		}
	}
}
