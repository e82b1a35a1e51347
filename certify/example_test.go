package certify_test

import (
	"fmt"

	"github.com/cairnhq/cairn/certify"
)

// A fixed-fit top-1 certificate over three landmarks: the kernel row comes from an
// evaluation draw independent of the fit, the variance bounds are fixed beforehand.
func ExampleRanker_CertifyTo() {
	kernel := []float64{0.9, 2.1, 1.0} // K^eval(x_ℓ, x_t)
	omega := []float64{1, 1, 1}        // ω_ℓ = ‖Ã_ℓ − Ã_0,ℓ‖
	vbar := []float64{1e-3, 1e-3, 1e-3}
	alloc, _ := certify.UniformAllocation(0.05, len(kernel), 1)
	var r certify.Ranker
	var c certify.Certificate
	if err := r.CertifyTo(&c, kernel, omega, vbar, 1, alloc); err != nil {
		panic(err)
	}
	fmt.Printf("top %d, radius %.3f, separation %.3f, %s\n", c.TopK[0].Index, c.TopK[0].Radius, c.Separation, c.Verdict)
	// Output: top 1, radius 0.245, separation 0.610, certified
}

// Prop. two-axis for one pair of 1×2 Jacobians on a padded length of 2. By hand: with
// J_x = [1 0], J_y = [1 1], one head w ~ N(0,1) and s = 1, ⟨Su, Sv⟩ is 0 or 2w² with
// probability ½ each, so its mean is E w² = 1 and its variance 2·E w⁴ − 1 = 5.
func ExampleComputePairTerms() {
	x := certify.NewJacobian([]float64{1, 0}, 1, 2)
	y := certify.NewJacobian([]float64{1, 1}, 1, 2)
	t := certify.ComputePairTerms(x, y, 2, &certify.Workspace{})
	v := t.Variance(1, 1)
	fmt.Printf("k* = %v, output %v, parameter %v, total %v\n", t.Mean(), v.Output, v.Parameter, v.Total)
	// Output: k* = 1, output 2, parameter 3, total 5
}
