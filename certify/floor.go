package certify

import (
	"fmt"
	"math"
)

// ProductVariance is eq. product-rule for one landmark: Var(K·Ω) for independent K (mean κ,
// variance V) and Ω (mean ω̄, variance τ²), split into its three nonnegative terms
// (Prop. product-rule, app. 2c).
type ProductVariance struct {
	Kernel float64 `json:"kernel"` // V·ω̄², reduced by heads and sketch width
	Weight float64 `json:"weight"` // κ²·τ², the coefficient-fit floor, budget-free
	Cross  float64 `json:"cross"`  // V·τ², present even under exact independence
	Total  float64 `json:"total"`
}

// ProductRule returns eq. product-rule σ² = V ω̄² + κ² τ² + V τ². v and tau2 must be ≥ 0.
func ProductRule(v, kappa, omegaMean, tau2 float64) ProductVariance {
	p := ProductVariance{Kernel: v * omegaMean * omegaMean, Weight: kappa * kappa * tau2, Cross: v * tau2}
	p.Total = p.Kernel + p.Weight + p.Cross
	return p
}

// Shares returns each term's share of Total (they sum to one); all zero when Total is 0.
func (p ProductVariance) Shares() (kernel, weight, cross float64) {
	if p.Total == 0 {
		return 0, 0, 0
	}
	return p.Kernel / p.Total, p.Weight / p.Total, p.Cross / p.Total
}

// FloorEntry is one landmark of the repeated-fit analysis.
type FloorEntry struct {
	Index     int             `json:"index"`
	Mu        float64         `json:"mu"`         // μ = κ ω̄
	Radius    float64         `json:"radius"`     // r(B) = σ/sqrt(δ_ℓ)
	FitRadius float64         `json:"fit_radius"` // r_fit = |κ| τ/sqrt(δ_ℓ)
	Variance  ProductVariance `json:"variance"`
}

// Floor is the repeated-fit analysis of Thm. fit-floor for one query.
type Floor struct {
	K        int          `json:"k"`
	TopK     []FloorEntry `json:"top_k"` // T* = Top_K(μ), ties by the lower index
	RunnerUp FloorEntry   `json:"runner_up"`
	// PopulationSeparation = min_{T*}(μ−r) − max_{∉T*}(μ+r); > 0 is eq.
	// population-separation, which gives Pr[Top_K(Z) = T*] ≥ 1−δ.
	PopulationSeparation float64 `json:"population_separation"`
	Stable               bool    `json:"stable"`
	// FloorSeparation is the same with the fit radii; ≤ 0 is eq. floor-overlap: no budget
	// can make the population separation hold.
	FloorSeparation float64 `json:"floor_separation"`
	FitLimited      bool    `json:"fit_limited"`
	// RadiusOverGap is the fit floor at the cut against the cut's gap: (r_fit of the K-th
	// + r_fit of the (K+1)-th by μ) / (μ_K − μ_{K+1}); at 1 or more the refits alone can
	// swap the two landmarks at the cut. Absent (nil) when μ ties at the cut.
	RadiusOverGap *float64 `json:"radius_over_gap,omitempty"`
	// Shares of Σ_ℓ σ_ℓ² taken by the kernel, weight and cross terms over all m landmarks.
	KernelShare float64 `json:"kernel_share"`
	WeightShare float64 `json:"weight_share"`
	CrossShare  float64 `json:"cross_share"`
	PerLandmark float64 `json:"per_landmark_delta"`
	// PlugIn is true when κ, ω̄ or τ² are estimates rather than exact values or valid upper
	// bounds; the analysis is then diagnostic, not a guarantee (paper §3.2).
	PlugIn bool `json:"plug_in"`
}

