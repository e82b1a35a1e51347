package identify

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/lab/verify"
)

// Top1Report is the per-query form of the deletion test (the daemon's audit, paper
// appendix D, with one query's top-1 landmark as the deleted set) for several rankings
// of one fitted model at once. The deletion effect of a single landmark on the audit
// set's 50-NN confidence does not depend on the query, so every landmark's effect is
// computed once, and a query's percentile is the share of the other landmarks whose
// removal does strictly less damage than removing its top-1 (certify.Percentile against
// all M − 1 of them, where the daemon draws 30).
type Top1Report struct {
	Data       string  `json:"data"`
	Landmarks  int     `json:"landmarks"`
	Audit      int     `json:"audit_points"` // the test split's first half
	Queries    int     `json:"queries"`      // its second half
	Confidence float64 `json:"confidence"`   // the audit set's confidence, nothing removed
	// NegativeEffects counts the landmarks whose removal raises the confidence.
	NegativeEffects int `json:"negative_effects"`
	// The Spearman correlation of the landmarks' effects with their self-similarity
	// K(ℓ, ℓ), their column mass Σ_i |K(x_i, ℓ)| over the training points, and the norm
	// of their fitted coefficients ‖A_ℓ‖.
	EffectVsSelf float64   `json:"effect_vs_self"`
	EffectVsMass float64   `json:"effect_vs_mass"`
	EffectVsCoef float64   `json:"effect_vs_coef"`
	Rankings     []Top1Row `json:"rankings"`
}

// Top1Row is one ranking's line of a Top1Report.
type Top1Row struct {
	Ranking string `json:"ranking"`
	FitFree bool   `json:"fit_free"`
	// The median, mean and quartiles of the queries' top-1 percentiles.
	Median float64 `json:"median_percentile"`
	Mean   float64 `json:"mean_percentile"`
	Q25    float64 `json:"q25"`
	Q75    float64 `json:"q75"`
	// SameClass is the share of queries whose top-1 landmark carries the query's label.
	SameClass float64 `json:"same_class"`
	// Distinct counts the landmarks that are some query's top-1: few means a handful of
	// hub landmarks answer for most queries.
	Distinct int `json:"distinct_top1"`
}

// top1Ranking scores landmark l for the query with kernel row row and label label.
type top1Ranking struct {
	name    string
	fitFree bool
	score   func(row []float64, label, l int) float64
}

// Top1Study measures the per-query deletion test on fm's first fit, in the units of the
// raw sketched kernel (fm.Prob). The rankings are the exact-similarity ranking entk,
// k(x_t, x_ℓ), and four fit-free variations of it: cosine (divided by √K(ℓ,ℓ)),
// x_self (times √K(ℓ,ℓ)), x_mass (times the column mass) and own_class (entk among the
// landmarks of the query's label only; the true label stands in for the predicted
// class); and, fit-dependent, x_coef (times ‖A_ℓ‖). It needs labels and at least two
// test rows.
func Top1Study(fm *offline.Model, data string) (*Top1Report, error) {
	p := fm.Prob
	if p.Test.K == nil || p.Val.K == nil || p.Val.Labels == nil || p.Test.Labels == nil || fm.Info.LandmarkLab == nil {
		return nil, fmt.Errorf("the top-1 study needs labelled validation and test splits and labelled landmarks")
	}
	nt, m := p.Test.K.Dims()
	if nt < 2 || m < 2 {
		return nil, fmt.Errorf("the top-1 study needs at least 2 test rows and 2 landmarks, have %d and %d", nt, m)
	}
	f := fm.Fits.Fits[0]
	enc := certify.Encoder{A: f.A, B: f.B}
	half := nt / 2
	audit := mat.DenseCopyOf(p.Test.K.Slice(0, half, 0, m))
	rep := &Top1Report{Data: data, Landmarks: m, Audit: half, Queries: nt - half}
	var err error
	if rep.Confidence, err = certify.Confidence(enc, p.Val.K, audit, p.Val.Labels, nil); err != nil {
		return nil, err
	}
	effects := make([]float64, m)
	for l := range effects {
		if effects[l], err = certify.DeletionEffect(rep.Confidence, enc, p.Val.K, audit, p.Val.Labels, []int{l}); err != nil {
			return nil, err
		}
		if effects[l] < 0 {
			rep.NegativeEffects++
		}
	}
	self, mass, coef := landmarkWeights(p.Kmm, p.KA, f.A)
	rep.EffectVsSelf = validate.Spearman(effects, self)
	rep.EffectVsMass = validate.Spearman(effects, mass)
	rep.EffectVsCoef = validate.Spearman(effects, coef)
	lab := fm.Info.LandmarkLab
	rankings := []top1Ranking{
		{"entk", true, func(r []float64, _, l int) float64 { return r[l] }},
		{"entk_cosine", true, func(r []float64, _, l int) float64 { return r[l] / math.Sqrt(self[l]) }},
		{"entk_x_self", true, func(r []float64, _, l int) float64 { return r[l] * math.Sqrt(self[l]) }},
		{"entk_x_mass", true, func(r []float64, _, l int) float64 { return r[l] * mass[l] }},
		{"entk_own_class", true, func(r []float64, c, l int) float64 {
			if lab[l] != c {
				return math.Inf(-1)
			}
			return r[l]
		}},
		{"entk_x_coef", false, func(r []float64, _, l int) float64 { return r[l] * coef[l] }},
	}
	queries := mat.DenseCopyOf(p.Test.K.Slice(half, nt, 0, m))
	for _, rk := range rankings {
		row, err := top1Row(rk, effects, queries, p.Test.Labels[half:], lab)
		if err != nil {
			return nil, err
		}
		rep.Rankings = append(rep.Rankings, row)
	}
	return rep, nil
}

