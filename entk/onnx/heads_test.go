package onnx

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// headsTol bounds |BackwardHeads row j − Backward(w_j)| relative to the largest entry of
// that row (at least 1): the two compute the same sums, but a batched matrix product may
// add in another order (another block size, a dense product where Backward skipped
// zeros), which moves each entry by a few ulps of the terms, far below 1e-12 of the row's
// scale for these depths.
const headsTol = 1e-12

// checkHeads compares BackwardHeads for h = 1, 3 and 5 random heads with Backward per
// head on the x of ws's last Forward, on the same workspace and then again (the second
// call reuses its buffers and must give the same bits).
func checkHeads(t *testing.T, name string, m *Model, ws *Workspace, r *rand.Rand) {
	t.Helper()
	P, d := m.NumParams(), m.OutDim()
	for _, h := range []int{1, 3, 5} {
		w := randVals(r, h*d, 1)
		got, again := make([]float64, h*P), make([]float64, h*P)
		m.BackwardHeads(got, w, h, ws)
		want := make([]float64, P)
		for j := range h {
			m.Backward(want, w[j*d:(j+1)*d], ws)
			scale := 1.0
			for _, v := range want {
				scale = max(scale, math.Abs(v))
			}
			for i, v := range want {
				if g := got[j*P+i]; math.Abs(g-v) > headsTol*scale || math.IsNaN(g) != math.IsNaN(v) {
					t.Errorf("%s: h = %d, head %d: BackwardHeads[%d] = %.17g, Backward %.17g", name, h, j, i, g, v)
					return
				}
			}
		}
		m.BackwardHeads(again, w, h, ws)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(again[i]) {
				t.Errorf("%s: h = %d: BackwardHeads not repeatable at %d: %v then %v", name, h, i, got[i], again[i])
				return
			}
		}
	}
}

// TestHeadsReference checks BackwardHeads against Backward on the reference models of
// testdata (the PyTorch exports: ResNet-20, the ViTs, the convnet, the embedding MLP).
func TestHeadsReference(t *testing.T) {
	for _, name := range []string{"convnet", "resnet20", "vit", "vit13", "embmlp"} {
		path := filepath.Join("testdata", name+".onnx")
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		m, err := Load(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 1))
		ws := m.NewWorkspace()
		x := randVals(r, m.InDim(), 1)
		for _, q := range m.IndexInputs() {
			x[q.Pos] = float64(r.IntN(q.N))
		}
		m.Forward(make([]float64, m.OutDim()), x, ws)
		checkHeads(t, name, m, ws, r)
	}
}

// TestHeadsNoAllocs: BackwardHeads allocates nothing after its first call with h heads,
// nor with fewer heads after that. Not under the race detector, where the GEMM's pooled
// packing buffers are dropped at random (raceEnabled).
func TestHeadsNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool entries: allocation counts are not checked")
	}
	r := rand.New(rand.NewPCG(2, 1))
	m, err := LoadBytes(smallCNN(t, r), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := m.NewWorkspace()
	x, w := randVals(r, m.InDim(), 1), randVals(r, 4*m.OutDim(), 1)
	out, g := make([]float64, m.OutDim()), make([]float64, 4*m.NumParams())
	m.Forward(out, x, ws)
	m.BackwardHeads(g, w, 4, ws)
	if n := testing.AllocsPerRun(20, func() {
		m.Forward(out, x, ws)
		m.BackwardHeads(g, w, 4, ws)
		m.BackwardHeads(g[:3*m.NumParams()], w[:3*m.OutDim()], 3, ws)
	}); n != 0 {
		t.Errorf("Forward+BackwardHeads: %v allocations", n)
	}
}

// TestUnaryHeadsBits: for every unary function, backwardHeads over h = 3 heads with
// strided input gradients gives the bits of backward run once per head (erf's shared
// exponentials included), on positive inputs so that sqrt and log are defined.
func TestUnaryHeadsBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, h, stride = 7, 3, 9
	for f := uRelu; f <= uLog; f++ {
		k := &unaryKernel{f: f, n: n}
		x := randVals(r, n, 1)
		for i := range x {
			x[i] = math.Abs(x[i]) + 0.1
		}
		if f == uRelu {
			x[2], x[4] = -x[2], 0 // both sides of the kink and the kink itself
		}
		y := make([]float64, n)
		k.forward([][]float64{y}, [][]float64{x}, nil)
		g := randVals(r, h*n, 1)
		want, got := randVals(r, h*stride, 1), make([]float64, h*stride)
		copy(got, want)
		for j := range h {
			k.backward([][]float64{want[j*stride : j*stride+n]}, [][]float64{g[j*n : (j+1)*n]}, [][]float64{x}, [][]float64{y}, nil)
		}
		if !k.backwardHeads(h, [][]float64{got}, [][]float64{g}, [][]float64{x}, [][]float64{y}, []int{stride}, nil, make([]float64, k.headsScratch(h))) {
			t.Fatalf("f = %d: backwardHeads declined", f)
		}
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Errorf("f = %d: [%d] = %v, per head %v", f, i, got[i], want[i])
			}
		}
	}
}

