package onnx

import (
	"math"
	"slices"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// mapKernel moves elements: y[i] = x[m[i]], or fill where m[i] < 0. Transpose, Slice,
// Expand and Pad compile to it; its VJP adds g[i] to gx[m[i]] (summing the repeats of an
// Expand, skipping the padding).
type mapKernel struct {
	m    []int32
	fill float64
	set  bool // backward sets the gradient (setter): m reaches every input entry once
}

// setsGrad: when the map is a permutation of the input's size entries (a Transpose, a
// Pad's interior), each gradient entry gets exactly one term.
func (k *mapKernel) setsGrad(_, size int) bool {
	hit := make([]bool, size)
	n := 0
	for _, j := range k.m {
		if j < 0 {
			continue
		}
		if int(j) >= size || hit[j] {
			return false
		}
		hit[j] = true
		n++
	}
	k.set = n == size
	return k.set
}

func (k *mapKernel) scratch() int { return 0 }

func (k *mapKernel) forward(out, in [][]float64, _ []float64) {
	y, x := out[0][:len(k.m)], in[0]
	for i, j := range k.m {
		if j < 0 {
			y[i] = k.fill
		} else {
			y[i] = x[j]
		}
	}
}

func (k *mapKernel) backward(gin, gout, _, _ [][]float64, _ []float64) {
	gx, g := gin[0], gout[0][:len(k.m)]
	if k.set {
		for i, j := range k.m {
			if j >= 0 {
				gx[j] = zero + g[i]
			}
		}
		return
	}
	for i, j := range k.m {
		if j >= 0 {
			gx[j] += g[i]
		}
	}
}

// mapOut returns the spec and kernel of a map, spending its table from the budget.
func (x *nodeCtx) mapOut(shape []int, m []int32, fill float64) ([]outSpec, kernel, error) {
	if err := x.c.spend(len(m)/2, "index map"); err != nil {
		return nil, nil, err
	}
	return []outSpec{{dt: x.in[0].dt, shape: shape}}, &mapKernel{m: m, fill: fill}, nil
}

// alias returns the spec of input 0's data under shape.
func (x *nodeCtx) alias(shape []int, dt dtype) ([]outSpec, kernel, error) {
	if numel(shape) != numel(x.in[0].shape) {
		return nil, nil, errf(ErrShape, "cannot view %v as %v", x.in[0].shape, shape)
	}
	return []outSpec{{dt: dt, shape: shape, alias: true}}, nil, nil
}

func opIdentity(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1); err != nil {
		return nil, nil, err
	}
	return x.alias(x.in[0].shape, x.in[0].dt)
}

// opDropout is the identity: an inference graph (training_mode absent or false; its
// mask output is not supported).
func opDropout(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 3, "seed"); err != nil {
		return nil, nil, err
	}
	if v := x.opt(2); v != nil && (v.c == nil || len(v.c) != 1 || v.c[0] != 0) {
		return nil, nil, errf(ErrUnsupported, "Dropout in training mode: export the module in eval mode")
	}
	return x.alias(x.in[0].shape, x.in[0].dt)
}

// opCast: between float types, and from integers to floats, the value is unchanged
// (everything is float64 here); float to integer truncates toward zero, anything to bool
// tests ≠ 0. Neither of the last two passes a gradient.
func opCast(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "to"); err != nil {
		return nil, nil, err
	}
	to, err := x.attrInt("to", 0)
	if err != nil {
		return nil, nil, err
	}
	dt, ok := dtypeOf(int32(to))
	if !ok {
		return nil, nil, errf(ErrUnsupported, "Cast to %v", onnxpb.TensorProto_DataType(to))
	}
	v := x.in[0]
	switch {
	case onnxpb.TensorProto_DataType(to) == onnxpb.TensorProto_BOOL:
		return []outSpec{{dt: dtInt, shape: v.shape}}, &castKernel{n: numel(v.shape), toBool: true}, nil
	case dt == dtInt && v.dt == dtFloat:
		return []outSpec{{dt: dtInt, shape: v.shape}}, &castKernel{n: numel(v.shape)}, nil
	}
	return x.alias(v.shape, dt)
}

