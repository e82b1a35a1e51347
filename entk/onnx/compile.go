package onnx

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// value is what the compiler knows of one named tensor: its element type and static
// shape, and either its constant data or the run-time slot that will hold it.
type value struct {
	name  string
	dt    dtype
	shape []int
	c     []float64 // constant data; nil for a run-time value
	slot  int       // run-time slot; -1 for a constant not yet needed at run time
	// t2 is the value this one is the 2-D transpose of (a Transpose with perm [1, 0]),
	// so that a MatMul can read t2 transposed in place (opMatMul); nil otherwise.
	t2 *value
}

// compiler turns the graph into steps for one input shape.
type compiler struct {
	opts    Options
	opset   int64
	budget  int // float64s left under Options.MaxElements
	vals    map[string]*value
	inits   []string // initializer names in file order
	inName  string
	inShape []int
	inSlot  int
	params  []float64
	slots   []slot
	steps   []step
	cov     *Coverage
}

func newCompiler(opts Options, opset int64) *compiler {
	return &compiler{opts: opts, opset: opset, budget: opts.MaxElements, vals: map[string]*value{}}
}

// spend deducts n float64s from the budget, or reports that the model needs more.
func (c *compiler) spend(n int, what string) error {
	if n < 0 || n > c.budget {
		return fmt.Errorf("%w: %s needs %d more values, over the limit of %d in all (Options.MaxElements)", ErrModel, what, n, c.opts.MaxElements)
	}
	c.budget -= n
	return nil
}

func (c *compiler) newSlot(s slot) int {
	c.slots = append(c.slots, s)
	return len(c.slots) - 1
}

// runSlot returns v's run-time slot, giving a constant one on first use.
func (c *compiler) runSlot(v *value) int {
	if v.slot < 0 {
		v.slot = c.newSlot(slot{kind: slotConst, dt: v.dt, size: len(v.c), data: v.c})
	}
	return v.slot
}

// run compiles the nodes in file order (ONNX requires them topologically sorted).
func (c *compiler) run(g *onnxpb.GraphProto) error {
	for i, n := range g.GetNode() {
		if err := c.node(i, n); err != nil {
			var oe *OpError
			if e, ok := err.(*OpError); ok {
				oe = e
			} else {
				oe = &OpError{Op: n.GetOpType(), Node: n.GetName(), Index: i, Opset: c.opset, Err: err}
			}
			return oe
		}
	}
	return nil
}

// outSpec describes one output of an operator at compile time.
type outSpec struct {
	dt    dtype
	shape []int
	c     []float64 // the output is this constant (Shape, Constant, folded-only ops)
	alias bool      // the output is input 0's data under a new shape
	t2    bool      // the output is input 0's 2-D transpose (value.t2)
}

// node compiles one node: the operator's shape rule, then a constant (folded when every
// input is constant), an alias of its input, or a run-time step.
func (c *compiler) node(idx int, n *onnxpb.NodeProto) error {
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		return fmt.Errorf("%w: operator domain %q", ErrUnsupported, d)
	}
	fn := ops[n.GetOpType()]
	if fn == nil {
		return fmt.Errorf("%w: operator %s", ErrUnsupported, n.GetOpType())
	}
	x := &nodeCtx{c: c, n: n, attrs: map[string]*onnxpb.AttributeProto{}}
	for _, a := range n.GetAttribute() {
		x.attrs[a.GetName()] = a
	}
	for k, name := range n.GetInput() {
		if name == "" {
			x.in = append(x.in, nil)
			continue
		}
		v := c.vals[name]
		if v == nil {
			return fmt.Errorf("%w: input %d %q is not defined before the node", ErrModel, k, name)
		}
		x.in = append(x.in, v)
	}
	outs, k, err := fn(x)
	if err != nil {
		return err
	}
	names := n.GetOutput()
	if err := c.checkNames(names); err != nil {
		return err
	}
	for j, name := range names {
		if j >= len(outs) && name != "" {
			return fmt.Errorf("%w: output %d %q (only %d supported)", ErrUnsupported, j, name, len(outs))
		}
	}
	if len(names) < len(outs) {
		outs = outs[:len(names)]
	}
	return c.define(x, names, outs, k)
}

