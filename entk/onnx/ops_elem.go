package onnx

import (
	"math"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// opBinary compiles Add, Sub, Mul, Div and Pow with multidirectional broadcasting. Integer
// operands (shape arithmetic) compute exactly; integer Div truncates toward zero.
func opBinary(op byte) opFunc {
	return func(x *nodeCtx) ([]outSpec, kernel, error) {
		if err := x.check(2, 2); err != nil {
			return nil, nil, err
		}
		a, b := x.in[0], x.in[1]
		if a.dt != b.dt && op != '^' {
			return nil, nil, errf(ErrModel, "operands of types %v and %v", a.dt, b.dt)
		}
		shape, ok := broadcastShapes(a.shape, b.shape)
		if !ok {
			return nil, nil, errf(ErrShape, "shapes %v and %v do not broadcast", a.shape, b.shape)
		}
		k := &binaryKernel{op: op, n: numel(shape), ia: bcastMap(a.shape, shape), ib: bcastMap(b.shape, shape), intDiv: a.dt == dtInt && op == '/'}
		if err := x.c.spend((len(k.ia)+len(k.ib))/2, "broadcast maps"); err != nil {
			return nil, nil, err
		}
		return []outSpec{{dt: a.dt, shape: shape}}, k, nil
	}
}

// binaryKernel computes y[i] = a[ia[i]] op b[ib[i]] (ia, ib nil: the identity).
type binaryKernel struct {
	op         byte
	n          int
	ia, ib     []int32
	intDiv     bool
	setA, setB bool // backward sets input a's or b's gradient (setter)
}

// setsGrad: a sum's, difference's or product's operand without broadcast, whose
// gradient entries get one term each (±g, or g times the other operand).
func (k *binaryKernel) setsGrad(j, _ int) bool {
	switch {
	case k.op != '+' && k.op != '-' && k.op != '*':
		return false
	case j == 0 && k.ia == nil:
		k.setA = true
	case j == 1 && k.ib == nil:
		k.setB = true
	}
	return j == 0 && k.setA || j == 1 && k.setB
}

func (k *binaryKernel) scratch() int { return 0 }

// at returns m[i], or i for the identity map.
func at(m []int32, i int) int {
	if m == nil {
		return i
	}
	return int(m[i])
}

func (k *binaryKernel) forward(out, in [][]float64, _ []float64) {
	y, a, b := out[0][:k.n], in[0], in[1]
	if k.ia == nil && k.ib == nil && k.op == '+' {
		for i := range y {
			y[i] = a[i] + b[i]
		}
		return
	}
	if k.op == '*' && k.ia == nil { // the attention's scaling, LayerNorm's weight, GELU's halves
		a = a[:len(y)]
		if k.ib == nil {
			for i := range y {
				y[i] = a[i] * b[i]
			}
			return
		}
		for i, jb := range k.ib[:len(y)] {
			y[i] = a[i] * b[jb]
		}
		return
	}
	for i := range y {
		u, v := a[at(k.ia, i)], b[at(k.ib, i)]
		switch k.op {
		case '+':
			y[i] = u + v
		case '-':
			y[i] = u - v
		case '*':
			y[i] = u * v
		case '/':
			y[i] = u / v
			if k.intDiv {
				y[i] = math.Trunc(y[i])
			}
		case '^':
			y[i] = math.Pow(u, v)
		}
	}
}

// backward: d(a+b) = (g, g), d(a−b) = (g, −g), d(ab) = (g·b, g·a), d(a/b) = (g/b, −g·y/b),
// d(a^b) = (g·b·a^(b−1), g·y·ln a), the last 0 where a ≤ 0 (ln undefined). Broadcast
// operands receive the sum over the elements they were repeated to. Each operator has
// its own loop (the switch outside it); every sum into an operand's gradient runs in
// element order.
func (k *binaryKernel) backward(gin, gout, in, out [][]float64, _ []float64) {
	g, a, b, y := gout[0][:k.n], in[0], in[1], out[0]
	ga, gb := gin[0], gin[1]
	switch k.op {
	case '+': // the residual and bias adds: sums only
		addOrSet(ga, k.ia, g, k.setA)
		addOrSet(gb, k.ib, g, k.setB)
	case '-':
		addOrSet(ga, k.ia, g, k.setA)
		if k.setB {
			for i, gi := range g {
				gb[i] = zero + -gi
			}
		} else if gb != nil {
			for i, gi := range g {
				gb[at(k.ib, i)] += -gi
			}
		}
	case '*':
		k.mulBackward(ga, gb, g, a, b)
	case '/':
		for i, gi := range g {
			ja, jb := at(k.ia, i), at(k.ib, i)
			if ga != nil {
				ga[ja] += gi / b[jb]
			}
			if gb != nil {
				gb[jb] += -gi * y[i] / b[jb]
			}
		}
	case '^':
		for i, gi := range g {
			ja, jb := at(k.ia, i), at(k.ib, i)
			u, v := a[ja], b[jb]
			if ga != nil {
				ga[ja] += gi * v * math.Pow(u, v-1)
			}
			if gb != nil {
				var db float64
				if u > 0 {
					db = gi * y[i] * math.Log(u)
				}
				gb[jb] += db
			}
		}
	}
}

// mulBackward is backward's product rule, ga[ia[i]] += g[i]·b[ib[i]] and gb[ib[i]] +=
// g[i]·a[ia[i]] (each operand's sums in element order, so ga's loop and gb's can run one
// after the other), with loops without index maps when both are the identity and for a
// scalar or broadcast b against an unmapped a (the attention's scaling, LayerNorm's
// weight). An unmapped operand that the kernel sets (setA, setB) gets 0 + g[i]·other.
func (k *binaryKernel) mulBackward(ga, gb, g, a, b []float64) {
	switch {
	case k.ia == nil && k.ib == nil:
		a, b = a[:len(g)], b[:len(g)]
		mulInto(ga, g, b, k.setA)
		mulInto(gb, g, a, k.setB)
	case k.ia == nil:
		a = a[:len(g)]
		ib := k.ib[:len(g)]
		if ga != nil {
			ga = ga[:len(g)]
			if k.setA {
				for i, gi := range g {
					ga[i] = zero + gi*b[ib[i]]
				}
			} else {
				for i, gi := range g {
					ga[i] += gi * b[ib[i]]
				}
			}
		}
		if gb != nil {
			for i, gi := range g {
				gb[ib[i]] += gi * a[i]
			}
		}
	default: // a mapped: only b may be set (ib nil)
		for i, gi := range g {
			ja, jb := at(k.ia, i), at(k.ib, i)
			if ga != nil {
				ga[ja] += gi * b[jb]
			}
			if k.setB {
				gb[jb] = zero + gi*a[ja]
			} else if gb != nil {
				gb[jb] += gi * a[ja]
			}
		}
	}
}

// mulInto sets dst[i] = 0 + g[i]·x[i] (set) or adds g[i]·x[i] to it; dst nil: nothing.
func mulInto(dst, g, x []float64, set bool) {
	if dst == nil {
		return
	}
	dst, x = dst[:len(g)], x[:len(g)]
	if set {
		for i, gi := range g {
			dst[i] = zero + gi*x[i]
		}
		return
	}
	for i, gi := range g {
		dst[i] += gi * x[i]
	}
}

// addMapped adds g[i] to dst[m[i]] for every i, in order (dst nil: nothing; m nil: the
// identity).
// addOrSet is addMapped, or with set (m nil) setTo.
func addOrSet(dst []float64, m []int32, g []float64, set bool) {
	if set {
		setTo(dst, g)
		return
	}
	addMapped(dst, m, g)
}

// setTo sets dst[i] = 0 + src[i] (a setter's addTo).
func setTo(dst, src []float64) { vec.SetTo(dst, src) }

func addMapped(dst []float64, m []int32, g []float64) {
	switch {
	case dst == nil:
	case m == nil:
		addTo(dst, g)
	default:
		for i, gi := range g {
			dst[m[i]] += gi
		}
	}
}

// unary operators.
const (
	uRelu = iota
	uTanh
	uSigmoid
	uSqrt
	uErf
	uNeg
	uExp
	uLog
)

// opUnary compiles a float elementwise function.
func opUnary(f int) opFunc {
	return func(x *nodeCtx) ([]outSpec, kernel, error) {
		if err := x.check(1, 1); err != nil {
			return nil, nil, err
		}
		if f != uRelu && f != uNeg {
			if err := x.floatIn(0); err != nil {
				return nil, nil, err
			}
		}
		v := x.in[0]
		return []outSpec{{dt: v.dt, shape: v.shape}}, &unaryKernel{f: f, n: numel(v.shape)}, nil
	}
}

// unaryKernel computes y = f(x) elementwise.
type unaryKernel struct {
	f, n int
	set  bool // backward sets the gradient (setter): ReLU and erf
}

func (k *unaryKernel) setsGrad(_, _ int) bool {
	k.set = k.f == uRelu || k.f == uErf
	return k.set
}

func (k *unaryKernel) scratch() int { return 0 }

func (k *unaryKernel) forward(out, in [][]float64, _ []float64) {
	y, x := out[0][:k.n], in[0][:k.n]
	for i, v := range x {
		switch k.f {
		case uRelu:
			y[i] = max(v, 0)
		case uTanh:
			y[i] = math.Tanh(v)
		case uSigmoid:
			y[i] = 1 / (1 + math.Exp(-v))
		case uSqrt:
			y[i] = math.Sqrt(v)
		case uErf:
			y[i] = math.Erf(v)
		case uNeg:
			y[i] = -v
		case uExp:
			y[i] = math.Exp(v)
		case uLog:
			y[i] = math.Log(v)
		}
	}
}

// backward multiplies by f'(x): relu' = [x > 0] (0 at 0), tanh' = 1 − y², σ' = y(1 − y),
// sqrt' = 1/(2y), erf' = 2/√π·e^{−x²}, neg' = −1, exp' = y, log' = 1/x.
func (k *unaryKernel) backward(gin, gout, in, out [][]float64, _ []float64) {
	k.backwardTo(gin[0][:k.n], gout[0][:k.n], in[0][:k.n], out[0][:k.n], nil)
}

// backwardTo adds g·f'(x) to gx, one loop per function; erf's e^{−x²} is read from e
// when it is not nil (the heads' shared values), else computed.
func (k *unaryKernel) backwardTo(gx, g, x, y, e []float64) {
	if k.set {
		k.setTo(gx, g, x, e)
		return
	}
	switch k.f {
	case uRelu:
		for i, gi := range g {
			gx[i] += reluGrad(gi, x[i])
		}
	case uTanh:
		for i, gi := range g {
			gx[i] += gi * (1 - y[i]*y[i])
		}
	case uSigmoid:
		for i, gi := range g {
			gx[i] += gi * y[i] * (1 - y[i])
		}
	case uSqrt:
		for i, gi := range g {
			gx[i] += gi / (2 * y[i])
		}
	case uErf:
		for i, gi := range g {
			gx[i] += erfGrad(gi, x, e, i)
		}
	case uNeg:
		for i, gi := range g {
			gx[i] += -gi
		}
	case uExp:
		for i, gi := range g {
			gx[i] += gi * y[i]
		}
	case uLog:
		for i, gi := range g {
			gx[i] += gi / x[i]
		}
	}
}

// reluGrad is g where x > 0, else +0: g's bits masked by a comparison of x's (x in (0,
// +Inf] is bits 1 … 0x7FF0…0 as an unsigned integer), which compiles to a conditional
// move. A branch on the sign of x, which after a normalization is a coin toss, was
// mispredicted about half the time.
func reluGrad(g, x float64) float64 {
	var keep uint64
	if math.Float64bits(x)-1 < 0x7FF0000000000000 {
		keep = ^uint64(0)
	}
	return math.Float64frombits(math.Float64bits(g) & keep)
}

// setTo is backwardTo for a kernel that sets its gradient (ReLU or erf): gx[i] = 0 + d
// where backwardTo adds d.
func (k *unaryKernel) setTo(gx, g, x, e []float64) {
	if k.f == uRelu {
		for i, gi := range g {
			gx[i] = zero + reluGrad(gi, x[i])
		}
		return
	}
	for i, gi := range g {
		gx[i] = zero + erfGrad(gi, x, e, i)
	}
}

// erfGrad is g·erf'(x_i) = g·2/√π·e^{−x_i²}, the exponential read from e when it is not
// nil (the heads' shared values).
func erfGrad(g float64, x, e []float64, i int) float64 {
	var ex float64
	if e != nil {
		ex = e[i]
	} else {
		ex = math.Exp(-x[i] * x[i])
	}
	return g * 2 / math.Sqrt(math.Pi) * ex
}

// headsScratch: erf's e^{−x²}, shared by the heads.
func (k *unaryKernel) headsScratch(int) int {
	if k.f == uErf {
		return k.n
	}
	return 0
}

// backwardHeads is backward for each of h heads, with erf's exponentials computed once
// for all of them (the same x): the bits of h backward calls.
func (k *unaryKernel) backwardHeads(h int, gin, gout, in, out [][]float64, gstr []int, _, hscr []float64) bool {
	if gin[0] == nil || gout[0] == nil {
		return false
	}
	n := k.n
	x, y := in[0][:n], out[0][:n]
	var e []float64
	if k.f == uErf {
		e = hscr[:n]
		for i, v := range x {
			e[i] = math.Exp(-v * v)
		}
	}
	for j := range h {
		k.backwardTo(gin[0][j*gstr[0]:j*gstr[0]+n], gout[0][j*n:(j+1)*n], x, y, e)
	}
	return true
}
