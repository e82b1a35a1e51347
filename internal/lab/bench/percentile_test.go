package bench

import (
	"math"
	"testing"
)

// TestPercentile checks the nearest-rank quantile against its definition: the
// smallest value v with #{x ≤ v} ≥ p·n.
func TestPercentile(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64((i * 37) % 200) // a permutation of 0..199
	}
	for _, p := range []float64{0.01, 0.5, 0.99, 1} {
		got := Percentile(append([]float64(nil), xs...), p)
		// Reference by definition, by brute force over the candidates.
		want := math.Inf(1)
		for _, v := range xs {
			cnt := 0
			for _, x := range xs {
				if x <= v {
					cnt++
				}
			}
			if float64(cnt) >= p*float64(len(xs)) && v < want {
				want = v
			}
		}
		if got != want {
			t.Errorf("Percentile(p=%v) = %v, want %v", p, got, want)
		}
	}
	if got := Percentile([]float64{3}, 0.99); got != 3 {
		t.Errorf("percentile of one value = %v, want 3", got)
	}
}
