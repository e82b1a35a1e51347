package certify

import (
	"fmt"
	"math"
)

// Verdict is the outcome of one attribution (paper appendix "Output"; docs/architecture.md,
// "Certificates and verdicts").
type Verdict string

const (
	// Certified: the top-K intervals separate at the chosen δ (eq. observed-separation).
	Certified Verdict = "certified"
	// Uncertified: they do not, and nothing says a larger kernel budget could not help.
	Uncertified Verdict = "uncertified"
	// FitLimited: they do not, and the coefficient-fit floor intervals already overlap at
	// the cut (eq. floor-overlap), so no evaluation budget can certify the population
	// ranking (Thm. fit-floor).
	FitLimited Verdict = "fit_limited"
	// Unstable: the intervals separate, so the top-K is exactly the served fit's, but a
	// refit with another seed is expected to change it (the answer's stability is below
	// the target or unknown): the arithmetic holds, the answer does not.
	Unstable Verdict = "unstable"
)

// Variance models a certificate can use for V̄_ℓt.
const (
	VarianceExact        = "exact"        // Prop. two-axis with exact Φ terms
	VarianceConservative = "conservative" // eq. conservative-variance from exact diagonals
	// VarianceExactKernel: no sketch. The kernel row is the exact eNTK k*(x_ℓ, x_t) up to
	// floating-point rounding, the radii are that rounding's bound, and the certificate
	// holds with certainty (δ is not spent; CertifyBoundedTo).
	VarianceExactKernel = "exact_kernel"
)

// Allocation is the split of the failure probability δ (Thm. topk): queries that share one
// evaluation draw and are audited together split δ equally (the paper's "further split"
// for simultaneous audits), and each query splits its share equally over its m landmarks,
// δ_ℓ = δ/(queries·m), so Σ over every landmark of every query is δ.
type Allocation struct {
	Delta       float64 `json:"delta"`
	Queries     int     `json:"queries"`
	Landmarks   int     `json:"landmarks"`
	PerQuery    float64 `json:"per_query"`
	PerLandmark float64 `json:"per_landmark"`
	Scheme      string  `json:"scheme"`
}

// UniformAllocation returns δ_ℓ = δ/(queries·m). It returns an error wrapping ErrDelta
// unless 0 < δ < 1, or ErrTopK/ErrValue for m < 2 or queries < 1.
func UniformAllocation(delta float64, m, queries int) (Allocation, error) {
	if !(delta > 0 && delta < 1) {
		return Allocation{}, fmt.Errorf("%w: delta = %v, want 0 < δ < 1", ErrDelta, delta)
	}
	if m < 2 {
		return Allocation{}, fmt.Errorf("%w: landmarks m = %d, want ≥ 2", ErrTopK, m)
	}
	if queries < 1 {
		return Allocation{}, fmt.Errorf("%w: queries = %d, want ≥ 1", ErrValue, queries)
	}
	q := delta / float64(queries)
	return Allocation{Delta: delta, Queries: queries, Landmarks: m, PerQuery: q,
		PerLandmark: q / float64(m), Scheme: "uniform"}, nil
}

// Budget is the approximation budget an answer was computed under.
type Budget struct {
	H       int `json:"h"`        // Gaussian heads
	S       int `json:"s"`        // SRHT width (0: no sketch)
	M       int `json:"m"`        // landmarks ranked for this query
	Pool    int `json:"pool"`     // landmark pool size M
	PaddedP int `json:"padded_p"` // SRHT length P
}

// Residual is the pool's residual certificate (Prop. greedy): tr R of unexplained kernel
// mass; Exact is false when it is a valid upper bound between quiescent points. TraceR
// and TraceK are those of the kernel of the stored features (fit-draw ψ rounded to
// float32); UnroundedBound, when set (a model's certificate, from its greedy factor),
// bounds tr R of the same landmarks under the unrounded features (RoundingBound).
type Residual struct {
	TraceR         float64 `json:"trace_r"`
	TraceK         float64 `json:"trace_k"`
	Exact          bool    `json:"exact"`
	UnroundedBound float64 `json:"trace_r_unrounded_bound,omitempty"`
}

// Entry is one ranked landmark: its index in the kernel row, an optional id the caller
// fills in, the score Î_ℓt and the radius ε_ℓ. Cosine, when the caller has exact rows,
// is k*(x_t, x_ℓ)/√(k*(x_t, x_t)·k*(x_ℓ, x_ℓ)) in [−1, 1]: how alike the landmark is to
// the query whatever the two norms, where the scores grow with the landmark's norm; 0
// (and left out of the JSON) without exact rows.
type Entry struct {
	Index  int     `json:"index"`
	ID     string  `json:"id,omitempty"`
	Score  float64 `json:"score"`
	Radius float64 `json:"radius"`
	Cosine float64 `json:"cosine,omitempty"`
}

