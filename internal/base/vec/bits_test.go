package vec

import (
	"math"
	"testing"
)

// TestSameBits: equal bit patterns only, of equal lengths.
func TestSameBits(t *testing.T) {
	nan1, nan2 := math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0x7ff8000000000002)
	for _, c := range []struct {
		a, b []float64
		want bool
	}{
		{nil, nil, true},
		{[]float64{}, nil, true},
		{[]float64{1, 2}, []float64{1, 2}, true},
		{[]float64{1, 2}, []float64{1}, false},
		{[]float64{0}, []float64{math.Copysign(0, -1)}, false},
		{[]float64{nan1}, []float64{nan1}, true},
		{[]float64{nan1}, []float64{nan2}, false},
		{[]float64{1, 2}, []float64{1, math.Nextafter(2, 3)}, false},
	} {
		if got := SameBits(c.a, c.b); got != c.want {
			t.Errorf("SameBits(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
