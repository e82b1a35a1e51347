package onnx

import (
	"math"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// opPad: pads constant, constant_value a constant scalar (default 0); modes constant,
// reflect and edge; negative pads crop.
func opPad(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 3, "mode"); err != nil {
		return nil, nil, err
	}
	mode, err := x.attrString("mode", "constant")
	if err != nil {
		return nil, nil, err
	}
	if mode != "constant" && mode != "reflect" && mode != "edge" {
		return nil, nil, errf(ErrUnsupported, "Pad mode %q", mode)
	}
	in := x.in[0].shape
	pads, err := x.constInts(1, "pads")
	if err != nil {
		return nil, nil, err
	}
	if len(pads) != 2*len(in) {
		return nil, nil, errf(ErrShape, "Pad: %d pads for rank %d", len(pads), len(in))
	}
	fill := 0.0
	if v := x.opt(2); v != nil {
		if v.c == nil || len(v.c) != 1 {
			return nil, nil, errf(ErrUnsupported, "Pad constant_value must be a constant scalar")
		}
		fill = v.c[0]
	}
	r := len(in)
	shape := make([]int, r)
	for i := range in {
		s := int64(in[i]) + pads[i] + pads[i+r]
		if s < 0 || s > int64(x.c.opts.MaxElements) || mode != "constant" && in[i] == 0 && s > 0 {
			return nil, nil, errf(ErrShape, "Pad %v of %v", pads, in)
		}
		shape[i] = int(s)
	}
	if _, err := checkedNumel(ints64(shape), x.c.budget); err != nil {
		return nil, nil, errf(ErrShape, "Pad: %v", err)
	}
	st := strides(in)
	m := make([]int32, numel(shape))
	idx := make([]int, r)
	for i := range m {
		src := 0
		for d := r - 1; d >= 0; d-- {
			c, ok := padCoord(idx[d]-int(pads[d]), in[d], mode)
			if !ok {
				src = -1
				break
			}
			src += c * st[d]
		}
		m[i] = int32(src)
		for d := r - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return x.mapOut(shape, m, fill)
}

// padCoord maps coordinate c of a padded axis of size n to the input coordinate it reads,
// or false for the constant fill.
func padCoord(c, n int, mode string) (int, bool) {
	if c >= 0 && c < n {
		return c, true
	}
	switch mode {
	case "edge":
		return min(max(c, 0), n-1), true
	case "reflect":
		if n == 1 {
			return 0, true
		}
		p := 2 * (n - 1)
		c = ((c % p) + p) % p
		if c >= n {
			c = p - c
		}
		return c, true
	}
	return 0, false
}

// chunkKernel is Concat (join: the inputs' chunks laid side by side along the axis) and
// Split (the reverse). Viewed as [outer, Σ chunk] the joined tensor holds, per outer
// index, chunk[k] values of part k in order.
type chunkKernel struct {
	outer int
	chunk []int
	total int
	join  bool
}

func (k *chunkKernel) scratch() int { return 0 }

func (k *chunkKernel) forward(out, in [][]float64, _ []float64) {
	parts, whole := in, out[0]
	if !k.join {
		parts, whole = out, in[0]
	}
	for o := 0; o < k.outer; o++ {
		off := o * k.total
		for p, c := range k.chunk {
			w, s := whole[off:off+c], parts[p][o*c:(o+1)*c]
			if k.join {
				copy(w, s)
			} else {
				copy(s, w)
			}
			off += c
		}
	}
}

func (k *chunkKernel) backward(gin, gout, _, _ [][]float64, _ []float64) {
	for o := 0; o < k.outer; o++ {
		off := o * k.total
		for p, c := range k.chunk {
			if k.join && gin[p] != nil {
				addTo(gin[p][o*c:(o+1)*c], gout[0][off:off+c])
			} else if !k.join && gout[p] != nil {
				addTo(gin[0][off:off+c], gout[p][o*c:(o+1)*c])
			}
			off += c
		}
	}
}

// addTo sets dst += src elementwise.
func addTo(dst, src []float64) { vec.AddTo(dst, src) }

func opConcat(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1<<20, "axis"); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", math.MinInt64)
	if err != nil {
		return nil, nil, err
	}
	if a == math.MinInt64 {
		return nil, nil, errf(ErrModel, "Concat without axis")
	}
	first := x.in[0]
	ax, err := normAxis(a, len(first.shape))
	if err != nil {
		return nil, nil, err
	}
	shape := append([]int(nil), first.shape...)
	shape[ax] = 0
	k := &chunkKernel{outer: numel(first.shape[:ax]), join: true}
	inner := numel(first.shape[ax+1:])
	for i, v := range x.in {
		if v == nil || len(v.shape) != len(first.shape) || v.dt != first.dt {
			return nil, nil, errf(ErrShape, "Concat input %d does not match input 0 (%v)", i, first.shape)
		}
		for d := range v.shape {
			if d != ax && v.shape[d] != first.shape[d] {
				return nil, nil, errf(ErrShape, "Concat input %d shape %v against %v on axis %d", i, v.shape, first.shape, ax)
			}
		}
		shape[ax] += v.shape[ax]
		k.chunk = append(k.chunk, v.shape[ax]*inner)
		k.total += v.shape[ax] * inner
	}
	return []outSpec{{dt: first.dt, shape: shape}}, k, nil
}

