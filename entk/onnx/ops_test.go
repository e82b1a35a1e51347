package onnx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// operand is one input of the operator under test:
//
//	'x' a run-time tensor: a slice of the graph input times a parameter tensor of the same
//	    shape (so its gradient shows in that parameter's), values from the input
//	'p' a parameter initializer (Conv weights, BatchNorm scale, …)
//	'c' a float constant initializer (BatchNorm running statistics, a Pow exponent)
//	'i' an int64 constant initializer (shapes, axes, indices)
type operand struct {
	kind  byte
	shape []int
	ints  []int64
	vals  []float64 // 'c': fixed values (random when nil)
}

func act(shape ...int) operand   { return operand{kind: 'x', shape: shape} }
func param(shape ...int) operand { return operand{kind: 'p', shape: shape} }
func ints(v ...int64) operand    { return operand{kind: 'i', shape: []int{len(v)}, ints: v} }

// opCase is one operator application checked forward against a plain reference and
// backward against central differences.
type opCase struct {
	name     string
	op       string
	opset    int64
	in       []operand
	attrs    []*onnxpb.AttributeProto
	outs     int // outputs (Split); 0 means 1
	positive bool
	ref      func(in [][]float64) []float64 // the outputs flattened and concatenated
}

// build makes the case's model and returns it with the operator's input values.
func (c opCase) build(t *testing.T, r *rand.Rand) (*Model, []float64, [][]float64) {
	t.Helper()
	opset := c.opset
	if opset == 0 {
		opset = 17
	}
	b := newBuilder(opset)
	nx := 0
	for _, o := range c.in {
		if o.kind == 'x' {
			nx += numel(o.shape)
		}
	}
	nx = max(nx, 1)
	b.input("x", 1, int64(nx))
	x := make([]float64, nx)
	for i := range x {
		x[i] = 2*r.Float64() - 1
		if c.positive {
			x[i] = 0.5 + r.Float64()
		}
	}
	vals := make([][]float64, len(c.in))
	names := make([]string, len(c.in))
	off := 0
	for k, o := range c.in {
		n := numel(o.shape)
		switch o.kind {
		case 'x':
			sl := b.node("Slice", []string{"x", b.ints(int64(off)), b.ints(int64(off + n)), b.ints(1)})
			rs := b.node("Reshape", []string{sl, b.ints(ints64(o.shape)...)})
			s := make([]float64, n)
			vals[k] = make([]float64, n)
			for i := range s {
				s[i] = 0.5 + r.Float64()
				vals[k][i] = x[off+i] * s[i]
			}
			names[k] = b.node("Mul", []string{rs, b.initF(fmt.Sprintf("scale%d", k), o.shape, s)})
			off += n
		case 'p', 'c':
			v := o.vals
			if v == nil {
				v = make([]float64, n)
				for i := range v {
					v[i] = 2*r.Float64() - 1
					if c.positive || o.kind == 'c' {
						v[i] = 0.5 + r.Float64()
					}
				}
			}
			vals[k] = v
			names[k] = b.initF(fmt.Sprintf("%c%d", o.kind, k), o.shape, v)
		case 'i':
			vals[k] = make([]float64, len(o.ints))
			for i, v := range o.ints {
				vals[k][i] = float64(v)
			}
			names[k] = b.initI(fmt.Sprintf("i%d", k), o.shape, o.ints...)
		case '-':
			names[k] = ""
		}
	}
	outs := b.nodeN(c.op, names, max(c.outs, 1), c.attrs...)
	var flat []string
	for _, o := range outs {
		flat = append(flat, b.node("Reshape", []string{o, b.ints(1, -1)}))
	}
	res := flat[0]
	if len(flat) > 1 {
		res = b.node("Concat", flat, aInt("axis", 1))
	}
	b.output(res)
	m, err := LoadBytes(b.bytes(t), Options{})
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return m, x, vals
}

// checkVJP compares Backward(w) with central differences of <w, f> in every parameter:
// h = 1e-6 leaves a truncation error O(h²·f”') ≈ 1e-12 and a rounding error ≈ 1e-16/h =
// 1e-10 relative to the output scale, so 1e-6 relative to the largest gradient entry
// (at least 1) separates a correct VJP from any wrong term by orders of magnitude.
func checkVJP(t *testing.T, name string, m *Model, x []float64, r *rand.Rand) {
	t.Helper()
	ws := m.NewWorkspace()
	out := make([]float64, m.OutDim())
	w := make([]float64, m.OutDim())
	for i := range w {
		w[i] = r.NormFloat64()
	}
	loss := func() float64 {
		m.Forward(out, x, ws)
		s := 0.0
		for i, v := range out {
			s += v * w[i]
		}
		return s
	}
	loss()
	got := make([]float64, m.NumParams())
	m.Backward(got, w, ws)
	checkHeads(t, name, m, ws, r)
	const h, tol = 1e-6, 1e-6
	scale := 1.0
	for _, g := range got {
		scale = max(scale, math.Abs(g))
	}
	p := m.params
	for i := range p {
		v := p[i]
		p[i] = v + h
		lp := loss()
		p[i] = v - h
		lm := loss()
		p[i] = v
		want := (lp - lm) / (2 * h)
		if math.Abs(got[i]-want) > tol*scale {
			t.Errorf("%s: dL/dp[%d] = %.12g, central difference %.12g", name, i, got[i], want)
			return
		}
	}
}

