package vec

import "math"

// The constants of ExpShift32: the clamp (so that 2^k is a normal float32), Cody–Waite's
// split of ln 2 (k·expC1 is exact for |k| ≤ 2^11), and Cephes' expf polynomial, whose
// error on |r| ≤ ln2/2 is within about 1 ulp of float32.
const (
	expLo    float32 = -87
	expHi    float32 = 88
	expLog2e float32 = 1.44269504088896341
	expC1    float32 = 0.693359375
	expC2    float32 = -2.12194440e-4
	expP0    float32 = 1.9875691500e-4
	expP1    float32 = 1.3981999507e-3
	expP2    float32 = 8.3334519073e-3
	expP3    float32 = 4.1665795894e-2
	expP4    float32 = 1.6666665459e-1
	expP5    float32 = 5.0000001201e-1
)

// ExpShift32 replaces every x[j] by e_j = exp((x[j] − shift)·scale) in float32 and returns
// Σ_j e_j in float64: the row pass of a softmax. Each e_j is formed by one fixed sequence
// of float32 operations, each rounded (no fused multiply-add): the argument clamped to
// [−87, 88], k = round-half-even(arg·log₂e), r = arg − k·C₁ − k·C₂, Cephes' degree-5
// polynomial p(r), e = ((p·r²) + r + 1)·2^k. Its error is within 2 ulp of float32 against
// exp of the clamped argument (tested); arguments below −87 give about 1.6·10⁻³⁸ instead
// of less, arguments above 88 give e^88. The sum adds e_j in 16 float64 lanes (lane l the
// j ≡ l mod 16 of the multiple-of-16 prefix), then the lanes in order, then the tail in
// order. On amd64 with AVX-512 the prefix runs 16 lanes per instruction
// (exp32_amd64.s), elsewhere the same operations run one by one; both give the same bits
// (tested). NaN arguments give unspecified values.
func ExpShift32(x []float32, shift, scale float32) float64 {
	var lanes [16]float64
	n := len(x) &^ 15
	if hasAVX512 && n > 0 {
		expShiftLanes(x[:n], shift, scale, &lanes)
	} else {
		for j := 0; j < n; j++ {
			e := exp32(x[j], shift, scale)
			x[j] = e
			lanes[j&15] += float64(e)
		}
	}
	var s float64
	for _, v := range lanes {
		s += v
	}
	for j := n; j < len(x); j++ {
		e := exp32(x[j], shift, scale)
		x[j] = e
		s += float64(e)
	}
	return s
}

// exp32 is one e_j of ExpShift32, operation by operation as the vector code does it.
func exp32(v, shift, scale float32) float32 {
	x := float32(v-shift) * scale
	x = min(max(x, expLo), expHi)
	k := float32(math.RoundToEven(float64(x * expLog2e)))
	r := x - float32(k*expC1)
	r = r - float32(k*expC2)
	p := float32(expP0*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(p*float32(r*r)) + r
	y = y + 1
	return y * math.Float32frombits(uint32(int32(k)+127)<<23)
}
