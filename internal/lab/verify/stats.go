package verify

import (
	"math"
	"slices"
	"sort"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// sampleStats returns the mean, the unbiased variance, and the standard error of that
// variance estimated with the empirical fourth central moment μ₄: Var(s²) ≈ (μ₄ − σ⁴)/n.
func sampleStats(xs []float64) (mean, variance, varSE float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var m4 float64
	for _, x := range xs {
		d := (x - mean) * (x - mean)
		variance += d
		m4 += d * d
	}
	variance /= n - 1
	m4 /= n
	return mean, variance, math.Sqrt(math.Max(m4-variance*variance, 0) / n)
}

// finite returns &x, or nil (JSON null) when x is NaN or infinite, e.g. a ratio against a
// predicted variance of exactly 0.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// common returns how many elements of a are in b (both without repeats).
func common(a, b []int) int {
	n := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			n++
		}
	}
	return n
}

// sameSet reports whether a and b hold the same elements (each without repeats).
func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[int]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// Median returns the median of xs (sorting a copy), 0 for an empty slice.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return 0.5 * (c[n/2-1] + c[n/2])
}

// pointJacobian returns the certify summary of x's exact Jacobian.
func pointJacobian(b entk.Backbone, x []float64, ws *entk.Workspace) *certify.Jacobian {
	j := make([]float64, b.OutDim()*b.NumParams())
	entk.JacobianTo(j, b, x, ws)
	return certify.NewJacobian(j, b.OutDim(), b.NumParams())
}

// GaussianInputs returns n seeded rows of dim standard normal values (n×dim, row-major)
// from the stream name under seed: the landmarks and queries of the verify commands.
func GaussianInputs(seed uint64, name string, n, dim int) []float64 {
	r := rng.New(seed, name)
	x := make([]float64, n*dim)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

// sketchDot returns ⟨ψ(x), ψ(y)⟩ for feature rows px and py of equal length.
func sketchDot(px, py []float64) float64 {
	var k float64
	for j := range px {
		k += px[j] * py[j]
	}
	return k
}