// define binds the node's outputs: constants, aliases, folded values or a new step.
func (c *compiler) define(x *nodeCtx, names []string, outs []outSpec, k kernel) error {
	vs := make([]*value, len(outs))
	for j, o := range outs {
		n, err := checkedNumel(ints64(o.shape), c.opts.MaxElements)
		if err != nil {
			return fmt.Errorf("%w: output %d: %v", ErrShape, j, err)
		}
		vs[j] = &value{name: names[j], dt: o.dt, shape: o.shape, c: o.c, slot: -1}
		if o.c != nil && len(o.c) != n {
			panic(fmt.Sprintf("onnx: %s output %d: constant of %d values for shape %v", x.n.GetOpType(), j, len(o.c), o.shape))
		}
		if o.alias {
			in := x.in[0]
			if numel(in.shape) != n {
				panic(fmt.Sprintf("onnx: %s alias of %v as %v", x.n.GetOpType(), in.shape, o.shape))
			}
			vs[j].c, vs[j].slot = in.c, in.slot
		}
		if o.t2 {
			vs[j].t2 = x.in[0]
		}
	}
	for j, o := range outs {
		if k == nil && o.c == nil && !o.alias {
			panic(fmt.Sprintf("onnx: %s output %d has neither a kernel, a constant nor an alias", x.n.GetOpType(), j))
		}
	}
	pending := k != nil
	if pending && x.allConst() {
		if err := c.fold(x, vs, k); err != nil {
			return err
		}
		pending = false
	}
	if pending {
		st := step{k: k, op: x.n.GetOpType(), node: x.n.GetName()}
		for _, v := range x.in {
			s := -1
			if v != nil {
				s = c.runSlot(v)
			}
			st.in = append(st.in, s)
		}
		for _, v := range vs {
			if err := c.spend(numel(v.shape), "activation "+v.name); err != nil {
				return err
			}
			v.slot = c.newSlot(slot{kind: slotAct, dt: v.dt, size: numel(v.shape)})
			st.out = append(st.out, v.slot)
		}
		if err := c.spend(k.scratch(), "scratch of "+x.n.GetOpType()); err != nil {
			return err
		}
		c.steps = append(c.steps, st)
	}
	for j, v := range vs {
		if names[j] != "" {
			c.vals[names[j]] = v
		}
	}
	return nil
}

// checkNames rejects node outputs that redefine a value (the graph must be in SSA form).
func (c *compiler) checkNames(names []string) error {
	for j, name := range names {
		if _, dup := c.vals[name]; dup && name != "" {
			return fmt.Errorf("%w: output %d %q is defined twice", ErrModel, j, name)
		}
		if slices.Contains(names[:j], name) && name != "" {
			return fmt.Errorf("%w: output %d %q is defined twice", ErrModel, j, name)
		}
	}
	return nil
}

// fold evaluates k on the node's constant inputs.
func (c *compiler) fold(x *nodeCtx, vs []*value, k kernel) error {
	in := make([][]float64, len(x.in))
	for i, v := range x.in {
		if v != nil {
			in[i] = v.c
		}
	}
	out := make([][]float64, len(vs))
	for j, v := range vs {
		if err := c.spend(numel(v.shape), "constant "+v.name); err != nil {
			return err
		}
		out[j] = make([]float64, numel(v.shape))
	}
	if err := c.spend(k.scratch(), "scratch of "+x.n.GetOpType()); err != nil {
		return err
	}
	k.forward(out, in, make([]float64, k.scratch()))
	c.budget += k.scratch()
	for j, v := range vs {
		v.c = out[j]
		if v.dt == dtInt {
			roundInts(v.c)
		}
	}
	return nil
}

// finish marks what the output depends on, drops the rest, decides where gradients
// flow, and assembles the Model.
func (c *compiler) finish(g *onnxpb.GraphProto) (*Model, error) {
	if len(g.GetOutput()) != 1 {
		return nil, fmt.Errorf("%w: the graph has %d outputs, want exactly one", ErrUnsupported, len(g.GetOutput()))
	}
	outName := g.GetOutput()[0].GetName()
	ov := c.vals[outName]
	if ov == nil {
		return nil, fmt.Errorf("%w: graph output %q is not computed by any node", ErrModel, outName)
	}
	if ov.dt != dtFloat {
		return nil, fmt.Errorf("%w: graph output %q is an integer tensor", ErrUnsupported, outName)
	}
	outSlot := c.runSlot(ov)
	c.slots[outSlot].live = true
	var live []step
	for i := len(c.steps) - 1; i >= 0; i-- {
		st := c.steps[i]
		if !slices.ContainsFunc(st.out, func(s int) bool { return c.slots[s].live }) {
			continue
		}
		for _, s := range st.in {
			if s >= 0 {
				c.slots[s].live = true
			}
		}
		live = append(live, st)
	}
	slices.Reverse(live)
	for i := range c.slots {
		s := &c.slots[i]
		s.grad = s.kind == slotParam && s.live
	}
	for i := range live {
		st := &live[i]
		st.gin = make([]bool, len(st.in))
		any := false
		for j, s := range st.in {
			st.gin[j] = s >= 0 && c.slots[s].grad
			any = any || st.gin[j]
		}
		for _, s := range st.out {
			c.slots[s].grad = any && c.slots[s].dt == dtFloat
			st.grad = st.grad || c.slots[s].grad
		}
	}
	c.setters(live, outSlot)
	c.paramSetters(live)
	c.unusedWarnings()
	m := &Model{
		opset: c.opset, inShape: c.inShape, outShape: ov.shape, inDim: numel(c.inShape), outDim: c.slots[outSlot].size,
		params: c.params, slots: c.slots, steps: live, inSlot: c.inSlot, outSlot: outSlot, cov: c.cov,
		preclear: c.preclear(),
	}
	m.linearA = m.finalLinear()
	return m, nil
}

