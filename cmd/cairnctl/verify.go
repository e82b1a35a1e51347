package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/rng"
)

// sampleStats returns the mean, the unbiased variance, and the standard error of that
// variance estimated with the empirical fourth central moment μ₄: Var(s²) ≈ (μ₄ − σ⁴)/n.
func sampleStats(xs []float64) (mean, variance, varSE float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var m4 float64
	for _, x := range xs {
		d := (x - mean) * (x - mean)
		variance += d
		m4 += d * d
	}
	variance /= n - 1
	m4 /= n
	return mean, variance, math.Sqrt(math.Max(m4-variance*variance, 0) / n)
}

// finite returns &x, or nil (JSON null) when x is NaN or infinite, e.g. a ratio against a
// predicted variance of exactly 0.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// --- verify srht -------------------------------------------------------------------------

type srhtCase struct {
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

type srhtReport struct {
	P       int        `json:"P"`
	PaddedP int        `json:"padded_P"`
	S       int        `json:"s"`
	Draws   int        `json:"draws"`
	Seed    uint64     `json:"seed"`
	Factor  float64    `json:"srht_factor"`
	JLRate  string     `json:"jl_rate"`
	Ratios  string     `json:"ratio_definition"`
	Cases   []srhtCase `json:"cases"`
}

// verifySRHTCmd measures Var⟨Su, Sv⟩ over independent draws of entk's SRHT and compares it
// with Thm. srht-exact and with the JL rate.
func verifySRHTCmd(fs *flag.FlagSet) cli.Func {
	p := fs.Int("P", 256, "vector length (zero-padded to a power of two)")
	s := fs.Int("s", 32, "SRHT width s, 1 ≤ s ≤ padded P")
	draws := fs.Int("draws", 20000, "independent SRHT draws")
	seed := fs.Uint64("seed", 1, "seed of the vectors and the draws")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *p < 2 {
			return fmt.Errorf("--P: %d, want ≥ 2", *p)
		}
		pad := entk.PaddedLen(*p)
		if *s < 1 || *s > pad {
			return fmt.Errorf("--s: %d, want 1 ≤ s ≤ %d (padded P)", *s, pad)
		}
		if *draws < 2 {
			return fmt.Errorf("--draws: %d, want ≥ 2", *draws)
		}
		r := rng.New(*seed, "cairnctl/verify/srht/inputs")
		n := *p
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
		type uv struct {
			name string
			u, v []float64
		}
		cases := []uv{
			{"dense-gaussian", gauss(), gauss()},
			{"u=v gaussian", g, g},
			{"spiky", spiky(1, 5, 9), spiky(1, 5, 13)},
			{"u=v spiky", sp, sp},
			{"u=v two spikes", two, two},
			{"power-law", decay(), decay()},
			{"e_j, ones", ej, ones},
			{"u=v=e_j", ej, ej},
		}
		xs := make([][]float64, len(cases))
		for i := range xs {
			xs[i] = make([]float64, *draws)
		}
		su, sv := make([]float64, *s), make([]float64, *s)
		work := make([]float64, pad)
		for d := 0; d < *draws; d++ {
			t, err := entk.NewSRHT(n, *s, rng.New(*seed, rng.Sub("cairnctl/verify/srht/draw", d)))
			if err != nil {
				return err
			}
			for i, c := range cases {
				t.ApplyTo(su, c.u, work)
				t.ApplyTo(sv, c.v, work)
				var ip float64
				for k := range su {
					ip += su[k] * sv[k]
				}
				xs[i][d] = ip
			}
		}
		rep := srhtReport{P: n, PaddedP: pad, S: *s, Draws: *draws, Seed: *seed,
			Factor: certify.SRHTFactor(pad, *s),
			Ratios: "ratio = measured/predicted, jl_ratio = measured/jl_predicted (below 1: JL over-predicts); ratio_se from the empirical fourth moment",
			JLRate: "(‖u‖²‖v‖² + ⟨u,v⟩²)/s, the variance of a dense Gaussian JL sketch; the paper names the JL rate without a formula"}
		for i, c := range cases {
			mean, got, se := sampleStats(xs[i])
			phi := certify.PhiRankOne(c.v, c.u)
			pred := certify.SRHTVariance(phi, pad, *s)
			jl := certify.JLVariance(c.u, c.v, *s)
			var ip float64
			for k := range c.u {
				ip += c.u[k] * c.v[k]
			}
			rep.Cases = append(rep.Cases, srhtCase{
				Name: c.name, Measured: got, Predicted: pred,
				Ratio: finite(got / pred), RatioSE: finite(se / pred),
				JLPredicted: jl, JLRatio: finite(got / jl),
				MeanMeas: mean, InnerProd: ip, Phi: phi,
			})
		}
		return writeJSON(stdio.Out, rep)
	}
}

