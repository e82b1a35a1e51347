package onnx

import (
	"math"
	"slices"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// win2 is a 2-D window setup for the references: pads (top, left, bottom, right),
// strides, dilations.
type win2 struct {
	pads           [4]int
	sh, sw, dh, dw int
	ceil, inclPad  bool
}

// outSize is the PyTorch output size of one axis.
func outSize(in, k, pb, pe, s, d int, ceil bool) int {
	ext := in + pb + pe - d*(k-1) - 1
	o := ext/s + 1
	if ceil && ext%s != 0 {
		o++
		if (o-1)*s >= in+pb {
			o--
		}
	}
	return o
}

// refConv is the convolution by its definition:
//
//	y[n,m,oy,ox] = b[m] + Σ_{c,ky,kx} x[n,c,oy·sh−pt+ky·dh, ox·sw−pl+kx·dw] · w[m,c,ky,kx]
func refConv(xs, wsh []int, bias bool, w win2) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		N, C, H, W := xs[0], xs[1], xs[2], xs[3]
		M, kh, kw := wsh[0], wsh[2], wsh[3]
		Ho := outSize(H, kh, w.pads[0], w.pads[2], w.sh, w.dh, false)
		Wo := outSize(W, kw, w.pads[1], w.pads[3], w.sw, w.dw, false)
		var res []float64
		for n := range N {
			for m := range M {
				for oy := range Ho {
					for ox := range Wo {
						s := 0.0
						if bias {
							s = in[2][m]
						}
						for c := range C {
							for ky := range kh {
								for kx := range kw {
									iy, ix := oy*w.sh-w.pads[0]+ky*w.dh, ox*w.sw-w.pads[1]+kx*w.dw
									if iy >= 0 && iy < H && ix >= 0 && ix < W {
										s += in[0][((n*C+c)*H+iy)*W+ix] * in[1][((m*C+c)*kh+ky)*kw+kx]
									}
								}
							}
						}
						res = append(res, s)
					}
				}
			}
		}
		return res
	}
}

// refPool is MaxPool (first maximum) or AveragePool by definition over [planes, H, W].
func refPool(isMax bool, xs []int, kh, kw int, w win2) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		H, W := xs[len(xs)-2], xs[len(xs)-1]
		planes := numel(xs) / (H * W)
		Ho := outSize(H, kh, w.pads[0], w.pads[2], w.sh, w.dh, w.ceil)
		Wo := outSize(W, kw, w.pads[1], w.pads[3], w.sw, w.dw, w.ceil)
		var res []float64
		for p := range planes {
			for oy := range Ho {
				for ox := range Wo {
					best, sum, cnt := math.Inf(-1), 0.0, 0
					for ky := range kh {
						for kx := range kw {
							iy, ix := oy*w.sh-w.pads[0]+ky*w.dh, ox*w.sw-w.pads[1]+kx*w.dw
							inside := iy >= 0 && iy < H && ix >= 0 && ix < W
							if inside || w.inclPad && iy < H+w.pads[2] && ix < W+w.pads[3] {
								cnt++
							}
							if inside {
								v := in[0][(p*H+iy)*W+ix]
								best = max(best, v)
								sum += v
							}
						}
					}
					if isMax {
						res = append(res, best)
					} else {
						res = append(res, sum/float64(cnt))
					}
				}
			}
		}
		return res
	}
}

func refBN(xs []int, eps float64) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		C, inner := xs[1], numel(xs[2:])
		res := make([]float64, numel(xs))
		for i := range res {
			c := i / inner % C
			res[i] = (in[0][i]-in[3][c])/math.Sqrt(in[4][c]+eps)*in[1][c] + in[2][c]
		}
		return res
	}
}

