package onnx

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestSettersSameBits: a model whose first gradient writers set their gradients (setter),
// and whose parameters' gradients are cleared by their only writers (slot.lazy), gives
// the bits of the same model with every gradient cleared first and added to
// (Options.noSetters), in Forward, Backward and BackwardHeads, on every reference model
// of testdata. Each pass runs on a second input, so that a setter that left an entry
// unwritten would leave the first input's value there.
func TestSettersSameBits(t *testing.T) {
	for _, name := range []string{"convnet", "resnet20", "vit", "vit13", "embmlp"} {
		path := filepath.Join("testdata", name+".onnx")
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		set, err := Load(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		add, err := Load(path, Options{noSetters: true})
		if err != nil {
			t.Fatal(err)
		}
		n, lazy := 0, 0
		for _, s := range set.slots {
			if s.lazy {
				lazy++
			}
		}
		for _, st := range set.steps {
			for _, s := range st.set {
				if s {
					n++
				}
			}
		}
		if n == 0 || lazy == 0 {
			t.Errorf("%s: %d steps' inputs set their gradients, %d parameters cleared by their writers; want some of both", name, n, lazy)
		}
		t.Logf("%s: %d of %d steps' inputs set their gradients, %d parameters cleared or set by their only writer", name, n, len(set.steps), lazy)
		r := rand.New(rand.NewPCG(7, 1))
		xs := [][]float64{randVals(r, set.InDim(), 1), randVals(r, set.InDim(), 1)}
		for _, x := range xs {
			for _, q := range set.IndexInputs() {
				x[q.Pos] = float64(r.IntN(q.N))
			}
		}
		const h = 3
		w := randVals(r, h*set.OutDim(), 1)
		var got, want [2][]float64
		for i, m := range []*Model{set, add} {
			ws := m.NewWorkspace()
			out := make([]float64, m.OutDim())
			g, gh := make([]float64, m.NumParams()), make([]float64, h*m.NumParams())
			for _, x := range xs {
				m.Forward(out, x, ws)
				m.Backward(g, w[:m.OutDim()], ws)
				m.BackwardHeads(gh, w, h, ws)
			}
			got[i] = append(append(append([]float64{}, out...), g...), gh...)
			want[i] = got[i]
		}
		for i, v := range want[1] {
			if math.Float64bits(got[0][i]) != math.Float64bits(v) {
				t.Errorf("%s: entry %d: %.17g with setters, %.17g without", name, i, got[0][i], v)
				break
			}
		}
	}
}
