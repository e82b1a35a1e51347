package verify

import (
	"math"
	"testing"
)

func TestCommon(t *testing.T) {
	for _, c := range []struct {
		a, b []int
		want int
	}{{nil, nil, 0}, {[]int{1, 2}, []int{2, 1}, 2}, {[]int{1, 2, 3}, []int{3, 4, 5}, 1}, {[]int{1}, []int{2}, 0}} {
		if got := common(c.a, c.b); got != c.want {
			t.Errorf("common(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestMedian: odd and even lengths, an unsorted input left as it was, and 0 for none.
func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2, 10}
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{3, 1, 2}, 2}, {xs, 2.5}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if xs[0] != 3 || xs[3] != 10 {
		t.Errorf("Median sorted its input: %v", xs)
	}
}

// TestSampleStats checks the mean, the unbiased variance and the fourth-moment standard
// error against the formulas worked by hand for {0, 0, 0, 4}: mean 1, deviations
// −1, −1, −1, 3, variance 12/3 = 4, μ₄ = (1 + 1 + 1 + 81)/4 = 21, se = sqrt((21 − 4²)/4).
// The values are small integers, exact in float64 but for the square root (1e-15).
func TestSampleStats(t *testing.T) {
	mean, v, se := sampleStats([]float64{0, 0, 0, 4})
	if want := math.Sqrt(1.25); mean != 1 || v != 4 || math.Abs(se-want) > 1e-15 {
		t.Errorf("sampleStats = %v, %v, %v; want 1, 4, %v", mean, v, se, want)
	}
}
