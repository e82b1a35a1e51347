package verify

import (
	"fmt"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// SRHTCase is one input pair (u, v) of verify srht: the variance of ⟨Su, Sv⟩ measured
// over the draws beside Thm. srht-exact's prediction and the JL rate's.
type SRHTCase struct {
	Name        string   `json:"name"`
	Measured    float64  `json:"measured"`
	Predicted   float64  `json:"predicted"`
	Ratio       *float64 `json:"ratio"`
	RatioSE     *float64 `json:"ratio_se"`
	JLPredicted float64  `json:"jl_predicted"`
	JLRatio     *float64 `json:"jl_ratio"`
	MeanMeas    float64  `json:"mean_measured"`
	InnerProd   float64  `json:"inner_product"`
	Phi         float64  `json:"phi"`
}

// SRHTReport is the output of cairnctl verify srht.
type SRHTReport struct {
	P       int        `json:"P"`
	PaddedP int        `json:"padded_P"`
	S       int        `json:"s"`
	Draws   int        `json:"draws"`
	Seed    uint64     `json:"seed"`
	Factor  float64    `json:"srht_factor"`
	JLRate  string     `json:"jl_rate"`
	Ratios  string     `json:"ratio_definition"`
	Cases   []SRHTCase `json:"cases"`
}

// SRHTOptions are the settings of cairnctl verify srht, each named by its flag.
type SRHTOptions struct {
	P     int    // --P: vector length (zero-padded to a power of two)
	S     int    // --s: SRHT width, 1 ≤ s ≤ padded P
	Draws int    // --draws: independent SRHT draws
	Seed  uint64 // --seed: seed of the vectors and the draws
}

// SRHTCaseNames are the input pairs of SRHT, in its order.
var SRHTCaseNames = []string{
	"dense-gaussian", "u=v gaussian", "spiky", "u=v spiky", "u=v two spikes", "power-law", "e_j, ones", "u=v=e_j",
}

// srhtPair is one named input pair of SRHT.
type srhtPair struct {
	name string
	u, v []float64
}

// SRHT measures Var⟨Su, Sv⟩ over o.Draws independent draws of entk's SRHT for each pair
// of SRHTCaseNames and compares it with Thm. srht-exact and with the JL rate.
func SRHT(o SRHTOptions) (*SRHTReport, error) {
	if o.P < 2 {
		return nil, fmt.Errorf("--P: %d, want ≥ 2", o.P)
	}
	pad := entk.PaddedLen(o.P)
	if o.S < 1 || o.S > pad {
		return nil, fmt.Errorf("--s: %d, want 1 ≤ s ≤ %d (padded P)", o.S, pad)
	}
	if o.Draws < 2 {
		return nil, fmt.Errorf("--draws: %d, want ≥ 2", o.Draws)
	}
	cases := srhtPairs(o.P, o.Seed)
	xs, err := srhtDraws(o, cases)
	if err != nil {
		return nil, err
	}
	rep := &SRHTReport{P: o.P, PaddedP: pad, S: o.S, Draws: o.Draws, Seed: o.Seed,
		Factor: certify.SRHTFactor(pad, o.S),
		Ratios: "ratio = measured/predicted, jl_ratio = measured/jl_predicted (below 1: JL over-predicts); ratio_se from the empirical fourth moment",
		JLRate: "(‖u‖²‖v‖² + ⟨u,v⟩²)/s, the variance of a dense Gaussian JL sketch; the paper names the JL rate without a formula"}
	for i, c := range cases {
		mean, got, se := sampleStats(xs[i])
		phi := certify.PhiRankOne(c.v, c.u)
		pred := certify.SRHTVariance(phi, pad, o.S)
		jl := certify.JLVariance(c.u, c.v, o.S)
		rep.Cases = append(rep.Cases, SRHTCase{
			Name: c.name, Measured: got, Predicted: pred,
			Ratio: finite(got / pred), RatioSE: finite(se / pred),
			JLPredicted: jl, JLRatio: finite(got / jl),
			MeanMeas: mean, InnerProd: sketchDot(c.u, c.v), Phi: phi,
		})
	}
	return rep, nil
}

// srhtPairs returns the input pairs of length n, named as SRHTCaseNames, drawn in order
// from the stream "cairnctl/verify/srht/inputs" under seed.
func srhtPairs(n int, seed uint64) []srhtPair {
	r := rng.New(seed, "cairnctl/verify/srht/inputs")
	gauss := func() []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	// spiky: a small dense floor plus a few large coordinates, the coordinate-concentrated
	// inputs where the diagonal correction of Φ matters most.
	spiky := func(idx ...int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = 0.02 * r.NormFloat64()
		}
		for _, i := range idx {
			x[i%n] = 1 + r.Float64()
		}
		return x
	}
	decay := func() []float64 { // power-law coordinates, |x_i| ∝ 1/(i+1)
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64() / float64(i+1)
		}
		return x
	}
	g := gauss()
	sp := spiky(1, 5, 9)
	two := make([]float64, n)
	two[0], two[n/2] = 1, 1
	ej := make([]float64, n)
	ej[n/3] = 1
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	return []srhtPair{
		{"dense-gaussian", gauss(), gauss()},
		{"u=v gaussian", g, g},
		{"spiky", spiky(1, 5, 9), spiky(1, 5, 13)},
		{"u=v spiky", sp, sp},
		{"u=v two spikes", two, two},
		{"power-law", decay(), decay()},
		{"e_j, ones", ej, ones},
		{"u=v=e_j", ej, ej},
	}
}

// srhtDraws returns ⟨Su, Sv⟩ of every pair (xs[pair][draw]) under o.Draws draws named
// "cairnctl/verify/srht/draw/<d>".
func srhtDraws(o SRHTOptions, cases []srhtPair) ([][]float64, error) {
	pad := entk.PaddedLen(o.P)
	xs := make([][]float64, len(cases))
	for i := range xs {
		xs[i] = make([]float64, o.Draws)
	}
	su, sv := make([]float64, o.S), make([]float64, o.S)
	work := make([]float64, pad)
	for d := 0; d < o.Draws; d++ {
		t, err := entk.NewSRHT(o.P, o.S, rng.New(o.Seed, rng.Sub("cairnctl/verify/srht/draw", d)))
		if err != nil {
			return nil, err
		}
		for i, c := range cases {
			t.ApplyTo(su, c.u, work)
			t.ApplyTo(sv, c.v, work)
			xs[i][d] = sketchDot(su, sv)
		}
	}
	return xs, nil
}
