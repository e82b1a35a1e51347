package validate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMarginCotangent: u = e_c − e_o with c the largest of the first classes outputs and
// o the largest other output, on cases where the two differ.
func TestMarginCotangent(t *testing.T) {
	for _, tc := range []struct {
		out          []float64
		classes      int
		wantC, wantO int
	}{
		{[]float64{0.1, 2, -1, 0.5}, 4, 1, 3},
		{[]float64{0.1, 2, -1, 5}, 3, 1, 3}, // the competitor may be an output that is no class
		{[]float64{3, 3, 1}, 3, 0, 1},       // ties go to the lower index
		{[]float64{-2, -1, -3}, 1, 0, 1},    // one class: c is 0 whatever its logit
	} {
		u := make([]float64, len(tc.out))
		c := MarginCotangentTo(u, tc.out, tc.classes)
		want := make([]float64, len(tc.out))
		want[tc.wantC], want[tc.wantO] = 1, -1
		if c != tc.wantC {
			t.Errorf("out %v classes %d: c = %d, want %d", tc.out, tc.classes, c, tc.wantC)
		}
		for k := range u {
			if u[k] != want[k] {
				t.Errorf("out %v classes %d: u = %v, want %v", tc.out, tc.classes, u, want)
				break
			}
		}
	}
}

// TestPointCotangent: with grad, g is minus the gradient of the softmax cross-entropy
// −log softmax(out)_y in out, checked by central differences (step 1e-5; the loss is
// smooth with second derivatives ≤ 1/4, so the error is O(h²) ≈ 1e-10, tolerance 1e-8);
// without, g = e_y − 1/d, which sums to 0.
func TestPointCotangent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	ce := func(out []float64, y int) float64 {
		s := 0.0
		for _, v := range out {
			s += math.Exp(v)
		}
		return math.Log(s) - out[y]
	}
	for trial := range 20 {
		d := 2 + trial%7
		out := make([]float64, d)
		for k := range out {
			out[k] = 3 * r.NormFloat64()
		}
		if trial == 0 {
			out[0] = 800 // no overflow in the max-shifted form
		}
		y := r.IntN(d)
		g := make([]float64, d)
		PointCotangentTo(g, out, y, true)
		const h = 1e-5
		for k := range out {
			if trial == 0 {
				break
			}
			p, m := append([]float64(nil), out...), append([]float64(nil), out...)
			p[k] += h
			m[k] -= h
			fd := -(ce(p, y) - ce(m, y)) / (2 * h)
			if math.Abs(g[k]-fd) > 1e-8 {
				t.Errorf("trial %d: g[%d] = %v, central difference %v", trial, k, g[k], fd)
			}
		}
		if trial == 0 && (math.IsNaN(g[0]) || math.Abs(g[0]-(btoi(y == 0)-1)) > 1e-12) {
			t.Errorf("logit 800: g[0] = %v", g[0])
		}
		PointCotangentTo(g, out, y, false)
		sum := 0.0
		for k, v := range g {
			want := -1 / float64(d)
			if k == y {
				want++
			}
			if v != want {
				t.Errorf("trial %d, label part: g[%d] = %v, want %v", trial, k, v, want)
			}
			sum += v
		}
		if math.Abs(sum) > 1e-15 {
			t.Errorf("trial %d: label part sums to %v", trial, sum)
		}
	}
}

func btoi(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
