package onnx

import (
	"math/rand/v2"
	"testing"
)

// FuzzLoad: no input bytes make LoadBytes panic, and a model it accepts runs Forward and
// Backward without panicking. The element budget is small so that a mutated shape
// cannot make the fuzzer allocate gigabytes.
func FuzzLoad(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 1))
	cnn, emb := smallCNN(f, r), embMLP(f, r)
	f.Add(cnn)
	f.Add(emb)
	f.Add(tinyViT(f, 13, 1))
	f.Add(cnn[:len(cnn)/3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := LoadBytes(data, Options{MaxElements: 1 << 16})
		if err != nil {
			return
		}
		ws := m.NewWorkspace()
		x := make([]float64, m.InDim())
		for i := range x {
			x[i] = float64(i%7) - 3
		}
		out := make([]float64, m.OutDim())
		m.Forward(out, x, ws)
		w := make([]float64, m.OutDim())
		for i := range w {
			w[i] = 1
		}
		m.Backward(make([]float64, m.NumParams()), w, ws)
	})
}
