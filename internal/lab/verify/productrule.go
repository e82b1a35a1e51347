package verify

import (
	"fmt"
	"math"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// ProductLandmark is one landmark's row of verify product-rule.
type ProductLandmark struct {
	Index       int      `json:"index"`
	Measured    float64  `json:"measured"`
	Predicted   float64  `json:"predicted"`
	Ratio       *float64 `json:"ratio"`
	KernelShare float64  `json:"kernel_share"`
	WeightShare float64  `json:"weight_share"`
	CrossShare  float64  `json:"cross_share"`
	Kappa       float64  `json:"kappa"`
	V           float64  `json:"v"`
	OmegaMean   float64  `json:"omega_mean"`
	Tau2        float64  `json:"tau2"`
}

// ProductShares are the kernel, weight and cross shares of eq. product-rule per
// landmark, with their medians over landmarks.
type ProductShares struct {
	Kernel       []float64 `json:"kernel"`
	Weight       []float64 `json:"weight"`
	Cross        []float64 `json:"cross"`
	MedianKernel float64   `json:"median_kernel"`
	MedianWeight float64   `json:"median_weight"`
	MedianCross  float64   `json:"median_cross"`
}

// ProductReport is the output of cairnctl verify product-rule.
type ProductReport struct {
	Arch         string            `json:"arch"`
	Seed         uint64            `json:"seed"`
	H            int               `json:"h"`
	S            int               `json:"s"`
	PaddedP      int               `json:"padded_P"`
	Landmarks    int               `json:"landmarks"`
	Realizations int               `json:"realizations"`
	OmegaSource  string            `json:"omega_source"`
	OmegaCV      float64           `json:"omega_cv"`
	MedianRatio  float64           `json:"median_ratio"`
	Ratios       []*float64        `json:"ratios"`
	RatioSE      float64           `json:"ratio_se_gaussian"`
	Shares       ProductShares     `json:"shares"`
	PerLandmark  []ProductLandmark `json:"per_landmark"`
}

// ProductOptions are the settings of cairnctl verify product-rule, each named by its flag.
type ProductOptions struct {
	Arch         string  // --arch
	Seed         uint64  // --seed: seed of backbone, inputs, ω̄ and all draws
	Landmarks    int     // --landmarks
	Realizations int     // --realizations: independent (sketch, Ω) realizations
	H, S         int     // --h, --s: the evaluation draw's heads and SRHT width (0: no sketch)
	OmegaCV      float64 // --omega-cv: coefficient of variation of Ω_ℓ
}

// ProductRule measures Var Z_ℓt = Var(K_ℓt·Ω_ℓ) over independent realizations (app. 2c):
// each realization draws a fresh entk evaluation sketch (shared by the landmarks of the
// query) and, independently, a displacement Ω_ℓ per landmark; the prediction is eq.
// product-rule with V exact from Prop. two-axis and κ = k* exact.
func ProductRule(o ProductOptions) (*ProductReport, error) {
	m := o.Landmarks
	if m < 1 {
		return nil, fmt.Errorf("--landmarks: %d, want ≥ 1", m)
	}
	if o.Realizations < 2 {
		return nil, fmt.Errorf("--realizations: %d, want ≥ 2", o.Realizations)
	}
	if !(o.OmegaCV >= 0) || math.IsInf(o.OmegaCV, 0) {
		return nil, fmt.Errorf("--omega-cv: %v, want finite ≥ 0", o.OmegaCV)
	}
	b, err := entk.NewBackbone(o.Arch, o.Seed)
	if err != nil {
		return nil, fmt.Errorf("--arch: %w", err)
	}
	pad := entk.PaddedLen(b.NumParams())
	if err := certify.CheckBudget(o.H, o.S, pad); err != nil {
		return nil, fmt.Errorf("--h/--s: %w", err)
	}
	in := b.InDim()
	ws := b.NewWorkspace()
	lx := GaussianInputs(o.Seed, "cairnctl/verify/product-rule/landmarks", m, in)
	x := GaussianInputs(o.Seed, "cairnctl/verify/product-rule/query", 1, in)
	qj := pointJacobian(b, x, ws)
	var pws certify.Workspace
	kappa, v := make([]float64, m), make([]float64, m)
	for l := range kappa {
		t := certify.ComputePairTerms(pointJacobian(b, lx[l*in:(l+1)*in], ws), qj, pad, &pws)
		kappa[l], v[l] = t.Mean(), t.Variance(o.H, o.S).Total
	}
	// Ω_ℓ = ω̄_ℓ·exp(σz − σ²/2), z ~ N(0,1): lognormal with mean ω̄_ℓ and variance
	// τ_ℓ² = ω̄_ℓ²·cv² (σ² = ln(1+cv²)), drawn from its own stream, independent of K.
	or := rng.New(o.Seed, "cairnctl/verify/product-rule/omega-mean")
	omegaMean, tau2 := make([]float64, m), make([]float64, m)
	for l := range omegaMean {
		omegaMean[l] = 0.5 + or.Float64()
		tau2[l] = omegaMean[l] * omegaMean[l] * o.OmegaCV * o.OmegaCV
	}
	z, err := productDraws(b, o, lx, x, omegaMean)
	if err != nil {
		return nil, err
	}
	rep := &ProductReport{Arch: o.Arch, Seed: o.Seed, H: o.H, S: o.S, PaddedP: pad, Landmarks: m,
		Realizations: o.Realizations, OmegaCV: o.OmegaCV,
		OmegaSource: "synthetic: no fit package is used; Ω_ℓ is lognormal with mean ω̄_ℓ ~ U(0.5,1.5) and CV omega_cv, drawn from its own seeded stream independent of the evaluation sketch; the prediction uses the exact κ, V, ω̄, τ² (no plug-in)",
		RatioSE:     math.Sqrt(2 / float64(o.Realizations-1))}
	rep.compare(z, kappa, v, omegaMean, tau2)
	return rep, nil
}

// productDraws returns z[ℓ][r] = K_ℓt·Ω_ℓ of every landmark under realization r's
// evaluation sketch and lognormal displacement.
func productDraws(b entk.Backbone, o ProductOptions, lx, x, omegaMean []float64) ([][]float64, error) {
	m, in := o.Landmarks, b.InDim()
	sig := math.Sqrt(math.Log1p(o.OmegaCV * o.OmegaCV))
	z := make([][]float64, m)
	for l := range z {
		z[l] = make([]float64, o.Realizations)
	}
	for r := 0; r < o.Realizations; r++ {
		sk, err := entk.NewSketch(b, o.H, o.S, o.Seed, rng.Sub("cairnctl/verify/product-rule/eval", r))
		if err != nil {
			return nil, err
		}
		skw := sk.NewWorkspace()
		pq, pl := make([]float64, sk.Dim()), make([]float64, sk.Dim())
		sk.FeaturesTo(pq, x, skw)
		wr := rng.New(o.Seed, rng.Sub("cairnctl/verify/product-rule/omega", r))
		for l := 0; l < m; l++ {
			sk.FeaturesTo(pl, lx[l*in:(l+1)*in], skw)
			k := sketchDot(pq, pl)
			om := omegaMean[l] * math.Exp(sig*wr.NormFloat64()-sig*sig/2)
			z[l][r] = k * om
		}
	}
	return z, nil
}

// compare fills the per-landmark measured and predicted variances, their ratios and the
// shares of eq. product-rule.
func (rep *ProductReport) compare(z [][]float64, kappa, v, omegaMean, tau2 []float64) {
	var ratios []float64
	for l := range z {
		_, got, _ := sampleStats(z[l])
		pv := certify.ProductRule(v[l], kappa[l], omegaMean[l], tau2[l])
		a, w, c := pv.Shares()
		ratio := got / pv.Total
		rep.Ratios = append(rep.Ratios, finite(ratio))
		if finite(ratio) != nil {
			ratios = append(ratios, ratio)
		}
		rep.Shares.Kernel = append(rep.Shares.Kernel, a)
		rep.Shares.Weight = append(rep.Shares.Weight, w)
		rep.Shares.Cross = append(rep.Shares.Cross, c)
		rep.PerLandmark = append(rep.PerLandmark, ProductLandmark{Index: l, Measured: got, Predicted: pv.Total,
			Ratio: finite(ratio), KernelShare: a, WeightShare: w, CrossShare: c,
			Kappa: kappa[l], V: v[l], OmegaMean: omegaMean[l], Tau2: tau2[l]})
	}
	rep.MedianRatio = Median(ratios)
	rep.Shares.MedianKernel = Median(rep.Shares.Kernel)
	rep.Shares.MedianWeight = Median(rep.Shares.Weight)
	rep.Shares.MedianCross = Median(rep.Shares.Cross)
}