// FitFloor evaluates Thm. fit-floor for one query from per-landmark κ_ℓt (exact kernel or
// its plug-in), V_ℓt (the kernel budget's variance, Prop. two-axis), ω̄_ℓ and τ_ℓ² (mean and
// variance of the displacement across refits), with δ_ℓ = alloc.PerLandmark fixed across
// budgets. Inputs are not modified. It panics on unequal lengths and returns errors
// wrapping ErrTopK, ErrDelta or ErrValue as CertifyTo does.
func FitFloor(kappa, v, omegaMean, tau2 []float64, k int, alloc Allocation, plugIn bool) (*Floor, error) {
	m := len(kappa)
	if len(v) != m || len(omegaMean) != m || len(tau2) != m {
		panic(fmt.Sprintf("certify: FitFloor lengths kappa %d, v %d, omegaMean %d, tau2 %d", m, len(v), len(omegaMean), len(tau2)))
	}
	if k < 1 || k >= m {
		return nil, fmt.Errorf("%w: K = %d for m = %d landmarks, want 1 ≤ K < m", ErrTopK, k, m)
	}
	dl := alloc.PerLandmark
	if !(dl > 0) || math.IsInf(dl, 0) {
		return nil, fmt.Errorf("%w: per-landmark δ_ℓ = %v, want > 0", ErrDelta, dl)
	}
	inv := 1 / math.Sqrt(dl)
	entries := make([]FloorEntry, m)
	mu := make([]float64, m)
	var sk, sw, sc, st float64
	for l := range kappa {
		if err := checkFinite("kappa", l, kappa[l], false); err != nil {
			return nil, err
		}
		if err := checkFinite("v", l, v[l], true); err != nil {
			return nil, err
		}
		if err := checkFinite("omegaMean", l, omegaMean[l], true); err != nil {
			return nil, err
		}
		if err := checkFinite("tau2", l, tau2[l], true); err != nil {
			return nil, err
		}
		pv := ProductRule(v[l], kappa[l], omegaMean[l], tau2[l])
		mu[l] = kappa[l] * omegaMean[l]
		entries[l] = FloorEntry{Index: l, Mu: mu[l], Radius: math.Sqrt(pv.Total) * inv,
			FitRadius: math.Abs(kappa[l]) * math.Sqrt(tau2[l]) * inv, Variance: pv}
		sk, sw, sc, st = sk+pv.Kernel, sw+pv.Weight, sc+pv.Cross, st+pv.Total
	}
	top := make([]int, k)
	topKTo(top, mu)
	in := make([]bool, m)
	f := &Floor{K: k, PerLandmark: dl, PlugIn: plugIn}
	lo, loFit := math.Inf(1), math.Inf(1)
	for _, l := range top {
		in[l] = true
		e := entries[l]
		f.TopK = append(f.TopK, e)
		lo, loFit = math.Min(lo, e.Mu-e.Radius), math.Min(loFit, e.Mu-e.FitRadius)
	}
	hi, hiFit := math.Inf(-1), math.Inf(-1)
	runner := -1
	for l, e := range entries {
		if in[l] {
			continue
		}
		hi, hiFit = math.Max(hi, e.Mu+e.Radius), math.Max(hiFit, e.Mu+e.FitRadius)
		if runner < 0 || before(mu, l, runner) {
			runner = l
		}
	}
	f.RunnerUp = entries[runner]
	kth := entries[top[k-1]]
	if gap := kth.Mu - f.RunnerUp.Mu; gap > 0 {
		ratio := (kth.FitRadius + f.RunnerUp.FitRadius) / gap
		f.RadiusOverGap = &ratio
	}
	f.PopulationSeparation, f.Stable = lo-hi, lo > hi
	f.FloorSeparation, f.FitLimited = loFit-hiFit, loFit <= hiFit
	if st > 0 {
		f.KernelShare, f.WeightShare, f.CrossShare = sk/st, sw/st, sc/st
	}
	return f, nil
}

// checkFinite returns an error wrapping ErrValue naming field[i] when x is NaN, infinite,
// or negative with nonNegative set.
func checkFinite(field string, i int, x float64, nonNegative bool) error {
	if math.IsNaN(x) || math.IsInf(x, 0) || (nonNegative && x < 0) {
		return fmt.Errorf("%w: %s[%d] = %v", ErrValue, field, i, x)
	}
	return nil
}
