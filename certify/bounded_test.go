package certify

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCertifyBoundedTo: rows whose computed kernel is the exact one plus an error
// anywhere within its bound (including at the bound, the adversarial case): every
// certified answer's top-K set equals the exact top-K set, the radii are what the
// formula says, and rows with gaps well above the bounds certify while rows whose
// bounds cover the cut gap do not.
func TestCertifyBoundedTo(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	var rk Ranker
	var c Certificate
	issued := 0
	for trial := range 2000 {
		m, k := 20+r.IntN(20), 1+r.IntN(10)
		exact, comp, omega, errb := make([]float64, m), make([]float64, m), make([]float64, m), make([]float64, m)
		rel := math.Pow(10, -1-4*r.Float64()) // bounds from 1e-5 to 1e-1 of the kernel
		for l := range m {
			exact[l] = 1 + r.Float64()
			omega[l] = r.Float64()
			errb[l] = rel * exact[l]
			sign := []float64{-1, 1, 2*r.Float64() - 1}[r.IntN(3)]
			comp[l] = exact[l] + sign*errb[l]
		}
		if err := rk.CertifyBoundedTo(&c, comp, omega, errb, k, 0.05); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.TopK {
			want := omega[e.Index]*errb[e.Index]*(1+4*0x1p-53) + 4*0x1p-53*math.Abs(e.Score)
			if e.Radius != want {
				t.Fatalf("trial %d: radius %v, want %v", trial, e.Radius, want)
			}
		}
		if c.Allocation.Scheme != "deterministic" || c.Allocation.PerLandmark != 0 {
			t.Fatalf("allocation %+v, want deterministic with no δ spent", c.Allocation)
		}
		if c.Verdict != Certified {
			continue
		}
		issued++
		scores := make([]float64, m)
		ScoresTo(scores, exact, omega)
		want := make([]int, k)
		TopKTo(want, scores)
		got := c.TopKSet()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: certified top-%d %v, exact top-%d %v", trial, k, got, k, want)
		}
	}
	if issued < 100 || issued > 1900 {
		t.Fatalf("%d of 2000 certified: the test does not exercise both verdicts", issued)
	}
	// A row whose cut gap is inside the bounds cannot certify; widening the gap can.
	kern, om := []float64{3, 2, 1.999, 1}, []float64{1, 1, 1, 1}
	if err := rk.CertifyBoundedTo(&c, kern, om, []float64{0.01, 0.01, 0.01, 0.01}, 2, 0.05); err != nil || c.Verdict != Uncertified {
		t.Fatalf("gap 0.001 with radii 0.01: verdict %v, err %v; want uncertified", c.Verdict, err)
	}
	if err := rk.CertifyBoundedTo(&c, kern, om, []float64{1e-5, 1e-5, 1e-5, 1e-5}, 2, 0.05); err != nil || c.Verdict != Certified {
		t.Fatalf("gap 0.001 with radii 1e-5: verdict %v, err %v; want certified", c.Verdict, err)
	}
	if err := rk.CertifyBoundedTo(&c, kern, om, []float64{1, -1, 0, 0}, 2, 0.05); err == nil {
		t.Fatal("a negative bound was accepted")
	}
}