// Certificate is everything an attribution answer carries (docs/architecture.md,
// "Certificates and verdicts"), in a form the daemon emits unchanged. CertifyTo fills K,
// TopK, the separation fields, Verdict and Allocation; the caller sets the provenance
// fields (Budget, VarianceModel, EvalSeed, EvalDraw, Residual, ModelVersion) and, after a
// repeated-fit analysis, Floor and Verdict through ApplyFloor.
type Certificate struct {
	K    int     `json:"k"`
	TopK []Entry `json:"top_k"` // by score, highest first; ties by lower index
	// LowerTop is min over the top-K of Î−ε; UpperRest is max below the cut of Î+ε;
	// Separation = LowerTop − UpperRest, certified iff > 0 (eq. observed-separation).
	LowerTop   float64 `json:"lower_top"`
	UpperRest  float64 `json:"upper_rest"`
	Separation float64 `json:"separation"`
	// RunnerUp is the best landmark below the cut (the (K+1)-th by score). The interval
	// that sets UpperRest may belong to another landmark with a wider radius.
	RunnerUp Entry   `json:"runner_up"`
	Verdict  Verdict `json:"verdict"`

	Budget        Budget     `json:"budget"`
	Allocation    Allocation `json:"allocation"`
	VarianceModel string     `json:"variance_model"`
	EvalSeed      uint64     `json:"eval_seed"`
	EvalDraw      string     `json:"eval_draw,omitempty"`
	Residual      Residual   `json:"residual"`
	ModelVersion  uint64     `json:"model_version"`
	Floor         *Floor     `json:"fit_floor,omitempty"`

	// Ranking names the scores (certify's doc "Rankings"). Stability is the expected
	// top-K Jaccard under a refit with another seed (nil: not known) and Stable whether it
	// meets the caller's target; a separating certificate that is not Stable has verdict
	// Unstable. The caller sets all three (the ranking code knows the fits).
	Ranking   Ranking  `json:"ranking,omitempty"`
	Stable    bool     `json:"stable"`
	Stability *float64 `json:"stability"`
	// ResidualFraction is the query's residual against the served landmarks over its
	// own kernel diagonal, in [0, 1]; nil when not computed.
	ResidualFraction *float64 `json:"residual_fraction,omitempty"`
}

// ScoresTo writes the influence scores Î_ℓt = K^eval(x_ℓ, x_t)·ω_ℓ (eq. conditional-score)
// into dst: dst[ℓ] = kernel[ℓ]*omega[ℓ]. It panics on unequal lengths.
func ScoresTo(dst, kernel, omega []float64) {
	if len(dst) != len(kernel) || len(kernel) != len(omega) {
		panic(fmt.Sprintf("certify: ScoresTo lengths dst %d, kernel %d, omega %d", len(dst), len(kernel), len(omega)))
	}
	for l, k := range kernel {
		dst[l] = k * omega[l]
	}
}

// ConservativeRowTo writes eq. conservative-variance for every landmark of one query into
// dst: dst[ℓ] = ConservativeVariance(diag[ℓ], kqq, h, s, p), with diag the exact landmark
// diagonals k*(x_ℓ,x_ℓ) and kqq = k*(x_t,x_t).
func ConservativeRowTo(dst, diag []float64, kqq float64, h, s, p int) {
	if len(dst) != len(diag) {
		panic(fmt.Sprintf("certify: ConservativeRowTo lengths dst %d, diag %d", len(dst), len(diag)))
	}
	c := ConservativeVariance(1, 1, h, s, p)
	for l, kl := range diag {
		dst[l] = c * kl * kqq
	}
}

// Ranker computes certificates. It holds scratch sized by the largest m seen, so repeated
// calls allocate nothing; one Ranker per goroutine. The zero value is ready.
type Ranker struct {
	scores, radii []float64
	inTop         []bool
	top           []int
}

func (r *Ranker) grow(m int) {
	if cap(r.scores) < m {
		r.scores, r.radii, r.inTop = make([]float64, m), make([]float64, m), make([]bool, m)
	}
	r.scores, r.radii, r.inTop = r.scores[:m], r.radii[:m], r.inTop[:m]
}

