package entk

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// NewHeads draws h Gaussian output heads w_j ~ N(0, I_d/d) (paper eq. composed) from r and
// returns them as an h×d row-major matrix: head j is heads[j*d : (j+1)*d]. The draw is
// heads[i] = r.NormFloat64()/sqrt(d) for i = 0, 1, …, h·d−1 in order, so the same r state
// gives the same heads on every platform. Because E[w wᵀ] = I/d,
// E[<J_xᵀw, J_yᵀw>] = tr(J_x J_yᵀ)/d = k*(x, y). It panics unless h ≥ 1 and d ≥ 1.
func NewHeads(h, d int, r *rand.Rand) []float64 {
	if h < 1 || d < 1 {
		panic(fmt.Sprintf("entk: NewHeads(h = %d, d = %d)", h, d))
	}
	sd := 1 / math.Sqrt(float64(d))
	w := make([]float64, h*d)
	for i := range w {
		w[i] = r.NormFloat64() * sd
	}
	return w
}
