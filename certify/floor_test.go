package certify

import (
	"errors"
	"math"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// TestProductRuleMonteCarlo checks eq. product-rule against the sample variance of K·Ω for
// independent K (a sketch-like skewed law: κ + sqrt(V)·(χ²₁−1)/√2) and Ω (lognormal), with
// the empirical-fourth-moment tolerance of varianceTolerance.
func TestProductRuleMonteCarlo(t *testing.T) {
	r := rng.New(1, "certify/test/product-rule")
	const n = 200000
	for _, tc := range []struct{ kappa, v, omega, cv float64 }{
		{1.5, 0.04, 2, 0.15},
		{-0.7, 0.3, 0.5, 0.5},
		{2, 0, 1, 0.3},
		{1, 0.2, 3, 0},
	} {
		sig := math.Sqrt(math.Log(1 + tc.cv*tc.cv))
		tau2 := tc.omega * tc.omega * tc.cv * tc.cv
		xs := make([]float64, n)
		for i := range xs {
			z := r.NormFloat64()
			k := tc.kappa + math.Sqrt(tc.v)*(z*z-1)/math.Sqrt2
			om := tc.omega * math.Exp(sig*r.NormFloat64()-sig*sig/2)
			xs[i] = k * om
		}
		mean, got, m4 := moments(xs)
		pv := ProductRule(tc.v, tc.kappa, tc.omega, tau2)
		if tol := varianceTolerance(got, m4, n); math.Abs(got-pv.Total) > tol {
			t.Errorf("%+v: measured Var = %v, product rule %v (tolerance %v)", tc, got, pv.Total, tol)
		}
		if tol := 5 * math.Sqrt(got/n); math.Abs(mean-tc.kappa*tc.omega) > tol {
			t.Errorf("%+v: mean = %v, want κω̄ = %v", tc, mean, tc.kappa*tc.omega)
		}
		a, b, c := pv.Shares()
		if pv.Total > 0 && math.Abs(a+b+c-1) > 1e-12 {
			t.Errorf("%+v: shares sum to %v, want 1", tc, a+b+c)
		}
	}
}

func TestFitFloor(t *testing.T) {
	alloc := mustAlloc(t, 0.5, 4, 1) // δ_ℓ = 1/8, 1/sqrt(δ_ℓ) = 2√2
	c := 2 * math.Sqrt2
	kappa := []float64{1, 1, 1, 1}
	omega := []float64{4, 3, 2, 1}
	tests := []struct {
		name           string
		v, tau2        []float64
		wantStable     bool
		wantFitLimited bool
		wantFloorSep   float64
	}{
		// No fit noise: r_fit = 0, floor separation = μ_2 − μ_3 = 1; V = 0.01 gives
		// r = 0.1·ω·c, population separation 3 − 0.3c − (2 + 0.2c) = 1 − 0.5c < 0.
		{"budget-limited", []float64{0.01, 0.01, 0.01, 0.01}, []float64{0, 0, 0, 0}, false, false, 1},
		// τ = 0.5 on all: r_fit = 0.5c ≈ 1.41 each; floor separation 1 − c < 0.
		{"fit-limited", []float64{0, 0, 0, 0}, []float64{0.25, 0.25, 0.25, 0.25}, false, true, 1 - c},
		// Tiny everything: stable and not fit-limited.
		{"stable", []float64{1e-6, 1e-6, 1e-6, 1e-6}, []float64{1e-6, 1e-6, 1e-6, 1e-6}, true, false, 1 - 2*1e-3*c},
	}
	for _, tc := range tests {
		f, err := FitFloor(kappa, tc.v, omega, tc.tau2, 2, alloc, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.Stable != tc.wantStable || f.FitLimited != tc.wantFitLimited {
			t.Errorf("%s: stable, fit_limited = %v, %v; want %v, %v", tc.name, f.Stable, f.FitLimited, tc.wantStable, tc.wantFitLimited)
		}
		if math.Abs(f.FloorSeparation-tc.wantFloorSep) > 1e-12 {
			t.Errorf("%s: floor separation = %v, want %v", tc.name, f.FloorSeparation, tc.wantFloorSep)
		}
		for _, e := range append(f.TopK, f.RunnerUp) {
			if e.Radius < e.FitRadius {
				t.Errorf("%s: landmark %d radius %v < fit radius %v (Thm. fit-floor)", tc.name, e.Index, e.Radius, e.FitRadius)
			}
		}
		if got := []int{f.TopK[0].Index, f.TopK[1].Index}; !equalInts(got, []int{0, 1}) {
			t.Errorf("%s: T* = %v, want [0 1]", tc.name, got)
		}
		// The cut is between μ = 3 and μ = 2 (gap 1); both fit radii are sqrt(τ²)·c.
		if want := 2 * math.Sqrt(tc.tau2[1]) * c; f.RadiusOverGap == nil || math.Abs(*f.RadiusOverGap-want) > 1e-12 {
			t.Errorf("%s: radius over gap = %v, want %v", tc.name, f.RadiusOverGap, want)
		}
		// Thm. fit-floor: the floor overlapping means the population separation cannot hold.
		if f.FitLimited && f.Stable {
			t.Errorf("%s: fit-limited and stable at once", tc.name)
		}
	}
	if _, err := FitFloor(kappa, []float64{0, -1, 0, 0}, omega, kappa, 2, alloc, false); !errors.Is(err, ErrValue) {
		t.Errorf("negative V: error = %v, want ErrValue", err)
	}
}

func TestApplyFloorVerdict(t *testing.T) {
	tests := []struct {
		verdict    Verdict
		fitLimited bool
		want       Verdict
	}{
		{Certified, true, Certified},
		{Uncertified, true, FitLimited},
		{Uncertified, false, Uncertified},
	}
	for _, tc := range tests {
		c := Certificate{Verdict: tc.verdict}
		c.ApplyFloor(&Floor{FitLimited: tc.fitLimited})
		if c.Verdict != tc.want {
			t.Errorf("verdict %s, fit_limited %v: got %s, want %s", tc.verdict, tc.fitLimited, c.Verdict, tc.want)
		}
	}
}
