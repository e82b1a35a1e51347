package onnxtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/onnx"
)

// TestExport: the export of each built-in architecture loads with the backbone's
// parameters in order, and computes the same f(x) and J_xᵀw. Tolerance 1e-12 relative to
// the largest entry: the two engines sum the same products in different orders (and the
// built-in convnet with fused multiply-adds), each within a few ulps per term.
func TestExport(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, spec := range []string{"mlp:7-5-3", "resmlp:6-5x2-4", "convnet:2x7x6-3-4-5"} {
		bb, err := entk.NewBackbone(spec, 2)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := entk.LoadONNXBytes(Export(bb), onnx.Options{})
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if !slices.Equal(ob.Params(), bb.Params()) || ob.InDim() != bb.InDim() || ob.OutDim() != bb.OutDim() {
			t.Fatalf("%s: the export has P=%d D=%d d=%d or other parameters, want %d %d %d", spec,
				ob.NumParams(), ob.InDim(), ob.OutDim(), bb.NumParams(), bb.InDim(), bb.OutDim())
		}
		if w := ob.Model().Coverage().Warnings; len(w) != 0 {
			t.Errorf("%s: warnings %v", spec, w)
		}
		x, w := vals(r, bb.InDim()), vals(r, bb.OutDim())
		got, want := eval(ob, x, w), eval(bb, x, w)
		scale := 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*scale {
				t.Fatalf("%s: entry %d (outputs, then VJP) onnx %v, built-in %v", spec, i, got[i], want[i])
			}
		}
	}
}

// eval returns f(x) followed by J_xᵀw.
func eval(b entk.Backbone, x, w []float64) []float64 {
	ws := b.NewWorkspace()
	out := make([]float64, b.OutDim())
	b.Forward(out, x, ws)
	g := make([]float64, b.NumParams())
	b.Backward(g, w, ws)
	return append(out, g...)
}

func vals(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// TestEmbeddingMLP: the codes are the input positions after the numeric ones, each with
// its table's size, and every table is a kernel parameter.
func TestEmbeddingMLP(t *testing.T) {
	m, err := onnx.LoadBytes(EmbeddingMLP(2, []int{4, 3}, 5, 2, 1), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := m.IndexInputs()
	if len(got) != 2 || got[0].Pos != 2 || got[0].N != 4 || got[1].Pos != 3 || got[1].N != 3 {
		t.Errorf("IndexInputs = %+v, want positions 2 and 3 of tables 4 and 3", got)
	}
	if cov := m.Coverage(); cov.KernelParams != 12+9+5*8+5+2*5+2 || len(cov.Warnings) != 0 {
		t.Errorf("coverage:\n%s", cov)
	}
}

// TestFoldedBatchNorm: the folded export is the warning's case.
func TestFoldedBatchNorm(t *testing.T) {
	m, err := onnx.LoadBytes(FoldedBatchNorm(), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := m.Coverage().Warnings
	if len(ws) != 1 || ws[0].Kind != onnx.WarnFoldedBatchNorm {
		t.Errorf("warnings %v, want one %s", ws, onnx.WarnFoldedBatchNorm)
	}
}