func refLN(rows, n int, eps float64) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		res := make([]float64, rows*n)
		for r := range rows {
			row := in[0][r*n : (r+1)*n]
			mu, vr := 0.0, 0.0
			for _, v := range row {
				mu += v / float64(n)
			}
			for _, v := range row {
				vr += (v - mu) * (v - mu) / float64(n)
			}
			for i, v := range row {
				res[r*n+i] = (v-mu)/math.Sqrt(vr+eps)*in[1][i] + in[2][i]
			}
		}
		return res
	}
}

func refSoftmax(shape []int, axis int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		res := make([]float64, len(in[0]))
		for i := range res {
			idx := unravel(i, shape)
			m, s := math.Inf(-1), 0.0
			for j := range shape[axis] {
				idx[axis] = j
				m = max(m, in[0][ravel(idx, shape)])
			}
			for j := range shape[axis] {
				idx[axis] = j
				s += math.Exp(in[0][ravel(idx, shape)] - m)
			}
			res[i] = math.Exp(in[0][i]-m) / s
		}
		return res
	}
}

// refMean averages over axes (keepdims does not change the flattened order).
func refMean(shape, axes []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		kept := slices.Clone(shape)
		for _, a := range axes {
			kept[a] = 1
		}
		res := make([]float64, numel(kept))
		cnt := float64(numel(shape) / numel(kept))
		for i, v := range in[0] {
			idx := unravel(i, shape)
			for _, a := range axes {
				idx[a] = 0
			}
			res[ravel(idx, kept)] += v / cnt
		}
		return res
	}
}