func opSplit(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 2, "axis"); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", 0)
	if err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	ax, err := normAxis(a, len(in))
	if err != nil {
		return nil, nil, err
	}
	split, err := x.constInts(1, "split")
	if err != nil {
		return nil, nil, err
	}
	nOut := len(x.n.GetOutput())
	if split == nil {
		if nOut == 0 || in[ax]%nOut != 0 {
			return nil, nil, errf(ErrShape, "Split of axis size %d into %d equal parts", in[ax], nOut)
		}
		for range nOut {
			split = append(split, int64(in[ax]/nOut))
		}
	}
	sum := int64(0)
	for _, s := range split {
		if s < 0 {
			return nil, nil, errf(ErrShape, "Split sizes %v", split)
		}
		sum += s
	}
	if sum != int64(in[ax]) || len(split) != nOut {
		return nil, nil, errf(ErrShape, "Split sizes %v of axis size %d into %d outputs", split, in[ax], nOut)
	}
	inner := numel(in[ax+1:])
	k := &chunkKernel{outer: numel(in[:ax]), total: in[ax] * inner}
	var outs []outSpec
	for _, s := range split {
		shape := append([]int(nil), in...)
		shape[ax] = int(s)
		outs = append(outs, outSpec{dt: x.in[0].dt, shape: shape})
		k.chunk = append(k.chunk, int(s)*inner)
	}
	return outs, k, nil
}

// opGather: y[o, j…, i] = data[o, idx[j…], i] along axis; indices may be computed at run
// time (an embedding lookup of Cast inputs). A run-time index outside [-n, n) gives a zero
// slice (and no gradient) instead of failing: Forward cannot return an error, and the
// caller validates inputs.
func opGather(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2, "axis"); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", 0)
	if err != nil {
		return nil, nil, err
	}
	data, idx := x.in[0], x.in[1]
	if idx.dt != dtInt {
		return nil, nil, errf(ErrModel, "Gather indices are float")
	}
	if len(data.shape) == 0 {
		return nil, nil, errf(ErrShape, "Gather on a scalar")
	}
	ax, err := normAxis(a, len(data.shape))
	if err != nil {
		return nil, nil, err
	}
	n := data.shape[ax]
	if idx.c != nil {
		for _, v := range idx.c {
			if v < float64(-n) || v >= float64(n) {
				return nil, nil, errf(ErrShape, "Gather index %v out of range for axis size %d", v, n)
			}
		}
	}
	shape := append(append(append([]int(nil), data.shape[:ax]...), idx.shape...), data.shape[ax+1:]...)
	k := &gatherKernel{outer: numel(data.shape[:ax]), n: n, inner: numel(data.shape[ax+1:]), nIdx: numel(idx.shape)}
	return []outSpec{{dt: data.dt, shape: shape}}, k, nil
}

// gatherKernel is Gather viewed as data [outer, n, inner], indices [nIdx].
type gatherKernel struct{ outer, n, inner, nIdx int }

func (k *gatherKernel) scratch() int { return 0 }

// index returns the row v selects, or -1 when it is out of range.
func (k *gatherKernel) index(v float64) int {
	if !(v >= float64(-k.n) && v < float64(k.n)) {
		return -1
	}
	j := int(v)
	if j < 0 {
		j += k.n
	}
	return j
}

func (k *gatherKernel) forward(out, in [][]float64, _ []float64) {
	y, data, idx := out[0], in[0], in[1][:k.nIdx]
	for o := 0; o < k.outer; o++ {
		for j, v := range idx {
			dst := y[(o*k.nIdx+j)*k.inner : (o*k.nIdx+j+1)*k.inner]
			if r := k.index(v); r >= 0 {
				copy(dst, data[(o*k.n+r)*k.inner:(o*k.n+r+1)*k.inner])
			} else {
				clear(dst)
			}
		}
	}
}

func (k *gatherKernel) backward(gin, gout, in, _ [][]float64, _ []float64) {
	gd, g, idx := gin[0], gout[0], in[1][:k.nIdx]
	if gd == nil {
		return
	}
	for o := 0; o < k.outer; o++ {
		for j, v := range idx {
			if r := k.index(v); r >= 0 {
				addTo(gd[(o*k.n+r)*k.inner:(o*k.n+r+1)*k.inner], g[(o*k.nIdx+j)*k.inner:(o*k.nIdx+j+1)*k.inner])
			}
		}
	}
}
