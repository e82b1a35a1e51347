package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// CertificateReport is the output of cairnctl verify certificate.
type CertificateReport struct {
	Arch          string  `json:"arch"`
	Seed          uint64  `json:"seed"`
	D             int     `json:"d"`
	P             int     `json:"P"`
	PaddedP       int     `json:"padded_P"`
	H             int     `json:"h"`
	S             int     `json:"s"`
	M             int     `json:"m"`
	K             int     `json:"k"`
	Queries       int     `json:"queries"`
	Delta         float64 `json:"delta"`
	PerLandmark   float64 `json:"per_landmark_delta"`
	VarianceModel string  `json:"variance_model"`
	// OmegaSource says where ω came from: "real" (a fit on real data, OmegaFit), "halving"
	// (synthetic, OmegaRatio^{-rank}) or "file:PATH"; Omega are the m values used and
	// OmegaSpread is max ω / min ω.
	OmegaSource string    `json:"omega_source"`
	OmegaFit    string    `json:"omega_fit,omitempty"`
	OmegaRatio  float64   `json:"omega_ratio,omitempty"`
	Omega       []float64 `json:"omega"`
	OmegaSpread float64   `json:"omega_spread"`

	Issued        int     `json:"issued"`
	Incorrect     int     `json:"incorrect"`
	IncorrectRate float64 `json:"incorrect_rate"`
	// IncorrectGivenIssued is incorrect/issued; Thm. topk bounds incorrect/queries.
	IncorrectGivenIssued *float64 `json:"incorrect_given_issued"`
	CertifiedRate        float64  `json:"certified_rate"`
	// SketchTopKExactRate is the fraction of queries whose sketched top-K set (the K
	// largest Î_ℓt, certified or not) equals the exact-kernel top-K set; MeanTopKOverlap
	// the mean of |sketched ∩ exact|/K.
	SketchTopKExactRate float64 `json:"sketch_topk_exact_rate"`
	MeanTopKOverlap     float64 `json:"mean_topk_overlap"`
	// How conservative Chebyshev + union bound are: the fraction of scores outside their
	// radius (allowed: δ_ℓ) and of queries with any score outside (allowed: δ).
	IntervalMissRate     float64 `json:"interval_miss_rate"`
	SimultaneousMissRate float64 `json:"simultaneous_miss_rate"`
	// MedianZ is the median over all scores of |Î−I*|/(ω·sqrt(V̄)), in standard deviations
	// of the bound; the radius sits at 1/sqrt(δ_ℓ) of them.
	MedianZ          float64            `json:"median_z"`
	RadiusZ          float64            `json:"radius_z"`
	MedianRelRadius  float64            `json:"median_relative_radius"`
	MedianSeparation float64            `json:"median_separation_certified"`
	Seconds          map[string]float64 `json:"seconds"`
	Note             string             `json:"note"`
}

// CertificateOptions are the settings of cairnctl verify certificate, each named by its
// flag.
type CertificateOptions struct {
	Arch     string  // --arch: backbone spec (small: the exact kernel is computed per pair)
	Seed     uint64  // --seed: seed of backbone, landmarks, ω, queries and evaluation draws
	Queries  int     // --queries: queries, each with its own evaluation draw
	M, K     int     // --m landmarks, --k top-K
	Delta    float64 // --delta: failure probability per query, split δ/m over landmarks
	H, S     int     // --h, --s: the evaluation draw's heads and SRHT width (0: no sketch)
	Variance string  // --variance: certify.VarianceExact or certify.VarianceConservative
	Omega    OmegaSpec
}