// castKernel truncates toward zero, keeping NaN and ±Inf (which no Gather accepts as an
// index) (toBool: y = [x ≠ 0]); no gradient passes.
type castKernel struct {
	n      int
	toBool bool
}

func (k *castKernel) scratch() int { return 0 }

func (k *castKernel) forward(out, in [][]float64, _ []float64) {
	for i, v := range in[0][:k.n] {
		switch {
		case k.toBool && v != 0:
			out[0][i] = 1
		case k.toBool:
			out[0][i] = 0
		case math.IsNaN(v) || math.IsInf(v, 0):
			out[0][i] = v // no integer: an index out of every range
		default:
			out[0][i] = float64(toInt64(v))
		}
	}
}

func (k *castKernel) backward(_, _, _, _ [][]float64, _ []float64) {}

// opReshape: the shape input is constant; 0 copies the input's dimension (unless
// allowzero = 1) and one -1 is inferred.
func opReshape(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2, "allowzero"); err != nil {
		return nil, nil, err
	}
	allowZero, err := x.attrInt("allowzero", 0)
	if err != nil {
		return nil, nil, err
	}
	spec, err := x.constInts(1, "shape")
	if err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	shape := make([]int, len(spec))
	infer := -1
	known := 1
	for i, d := range spec {
		switch {
		case d == 0 && allowZero == 0:
			if i >= len(in) {
				return nil, nil, errf(ErrShape, "Reshape %v of %v: dimension %d copies a missing input dimension", spec, in, i)
			}
			shape[i] = in[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d < 0 || d > int64(x.c.opts.MaxElements):
			return nil, nil, errf(ErrShape, "Reshape to %v", spec)
		default:
			shape[i] = int(d)
		}
		known *= shape[i]
	}
	n := numel(in)
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, nil, errf(ErrShape, "Reshape of %v to %v: cannot infer -1", in, spec)
		}
		shape[infer] = n / known
	}
	return x.alias(shape, x.in[0].dt)
}

func opFlatten(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "axis"); err != nil {
		return nil, nil, err
	}
	a, err := x.attrInt("axis", 1)
	if err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	if a == int64(len(in)) {
		return x.alias([]int{numel(in), 1}, x.in[0].dt)
	}
	ax, err := normAxis(a, len(in))
	if err != nil {
		return nil, nil, err
	}
	return x.alias([]int{numel(in[:ax]), numel(in[ax:])}, x.in[0].dt)
}

// axesOf normalizes constant axes for the given rank and rejects repeats.
func axesOf(axes []int64, rank int) ([]int, error) {
	r := make([]int, len(axes))
	for i, a := range axes {
		ax, err := normAxis(a, rank)
		if err != nil {
			return nil, err
		}
		if slices.Contains(r[:i], ax) {
			return nil, errf(ErrShape, "axis %d repeated in %v", a, axes)
		}
		r[i] = ax
	}
	return r, nil
}

func opSqueeze(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 2); err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	raw, err := x.constInts(1, "axes")
	if err != nil {
		return nil, nil, err
	}
	axes, err := axesOf(raw, len(in))
	if err != nil {
		return nil, nil, err
	}
	var shape []int
	for i, d := range in {
		drop := slices.Contains(axes, i) || x.opt(1) == nil && d == 1
		if drop && d != 1 {
			return nil, nil, errf(ErrShape, "Squeeze axis %d of %v has size %d", i, in, d)
		}
		if !drop {
			shape = append(shape, d)
		}
	}
	return x.alias(shape, x.in[0].dt)
}

func opUnsqueeze(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2); err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	raw, err := x.constInts(1, "axes")
	if err != nil {
		return nil, nil, err
	}
	axes, err := axesOf(raw, len(in)+len(raw))
	if err != nil {
		return nil, nil, err
	}
	shape := make([]int, 0, len(in)+len(axes))
	j := 0
	for i := 0; i < len(in)+len(axes); i++ {
		if slices.Contains(axes, i) {
			shape = append(shape, 1)
		} else {
			shape = append(shape, in[j])
			j++
		}
	}
	return x.alias(shape, x.in[0].dt)
}

