package validate

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestRepresenterAgainstReference: RepresenterTo equals the scores computed from the
// definition (the latent z = scale·Σ k_ℓ a_ℓ + b built landmark by landmark, each term's
// projection on z/‖z‖), and the scores with the bias's projection sum to ‖z‖; a zero latent
// gives zero scores. Tolerance: sums of M·c products of O(1) terms, 1e-12 relative.
func TestRepresenterAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, sz := range []struct{ m, c int }{{1, 1}, {5, 3}, {33, 17}} {
		a := mat.NewDense(sz.m, sz.c, nil)
		b := make([]float64, sz.c)
		k := make([]float64, sz.m)
		for l := range sz.m {
			k[l] = r.NormFloat64()
			for j := range sz.c {
				a.Set(l, j, r.NormFloat64())
			}
		}
		for j := range b {
			b[j] = r.NormFloat64()
		}
		const scale = 0.37
		got := make([]float64, sz.m)
		RepresenterTo(got, k, a, b, scale)

		z := make([]float64, sz.c)
		copy(z, b)
		terms := make([][]float64, sz.m)
		for l := range sz.m {
			terms[l] = make([]float64, sz.c)
			for j := range sz.c {
				terms[l][j] = scale * k[l] * a.At(l, j)
				z[j] += terms[l][j]
			}
		}
		var nz float64
		for _, v := range z {
			nz += v * v
		}
		nz = math.Sqrt(nz)
		sum := 0.0
		for j := range sz.c {
			sum += b[j] * z[j] / nz
		}
		for l := range sz.m {
			var want float64
			for j := range sz.c {
				want += terms[l][j] * z[j] / nz
			}
			if math.Abs(got[l]-want) > 1e-12*(1+math.Abs(want)) {
				t.Errorf("m=%d c=%d landmark %d: got %v, want %v", sz.m, sz.c, l, got[l], want)
			}
			sum += got[l]
		}
		if math.Abs(sum-nz) > 1e-12*nz*float64(sz.m) {
			t.Errorf("m=%d c=%d: terms sum to %v, ‖z‖ = %v", sz.m, sz.c, sum, nz)
		}
	}
	// A view of a wider matrix (stride ≠ columns) reads the same rows.
	wide := mat.NewDense(4, 7, nil)
	for l := range 4 {
		for j := range 7 {
			wide.Set(l, j, float64(l*7+j)/10)
		}
	}
	view := wide.Slice(0, 4, 1, 4).(*mat.Dense)
	got, want := make([]float64, 4), make([]float64, 4)
	RepresenterTo(got, []float64{1, -1, 0.5, 2}, view, []float64{0.1, 0, -0.2}, 2)
	RepresenterTo(want, []float64{1, -1, 0.5, 2}, mat.DenseCopyOf(view), []float64{0.1, 0, -0.2}, 2)
	if !equal(got, want) {
		t.Errorf("strided coefficients: %v, want %v", got, want)
	}
	zero := []float64{1, 2}
	RepresenterTo(zero, []float64{0, 0}, mat.NewDense(2, 2, []float64{1, 2, 3, 4}), []float64{0, 0}, 1)
	if zero[0] != 0 || zero[1] != 0 {
		t.Errorf("zero latent: got %v, want zeros", zero)
	}
}

func TestDisplacementAndPointSum(t *testing.T) {
	d := make([]float64, 3)
	DisplacementTo(d, []float64{1, -2, 0.5}, []float64{2, 3, 4})
	if d[0] != 2 || d[1] != -6 || d[2] != 2 {
		t.Errorf("DisplacementTo: %v", d)
	}
	// Landmark rows 0 and 2 are point 4's two views; row 1 is point 1.
	p := []float64{9, 9, 9, 9, 9}
	PointSumTo(p, d, []int{4, 1, 4})
	if want := []float64{0, -6, 0, 0, 4}; !equal(p, want) {
		t.Errorf("PointSumTo: %v, want %v", p, want)
	}
	c := make([]float64, 4)
	ClassScoresTo(c, []int{2, 0, 2, 1}, 2)
	if want := []float64{1, 0, 1, 0}; !equal(c, want) {
		t.Errorf("ClassScoresTo: %v, want %v", c, want)
	}
	SignedTo(c, []float64{1, -2, 3, 4}, []int{2, 0, 2, 1}, 2)
	if want := []float64{1, 2, 3, -4}; !equal(c, want) {
		t.Errorf("SignedTo: %v, want %v", c, want)
	}
	a, b := make([]float64, 5), make([]float64, 5)
	RandomScoresTo(a, 1, 0)
	RandomScoresTo(b, 1, 0)
	if !equal(a, b) {
		t.Error("random scores are not reproducible")
	}
	RandomScoresTo(b, 1, 1)
	if equal(a, b) {
		t.Error("two queries got the same random scores")
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCosineTo: k/√self by hand, a zero-norm landmark scores 0, and a landmark that is
// the query's exact multiple ranks first once the norms are divided out although its raw
// similarity is below a larger landmark's.
func TestCosineTo(t *testing.T) {
	// Query q = (1, 0); landmarks (2, 0), (3, 3), (0, 0): k = (2, 3, 0), self = (4, 18, 0).
	dst := make([]float64, 3)
	CosineTo(dst, []float64{2, 3, 0}, []float64{4, 18, 0})
	want := []float64{1, 3 / math.Sqrt(18), 0}
	for l := range want {
		if math.Abs(dst[l]-want[l]) > 1e-15 {
			t.Errorf("dst[%d] = %v, want %v", l, dst[l], want[l])
		}
	}
	if dst[0] <= dst[1] {
		t.Errorf("the parallel landmark scores %v, the larger oblique one %v: want it first", dst[0], dst[1])
	}
}