func TestOps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			m, x, vals := c.build(t, r)
			out := make([]float64, m.OutDim())
			m.Forward(out, x, m.NewWorkspace())
			if c.ref != nil {
				want := c.ref(vals)
				if len(want) != len(out) {
					t.Fatalf("output has %d values, reference %d", len(out), len(want))
				}
				// Each output is a short sum of products computed in another order than the
				// reference: 1e-12 relative to the output scale is rounding, never a bug.
				sc := 1.0
				for _, v := range want {
					sc = max(sc, math.Abs(v))
				}
				for i := range out {
					if math.Abs(out[i]-want[i]) > 1e-12*sc || math.IsNaN(out[i]) {
						t.Fatalf("output %d = %.15g, want %.15g", i, out[i], want[i])
					}
				}
			}
			for _, tc := range m.Coverage().Tensors {
				if constant := tc.Name[0] == 'c'; tc.InKernel == constant || tc.Parameter == constant {
					t.Errorf("%s (%v): parameter %v, in kernel %v", tc.Name, tc.Shape, tc.Parameter, tc.InKernel)
				}
			}
			checkVJP(t, c.name, m, x, r)
		})
	}
}

// unravel and ravel convert between a flat row-major index and a multi-index.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

func ravel(idx, shape []int) int {
	i := 0
	for d, v := range idx {
		i = i*shape[d] + v
	}
	return i
}

// refBroadcast evaluates f elementwise over operands broadcast numpy-style, reading each
// operand at its own multi-index (dimensions of size 1 pinned to 0).
func refBroadcast(shapes [][]int, vals [][]float64, f func(v []float64) float64) []float64 {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for d := range out {
		out[d] = 1
		for _, s := range shapes {
			if j := d - (r - len(s)); j >= 0 && s[j] != 1 {
				out[d] = s[j]
			}
		}
	}
	res := make([]float64, numel(out))
	v := make([]float64, len(shapes))
	for i := range res {
		oi := unravel(i, out)
		for k, s := range shapes {
			idx := make([]int, len(s))
			for j := range s {
				if s[j] != 1 {
					idx[j] = oi[j+r-len(s)]
				}
			}
			v[k] = vals[k][ravel(idx, s)]
		}
		res[i] = f(v)
	}
	return res
}

// binaryCase checks op over operand shapes a and b.
func binaryCase(op string, f func(a, b float64) float64, a, b operand, positive bool) opCase {
	return opCase{
		name: fmt.Sprintf("%s%v%v", op, a.shape, b.shape), op: op, in: []operand{a, b}, positive: positive,
		ref: func(in [][]float64) []float64 {
			return refBroadcast([][]int{a.shape, b.shape}, in, func(v []float64) float64 { return f(v[0], v[1]) })
		},
	}
}

func unaryCase(op string, f func(float64) float64, positive bool) opCase {
	return opCase{
		name: op, op: op, in: []operand{act(2, 3, 4)}, positive: positive,
		ref: func(in [][]float64) []float64 {
			r := make([]float64, len(in[0]))
			for i, v := range in[0] {
				r[i] = f(v)
			}
			return r
		},
	}
}