// before reports whether landmark a ranks before b: higher score first, ties by the lower
// index (the fixed tie-breaking rule of Thm. fit-floor, also used for T̂).
func before(scores []float64, a, b int) bool {
	return scores[a] > scores[b] || (scores[a] == scores[b] && a < b)
}

// topKTo writes the indices of the k best entries of scores into top (len k), best first,
// by insertion into a sorted prefix: O(m·k), which beats a heap for the k ≤ 50 of an
// attribution and allocates nothing.
func topKTo(top []int, scores []float64) {
	k := len(top)
	n := 0
	for l := range scores {
		if n == k && !before(scores, l, top[k-1]) {
			continue
		}
		i := n
		if n < k {
			n++
		} else {
			i = k - 1
		}
		for i > 0 && before(scores, l, top[i-1]) {
			top[i] = top[i-1]
			i--
		}
		top[i] = l
	}
}

// CertifyTo fills c with the fixed-fit top-K certificate of Thm. topk for one query:
//
//	Î_ℓ = kernel[ℓ]·ω_ℓ,   ε_ℓ = ω_ℓ·sqrt(V̄_ℓ/δ_ℓ),   T̂ = Top_K(Î),
//	certified  ⇔  min_{ℓ∈T̂}(Î_ℓ − ε_ℓ) > max_{j∉T̂}(Î_j + ε_j)   (eq. observed-separation)
//
// with δ_ℓ = alloc.PerLandmark. kernel is the evaluation row K^eval_{h,s}(x_ℓ, x_t) drawn
// independently of the fit, omega the fixed weights ω_ℓ ≥ 0, varBound valid upper bounds
// V̄_ℓt ≥ Var K^eval_ℓt fixed before the draw (Prop. two-axis or eq. conservative-variance).
// Then an incorrect certificate is issued with probability ≤ δ given the fit, with no
// independence between landmarks needed; a plug-in sample variance voids this.
//
// Inputs are not modified; c's provenance fields are left as they are and its TopK slice
// is reused. It panics on unequal lengths and returns an error wrapping ErrTopK unless
// 1 ≤ k < m, ErrDelta for a non-positive δ_ℓ, and ErrValue for a non-finite score or a
// negative or non-finite weight or bound (naming the landmark).
func (r *Ranker) CertifyTo(c *Certificate, kernel, omega, varBound []float64, k int, alloc Allocation) error {
	m := len(kernel)
	if len(omega) != m || len(varBound) != m {
		panic(fmt.Sprintf("certify: CertifyTo lengths kernel %d, omega %d, varBound %d", m, len(omega), len(varBound)))
	}
	if k < 1 || k >= m {
		return fmt.Errorf("%w: K = %d for m = %d landmarks, want 1 ≤ K < m", ErrTopK, k, m)
	}
	dl := alloc.PerLandmark
	if !(dl > 0) || math.IsInf(dl, 0) {
		return fmt.Errorf("%w: per-landmark δ_ℓ = %v, want > 0", ErrDelta, dl)
	}
	r.grow(m)
	inv := 1 / math.Sqrt(dl)
	for l, kl := range kernel {
		w, v := omega[l], varBound[l]
		if err := checkEntry(l, kl, w, "varBound", v); err != nil {
			return err
		}
		r.scores[l] = kl * w
		r.radii[l] = w * math.Sqrt(v) * inv
	}
	r.rank(c, k)
	c.Allocation = alloc
	return nil
}

// CertifyBoundedTo fills c with the deterministic top-K certificate of a kernel row known
// to within a bound: |kernel[ℓ] − k*(x_ℓ, x_t)| ≤ kernelErr[ℓ] (an exact eNTK row and
// its rounding bound, entk.ExactRowError). Then Î_ℓ = kernel[ℓ]·ω_ℓ and
//
//	ε_ℓ = ω_ℓ·kernelErr[ℓ]·(1 + 4u) + 4u·|Î_ℓ|,   u = 2^-53,
//
// covers the kernel's error, the rounding of the product and of the interval ends, so
// certified (eq. observed-separation with these radii) means the top-K set equals the
// exact-kernel top-K of the served fit, with no probability spent: c.Allocation records
// δ with Scheme "deterministic" and PerLandmark 0. Errors and panics as CertifyTo.
func (r *Ranker) CertifyBoundedTo(c *Certificate, kernel, omega, kernelErr []float64, k int, delta float64) error {
	m := len(kernel)
	if len(omega) != m || len(kernelErr) != m {
		panic(fmt.Sprintf("certify: CertifyBoundedTo lengths kernel %d, omega %d, kernelErr %d", m, len(omega), len(kernelErr)))
	}
	if k < 1 || k >= m {
		return fmt.Errorf("%w: K = %d for m = %d landmarks, want 1 ≤ K < m", ErrTopK, k, m)
	}
	r.grow(m)
	const u = 0x1p-53
	for l, kl := range kernel {
		w, e := omega[l], kernelErr[l]
		if err := checkEntry(l, kl, w, "kernelErr", e); err != nil {
			return err
		}
		sc := kl * w
		r.scores[l] = sc
		r.radii[l] = w*e*(1+4*u) + 4*u*math.Abs(sc)
	}
	r.rank(c, k)
	c.Allocation = Allocation{Delta: delta, Queries: 1, Landmarks: m, Scheme: "deterministic"}
	return nil
}

