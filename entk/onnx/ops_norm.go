package onnx

import (
	"math"
	"slices"
)

// opLayerNorm: LayerNormalization (opset 17) over the dimensions from axis on, Y only
// (stash_type is accepted; everything is float64 here).
func opLayerNorm(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 3, "axis", "epsilon", "stash_type"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0, 1, 2); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", -1)
	if err != nil {
		return nil, nil, err
	}
	eps, err := x.attrFloat("epsilon", float64(float32(1e-5)))
	if err != nil {
		return nil, nil, err
	}
	xs := x.in[0].shape
	ax, err := normAxis(a, len(xs))
	if err != nil {
		return nil, nil, err
	}
	k := &lnKernel{rows: numel(xs[:ax]), n: numel(xs[ax:]), eps: eps}
	for i := 1; i < len(x.in); i++ {
		if v := x.in[i]; v != nil && numel(v.shape) != k.n {
			return nil, nil, errf(ErrShape, "LayerNormalization input %d shape %v for normalized shape %v", i, v.shape, xs[ax:])
		}
	}
	if k.n == 0 {
		return nil, nil, errf(ErrShape, "LayerNormalization over an empty shape %v", xs[ax:])
	}
	return []outSpec{{dt: dtFloat, shape: xs}}, k, nil
}

// lnKernel normalizes each of rows rows of n values (Ba et al. 2016, eq. 4):
//
//	μ = Σx/n, σ² = Σ(x−μ)²/n, r = 1/√(σ² + ε), x̂ = (x − μ)·r, y = x̂·γ + β
//
// with VJP gγ += Σ_rows g·x̂, gβ += Σ_rows g, and, with h = g·γ,
// gx += r·(h − mean(h) − x̂·mean(h·x̂)).
type lnKernel struct {
	rows, n int
	eps     float64
	set     bool // backward sets x's gradient (setter)
}

func (k *lnKernel) setsGrad(j, _ int) bool {
	k.set = k.set || j == 0
	return j == 0
}

// scratch holds x̂ (rows·n) and r (rows).
func (k *lnKernel) scratch() int { return k.rows*k.n + k.rows }

func (k *lnKernel) forward(out, in [][]float64, scr []float64) {
	x, gamma, beta := in[0], in[1], get(in, 2)
	xh, rs := scr[:k.rows*k.n], scr[k.rows*k.n:]
	nf := float64(k.n)
	for r := 0; r < k.rows; r++ {
		row, h, y := x[r*k.n:(r+1)*k.n], xh[r*k.n:(r+1)*k.n], out[0][r*k.n:(r+1)*k.n]
		mu := 0.0
		for _, v := range row {
			mu += v
		}
		mu /= nf
		vr := 0.0
		for _, v := range row {
			vr += (v - mu) * (v - mu)
		}
		rstd := 1 / math.Sqrt(vr/nf+k.eps)
		rs[r] = rstd
		for i, v := range row {
			h[i] = (v - mu) * rstd
			y[i] = h[i] * gamma[i]
			if beta != nil {
				y[i] += beta[i]
			}
		}
	}
}

func (k *lnKernel) backward(gin, gout, in, _ [][]float64, scr []float64) {
	gamma := in[1]
	gx, gg, gb := gin[0], gin[1], get(gin, 2)
	xh, rs := scr[:k.rows*k.n], scr[k.rows*k.n:]
	nf := float64(k.n)
	for r := 0; r < k.rows; r++ {
		g, h := gout[0][r*k.n:(r+1)*k.n], xh[r*k.n:(r+1)*k.n]
		var mh, mhx float64
		for i, gi := range g {
			if gg != nil {
				gg[i] += gi * h[i]
			}
			if gb != nil {
				gb[i] += gi
			}
			mh += gi * gamma[i]
			mhx += gi * gamma[i] * h[i]
		}
		if gx == nil {
			continue
		}
		mh, mhx = mh/nf, mhx/nf
		dx := gx[r*k.n : (r+1)*k.n]
		if k.set {
			for i, gi := range g {
				dx[i] = zero + rs[r]*(gi*gamma[i]-mh-h[i]*mhx)
			}
			continue
		}
		for i, gi := range g {
			dx[i] += rs[r] * (gi*gamma[i] - mh - h[i]*mhx)
		}
	}
}

