package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// OmegaSpec is how verify certificate gets the landmarks' ω (--omega and its flags).
type OmegaSpec struct {
	From  string  // --omega: "real", "halving" or a file name
	Data  string  // --omega-data: data set of the real fit
	N     int     // --omega-n: training rows of the real fit
	Ratio float64 // --omega-ratio: the halving ratio
}

// OmegaValues are the m values of ω verify certificate ranks with, where they came
// from, and for a real fit the recipe.
type OmegaValues struct {
	Values []float64
	Source string
	Fit    string
}

// CertificateOmega returns m values of ω by spec:
//
//   - real: ω of a model fitted by cairnctl explain's recipe (offline.FitModel with every
//     offline.DefaultModelOptions value: the data set's trained backbone, h = 4, s = 1024, SimCLR from
//     PCI, 20 epochs) on the first spec.N training rows of spec.Data, with ⌈m/2⌉
//     landmarks per view so that the pool holds m (m+1 for odd m, the last dropped), in
//     raw kernel units (ω of the first fit times kernel_scale, as explain and the daemon
//     report it), in model row order;
//   - halving: synthetic, ratio^{-rank}·U(0.9, 1.1) over a seeded random ranking (the
//     command's former default);
//   - otherwise a file (readOmegaFile), of which the first m values are used.
func CertificateOmega(ctx context.Context, spec OmegaSpec, m int, seed uint64) (OmegaValues, error) {
	switch spec.From {
	case "halving":
		if !(spec.Ratio >= 1) || math.IsInf(spec.Ratio, 0) {
			return OmegaValues{}, fmt.Errorf("--omega-ratio: %v, want finite ≥ 1", spec.Ratio)
		}
		omega := make([]float64, m)
		or := rng.New(seed, "cairnctl/verify/certificate/omega")
		for rank, l := range or.Perm(m) {
			omega[l] = math.Pow(spec.Ratio, -float64(rank)) * (0.9 + 0.2*or.Float64())
		}
		return OmegaValues{Values: omega, Source: "halving"}, nil
	case "real":
		if spec.N < 2 {
			return OmegaValues{}, fmt.Errorf("--omega-n: %d, want ≥ 2", spec.N)
		}
		args := []string{"--data", spec.Data, "--n", strconv.Itoa(spec.N), "--m", strconv.Itoa((m + 1) / 2),
			"--seed", strconv.FormatUint(seed, 10)}
		mo := offline.DefaultModelOptions()
		mo.Pipeline.Data, mo.Pipeline.N, mo.Pipeline.M, mo.Pipeline.Seed = spec.Data, spec.N, (m+1)/2, seed
		fm, err := offline.FitModel(ctx, &mo, 1, 0)
		if err != nil {
			return OmegaValues{}, fmt.Errorf("--omega real (cairnctl explain %s): %w", strings.Join(args, " "), err)
		}
		omega := fm.ExplainInput(&mo.Pipeline).Omega
		if len(omega) < m {
			return OmegaValues{}, fmt.Errorf("--omega real: the fit selected %d landmarks, want %d (raise --omega-n)", len(omega), m)
		}
		return OmegaValues{Values: omega[:m], Source: "real", Fit: "cairnctl explain " + strings.Join(args, " ")}, nil
	}
	omega, err := readOmegaFile(spec.From)
	if err != nil {
		return OmegaValues{}, fmt.Errorf("--omega %s: %w", spec.From, err)
	}
	if len(omega) < m {
		return OmegaValues{}, fmt.Errorf("--omega %s: %d values, want at least m = %d", spec.From, len(omega), m)
	}
	return OmegaValues{Values: omega[:m], Source: "file:" + spec.From}, nil
}

// readOmegaFile reads ω values from path: a JSON array of numbers, a JSON object with
// landmarks[].omega (cairnctl model export, GET /model) or omega.mean (cairnctl fit), or
// plain numbers separated by white space or commas. Every value must be positive and
// finite.
func readOmegaFile(path string) ([]float64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []float64
	text := strings.TrimSpace(string(raw))
	switch {
	case strings.HasPrefix(text, "["):
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("a JSON array of numbers: %w", err)
		}
	case strings.HasPrefix(text, "{"):
		var obj struct {
			Landmarks []struct {
				Omega *float64 `json:"omega"`
			} `json:"landmarks"`
			Omega struct {
				Mean []float64 `json:"mean"`
			} `json:"omega"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		for i, l := range obj.Landmarks {
			if l.Omega == nil {
				return nil, fmt.Errorf("landmarks[%d] has no omega", i)
			}
			out = append(out, *l.Omega)
		}
		if out == nil {
			out = obj.Omega.Mean
		}
		if out == nil {
			return nil, errors.New("a JSON object without landmarks[].omega or omega.mean")
		}
	default:
		for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("value %q: %w", f, err)
			}
			out = append(out, v)
		}
	}
	for i, v := range out {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("value %d is %v, want positive and finite", i, v)
		}
	}
	return out, nil
}
