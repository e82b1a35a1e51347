package entk

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFactoredGrad: on the dense backbones, a factored gradient row's inner products
// (GradDot32, one row stored in float32) equal those of the full parameter gradients
// that Backward computes for the same cotangents, within GradError, and GradNorm2 is the
// full gradient's squared norm within 1e-12 relative.
func TestFactoredGrad(t *testing.T) {
	for _, arch := range []string{"mlp:6-8-4", "resmlp:7-9x2-5"} {
		b, err := NewBackbone(arch, 4)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := NewFactored(b)
		if !ok {
			t.Fatalf("%s: not factored", arch)
		}
		r := rand.New(rand.NewPCG(5, 5))
		d, p := b.OutDim(), b.NumParams()
		vec := func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = r.NormFloat64()
			}
			return v
		}
		q, ws := f.NewQuery(), b.NewWorkspace()
		phi := make([]float64, f.Dim())
		type grad struct{ fac, full []float64 }
		var gs []grad
		for range 6 {
			x, cw := vec(b.InDim()), vec(d)
			// The cotangent may depend on the outputs: scale a fixed direction by f(x)_0.
			cot := func(c, out []float64) {
				for i := range c {
					c[i] = cw[i] * (1 + out[0])
				}
			}
			g := grad{fac: make([]float64, f.GradDim()), full: make([]float64, p)}
			q.GradTo(g.fac, phi, x, cot)
			out, c := make([]float64, d), make([]float64, d)
			b.Forward(out, x, ws)
			cot(c, out)
			b.Backward(g.full, c, ws)
			gs = append(gs, g)
		}
		for i, gi := range gs {
			n2 := 0.0
			for _, v := range gi.full {
				n2 += v * v
			}
			if got := f.GradNorm2(gi.fac); math.Abs(got-n2) > 1e-12*n2 {
				t.Errorf("%s row %d: GradNorm2 %v, full %v", arch, i, got, n2)
			}
			p32 := make([]float32, len(gi.fac))
			for k, v := range gi.fac {
				p32[k] = float32(v)
			}
			for j, gj := range gs {
				want := 0.0
				for k := range gj.full {
					want += gi.full[k] * gj.full[k]
				}
				got := f.GradDot32(p32, gj.fac)
				if e := f.GradError(f.GradNorm2(gi.fac), f.GradNorm2(gj.fac)); math.Abs(got-want) > e || e > 1e-6*math.Sqrt(n2*f.GradNorm2(gj.fac)) {
					t.Errorf("%s rows %d, %d: factored %v, full %v, bound %v", arch, i, j, got, want, e)
				}
			}
		}
	}
}