// opSoftmax: softmax along one axis (opset 13 semantics).
func opSoftmax(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "axis"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", -1)
	if err != nil {
		return nil, nil, err
	}
	xs := x.in[0].shape
	ax, err := normAxis(a, len(xs))
	if err != nil {
		return nil, nil, err
	}
	return []outSpec{{dt: dtFloat, shape: xs}}, &softmaxKernel{outer: numel(xs[:ax]), n: xs[ax], inner: numel(xs[ax+1:])}, nil
}

// softmaxKernel computes y_j = exp(x_j − max x)/Σ_k exp(x_k − max x) along the axis of x
// viewed as [outer, n, inner]; VJP gx_j += y_j·(g_j − Σ_k g_k y_k).
type softmaxKernel struct {
	outer, n, inner int
	set             bool // backward sets x's gradient (setter)
}

func (k *softmaxKernel) setsGrad(_, _ int) bool {
	k.set = true
	return true
}

func (k *softmaxKernel) scratch() int { return 0 }

func (k *softmaxKernel) forward(out, in [][]float64, _ []float64) {
	x, y := in[0], out[0]
	for o := 0; o < k.outer; o++ {
		for i := 0; i < k.inner; i++ {
			base := o*k.n*k.inner + i
			m := math.Inf(-1)
			for j := 0; j < k.n; j++ {
				m = max(m, x[base+j*k.inner])
			}
			s := 0.0
			for j := 0; j < k.n; j++ {
				e := math.Exp(x[base+j*k.inner] - m)
				y[base+j*k.inner] = e
				s += e
			}
			for j := 0; j < k.n; j++ {
				y[base+j*k.inner] /= s
			}
		}
	}
}

func (k *softmaxKernel) backward(gin, gout, _, out [][]float64, _ []float64) {
	gx, g, y := gin[0], gout[0], out[0]
	for o := 0; o < k.outer; o++ {
		for i := 0; i < k.inner; i++ {
			base := o*k.n*k.inner + i
			s := 0.0
			for j := 0; j < k.n; j++ {
				s += g[base+j*k.inner] * y[base+j*k.inner]
			}
			for j := 0; j < k.n; j++ {
				p := base + j*k.inner
				if k.set {
					gx[p] = zero + y[p]*(g[p]-s)
					continue
				}
				gx[p] += y[p] * (g[p] - s)
			}
		}
	}
}

// opReduceMean: the mean over the axes attribute (all axes when absent), keepdims.
func opReduceMean(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "axes", "keepdims"); err != nil {
		return nil, nil, err
	}
	if err := x.floatIn(0); err != nil {
		return nil, nil, err
	}
	raw, err := x.attrInts("axes")
	if err != nil {
		return nil, nil, err
	}
	keep, err := x.attrInt("keepdims", 1)
	if err != nil {
		return nil, nil, err
	}
	xs := x.in[0].shape
	axes, err := axesOf(raw, len(xs))
	if err != nil {
		return nil, nil, err
	}
	if raw == nil {
		for i := range xs {
			axes = append(axes, i)
		}
	}
	kept := slices.Clone(xs)
	var shape []int
	for i := range xs {
		if slices.Contains(axes, i) {
			kept[i] = 1
			if keep != 0 {
				shape = append(shape, 1)
			}
			continue
		}
		shape = append(shape, xs[i])
	}
	count := numel(xs) / max(numel(kept), 1)
	if count == 0 {
		return nil, nil, errf(ErrShape, "ReduceMean over an empty axis of %v", xs)
	}
	st := alignedStrides(kept, xs)
	m := stridedMap(xs, st, 0)
	if err := x.c.spend(len(m)/2, "reduction map"); err != nil {
		return nil, nil, err
	}
	return []outSpec{{dt: dtFloat, shape: shape}}, &reduceKernel{m: m, out: numel(kept), count: float64(count)}, nil
}

// reduceKernel averages: y[m[i]] = Σ x[i] / count; VJP gx[i] += g[m[i]]/count.
type reduceKernel struct {
	m     []int32
	out   int
	count float64
}

func (k *reduceKernel) scratch() int { return 0 }

func (k *reduceKernel) forward(out, in [][]float64, _ []float64) {
	y := out[0][:k.out]
	clear(y)
	for i, j := range k.m {
		y[j] += in[0][i]
	}
	for j := range y {
		y[j] /= k.count
	}
}

func (k *reduceKernel) backward(gin, gout, _, _ [][]float64, _ []float64) {
	for i, j := range k.m {
		gin[0][i] += gout[0][j] / k.count
	}
}