func opCases() []opCase {
	add := func(a, b float64) float64 { return a + b }
	sub := func(a, b float64) float64 { return a - b }
	mul := func(a, b float64) float64 { return a * b }
	div := func(a, b float64) float64 { return a / b }
	cs := []opCase{
		binaryCase("Add", add, act(2, 3, 4), act(2, 3, 4), false),
		binaryCase("Add", add, act(2, 3, 4), param(4), false),
		binaryCase("Add", add, act(3, 1), act(2, 1, 4), false),
		binaryCase("Sub", sub, act(2, 1, 4), act(3, 1), false),
		binaryCase("Sub", sub, param(1, 3, 1), act(2, 3, 4), false),
		binaryCase("Mul", mul, act(2, 3, 4), act(3, 4), false),
		binaryCase("Mul", mul, act(4), act(2, 3, 1), false),
		binaryCase("Mul", mul, act(4), act(2, 3, 4), false), // b set, a broadcast (setter)
		binaryCase("Mul", mul, act(2, 3, 4), act(3, 1), false),
		binaryCase("Div", div, act(2, 3, 4), act(1, 4), true),
		binaryCase("Div", div, act(3, 1), act(2, 3, 4), true),
		binaryCase("Pow", math.Pow, act(2, 3, 4), act(4), true),
		binaryCase("Pow", math.Pow, act(2, 3), operand{kind: 'c', shape: []int{}, vals: []float64{2}}, true),
		unaryCase("Relu", func(v float64) float64 { return max(v, 0) }, false),
		unaryCase("Tanh", math.Tanh, false),
		unaryCase("Sigmoid", func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }, false),
		unaryCase("Sqrt", math.Sqrt, true),
		unaryCase("Erf", math.Erf, false),
		unaryCase("Neg", func(v float64) float64 { return -v }, false),
		unaryCase("Exp", math.Exp, false),
		unaryCase("Log", math.Log, true),
	}
	cs = append(cs, layoutCases()...)
	cs = append(cs, nnCases()...)
	return append(cs, linalgCases()...)
}

func layoutCases() []opCase {
	return []opCase{
		{name: "Transpose", op: "Transpose", in: []operand{act(2, 3, 4)}, attrs: []*onnxpb.AttributeProto{aInts("perm", 1, 2, 0)},
			ref: refTranspose([]int{2, 3, 4}, []int{1, 2, 0})},
		{name: "TransposeDefault", op: "Transpose", in: []operand{act(2, 3, 4)}, ref: refTranspose([]int{2, 3, 4}, []int{2, 1, 0})},
		{name: "Slice", op: "Slice", in: []operand{act(4, 5, 6), ints(1, -1), ints(4, 0), ints(0, 2), ints(2, -2)},
			ref: refSlice([]int{4, 5, 6}, [][3]int{{1, 4, 2}, {0, 5, 1}, {5, 0, -2}})},
		{name: "SliceEndMax", op: "Slice", in: []operand{act(3, 4), ints(1), ints(math.MaxInt64), ints(1)},
			ref: refSlice([]int{3, 4}, [][3]int{{0, 3, 1}, {1, 4, 1}})},
		{name: "Concat", op: "Concat", in: []operand{act(2, 1, 3), act(2, 2, 3), param(2, 3, 3)}, attrs: []*onnxpb.AttributeProto{aInt("axis", -2)},
			ref: refConcat([][]int{{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}, 1)},
		{name: "Split", op: "Split", in: []operand{act(2, 5, 3), ints(2, 3)}, attrs: []*onnxpb.AttributeProto{aInt("axis", 1)}, outs: 2,
			ref: refSplit([]int{2, 5, 3}, 1, []int{2, 3})},
		{name: "SplitEqual", op: "Split", in: []operand{act(6, 2)}, outs: 3,
			ref: refSplit([]int{6, 2}, 0, []int{2, 2, 2})},
		{name: "Expand", op: "Expand", in: []operand{act(3, 1), ints(2, 1, 4)},
			ref: func(in [][]float64) []float64 {
				return refBroadcast([][]int{{3, 1}, {2, 3, 4}}, [][]float64{in[0], make([]float64, 24)}, func(v []float64) float64 { return v[0] })
			}},
		{name: "Gather", op: "Gather", in: []operand{act(3, 4, 2), ints(2, 0, -1, 2)}, attrs: []*onnxpb.AttributeProto{aInt("axis", 1)},
			ref: refGather([]int{3, 4, 2}, 1, []int{2, 0, 3, 2})},
		{name: "GatherScalar", op: "Gather", in: []operand{act(3, 4), {kind: 'i', shape: []int{}, ints: []int64{1}}},
			ref: refGather([]int{3, 4}, 0, []int{1})},
		{name: "PadConstant", op: "Pad", in: []operand{act(2, 3, 3), ints(0, 1, 2, 1, 0, 1), {kind: 'c', shape: []int{}, vals: []float64{0.25}}},
			ref: refPad([]int{2, 3, 3}, []int{0, 1, 2}, []int{1, 0, 1}, "constant", 0.25)},
		{name: "PadReflect", op: "Pad", in: []operand{act(3, 4), ints(1, 2, 2, 1)}, attrs: []*onnxpb.AttributeProto{aStr("mode", "reflect")},
			ref: refPad([]int{3, 4}, []int{1, 2}, []int{2, 1}, "reflect", 0)},
		{name: "PadEdge", op: "Pad", in: []operand{act(3, 4), ints(1, 0, 0, 2)}, attrs: []*onnxpb.AttributeProto{aStr("mode", "edge")},
			ref: refPad([]int{3, 4}, []int{1, 0}, []int{0, 2}, "edge", 0)},
		{name: "Squeeze", op: "Squeeze", in: []operand{act(2, 1, 3), ints(1)}, ref: ident},
		{name: "Unsqueeze", op: "Unsqueeze", in: []operand{act(2, 3), ints(0, -1)}, ref: ident},
		{name: "Flatten", op: "Flatten", in: []operand{act(2, 3, 2)}, attrs: []*onnxpb.AttributeProto{aInt("axis", 2)}, ref: ident},
		{name: "Identity", op: "Identity", in: []operand{act(5)}, ref: ident},
		{name: "Dropout", op: "Dropout", in: []operand{act(5), {kind: 'c', shape: []int{}, vals: []float64{0.5}}}, ref: ident},
		{name: "Where", op: "Where", in: []operand{{kind: 'c', shape: []int{3, 1}, vals: []float64{1, 0, 1}}, act(3, 4), act(4)},
			ref: func(in [][]float64) []float64 {
				return refBroadcast([][]int{{3, 1}, {3, 4}, {4}}, in, func(v []float64) float64 {
					if v[0] != 0 {
						return v[1]
					}
					return v[2]
				})
			}},
	}
}

func ident(in [][]float64) []float64 { return in[0] }

func refTranspose(shape, perm []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		out := make([]int, len(shape))
		for i, p := range perm {
			out[i] = shape[p]
		}
		res := make([]float64, len(in[0]))
		for i := range res {
			oi := unravel(i, out)
			ii := make([]int, len(shape))
			for d, p := range perm {
				ii[p] = oi[d]
			}
			res[i] = in[0][ravel(ii, shape)]
		}
		return res
	}
}