// --- verify two-axis ---------------------------------------------------------------------

// pointJacobian returns the certify summary of x's exact Jacobian.
func pointJacobian(b entk.Backbone, x []float64, ws *entk.Workspace) *certify.Jacobian {
	j := make([]float64, b.OutDim()*b.NumParams())
	entk.JacobianTo(j, b, x, ws)
	return certify.NewJacobian(j, b.OutDim(), b.NumParams())
}

func gaussianInputs(seed uint64, name string, n, dim int) []float64 {
	r := rng.New(seed, name)
	x := make([]float64, n*dim)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

type twoAxisCell struct {
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

type twoAxisReport struct {
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
	Cells   []twoAxisCell `json:"cells"`
}

// verifyTwoAxisCmd measures Var K_{h,s}(x, y) for one fixed pair over independent entk
// sketches (heads and SRHT redrawn per draw) and compares it with Prop. two-axis evaluated
// with exact Jacobian terms.
func verifyTwoAxisCmd(fs *flag.FlagSet) cli.Func {
	arch := fs.String("arch", "mlp:16-32-32-8", "backbone spec (default: d = 8, 1864 parameters as in the paper)")
	seed := fs.Uint64("seed", 1, "seed of the backbone, the inputs and the sketches")
	draws := fs.Int("draws", 96, "independent sketches per cell")
	hs := fs.String("h", "1,4,16", "head counts")
	ss := fs.String("s", "20,64,0", "SRHT widths (0: no sketch)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		hList, err := parseInts("h", *hs)
		if err != nil {
			return err
		}
		sList, err := parseInts("s", *ss)
		if err != nil {
			return err
		}
		if *draws < 2 {
			return fmt.Errorf("--draws: %d, want ≥ 2", *draws)
		}
		b, err := entk.NewBackbone(*arch, *seed)
		if err != nil {
			return fmt.Errorf("--arch: %w", err)
		}
		pad := entk.PaddedLen(b.NumParams())
		for _, h := range hList {
			for _, s := range sList {
				if err := certify.CheckBudget(h, s, pad); err != nil {
					return fmt.Errorf("--h %d --s %d: %w", h, s, err)
				}
			}
		}
		in := b.InDim()
		xy := gaussianInputs(*seed, "cairnctl/verify/two-axis/inputs", 2, in)
		x, y := xy[:in], xy[in:]
		ws := b.NewWorkspace()
		terms := certify.ComputePairTerms(pointJacobian(b, x, ws), pointJacobian(b, y, ws), pad, &certify.Workspace{})
		rep := twoAxisReport{Arch: *arch, Seed: *seed, Draws: *draws, D: b.OutDim(), P: b.NumParams(),
			PaddedP: pad, KStar: terms.Mean(), RTrace: finite(terms.RelTrace()),
			PhiMean: terms.PhiMean, EPhi: terms.EPhi}
		ks := make([]float64, *draws)
		for _, h := range hList {
			for _, s := range sList {
				for i := range ks {
					name := fmt.Sprintf("cairnctl/verify/two-axis/h%d/s%d/%d", h, s, i)
					sk, err := entk.NewSketch(b, h, s, *seed, name)
					if err != nil {
						return err
					}
					skw := sk.NewWorkspace()
					px, py := make([]float64, sk.Dim()), make([]float64, sk.Dim())
					sk.FeaturesTo(px, x, skw)
					sk.FeaturesTo(py, y, skw)
					var k float64
					for j := range px {
						k += px[j] * py[j]
					}
					ks[i] = k
				}
				mean, got, se := sampleStats(ks)
				v := terms.Variance(h, s)
				rep.Cells = append(rep.Cells, twoAxisCell{
					H: h, S: s, Measured: got, Predicted: v.Total,
					Ratio: finite(got / v.Total), RatioSE: finite(se / v.Total),
					Output: v.Output, Shared: v.Shared, Heads: v.Heads, MeanMeas: mean,
					Conserv: terms.Conservative(h, s),
				})
			}
		}
		return writeJSON(stdio.Out, rep)
	}
}

// --- verify certificate ------------------------------------------------------------------

type certificateReport struct {
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

// verifyCertificateCmd counts incorrect certificates (Thm. topk) over independent
// evaluation draws: fixed landmarks and ω, one query and one fresh entk sketch per trial,
// V̄ from the exact two-axis terms (or the conservative bound), and the exact-kernel top-K
// as ground truth. ω comes by default from a real fit (certificateOmega), because the
// spread of ω is what separates the top-K from the rest: a synthetic ω that halves per
// rank separates scores far more than fitted ω do and hides how rarely certificates
// issue on a real model.
func verifyCertificateCmd(fs *flag.FlagSet) cli.Func {
	arch := fs.String("arch", "mlp:8-32-16", "backbone spec (small: the exact kernel is computed per pair)")
	seed := fs.Uint64("seed", 1, "seed of backbone, landmarks, ω, queries and evaluation draws")
	queries := fs.Int("queries", 1000, "queries, each with its own evaluation draw")
	m := fs.Int("m", 12, "landmarks")
	k := fs.Int("k", 5, "top-K")
	delta := fs.Float64("delta", 0.05, "failure probability per query, split δ/m over landmarks")
	h := fs.Int("h", 256, "Gaussian heads of the evaluation draw")
	s := fs.Int("s", 512, "SRHT width of the evaluation draw (0: no sketch)")
	model := fs.String("variance", certify.VarianceExact, "variance bound: exact (Prop. two-axis) or conservative (eq. conservative-variance)")
	omegaFrom := fs.String("omega", "real", "ω of the landmarks: real (a fit on --omega-data, cairnctl explain's recipe with --m ⌈m/2⌉ per view) | halving (synthetic, see --omega-ratio) | FILE (numbers, a JSON array, cairnctl fit output or a model export; the first m are used)")
	omegaData := fs.String("omega-data", "mnist", "data set of the real fit (--omega real)")
	omegaN := fs.Int("omega-n", 1000, "training rows of the real fit (--omega real)")
	ratio := fs.Float64("omega-ratio", 2, "--omega halving: ω = ratio^{-rank}·U(0.9,1.1) over a seeded random ranking")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *model != certify.VarianceExact && *model != certify.VarianceConservative {
			return fmt.Errorf("--variance: %q, want %q or %q", *model, certify.VarianceExact, certify.VarianceConservative)
		}
		if *queries < 1 {
			return fmt.Errorf("--queries: %d, want ≥ 1", *queries)
		}
		alloc, err := certify.UniformAllocation(*delta, *m, 1)
		if err != nil {
			return fmt.Errorf("--delta/--m: %w", err)
		}
		if *k < 1 || *k >= *m {
			return fmt.Errorf("--k: %d, want 1 ≤ k < m = %d", *k, *m)
		}
		b, err := entk.NewBackbone(*arch, *seed)
		if err != nil {
			return fmt.Errorf("--arch: %w", err)
		}
		pad := entk.PaddedLen(b.NumParams())
		if err := certify.CheckBudget(*h, *s, pad); err != nil {
			return fmt.Errorf("--h/--s: %w", err)
		}
		in := b.InDim()
		lx := gaussianInputs(*seed, "cairnctl/verify/certificate/landmarks", *m, in)
		t0 := time.Now()
		om, err := certificateOmega(ctx, omegaSpec{from: *omegaFrom, data: *omegaData, n: *omegaN, ratio: *ratio}, *m, *seed)
		if err != nil {
			return err
		}
		omega := om.values
		qx := gaussianInputs(*seed, "cairnctl/verify/certificate/queries", *queries, in)

		rep := certificateReport{Arch: *arch, Seed: *seed, D: b.OutDim(), P: b.NumParams(), PaddedP: pad,
			H: *h, S: *s, M: *m, K: *k, Queries: *queries, Delta: *delta, PerLandmark: alloc.PerLandmark,
			VarianceModel: *model, OmegaSource: om.source, OmegaFit: om.fit, Omega: omega,
			OmegaSpread: slices.Max(omega) / slices.Min(omega), RadiusZ: 1 / math.Sqrt(alloc.PerLandmark),
			Seconds: map[string]float64{"omega": time.Since(t0).Seconds()},
			Note: "landmarks and queries are seeded Gaussian inputs of the seeded --arch network; ω is omega_source's " +
				"(real: the m displacements of a fitted model, assigned to the landmarks in model row order); " +
				"incorrect_rate = incorrect/queries is what Thm. topk bounds by δ"}
		if om.source == "halving" {
			rep.OmegaRatio = *ratio
		}
		t0 = time.Now()
		run := newCertificateRun(b, lx, omega, *h, *s, *k, *model, *seed, alloc)
		for q := 0; q < *queries; q++ {
			if err := run.query(q, qx[q*in:(q+1)*in]); err != nil {
				return err
			}
		}
		rep.Seconds["queries"] = time.Since(t0).Seconds()
		run.reportTo(&rep)
		return writeJSON(stdio.Out, rep)
	}
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
func (c *certificateRun) reportTo(rep *certificateReport) {
	nq, m := float64(c.queries), float64(len(c.omega))
	rep.Issued, rep.Incorrect = c.issued, c.incorrect
	rep.IncorrectRate = float64(c.incorrect) / nq
	rep.IncorrectGivenIssued = finite(float64(c.incorrect) / float64(c.issued))
	rep.CertifiedRate = float64(c.issued) / nq
	rep.SketchTopKExactRate = float64(c.topkEqual) / nq
	rep.MeanTopKOverlap = float64(c.overlap) / (nq * float64(c.k))
	rep.IntervalMissRate = float64(c.misses) / (nq * m)
	rep.SimultaneousMissRate = float64(c.queryMisses) / nq
	rep.MedianZ, rep.MedianRelRadius, rep.MedianSeparation = median(c.zs), median(c.rel), median(c.seps)
}

// common returns how many elements of a are in b (both without repeats).
func common(a, b []int) int {
	n := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			n++
		}
	}
	return n
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[int]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// median returns the median of xs (sorting a copy), 0 for an empty slice.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return 0.5 * (c[n/2-1] + c[n/2])
}

// --- verify product-rule -----------------------------------------------------------------

type productLandmark struct {
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

type productShares struct {
	Kernel []float64 `json:"kernel"`
	Weight []float64 `json:"weight"`
	Cross  []float64 `json:"cross"`
	// Medians over landmarks.
	MedianKernel float64 `json:"median_kernel"`
	MedianWeight float64 `json:"median_weight"`
	MedianCross  float64 `json:"median_cross"`
}

type productReport struct {
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
	Shares       productShares     `json:"shares"`
	PerLandmark  []productLandmark `json:"per_landmark"`
}

// verifyProductRuleCmd measures Var Z_ℓt = Var(K_ℓt·Ω_ℓ) over independent realizations
// (app. 2c): each realization draws a fresh entk evaluation sketch (shared by the landmarks
// of the query) and, independently, a displacement Ω_ℓ per landmark; the prediction is
// eq. product-rule with V exact from Prop. two-axis and κ = k* exact.
func verifyProductRuleCmd(fs *flag.FlagSet) cli.Func {
	arch := fs.String("arch", "mlp:16-32-32-8", "backbone spec (default: d = 8, 1864 parameters as in the paper)")
	seed := fs.Uint64("seed", 1, "seed of backbone, inputs, ω̄ and all draws")
	m := fs.Int("landmarks", 12, "landmarks")
	reals := fs.Int("realizations", 64, "independent (sketch, Ω) realizations")
	h := fs.Int("h", 4, "Gaussian heads of the evaluation draw")
	s := fs.Int("s", 64, "SRHT width of the evaluation draw (0: no sketch)")
	cv := fs.Float64("omega-cv", 0.15, "coefficient of variation of Ω_ℓ")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *m < 1 {
			return fmt.Errorf("--landmarks: %d, want ≥ 1", *m)
		}
		if *reals < 2 {
			return fmt.Errorf("--realizations: %d, want ≥ 2", *reals)
		}
		if !(*cv >= 0) || math.IsInf(*cv, 0) {
			return fmt.Errorf("--omega-cv: %v, want finite ≥ 0", *cv)
		}
		b, err := entk.NewBackbone(*arch, *seed)
		if err != nil {
			return fmt.Errorf("--arch: %w", err)
		}
		pad := entk.PaddedLen(b.NumParams())
		if err := certify.CheckBudget(*h, *s, pad); err != nil {
			return fmt.Errorf("--h/--s: %w", err)
		}
		in := b.InDim()
		ws := b.NewWorkspace()
		lx := gaussianInputs(*seed, "cairnctl/verify/product-rule/landmarks", *m, in)
		x := gaussianInputs(*seed, "cairnctl/verify/product-rule/query", 1, in)
		qj := pointJacobian(b, x, ws)
		var pws certify.Workspace
		kappa, v := make([]float64, *m), make([]float64, *m)
		for l := range kappa {
			t := certify.ComputePairTerms(pointJacobian(b, lx[l*in:(l+1)*in], ws), qj, pad, &pws)
			kappa[l], v[l] = t.Mean(), t.Variance(*h, *s).Total
		}
		// Ω_ℓ = ω̄_ℓ·exp(σz − σ²/2), z ~ N(0,1): lognormal with mean ω̄_ℓ and variance
		// τ_ℓ² = ω̄_ℓ²·cv² (σ² = ln(1+cv²)), drawn from its own stream, independent of K.
		or := rng.New(*seed, "cairnctl/verify/product-rule/omega-mean")
		omegaMean, tau2 := make([]float64, *m), make([]float64, *m)
		for l := range omegaMean {
			omegaMean[l] = 0.5 + or.Float64()
			tau2[l] = omegaMean[l] * omegaMean[l] * *cv * *cv
		}
		sig := math.Sqrt(math.Log1p(*cv * *cv))
		z := make([][]float64, *m)
		for l := range z {
			z[l] = make([]float64, *reals)
		}
		for r := 0; r < *reals; r++ {
			sk, err := entk.NewSketch(b, *h, *s, *seed, rng.Sub("cairnctl/verify/product-rule/eval", r))
			if err != nil {
				return err
			}
			skw := sk.NewWorkspace()
			pq, pl := make([]float64, sk.Dim()), make([]float64, sk.Dim())
			sk.FeaturesTo(pq, x, skw)
			wr := rng.New(*seed, rng.Sub("cairnctl/verify/product-rule/omega", r))
			for l := 0; l < *m; l++ {
				sk.FeaturesTo(pl, lx[l*in:(l+1)*in], skw)
				var k float64
				for j := range pq {
					k += pq[j] * pl[j]
				}
				om := omegaMean[l] * math.Exp(sig*wr.NormFloat64()-sig*sig/2)
				z[l][r] = k * om
			}
		}
		rep := productReport{Arch: *arch, Seed: *seed, H: *h, S: *s, PaddedP: pad, Landmarks: *m,
			Realizations: *reals, OmegaCV: *cv,
			OmegaSource: "synthetic: no fit package is used; Ω_ℓ is lognormal with mean ω̄_ℓ ~ U(0.5,1.5) and CV omega_cv, drawn from its own seeded stream independent of the evaluation sketch; the prediction uses the exact κ, V, ω̄, τ² (no plug-in)",
			RatioSE:     math.Sqrt(2 / float64(*reals-1))}
		var ratios []float64
		for l := 0; l < *m; l++ {
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
			rep.PerLandmark = append(rep.PerLandmark, productLandmark{Index: l, Measured: got, Predicted: pv.Total,
				Ratio: finite(ratio), KernelShare: a, WeightShare: w, CrossShare: c,
				Kappa: kappa[l], V: v[l], OmegaMean: omegaMean[l], Tau2: tau2[l]})
		}
		rep.MedianRatio = median(ratios)
		rep.Shares.MedianKernel = median(rep.Shares.Kernel)
		rep.Shares.MedianWeight = median(rep.Shares.Weight)
		rep.Shares.MedianCross = median(rep.Shares.Cross)
		return writeJSON(stdio.Out, rep)
	}
}