func opTranspose(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "perm"); err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	perm, err := x.attrInts("perm")
	if err != nil {
		return nil, nil, err
	}
	if perm == nil {
		for i := len(in) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	p, err := axesOf(perm, len(in))
	if err != nil || len(p) != len(in) {
		return nil, nil, errf(ErrShape, "perm %v for rank %d", perm, len(in))
	}
	st := strides(in)
	shape, pst := make([]int, len(in)), make([]int, len(in))
	for i, a := range p {
		shape[i], pst[i] = in[a], st[a]
	}
	outs, k, err := x.mapOut(shape, stridedMap(shape, pst, 0), 0)
	if err == nil && len(in) == 2 && p[0] == 1 {
		outs[0].t2 = true
	}
	return outs, k, err
}

// opSlice: starts, ends, axes and steps are constant; bounds are clamped as the ONNX
// specification says (so ends of ±2^63 mean "to the end").
func opSlice(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(3, 5); err != nil {
		return nil, nil, err
	}
	in := x.in[0].shape
	var cs [4][]int64
	for i, what := range []string{"starts", "ends", "axes", "steps"} {
		var err error
		if cs[i], err = x.constInts(i+1, what); err != nil {
			return nil, nil, err
		}
	}
	starts, ends, rawAxes, steps := cs[0], cs[1], cs[2], cs[3]
	if rawAxes == nil {
		for i := range starts {
			rawAxes = append(rawAxes, int64(i))
		}
	}
	if len(ends) != len(starts) || len(rawAxes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return nil, nil, errf(ErrModel, "Slice starts %v, ends %v, axes %v, steps %v differ in length", starts, ends, rawAxes, steps)
	}
	axes, err := axesOf(rawAxes, len(in))
	if err != nil {
		return nil, nil, err
	}
	shape, st := slices.Clone(in), strides(in)
	base := 0
	pst := slices.Clone(st)
	for i, ax := range axes {
		step := int64(1)
		if steps != nil {
			step = steps[i]
		}
		if step == 0 {
			return nil, nil, errf(ErrModel, "Slice step 0 on axis %d", ax)
		}
		start, count := sliceRange(starts[i], ends[i], step, int64(in[ax]))
		shape[ax] = count
		base += start * st[ax]
		pst[ax] = int(step) * st[ax]
	}
	return x.mapOut(shape, stridedMap(shape, pst, base), 0)
}

// sliceRange clamps start and end of one sliced axis of size n and returns the first
// index and the element count (ONNX Slice).
func sliceRange(start, end, step, n int64) (int, int) {
	clamp := func(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }
	if start < 0 {
		start = max(start, -n-1) + n
	}
	if end < 0 {
		end = max(end, -n-1) + n
	}
	var count int64
	switch {
	case n == 0:
		return 0, 0
	case step > 0:
		start, end = clamp(start, 0, n), clamp(end, 0, n)
		count = max(0, (end-start+step-1)/step)
	default:
		start, end = clamp(start, 0, n-1), clamp(end, -1, n-1)
		count = max(0, (start-end-step-1)/(-step))
	}
	if count == 0 {
		start = 0
	}
	return int(start), int(count)
}

func opExpand(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2); err != nil {
		return nil, nil, err
	}
	spec, err := x.constInts(1, "shape")
	if err != nil {
		return nil, nil, err
	}
	want := make([]int, len(spec))
	for i, d := range spec {
		if d < 0 || d > int64(x.c.opts.MaxElements) {
			return nil, nil, errf(ErrShape, "Expand to %v", spec)
		}
		want[i] = int(d)
	}
	in := x.in[0].shape
	shape, ok := broadcastShapes(in, want)
	if !ok {
		return nil, nil, errf(ErrShape, "Expand of %v to %v", in, spec)
	}
	if _, err := checkedNumel(ints64(shape), x.c.budget); err != nil {
		return nil, nil, errf(ErrShape, "Expand: %v", err)
	}
	if slices.Equal(shape, in) {
		return x.alias(shape, x.in[0].dt)
	}
	return x.mapOut(shape, bcastMap(in, shape), 0)
}