// TestCol2imRuns: col2imHeads adds by runs (stride-1 convolutions with and without
// padding: without, a run ends where an output row wraps to the next input row) the
// same bits as by the element loop, over column blocks that split heads and rows
// anywhere; a stride-2 convolution has no runs (findRuns declines), and its element loop
// is what TestHeadsReference checks.
func TestCol2imRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	conv := func(stride, pad int64) *convKernel {
		b := newBuilder(17)
		b.input("x", 1, 3, 9, 7)
		y := b.node("Conv", []string{"x", b.initF("w", []int{4, 3, 3, 3}, randVals(r, 108, 1))},
			aInts("pads", pad, pad, pad, pad), aInts("strides", stride, stride))
		b.output(y)
		m, err := LoadBytes(b.bytes(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range m.steps {
			if k, ok := st.k.(*convKernel); ok {
				return k
			}
		}
		t.Fatal("no Conv step")
		return nil
	}
	if k := conv(2, 1); k.runs != nil {
		t.Errorf("stride 2: %d runs for %d entries, want none", len(k.runs), len(k.colsT))
	}
	for _, pad := range []int64{1, 0} {
		k := conv(1, pad)
		if k.runs == nil {
			t.Fatalf("stride 1, padding %d: no runs", pad)
		}
		checkRuns(t, k, r)
	}
}

// checkRuns compares col2imHeads by k's runs and by its element loop (TestCol2imRuns).
func checkRuns(t *testing.T, k *convKernel, r *rand.Rand) {
	const h = 3
	hP := h * k.P
	for _, nb := range []int{hP, 16, 37, k.P} {
		gc := randVals(r, k.K*hP, 1)
		byRuns := randVals(r, h*k.plane, 1)
		byElem := slices.Clone(byRuns)
		noRuns := *k
		noRuns.runs, noRuns.runAt = nil, nil
		for c0 := 0; c0 < hP; c0 += nb {
			w := min(nb, hP-c0)
			blk := make([]float64, k.K*w)
			for q := range k.K {
				copy(blk[q*w:(q+1)*w], gc[q*hP+c0:q*hP+c0+w])
			}
			k.col2imHeads(byRuns, k.plane, blk, c0, w)
			noRuns.col2imHeads(byElem, k.plane, blk, c0, w)
		}
		for i := range byRuns {
			if math.Float64bits(byRuns[i]) != math.Float64bits(byElem[i]) {
				t.Fatalf("blocks of %d: gx[%d] = %v by runs, %v by elements", nb, i, byRuns[i], byElem[i])
			}
		}
	}
}

// TestConvGradByProduct: a stride-1 convolution's input gradient in BackwardHeads as one
// product over the padded output gradient (gxByProduct) agrees, within headsTol, with
// the same convolution's col2im path (inv removed), over padding none, even, uneven and
// "same", 3×3, 1×1, 3×2 and dilated kernels, non-square and 1-D inputs; and a stride-2
// convolution has no such form.
func TestConvGradByProduct(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 1))
	cases := []struct {
		name  string
		x, w  []int
		attrs []*onnxpb.AttributeProto
	}{
		{"3x3 pad 1", []int{1, 3, 9, 7}, []int{4, 3, 3, 3}, []*onnxpb.AttributeProto{aInts("pads", 1, 1, 1, 1)}},
		{"3x3 no pad", []int{1, 3, 9, 7}, []int{4, 3, 3, 3}, nil},
		{"3x2 uneven pads", []int{1, 2, 6, 8}, []int{5, 2, 3, 2}, []*onnxpb.AttributeProto{aInts("pads", 0, 1, 2, 0)}},
		{"1x1", []int{1, 5, 4, 6}, []int{3, 5, 1, 1}, nil},
		{"dilated", []int{1, 2, 8, 8}, []int{3, 2, 3, 3}, []*onnxpb.AttributeProto{aInts("pads", 2, 2, 2, 2), aInts("dilations", 2, 2)}},
		{"1-D", []int{1, 3, 11}, []int{2, 3, 3}, []*onnxpb.AttributeProto{aInts("pads", 1, 1)}},
		{"stride 2", []int{1, 3, 9, 7}, []int{4, 3, 3, 3}, []*onnxpb.AttributeProto{aInts("pads", 1, 1, 1, 1), aInts("strides", 2, 2)}},
	}
	for _, c := range cases {
		b := newBuilder(17)
		dims := make([]int64, len(c.x))
		for i, d := range c.x {
			dims[i] = int64(d)
		}
		b.input("x", dims...)
		// An added constant is a parameter, so the convolution's input needs its gradient.
		pre := b.node("Tanh", []string{b.node("Add", []string{"x", b.initF("s", c.x, randVals(r, numel(c.x), 1))})})
		y := b.node("Conv", []string{pre, b.initF("w", c.w, randVals(r, numel(c.w), 1))}, c.attrs...)
		b.output(b.node("Reshape", []string{y, b.ints(1, -1)}))
		m, err := LoadBytes(b.bytes(t), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var k *convKernel
		for _, st := range m.steps {
			if ck, ok := st.k.(*convKernel); ok {
				k = ck
			}
		}
		if c.name == "stride 2" {
			if k.inv != nil {
				t.Errorf("stride 2: a product form %+v, want none", *k.inv)
			}
			continue
		}
		if k.inv == nil {
			t.Fatalf("%s: no product form", c.name)
		}
		x := randVals(r, m.InDim(), 1)
		const h = 3
		w := randVals(r, h*m.OutDim(), 1)
		grads := func() []float64 {
			ws := m.NewWorkspace()
			m.Forward(make([]float64, m.OutDim()), x, ws)
			g := make([]float64, h*m.NumParams())
			m.BackwardHeads(g, w, h, ws)
			return g
		}
		got := grads()
		inv := k.inv
		k.inv = nil
		want := grads()
		k.inv = inv
		scale := 1.0
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for i, v := range want {
			if math.Abs(got[i]-v) > headsTol*scale {
				t.Errorf("%s: dL/dp[%d] = %.17g by the product, %.17g by col2im", c.name, i, got[i], v)
				break
			}
		}
	}
}
