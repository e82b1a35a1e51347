package vec

import "math"

// SameBits reports whether a and b have the same length and the same float64 bit
// patterns entry by entry: −0 is not 0, and a NaN equals only a NaN of the same payload.
// It is the equality under which a computation that is a function of its input (a
// point's features, a landmark's exact row) may be reused.
func SameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
