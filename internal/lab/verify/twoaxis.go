package verify

import (
	"fmt"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// TwoAxisCell is one (h, s) cell of verify two-axis.
type TwoAxisCell struct {
	H         int      `json:"h"`
	S         int      `json:"s"`
	Measured  float64  `json:"measured"`
	Predicted float64  `json:"predicted"`
	Ratio     *float64 `json:"ratio"`
	RatioSE   *float64 `json:"ratio_se"`
	Output    float64  `json:"output_axis"`
	Shared    float64  `json:"parameter_shared"`
	Heads     float64  `json:"parameter_heads"`
	MeanMeas  float64  `json:"mean_measured"`
	Conserv   float64  `json:"conservative_bound"`
}

// TwoAxisReport is the output of cairnctl verify two-axis.
type TwoAxisReport struct {
	Arch    string        `json:"arch"`
	Seed    uint64        `json:"seed"`
	Draws   int           `json:"draws"`
	D       int           `json:"d"`
	P       int           `json:"P"`
	PaddedP int           `json:"padded_P"`
	KStar   float64       `json:"k_star"`
	RTrace  *float64      `json:"r_tr"`
	PhiMean float64       `json:"phi_mean"`
	EPhi    float64       `json:"e_phi"`
	Cells   []TwoAxisCell `json:"cells"`
}

// TwoAxisOptions are the settings of cairnctl verify two-axis, each named by its flag.
type TwoAxisOptions struct {
	Arch  string // --arch: backbone spec
	Seed  uint64 // --seed: seed of the backbone, the inputs and the sketches
	Draws int    // --draws: independent sketches per cell
	H, S  []int  // --h head counts, --s SRHT widths (0: no sketch)
}

// TwoAxis measures Var K_{h,s}(x, y) for one fixed pair over independent entk sketches
// (heads and SRHT redrawn per draw) and compares it with Prop. two-axis evaluated with
// exact Jacobian terms, for every h of o.H and s of o.S.
func TwoAxis(o TwoAxisOptions) (*TwoAxisReport, error) {
	if o.Draws < 2 {
		return nil, fmt.Errorf("--draws: %d, want ≥ 2", o.Draws)
	}
	b, err := entk.NewBackbone(o.Arch, o.Seed)
	if err != nil {
		return nil, fmt.Errorf("--arch: %w", err)
	}
	pad := entk.PaddedLen(b.NumParams())
	for _, h := range o.H {
		for _, s := range o.S {
			if err := certify.CheckBudget(h, s, pad); err != nil {
				return nil, fmt.Errorf("--h %d --s %d: %w", h, s, err)
			}
		}
	}
	in := b.InDim()
	xy := GaussianInputs(o.Seed, "cairnctl/verify/two-axis/inputs", 2, in)
	x, y := xy[:in], xy[in:]
	ws := b.NewWorkspace()
	terms := certify.ComputePairTerms(pointJacobian(b, x, ws), pointJacobian(b, y, ws), pad, &certify.Workspace{})
	rep := &TwoAxisReport{Arch: o.Arch, Seed: o.Seed, Draws: o.Draws, D: b.OutDim(), P: b.NumParams(),
		PaddedP: pad, KStar: terms.Mean(), RTrace: finite(terms.RelTrace()),
		PhiMean: terms.PhiMean, EPhi: terms.EPhi}
	ks := make([]float64, o.Draws)
	for _, h := range o.H {
		for _, s := range o.S {
			for i := range ks {
				name := fmt.Sprintf("cairnctl/verify/two-axis/h%d/s%d/%d", h, s, i)
				sk, err := entk.NewSketch(b, h, s, o.Seed, name)
				if err != nil {
					return nil, err
				}
				skw := sk.NewWorkspace()
				px, py := make([]float64, sk.Dim()), make([]float64, sk.Dim())
				sk.FeaturesTo(px, x, skw)
				sk.FeaturesTo(py, y, skw)
				ks[i] = sketchDot(px, py)
			}
			mean, got, se := sampleStats(ks)
			v := terms.Variance(h, s)
			rep.Cells = append(rep.Cells, TwoAxisCell{
				H: h, S: s, Measured: got, Predicted: v.Total,
				Ratio: finite(got / v.Total), RatioSE: finite(se / v.Total),
				Output: v.Output, Shared: v.Shared, Heads: v.Heads, MeanMeas: mean,
				Conserv: terms.Conservative(h, s),
			})
		}
	}
	return rep, nil
}