func nnCases() []opCase {
	c := func(shape ...int) operand { return operand{kind: 'c', shape: shape} }
	return []opCase{
		{name: "Conv", op: "Conv", in: []operand{act(1, 2, 5, 6), param(3, 2, 3, 2), param(3)},
			attrs: []*onnxpb.AttributeProto{aInts("pads", 1, 0, 1, 1), aInts("strides", 2, 1), aInts("dilations", 1, 2), aInts("kernel_shape", 3, 2)},
			ref:   refConv([]int{1, 2, 5, 6}, []int{3, 2, 3, 2}, true, win2{pads: [4]int{1, 0, 1, 1}, sh: 2, sw: 1, dh: 1, dw: 2})},
		{name: "ConvBatch1x1", op: "Conv", in: []operand{act(2, 3, 4, 4), param(4, 3, 1, 1)},
			ref: refConv([]int{2, 3, 4, 4}, []int{4, 3, 1, 1}, false, win2{sh: 1, sw: 1, dh: 1, dw: 1})},
		{name: "Conv1D", op: "Conv", in: []operand{act(1, 2, 7), param(3, 2, 3), param(3)},
			attrs: []*onnxpb.AttributeProto{aInts("pads", 1, 1), aInts("strides", 2)},
			ref:   refConv([]int{1, 2, 1, 7}, []int{3, 2, 1, 3}, true, win2{pads: [4]int{0, 1, 0, 1}, sh: 1, sw: 2, dh: 1, dw: 1})},
		{name: "ConvSameUpper", op: "Conv", in: []operand{act(1, 1, 5, 5), param(2, 1, 3, 3)},
			attrs: []*onnxpb.AttributeProto{aStr("auto_pad", "SAME_UPPER"), aInts("strides", 2, 2)},
			ref:   refConv([]int{1, 1, 5, 5}, []int{2, 1, 3, 3}, false, win2{pads: [4]int{1, 1, 1, 1}, sh: 2, sw: 2, dh: 1, dw: 1})},
		{name: "MaxPool", op: "MaxPool", in: []operand{act(1, 2, 5, 5)},
			attrs: []*onnxpb.AttributeProto{aInts("kernel_shape", 2, 2), aInts("strides", 2, 2)},
			ref:   refPool(true, []int{1, 2, 5, 5}, 2, 2, win2{sh: 2, sw: 2, dh: 1, dw: 1})},
		{name: "MaxPoolCeilPad", op: "MaxPool", in: []operand{act(1, 1, 6, 6)},
			attrs: []*onnxpb.AttributeProto{aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aInts("pads", 1, 1, 1, 1), aInt("ceil_mode", 1)},
			ref:   refPool(true, []int{1, 1, 6, 6}, 3, 3, win2{pads: [4]int{1, 1, 1, 1}, sh: 2, sw: 2, dh: 1, dw: 1, ceil: true})},
		{name: "AveragePool", op: "AveragePool", in: []operand{act(1, 2, 5, 5)},
			attrs: []*onnxpb.AttributeProto{aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aInts("pads", 1, 1, 1, 1)},
			ref:   refPool(false, []int{1, 2, 5, 5}, 3, 3, win2{pads: [4]int{1, 1, 1, 1}, sh: 2, sw: 2, dh: 1, dw: 1})},
		{name: "AveragePoolInclPadCeil", op: "AveragePool", in: []operand{act(1, 1, 6, 6)},
			attrs: []*onnxpb.AttributeProto{aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aInts("pads", 1, 1, 1, 1), aInt("count_include_pad", 1), aInt("ceil_mode", 1)},
			ref:   refPool(false, []int{1, 1, 6, 6}, 3, 3, win2{pads: [4]int{1, 1, 1, 1}, sh: 2, sw: 2, dh: 1, dw: 1, ceil: true, inclPad: true})},
		{name: "GlobalAveragePool", op: "GlobalAveragePool", in: []operand{act(1, 3, 4, 5)}, ref: refMean([]int{1, 3, 4, 5}, []int{2, 3})},
		{name: "BatchNormalization", op: "BatchNormalization", in: []operand{act(2, 3, 2, 2), param(3), param(3), c(3), c(3)},
			attrs: []*onnxpb.AttributeProto{aFloat("epsilon", 1e-3)}, ref: refBN([]int{2, 3, 2, 2}, float64(float32(1e-3)))},
		{name: "LayerNormalization", op: "LayerNormalization", in: []operand{act(2, 3, 4), param(4), param(4)},
			ref: refLN(6, 4, float64(float32(1e-5)))},
		{name: "LayerNormalizationAxis", op: "LayerNormalization", in: []operand{act(2, 3, 4), param(3, 4), param(3, 4)},
			attrs: []*onnxpb.AttributeProto{aInt("axis", -2), aFloat("epsilon", 1e-2)}, ref: refLN(2, 12, float64(float32(1e-2)))},
		{name: "Softmax", op: "Softmax", in: []operand{act(2, 3, 4)}, ref: refSoftmax([]int{2, 3, 4}, 2)},
		{name: "SoftmaxAxis", op: "Softmax", in: []operand{act(2, 3, 4)}, attrs: []*onnxpb.AttributeProto{aInt("axis", 1)}, ref: refSoftmax([]int{2, 3, 4}, 1)},
		{name: "ReduceMean", op: "ReduceMean", in: []operand{act(2, 3, 4)}, attrs: []*onnxpb.AttributeProto{aInts("axes", -1)}, ref: refMean([]int{2, 3, 4}, []int{2})},
		{name: "ReduceMeanFlat", op: "ReduceMean", in: []operand{act(2, 3, 4)}, attrs: []*onnxpb.AttributeProto{aInts("axes", 0, 2), aInt("keepdims", 0)}, ref: refMean([]int{2, 3, 4}, []int{0, 2})},
		{name: "ReduceMeanAll", op: "ReduceMean", in: []operand{act(2, 3)}, ref: refMean([]int{2, 3}, []int{0, 1})},
	}
}

// refGemm is alpha·op(A)·op(B) + beta·C by its definition, C broadcast from cshape.
func refGemm(m, n, k int, tA, tB bool, alpha, beta float64, cshape []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		var c []float64
		if cshape != nil {
			c = refBroadcast([][]int{cshape, {m, n}}, [][]float64{in[2], make([]float64, m*n)}, func(v []float64) float64 { return v[0] })
		}
		res := make([]float64, m*n)
		for i := range m {
			for j := range n {
				s := 0.0
				for p := range k {
					a, b := in[0][i*k+p], in[1][p*n+j]
					if tA {
						a = in[0][p*m+i]
					}
					if tB {
						b = in[1][j*k+p]
					}
					s += a * b
				}
				res[i*n+j] = alpha * s
				if c != nil {
					res[i*n+j] += beta * c[i*n+j]
				}
			}
		}
		return res
	}
}