// checkEntry validates landmark l's kernel entry (finite), weight and bound (finite, ≥ 0),
// naming the offending input.
func checkEntry(l int, kl, w float64, boundName string, b float64) error {
	switch {
	case math.IsNaN(kl) || math.IsInf(kl, 0):
		return fmt.Errorf("%w: kernel[%d] = %v", ErrValue, l, kl)
	case !(w >= 0) || math.IsInf(w, 0):
		return fmt.Errorf("%w: omega[%d] = %v, want finite ≥ 0", ErrValue, l, w)
	case !(b >= 0) || math.IsInf(b, 0):
		return fmt.Errorf("%w: %s[%d] = %v, want finite ≥ 0", ErrValue, boundName, l, b)
	}
	return nil
}

// rank finishes a certificate from r.scores and r.radii (filled for m landmarks): T̂, the
// separation, the runner-up and the verdict; it clears c.Floor.
func (r *Ranker) rank(c *Certificate, k int) {
	if cap(r.top) < k {
		r.top = make([]int, k)
	}
	r.top = r.top[:k]
	topKTo(r.top, r.scores)

	c.K = k
	c.TopK = c.TopK[:0]
	lower := math.Inf(1)
	for _, l := range r.top {
		r.inTop[l] = true
		c.TopK = append(c.TopK, Entry{Index: l, Score: r.scores[l], Radius: r.radii[l]})
		if lo := r.scores[l] - r.radii[l]; lo < lower { // inputs are validated finite: no math.Min NaN path
			lower = lo
		}
	}
	upper := math.Inf(-1)
	runner := -1
	for l := range r.scores {
		if r.inTop[l] {
			continue
		}
		if hi := r.scores[l] + r.radii[l]; hi > upper {
			upper = hi
		}
		if runner < 0 || before(r.scores, l, runner) {
			runner = l
		}
	}
	for _, l := range r.top {
		r.inTop[l] = false
	}
	c.LowerTop, c.UpperRest, c.Separation = lower, upper, lower-upper
	c.RunnerUp = Entry{Index: runner, Score: r.scores[runner], Radius: r.radii[runner]}
	c.Verdict = Uncertified
	if lower > upper {
		c.Verdict = Certified
	}
	c.Floor = nil
}

// ApplyFloor attaches a repeated-fit floor analysis to c and sets the verdict:
// a certificate that separates stays certified (Thm. topk holds for the fixed fit whatever
// the refits do); one that does not becomes fit_limited when the floor intervals overlap at
// the cut, since then no evaluation budget can certify the population ranking.
func (c *Certificate) ApplyFloor(f *Floor) {
	c.Floor = f
	if c.Verdict != Certified && f != nil && f.FitLimited {
		c.Verdict = FitLimited
	}
}

// SetIDs fills the Entry ids from the landmark ids of the kernel row (ids[ℓ] for index ℓ).
func (c *Certificate) SetIDs(ids []string) {
	for i := range c.TopK {
		c.TopK[i].ID = ids[c.TopK[i].Index]
	}
	if c.RunnerUp.Index >= 0 && c.RunnerUp.Index < len(ids) {
		c.RunnerUp.ID = ids[c.RunnerUp.Index]
	}
}

// TopKSet returns the indices of the certificate's top-K (best first).
func (c *Certificate) TopKSet() []int {
	out := make([]int, len(c.TopK))
	for i, e := range c.TopK {
		out[i] = e.Index
	}
	return out
}

// TopKTo writes the indices of the k best scores into dst (len k), best first, ties by the
// lower index. It panics unless 1 ≤ k ≤ len(scores) and len(dst) == k.
func TopKTo(dst []int, scores []float64) {
	if len(dst) < 1 || len(dst) > len(scores) {
		panic(fmt.Sprintf("certify: TopKTo k = %d for %d scores", len(dst), len(scores)))
	}
	topKTo(dst, scores)
}
