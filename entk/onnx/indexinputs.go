package onnx

import (
	"slices"
)

// IndexInput is one position of the input x that the model reads as a table index: its
// value reaches the indices of a Gather over a parameter or constant table (an
// nn.Embedding) through layout operators and a Cast to an integer type, unchanged. The
// model is only defined there for integers in [0, N): Cast truncates 2.7 to 2, and Gather
// gives an out-of-range code a zero row (doc.go), so a caller that feeds the model data
// from outside validates these positions first.
type IndexInput struct {
	Pos  int    // index into x (the input tensor flattened row-major)
	N    int    // the table's size along the gathered axis; valid values are 0, 1, …, N−1
	Node string // the Gather node that reads it (the one of the smallest table, when several do)
}

// IndexInputs lists the input positions read as table indices, in increasing Pos; nil
// for a model without run-time Gather indices. When several Gathers read one position,
// N is the smallest table's. The caller must not modify the result.
//
// They are found at load by running the model on two probe inputs, x_j = j and x_j =
// tag(j), a 40-bit hash of j plus 2⁴¹ (exact in float64), and reading each run-time
// Gather's indices: an index that equals j under the first probe and tag(j) under the
// second is input position j carried through unchanged. An index computed from the input
// by arithmetic (x + 1, 2x) would have to map the hashes onto each other to pass, which
// happens with probability about D/2⁴⁰ per index; such indices, and constant ones, are
// not listed.
func (m *Model) IndexInputs() []IndexInput { return m.indexIn }

// findIndexInputs runs the probes of IndexInputs on the compiled model.
func (m *Model) findIndexInputs() []IndexInput {
	var gathers []int // steps with run-time indices
	for i, st := range m.steps {
		if _, ok := st.k.(*gatherKernel); ok && st.in[1] >= 0 && m.slots[st.in[1]].kind == slotAct {
			gathers = append(gathers, i)
		}
	}
	if len(gathers) == 0 {
		return nil
	}
	d := m.inDim
	probe := func(val func(j int) float64) [][]float64 {
		x := make([]float64, d)
		for j := range x {
			x[j] = val(j)
		}
		ws := m.NewWorkspace()
		m.Forward(make([]float64, m.outDim), x, ws)
		out := make([][]float64, len(gathers))
		for g, i := range gathers {
			k := m.steps[i].k.(*gatherKernel)
			out[g] = slices.Clone(ws.vals[m.steps[i].in[1]][:k.nIdx])
		}
		return out
	}
	second := func(j int) float64 { return float64(probeTag(uint64(j))>>24 + 1<<41) }
	a := probe(func(j int) float64 { return float64(j) })
	b := probe(second)
	byPos := map[int]IndexInput{}
	for g, i := range gathers {
		k := m.steps[i].k.(*gatherKernel)
		for e, v := range a[g] {
			if !(v >= 0 && v < float64(d)) || v != float64(int(v)) {
				continue
			}
			j := int(v)
			if b[g][e] != second(j) {
				continue
			}
			if old, ok := byPos[j]; !ok || k.n < old.N {
				byPos[j] = IndexInput{Pos: j, N: k.n, Node: m.steps[i].node}
			}
		}
	}
	var out []IndexInput
	for _, in := range byPos {
		out = append(out, in)
	}
	slices.SortFunc(out, func(x, y IndexInput) int { return x.Pos - y.Pos })
	return out
}

// probeTag is splitmix64's finalizer (Steele, Lea & Flood 2014): a fixed bijection of
// uint64 whose outputs for nearby inputs look unrelated.
func probeTag(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