// setters asks the first writer of each activation gradient in the reverse sweep
// whether it sets it (setter), and records the answers in the steps and slots. The
// output's gradient is written before any step (the heads w).
func (c *compiler) setters(live []step, outSlot int) {
	seen := make([]bool, len(c.slots))
	seen[outSlot] = true
	for i := len(live) - 1; i >= 0; i-- {
		st := &live[i]
		st.set = make([]bool, len(st.in))
		if !st.grad || c.opts.noSetters {
			continue
		}
		for j, s := range st.in {
			if !st.gin[j] || c.slots[s].kind == slotParam || seen[s] {
				continue
			}
			seen[s] = true
			k, ok := st.k.(setter)
			if ok && len(st.out) == 1 && countOf(st.in, s) == 1 && k.setsGrad(j, c.slots[s].size) {
				st.set[j], c.slots[s].set = true, true
			}
		}
	}
}

// paramSetters marks the parameters whose gradient exactly one step writes (slot.lazy),
// and asks that step whether it sets it (setter).
func (c *compiler) paramSetters(live []step) {
	writers := make([]int, len(c.slots))
	for _, st := range live {
		for j, s := range st.in {
			if st.grad && st.gin[j] && c.slots[s].kind == slotParam {
				writers[s]++
			}
		}
	}
	for i := range live {
		st := &live[i]
		for j, s := range st.in {
			if !st.grad || !st.gin[j] || c.slots[s].kind != slotParam || writers[s] != 1 {
				continue
			}
			if c.opts.noSetters {
				continue
			}
			c.slots[s].lazy = true
			if k, ok := st.k.(setter); ok && len(st.out) == 1 && k.setsGrad(j, c.slots[s].size) {
				st.set[j], c.slots[s].set = true, true
			}
		}
	}
}

// preclear is the parameter vector less the lazy parameters' ranges, as spans.
func (c *compiler) preclear() []paramSpan {
	keep := make([]bool, len(c.params))
	for _, s := range c.slots {
		if s.kind == slotParam && s.lazy {
			for i := s.off; i < s.off+s.size; i++ {
				keep[i] = true
			}
		}
	}
	var sp []paramSpan
	for i := 0; i < len(keep); {
		n := 0
		for i+n < len(keep) && keep[i+n] == keep[i] {
			n++
		}
		if !keep[i] {
			sp = append(sp, paramSpan{i, n})
		}
		i += n
	}
	return sp
}

// countOf is the number of times s occurs in ids.
func countOf(ids []int, s int) int {
	n := 0
	for _, v := range ids {
		if v == s {
			n++
		}
	}
	return n
}

// unusedWarnings reports kernel parameters that no live step reads.
func (c *compiler) unusedWarnings() {
	var unused []string
	for _, t := range c.cov.Tensors {
		if t.InKernel && !c.slots[c.vals[t.Name].slot].live {
			unused = append(unused, t.Name)
		}
	}
	if len(unused) > 0 {
		c.cov.Warnings = append(c.cov.Warnings, Warning{
			Kind: WarnUnusedParameter, Tensors: unused, Fix: ExportRecipe,
			Message: fmt.Sprintf("no output depends on %d kernel parameter(s) (%s): their Jacobian columns are zero; "+
				"if the module uses them, the export lost the dependence", len(unused), strings.Join(unused, ", ")),
		})
	}
}

// finalLinear returns A when the output slot is written by a Gemm a·Wᵀ + b as
// Model.FinalLinear describes, else -1.
func (m *Model) finalLinear() int {
	var last *step
	for i := range m.steps {
		if slices.Contains(m.steps[i].out, m.outSlot) {
			last = &m.steps[i]
		}
	}
	if last == nil || len(last.in) != 3 || last.in[2] < 0 {
		return -1
	}
	g, ok := last.k.(*gemmKernel)
	if !ok || g.transA || !g.transB || g.alpha != 1 || g.beta != 1 || g.m != 1 || g.cb != nil {
		return -1
	}
	w, b := m.slots[last.in[1]], m.slots[last.in[2]]
	d, a, p := g.n, g.k, len(m.params)
	if w.kind != slotParam || b.kind != slotParam || w.off != p-d*a-d || b.off != p-d || b.size != d {
		return -1
	}
	for i := range m.steps {
		st := &m.steps[i]
		for _, s := range st.in {
			if st != last && (s == last.in[1] || s == last.in[2]) {
				return -1
			}
		}
	}
	return a
}