// refSlice takes, per axis, (start, end, step) already clamped as Python's range.
func refSlice(shape []int, rng [][3]int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		var axes [][]int
		for _, r := range rng {
			var ix []int
			for i := r[0]; (r[2] > 0 && i < r[1]) || (r[2] < 0 && i > r[1]); i += r[2] {
				ix = append(ix, i)
			}
			axes = append(axes, ix)
		}
		out := make([]int, len(shape))
		for d := range out {
			out[d] = len(axes[d])
		}
		res := make([]float64, numel(out))
		for i := range res {
			oi := unravel(i, out)
			ii := make([]int, len(shape))
			for d := range ii {
				ii[d] = axes[d][oi[d]]
			}
			res[i] = in[0][ravel(ii, shape)]
		}
		return res
	}
}

func refConcat(shapes [][]int, axis int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		out := slices.Clone(shapes[0])
		out[axis] = 0
		for _, s := range shapes {
			out[axis] += s[axis]
		}
		res := make([]float64, numel(out))
		for i := range res {
			oi := unravel(i, out)
			k, a := 0, oi[axis]
			for a >= shapes[k][axis] {
				a -= shapes[k][axis]
				k++
			}
			ii := slices.Clone(oi)
			ii[axis] = a
			res[i] = in[k][ravel(ii, shapes[k])]
		}
		return res
	}
}

func refSplit(shape []int, axis int, sizes []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		var res []float64
		start := 0
		for _, s := range sizes {
			part := slices.Clone(shape)
			part[axis] = s
			for i := range numel(part) {
				pi := unravel(i, part)
				pi[axis] += start
				res = append(res, in[0][ravel(pi, shape)])
			}
			start += s
		}
		return res
	}
}

func refGather(shape []int, axis int, idx []int) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		out := slices.Clone(shape)
		out[axis] = len(idx)
		res := make([]float64, numel(out))
		for i := range res {
			oi := unravel(i, out)
			oi[axis] = idx[oi[axis]]
			res[i] = in[0][ravel(oi, shape)]
		}
		return res
	}
}

func refPad(shape, before, after []int, mode string, fill float64) func([][]float64) []float64 {
	return func(in [][]float64) []float64 {
		out := make([]int, len(shape))
		for d := range out {
			out[d] = shape[d] + before[d] + after[d]
		}
		res := make([]float64, numel(out))
		for i := range res {
			oi := unravel(i, out)
			ii := make([]int, len(shape))
			inside := true
			for d := range ii {
				c := oi[d] - before[d]
				switch {
				case c >= 0 && c < shape[d]:
				case mode == "edge":
					c = min(max(c, 0), shape[d]-1)
				case mode == "reflect" && c < 0:
					c = -c
				case mode == "reflect":
					c = 2*(shape[d]-1) - c
				default:
					inside = false
				}
				ii[d] = c
			}
			res[i] = fill
			if inside {
				res[i] = in[0][ravel(ii, shape)]
			}
		}
		return res
	}
}