// refMatMul is numpy matmul for operands already promoted to ≥ 2-D shapes as, bs.
func refMatMul(as, bs []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
		ab, bb := as[:len(as)-2], bs[:len(bs)-2]
		batch, _ := broadcastShapes(ab, bb)
		var res []float64
		for bi := range numel(batch) {
			idx := unravel(bi, batch)
			pick := func(s []int) int {
				j := make([]int, len(s))
				for d := range s {
					if s[d] != 1 {
						j[d] = idx[d+len(batch)-len(s)]
					}
				}
				return ravel(j, s)
			}
			oa, ob := pick(ab)*m*k, pick(bb)*k*n
			for i := range m {
				for j := range n {
					s := 0.0
					for p := range k {
						s += in[0][oa+i*k+p] * in[1][ob+p*n+j]
					}
					res = append(res, s)
				}
			}
		}
		return res
	}
}

func linalgCases() []opCase {
	gemm := func(name string, a, b operand, c *operand, tA, tB bool, alpha, beta float32) opCase {
		m, k := a.shape[0], a.shape[1]
		if tA {
			m, k = k, m
		}
		n := b.shape[1]
		if tB {
			n = b.shape[0]
		}
		in := []operand{a, b}
		var cs []int
		if c != nil {
			in, cs = append(in, *c), c.shape
		}
		ti := func(v bool) int64 {
			if v {
				return 1
			}
			return 0
		}
		return opCase{name: name, op: "Gemm", in: in,
			attrs: []*onnxpb.AttributeProto{aInt("transA", ti(tA)), aInt("transB", ti(tB)), aFloat("alpha", alpha), aFloat("beta", beta)},
			ref:   refGemm(m, n, k, tA, tB, float64(alpha), float64(beta), cs)}
	}
	return []opCase{
		gemm("GemmLinear", act(1, 4), param(5, 4), &operand{kind: 'p', shape: []int{5}}, false, true, 1, 1),
		gemm("GemmPlain", act(3, 4), param(4, 5), &operand{kind: 'p', shape: []int{3, 1}}, false, false, 0.5, 2),
		gemm("GemmTransA", act(4, 3), param(4, 5), nil, true, false, 1, 1),
		gemm("GemmTransAB", act(4, 3), act(5, 4), &operand{kind: 'p', shape: []int{3, 5}}, true, true, -1.5, 0.25),
		gemm("GemmScalarC", param(3, 4), act(5, 4), &operand{kind: 'p', shape: []int{}}, false, true, 1, 1),
		{name: "MatMulShared", op: "MatMul", in: []operand{act(2, 3, 4), param(4, 5)}, ref: refMatMul([]int{2, 3, 4}, []int{4, 5})},
		{name: "MatMulBatch", op: "MatMul", in: []operand{act(2, 1, 3, 4), act(5, 4, 2)}, ref: refMatMul([]int{2, 1, 3, 4}, []int{5, 4, 2})},
		{name: "MatMulVecLeft", op: "MatMul", in: []operand{act(4), act(2, 4, 3)}, ref: refMatMul([]int{1, 4}, []int{2, 4, 3})},
		{name: "MatMulVecRight", op: "MatMul", in: []operand{act(3, 4), act(4)}, ref: refMatMul([]int{3, 4}, []int{4, 1})},
		{name: "MatMulParamLeft", op: "MatMul", in: []operand{param(3, 4), act(2, 4, 2)}, ref: refMatMul([]int{3, 4}, []int{2, 4, 2})},
	}
}
