package entk

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// denseHadamardTo writes H v into dst by the definition H_jk = (−1)^{popcount(j AND k)}/sqrt(n),
// O(n²): the obviously-correct reference.
func denseHadamardTo(dst, v []float64) {
	n := len(v)
	c := 1 / math.Sqrt(float64(n))
	for j := range dst {
		var sum float64
		for k, x := range v {
			if bits.OnesCount(uint(j&k))&1 == 0 {
				sum += x
			} else {
				sum -= x
			}
		}
		dst[j] = c * sum
	}
}

// plainFWHT is the plain butterfly loop of FWHT's doc comment, O(n log n), used as the
// reference for sizes where the dense one is too slow.
func plainFWHT(v []float64) {
	n := len(v)
	for h := 1; h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
			}
		}
	}
	for j := range v {
		v[j] /= math.Sqrt(float64(n))
	}
}

func randVec(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

func norm2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// fwhtTol bounds the rounding error of one transform: each output is built in log2(n)
// rounds of additions whose partial sums are bounded by ||v||_2 (the transform of a
// prefix of stages is orthogonal up to the scaling), so the error per entry is below
// (log2(n)+2)·ε·||v||_2; a factor 4 covers the reordering of the sums.
func fwhtTol(n int, v []float64) float64 {
	return 4 * float64(bits.Len(uint(n))+2) * 0x1p-52 * norm2(v)
}

func TestFWHTAgainstDense(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for lg := 0; lg <= 12; lg++ {
		n := 1 << lg
		v := randVec(r, n)
		want := make([]float64, n)
		denseHadamardTo(want, v)
		got := append([]float64(nil), v...)
		FWHT(got)
		tol := fwhtTol(n, v)
		for j := range got {
			if math.Abs(got[j]-want[j]) > tol {
				t.Fatalf("n = %d: entry %d: got %v, want %v (tol %.3g)", n, j, got[j], want[j], tol)
			}
		}
	}
}

// TestFWHTAgainstPlain covers the sizes past the L1 block (2^11) where several blocked
// and radix-8/4/2 high passes combine.
func TestFWHTAgainstPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for lg := 10; lg <= 17; lg++ {
		n := 1 << lg
		v := randVec(r, n)
		want := append([]float64(nil), v...)
		plainFWHT(want)
		got := append([]float64(nil), v...)
		FWHT(got)
		tol := fwhtTol(n, v)
		for j := range got {
			if math.Abs(got[j]-want[j]) > tol {
				t.Fatalf("n = 2^%d: entry %d: got %v, want %v (tol %.3g)", lg, j, got[j], want[j], tol)
			}
		}
	}
}

func TestFWHTInvolution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 3))
	for lg := 0; lg <= 16; lg++ {
		n := 1 << lg
		v := randVec(r, n)
		got := append([]float64(nil), v...)
		FWHT(got)
		if gn, wn := norm2(got), norm2(v); math.Abs(gn-wn) > fwhtTol(n, v) {
			t.Errorf("n = 2^%d: ||Hv|| = %v, want ||v|| = %v", lg, gn, wn)
		}
		FWHT(got)
		tol := 2 * fwhtTol(n, v)
		for j := range got {
			if math.Abs(got[j]-v[j]) > tol {
				t.Fatalf("n = 2^%d: H(H(v))[%d] = %v, want %v", lg, j, got[j], v[j])
			}
		}
	}
}

func TestFWHTPanicsOnBadLength(t *testing.T) {
	for _, n := range []int{0, 3, 6, 12, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("FWHT(len %d) did not panic", n)
				}
			}()
			FWHT(make([]float64, n))
		})
	}
}

func TestFWHTAllocs(t *testing.T) {
	v := make([]float64, 1<<13)
	v[3] = 1
	if a := testing.AllocsPerRun(5, func() { FWHT(v) }); a != 0 {
		t.Errorf("FWHT allocates %v times per call, want 0", a)
	}
}
