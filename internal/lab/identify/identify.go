package identify

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/verify"
)

// Ranking is one ranking's row of the appendix-D table.
type Ranking struct {
	// PercentileMedian is the median over seeds of π_ω, the fraction of random deletions
	// that do strictly less damage than deleting the ranking's top-K.
	PercentileMedian float64    `json:"percentile_median"`
	Percentiles      []float64  `json:"percentiles"` // per seed
	PValues          []float64  `json:"p_values"`    // per seed, (1 + #{Δ(R_t) ≥ Δ_ω})/(N+1)
	Effects          []float64  `json:"effects"`     // Δ_ω per seed
	TopK             [][]string `json:"topk"`        // landmark ids per seed
	// Coverage is κ_C of the ranking per seed (when labels exist).
	Coverage []certify.Coverage `json:"coverage,omitempty"`
}

// Report is the identifiability table of paper appendix D for one data set.
type Report struct {
	Data          string              `json:"data"`
	K             int                 `json:"k"`
	Random        int                 `json:"random"`
	Seeds         int                 `json:"seeds"`
	Landmarks     int                 `json:"landmarks"`
	Reference     int                 `json:"reference_points"`
	Test          int                 `json:"test_points"`
	Confidence    []float64           `json:"confidence"`     // conf(A, b) per seed
	RandomEffects [][]float64         `json:"random_effects"` // Δ(R_t) per seed, same sets for every ranking
	Rankings      map[string]*Ranking `json:"rankings"`
	// SeedStability is the mean pairwise Jaccard overlap of the displacement ranking's
	// top-K sets across seeds (paper appendix D).
	SeedStability float64            `json:"seed_stability"`
	Seconds       map[string]float64 `json:"seconds"`
}

// Table measures the identifiability table of fm's fits (every fit in fm.Fits, one per
// seed): the deletion effect of each ranking's top-k landmarks against random k-sets
// drawn under seed (the same sets for every ranking and every fit). The report's Seconds
// is fm.Seconds, with "audit" added.
func Table(fm *offline.Model, data string, k, random int, seed uint64) (*Report, error) {
	m := fm.Info.M
	if k >= m {
		return nil, fmt.Errorf("--k %d: must be below the pool size %d", k, m)
	}
	ref, test, labels := fm.Prob.Val.K, fm.Prob.Test.K, fm.Prob.Val.Labels
	nr, _ := ref.Dims()
	nt, _ := test.Dims()
	rep := &Report{
		Data: data, K: k, Random: random, Seeds: len(fm.Fits.Fits), Landmarks: m,
		Reference: nr, Test: nt, Rankings: map[string]*Ranking{}, Seconds: fm.Seconds,
	}
	t0 := time.Now()
	sets := randomSets(rng.New(seed, "cairnctl/audit/random"), m, k, random)
	var topDisp [][]int
	for _, f := range fm.Fits.Fits {
		enc := certify.Encoder{A: f.A, B: f.B}
		full, err := certify.Confidence(enc, ref, test, labels, nil)
		if err != nil {
			return nil, err
		}
		rep.Confidence = append(rep.Confidence, full)
		effects := make([]float64, len(sets))
		for t, s := range sets {
			if effects[t], err = certify.DeletionEffect(full, enc, ref, test, labels, s); err != nil {
				return nil, err
			}
		}
		rep.RandomEffects = append(rep.RandomEffects, effects)
		contrib := make([]float64, m)
		certify.ContributionTo(contrib, enc, fm.Prob.KA)
		loo := make([]float64, m)
		certify.LeaveOneOutTo(loo, enc, fm.Prob.KA)
		lsr := make([]float64, m)
		certify.ReselectionTo(lsr, f.A, f.A0)
		for _, rk := range []struct {
			name   string
			scores []float64
		}{{"displacement", f.Omega}, {"contribution", contrib}, {"leave_one_out", loo}, {"reselection", lsr}} {
			row := rep.Rankings[rk.name]
			if row == nil {
				row = &Ranking{}
				rep.Rankings[rk.name] = row
			}
			top := certify.TopKIndices(rk.scores, k)
			if rk.name == "displacement" {
				topDisp = append(topDisp, top)
			}
			eff, err := certify.DeletionEffect(full, enc, ref, test, labels, top)
			if err != nil {
				return nil, err
			}
			pct, err := certify.Percentile(eff, effects)
			if err != nil {
				return nil, err
			}
			pv, err := certify.PermutationPValue(eff, effects)
			if err != nil {
				return nil, err
			}
			row.Effects = append(row.Effects, eff)
			row.Percentiles = append(row.Percentiles, pct)
			row.PValues = append(row.PValues, pv)
			ids := make([]string, len(top))
			for i, l := range top {
				ids[i] = fm.Info.LandmarkIDs[l]
			}
			row.TopK = append(row.TopK, ids)
			if fm.Info.LandmarkLab != nil {
				cov, err := certify.CoverageNumber(rk.scores, fm.Info.LandmarkLab, fm.Info.Classes)
				if err != nil {
					return nil, err
				}
				row.Coverage = append(row.Coverage, cov)
			}
		}
	}
	for _, row := range rep.Rankings {
		row.PercentileMedian = verify.Median(row.Percentiles)
	}
	if len(topDisp) >= 2 {
		var err error
		if rep.SeedStability, err = certify.SeedStability(topDisp); err != nil {
			return nil, err
		}
	} else {
		rep.SeedStability = 1 // one seed agrees with itself; reported for a complete table
	}
	rep.Seconds["audit"] = time.Since(t0).Seconds()
	return rep, nil
}

// randomSets draws n sets of k distinct landmark indices out of m, each uniform without
// replacement (partial Fisher–Yates), from r.
func randomSets(r interface{ IntN(int) int }, m, k, n int) [][]int {
	sets := make([][]int, n)
	perm := make([]int, m)
	for t := range sets {
		for i := range perm {
			perm[i] = i
		}
		for i := 0; i < k; i++ {
			j := i + r.IntN(m-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		sets[t] = slices.Clone(perm[:k])
	}
	return sets
}
