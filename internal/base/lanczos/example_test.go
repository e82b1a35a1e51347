package lanczos_test

import (
	"fmt"

	"github.com/cairnhq/cairn/internal/base/lanczos"
)

// Leading eigenpairs of A = diag(1/i²) (a power-law spectrum, as kernel matrices have)
// and a quadrature, from products alone.
func ExampleRun() {
	const n = 50
	op := func(dst, v []float64) { // dst = diag(1, 1/4, 1/9, …) v
		for i := range v {
			dst[i] = v[i] / float64((i+1)*(i+1))
		}
	}
	t, err := lanczos.Run(n, 2*3+20, op, lanczos.Start(n, 1, "example/lanczos"), true)
	if err != nil {
		panic(err)
	}
	vals, _, res, err := t.Ritz()
	if err != nil {
		panic(err)
	}
	fmt.Printf("steps %d, top Ritz values %.6f %.6f, residual < 1e-10: %v\n", t.Steps(), vals[0], vals[1], res[1] < 1e-10)

	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	t, _ = lanczos.Run(n, 10, op, ones, false)
	tr, _ := t.Quadrature(func(x float64) float64 { return x }) // 1ᵀA1 = tr A = Σ 1/i²
	fmt.Printf("1ᵀ A 1 = %.6f\n", tr)
	// Output:
	// steps 26, top Ritz values 1.000000 0.250000, residual < 1e-10: true
	// 1ᵀ A 1 = 1.625133
}