// Certificate counts incorrect certificates (Thm. topk) over independent evaluation
// draws: fixed landmarks and ω, one query and one fresh entk sketch per trial, V̄ from the
// exact two-axis terms (or the conservative bound), and the exact-kernel top-K as ground
// truth. ω comes by default from a real fit (CertificateOmega), because the spread of ω
// is what separates the top-K from the rest: a synthetic ω that halves per rank separates
// scores far more than fitted ω do and hides how rarely certificates issue on a real
// model.
func Certificate(ctx context.Context, o CertificateOptions) (*CertificateReport, error) {
	if o.Variance != certify.VarianceExact && o.Variance != certify.VarianceConservative {
		return nil, fmt.Errorf("--variance: %q, want %q or %q", o.Variance, certify.VarianceExact, certify.VarianceConservative)
	}
	if o.Queries < 1 {
		return nil, fmt.Errorf("--queries: %d, want ≥ 1", o.Queries)
	}
	alloc, err := certify.UniformAllocation(o.Delta, o.M, 1)
	if err != nil {
		return nil, fmt.Errorf("--delta/--m: %w", err)
	}
	if o.K < 1 || o.K >= o.M {
		return nil, fmt.Errorf("--k: %d, want 1 ≤ k < m = %d", o.K, o.M)
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
	lx := GaussianInputs(o.Seed, "cairnctl/verify/certificate/landmarks", o.M, in)
	t0 := time.Now()
	om, err := CertificateOmega(ctx, o.Omega, o.M, o.Seed)
	if err != nil {
		return nil, err
	}
	omega := om.Values
	qx := GaussianInputs(o.Seed, "cairnctl/verify/certificate/queries", o.Queries, in)

	rep := &CertificateReport{Arch: o.Arch, Seed: o.Seed, D: b.OutDim(), P: b.NumParams(), PaddedP: pad,
		H: o.H, S: o.S, M: o.M, K: o.K, Queries: o.Queries, Delta: o.Delta, PerLandmark: alloc.PerLandmark,
		VarianceModel: o.Variance, OmegaSource: om.Source, OmegaFit: om.Fit, Omega: omega,
		OmegaSpread: slices.Max(omega) / slices.Min(omega), RadiusZ: 1 / math.Sqrt(alloc.PerLandmark),
		Seconds: map[string]float64{"omega": time.Since(t0).Seconds()},
		Note: "landmarks and queries are seeded Gaussian inputs of the seeded --arch network; ω is omega_source's " +
			"(real: the m displacements of a fitted model, assigned to the landmarks in model row order); " +
			"incorrect_rate = incorrect/queries is what Thm. topk bounds by δ"}
	if om.Source == "halving" {
		rep.OmegaRatio = o.Omega.Ratio
	}
	t0 = time.Now()
	run := newCertificateRun(b, lx, omega, o.H, o.S, o.K, o.Variance, o.Seed, alloc)
	for q := 0; q < o.Queries; q++ {
		if err := run.query(q, qx[q*in:(q+1)*in]); err != nil {
			return nil, err
		}
	}
	rep.Seconds["queries"] = time.Since(t0).Seconds()
	run.reportTo(rep)
	return rep, nil
}

// certificateRun is one verify certificate run: the fixed backbone, landmarks and ω,
// the settings, scratch reused across queries, and the counts over queries so far.
type certificateRun struct {
	b           entk.Backbone
	ws          *entk.Workspace
	lx          []float64 // landmark inputs, m×D
	lj          []*certify.Jacobian
	omega       []float64
	pad         int
	h, s, k     int
	model       string
	seed        uint64
	alloc       certify.Allocation
	radiusZ     float64 // the radius in standard deviations of the bound, 1/sqrt(δ_ℓ)
	pws         certify.Workspace
	rk          certify.Ranker
	cert        certify.Certificate
	kstar, vbar []float64
	row         []float64
	exact       []float64
	sketched    []float64
	want, got   []int

	queries, issued, incorrect int
	misses, queryMisses        int
	topkEqual, overlap         int
	zs, rel, seps              []float64
}

func newCertificateRun(b entk.Backbone, lx, omega []float64, h, s, k int, model string, seed uint64, alloc certify.Allocation) *certificateRun {
	m, in := len(omega), b.InDim()
	c := &certificateRun{b: b, ws: b.NewWorkspace(), lx: lx, omega: omega, pad: entk.PaddedLen(b.NumParams()),
		h: h, s: s, k: k, model: model, seed: seed, alloc: alloc, radiusZ: 1 / math.Sqrt(alloc.PerLandmark),
		kstar: make([]float64, m), vbar: make([]float64, m), row: make([]float64, m),
		exact: make([]float64, m), sketched: make([]float64, m), want: make([]int, k), got: make([]int, k)}
	c.lj = make([]*certify.Jacobian, m)
	for l := range c.lj {
		c.lj[l] = pointJacobian(b, lx[l*in:(l+1)*in], c.ws)
	}
	return c
}

// query runs trial q on the query input x: the exact kernel and V̄ of every landmark,
// a fresh evaluation sketch, the certificate, and the counts against the exact top-K.
func (c *certificateRun) query(q int, x []float64) error {
	qj := pointJacobian(c.b, x, c.ws)
	for l := range c.lj {
		t := certify.ComputePairTerms(c.lj[l], qj, c.pad, &c.pws)
		c.kstar[l] = t.Mean()
		if c.model == certify.VarianceExact {
			c.vbar[l] = t.Variance(c.h, c.s).Total
		} else {
			c.vbar[l] = t.Conservative(c.h, c.s)
		}
	}
	if err := c.sketchRow(q, x); err != nil {
		return err
	}
	if err := c.rk.CertifyTo(&c.cert, c.row, c.omega, c.vbar, c.k, c.alloc); err != nil {
		return err
	}
	certify.ScoresTo(c.exact, c.kstar, c.omega)
	certify.TopKTo(c.want, c.exact)
	certify.ScoresTo(c.sketched, c.row, c.omega)
	certify.TopKTo(c.got, c.sketched)
	c.queries++
	n := common(c.got, c.want)
	c.overlap += n
	if n == c.k {
		c.topkEqual++
	}
	anyMiss := false
	for l := range c.row {
		dev := math.Abs(c.row[l]-c.kstar[l]) * c.omega[l]
		sd := c.omega[l] * math.Sqrt(c.vbar[l])
		if dev > sd*c.radiusZ {
			c.misses++
			anyMiss = true
		}
		if sd > 0 {
			c.zs = append(c.zs, dev/sd)
		}
		if c.exact[l] != 0 {
			c.rel = append(c.rel, sd*c.radiusZ/math.Abs(c.exact[l]))
		}
	}
	if anyMiss {
		c.queryMisses++
	}
	if c.cert.Verdict == certify.Certified {
		c.issued++
		c.seps = append(c.seps, c.cert.Separation)
		if !sameSet(c.cert.TopKSet(), c.want) {
			c.incorrect++
		}
	}
	return nil
}

// sketchRow writes into c.row the sketched kernel row of x against the landmarks under
// query q's own evaluation draw.
func (c *certificateRun) sketchRow(q int, x []float64) error {
	sk, err := entk.NewSketch(c.b, c.h, c.s, c.seed, rng.Sub("cairnctl/verify/certificate/eval", q))
	if err != nil {
		return err
	}
	in := c.b.InDim()
	skw := sk.NewWorkspace()
	pq, pl := make([]float64, sk.Dim()), make([]float64, sk.Dim())
	sk.FeaturesTo(pq, x, skw)
	for l := range c.row {
		sk.FeaturesTo(pl, c.lx[l*in:(l+1)*in], skw)
		var v float64
		for j := range pq {
			v += pq[j] * pl[j]
		}
		c.row[l] = v
	}
	return nil
}

// reportTo writes the counts as rates into rep.
func (c *certificateRun) reportTo(rep *CertificateReport) {
	nq, m := float64(c.queries), float64(len(c.omega))
	rep.Issued, rep.Incorrect = c.issued, c.incorrect
	rep.IncorrectRate = float64(c.incorrect) / nq
	rep.IncorrectGivenIssued = finite(float64(c.incorrect) / float64(c.issued))
	rep.CertifiedRate = float64(c.issued) / nq
	rep.SketchTopKExactRate = float64(c.topkEqual) / nq
	rep.MeanTopKOverlap = float64(c.overlap) / (nq * float64(c.k))
	rep.IntervalMissRate = float64(c.misses) / (nq * m)
	rep.SimultaneousMissRate = float64(c.queryMisses) / nq
	rep.MedianZ, rep.MedianRelRadius, rep.MedianSeparation = Median(c.zs), Median(c.rel), Median(c.seps)
}