// landmarkWeights returns each landmark's self-similarity K(ℓ,ℓ) (the diagonal of kmm),
// its column mass Σ_i |ka[i,ℓ]| and its coefficient norm ‖a[ℓ,:]‖.
func landmarkWeights(kmm, ka, a *mat.Dense) (self, mass, coef []float64) {
	m, _ := kmm.Dims()
	n, _ := ka.Dims()
	self, mass, coef = make([]float64, m), make([]float64, m), make([]float64, m)
	for l := range m {
		self[l] = kmm.At(l, l)
		coef[l] = mat.Norm(a.RowView(l), 2)
	}
	for i := range n {
		for l, v := range ka.RawRowView(i) {
			mass[l] += math.Abs(v)
		}
	}
	return self, mass, coef
}

// top1Row ranks the landmarks for every query row of queries (labels qlab) by rk, takes
// the top-1 (the highest score, ties to the lower index; a query whose scores are all
// −∞ takes landmark 0), and summarizes the percentiles of the top-1s' effects among the
// other landmarks' effects.
func top1Row(rk top1Ranking, effects []float64, queries *mat.Dense, qlab, llab []int) (Top1Row, error) {
	nq, m := queries.Dims()
	row := Top1Row{Ranking: rk.name, FitFree: rk.fitFree}
	pct := make([]float64, nq)
	others := make([]float64, 0, m-1)
	seen := map[int]bool{}
	same := 0
	for q := range nq {
		r := queries.RawRowView(q)
		best, top := math.Inf(-1), 0
		for l := range m {
			if s := rk.score(r, qlab[q], l); s > best {
				best, top = s, l
			}
		}
		others = others[:0]
		for l, e := range effects {
			if l != top {
				others = append(others, e)
			}
		}
		var err error
		if pct[q], err = certify.Percentile(effects[top], others); err != nil {
			return row, fmt.Errorf("ranking %s, query %d: %w", rk.name, q, err)
		}
		seen[top] = true
		if llab[top] == qlab[q] {
			same++
		}
	}
	row.Median = verify.Median(pct)
	sort.Float64s(pct)
	for _, v := range pct {
		row.Mean += v / float64(nq)
	}
	row.Q25, row.Q75 = pct[(nq-1)/4], pct[3*(nq-1)/4]
	row.SameClass = float64(same) / float64(nq)
	row.Distinct = len(seen)
	return row, nil
}
