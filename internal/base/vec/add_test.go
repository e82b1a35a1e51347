package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddSetTo compares AddTo and SetTo with their loops bit for bit on lengths around
// the sixteen-entry step, with −0 and NaN among the values, and checks that SetTo turns
// −0 into +0.
func TestAddSetTo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{0, 1, 15, 16, 17, 33, 100} {
		src, dst := make([]float64, n), make([]float64, n+2)
		for i := range src {
			src[i] = r.NormFloat64()
		}
		for i := range dst {
			dst[i] = r.NormFloat64()
		}
		if n > 3 {
			src[0], src[1], dst[1], src[2] = math.Copysign(0, -1), math.Copysign(0, -1), math.Copysign(0, -1), math.NaN()
		}
		add, set := append([]float64{}, dst...), append([]float64{}, dst...)
		AddTo(add, src)
		SetTo(set, src)
		for i := range dst {
			wa, ws := dst[i], dst[i]
			if i < n {
				wa, ws = dst[i]+src[i], 0+src[i]
			}
			if math.Float64bits(add[i]) != math.Float64bits(wa) || math.Float64bits(set[i]) != math.Float64bits(ws) {
				t.Fatalf("n = %d, entry %d: AddTo %v (want %v), SetTo %v (want %v)", n, i, add[i], wa, set[i], ws)
			}
		}
		if n > 3 && math.Signbit(set[0]) {
			t.Fatalf("n = %d: SetTo kept −0", n)
		}
	}
}
