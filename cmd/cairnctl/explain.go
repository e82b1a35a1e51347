package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/rng"
	"gonum.org/v1/gonum/mat"
)

// exactTermsBudget bounds d·P for which explain computes the exact two-axis variance of
// every landmark–query pair (Prop. two-axis, O(d²P) each plus d backward passes); above it
// the conservative bound with exact diagonals is used (eq. conservative-variance).
const exactTermsBudget = 1 << 24

// explanation is the attribution of one query against a fitted pool: the offline twin of
// the daemon's attribution event.
type explanation struct {
	Query      int             `json:"query"`
	QueryID    string          `json:"query_id"`
	TopK       []explainEntry  `json:"topk"`
	Separation float64         `json:"separation"`
	Verdict    certify.Verdict `json:"verdict"`
	FitFloor   *certify.Floor  `json:"fit_floor"`
	// VarianceShares are the shares of Σ_ℓ σ_ℓ² (eq. product-rule) taken by the kernel,
	// fit (weight) and cross terms; with one fit only the kernel term exists.
	VarianceShares map[string]float64  `json:"variance_shares"`
	EvalSeed       uint64              `json:"eval_seed"`
	EvalDraw       string              `json:"eval_draw"`
	Model          string              `json:"model"`
	Certificate    certify.Certificate `json:"certificate"`
	Seconds        map[string]float64  `json:"seconds"`
}

type explainEntry struct {
	ID     string  `json:"id"`
	Score  float64 `json:"score"`
	Radius float64 `json:"radius"`
}

// explainInput is what explain needs from a fitted model: the backbone and sketch budget,
// the landmark inputs (M×D, the augmented views the pool selected) and ids, the fitted
// displacements in raw-kernel units (ω of the first fit, and ω̄, τ² over R fits), the
// encoder for the model id, and the pool's residual certificate.
type explainInput struct {
	backbone    entk.Backbone
	h, s        int
	seed        uint64
	landmarkX   []float64
	landmarkIDs []string
	omega       []float64
	omegaMean   []float64
	tau2        []float64 // nil with one fit
	a           *mat.Dense
	b           []float64
	residual    certify.Residual
}

// explain certifies the top-k landmarks for query x (paper Thm. topk and Thm. fit-floor):
// scores Î_ℓt = K^eval(x_ℓ, x_t)·ω_ℓ under a fresh evaluation draw (heads and SRHT named
// "eval", seeded independently of the fit draw), radii from the exact two-axis variance
// when d·P ≤ exactTermsBudget, else from the conservative bound with exact diagonals.
func explain(in *explainInput, x []float64, k int, delta float64) (*explanation, error) {
	b := in.backbone
	m := len(in.landmarkIDs)
	d, dim := b.OutDim(), b.InDim()
	if k < 1 || k >= m {
		return nil, fmt.Errorf("--k %d: must be in [1, %d) for %d landmarks", k, m, m)
	}
	secs := map[string]float64{}

	t0 := time.Now()
	evalSeed := rng.Seed(in.seed, "cairnctl/explain/eval")
	sk, err := entk.NewSketch(b, in.h, in.s, evalSeed, "eval")
	if err != nil {
		return nil, err
	}
	q := sk.Dim()
	lf := make([]float64, m*q)
	sk.FeaturesBatchTo(lf, in.landmarkX, m)
	qf := make([]float64, q)
	sk.FeaturesTo(qf, x, sk.NewWorkspace())
	kernel := make([]float64, m)
	for l := range kernel {
		var s float64
		for j, v := range lf[l*q : (l+1)*q] {
			s += v * qf[j]
		}
		kernel[l] = s
	}
	secs["eval_sketch"] = time.Since(t0).Seconds()

	// Exact per-landmark terms: κ_ℓt = k*(x_ℓ, x_t) and V_ℓt (or the conservative bound).
	t0 = time.Now()
	pad := entk.PaddedLen(b.NumParams())
	kappa := make([]float64, m)
	vbar := make([]float64, m)
	ws := b.NewWorkspace()
	model := "conservative"
	if d*b.NumParams() <= exactTermsBudget {
		model = "exact_two_axis"
		jac := func(v []float64) *certify.Jacobian {
			j := make([]float64, d*b.NumParams())
			entk.JacobianTo(j, b, v, ws)
			return certify.NewJacobian(j, d, b.NumParams())
		}
		qj := jac(x)
		var pws certify.Workspace
		for l := 0; l < m; l++ {
			t := certify.ComputePairTerms(jac(in.landmarkX[l*dim:(l+1)*dim]), qj, pad, &pws)
			kappa[l] = t.Mean()
			vbar[l] = t.Variance(in.h, in.s).Total
		}
	} else {
		kqq := entk.ExactDiag(b, x, ws)
		for l := 0; l < m; l++ {
			kll := entk.ExactDiag(b, in.landmarkX[l*dim:(l+1)*dim], ws)
			vbar[l] = certify.ConservativeVariance(kll, kqq, in.h, in.s, pad)
			kappa[l] = math.NaN() // not computed; the floor then uses the plug-in below
		}
	}
	secs["variance"] = time.Since(t0).Seconds()

	t0 = time.Now()
	alloc, err := certify.UniformAllocation(delta, m, 1)
	if err != nil {
		return nil, fmt.Errorf("--delta: %w", err)
	}
	var c certify.Certificate
	var r certify.Ranker
	if err := r.CertifyTo(&c, kernel, in.omega, vbar, k, alloc); err != nil {
		return nil, err
	}
	c.SetIDs(in.landmarkIDs)
	c.Budget = certify.Budget{H: in.h, S: in.s, M: m, Pool: m, PaddedP: pad}
	c.VarianceModel = model
	c.EvalSeed = evalSeed
	c.EvalDraw = "eval"
	c.Residual = in.residual
	shares := map[string]float64{"kernel": 1, "weight": 0, "cross": 0}
	if in.tau2 != nil {
		// κ is exact under the exact model; otherwise the evaluation draw's kernel row is
		// its plug-in estimate, and the floor is diagnostic (paper §3.2).
		plugIn := true // τ² is a sample estimate over R fits in any case
		kap := kappa
		if model != "exact_two_axis" {
			kap = kernel
		}
		fl, err := certify.FitFloor(kap, vbar, in.omegaMean, in.tau2, k, alloc, plugIn)
		if err != nil {
			return nil, err
		}
		c.ApplyFloor(fl)
		shares = map[string]float64{"kernel": fl.KernelShare, "weight": fl.WeightShare, "cross": fl.CrossShare}
	}
	secs["certificate"] = time.Since(t0).Seconds()

	e := &explanation{
		Separation: c.Separation, Verdict: c.Verdict, FitFloor: c.Floor,
		VarianceShares: shares, EvalSeed: evalSeed, EvalDraw: "eval",
		Model: modelID(in.a, in.b), Certificate: c, Seconds: secs,
	}
	for _, t := range c.TopK {
		e.TopK = append(e.TopK, explainEntry{ID: t.ID, Score: t.Score, Radius: t.Radius})
	}
	return e, nil
}

// modelID names a fitted encoder by content: "sha256:" and the first 16 hex digits of the
// hash of (M, k, Ã, b) as little-endian float64s, so the same fit always has the same id.
func modelID(a *mat.Dense, b []float64) string {
	h := sha256.New()
	r, c := a.Dims()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(r))
	h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(c))
	h.Write(buf[:])
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(a.At(i, j)))
			h.Write(buf[:])
		}
	}
	for _, v := range b {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
		h.Write(buf[:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// queryRow loads row index of the data set's test split (the query x_t).
func queryRow(spec string, index int) ([]float64, string, error) {
	if index < 0 {
		return nil, "", fmt.Errorf("--query %d: must be ≥ 0", index)
	}
	ts, err := dataset.Open(spec, "test", index+1)
	if err != nil {
		return nil, "", fmt.Errorf("--query %d: %w", index, err)
	}
	if ts.N <= index {
		return nil, "", fmt.Errorf("--query %d: the test split has %d rows", index, ts.N)
	}
	return append([]float64(nil), ts.Row(index)...), ts.IDs[index], nil
}

// explainCmd is `cairnctl explain`: fit R models on the data (the same pipeline as cairnctl
// fit), then certify the top-K landmarks for one test-split row under a fresh evaluation
// draw, with the fit floor when R > 1.
func explainCmd(fs *flag.FlagSet) cli.Func {
	var mf modelFlags
	mf.register(fs)
	query := fs.Int("query", 0, "row of the data set's test split to explain")
	k := fs.Int("k", 10, "top-K size")
	delta := fs.Float64("delta", 0.05, "failure probability δ of the certificate")
	fits := fs.Int("fits", 2, "R repeated fits for the fit floor (1: fixed-fit certificate only)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if !(*delta > 0 && *delta < 1) {
			return fmt.Errorf("--delta: %v must be in (0, 1)", *delta)
		}
		x, qid, err := queryRow(mf.pipeline.data, *query)
		if err != nil {
			return err
		}
		fm, err := fitModel(ctx, &mf, *fits, 0)
		if err != nil {
			return err
		}
		if len(x) != fm.info.backbone.InDim() {
			return fmt.Errorf("--query %d: test row has %d values, the backbone takes %d", *query, len(x), fm.info.backbone.InDim())
		}
		in := fm.explainInput(&mf.pipeline)
		e, err := explain(in, x, *k, *delta)
		if err != nil {
			return err
		}
		e.Query, e.QueryID = *query, qid
		for name, v := range fm.secs {
			e.Seconds[name] = v
		}
		return writeJSON(stdio.Out, e)
	}
}

// explainInput converts the first fit (and the repeated-fit statistics) to raw-kernel
// units: the fit saw blocks multiplied by scale, so the raw coefficients are scale·Ã and
// ω_raw = scale·ω, τ²_raw = scale²·τ².
func (fm *fittedModel) explainInput(p *pipelineFlags) *explainInput {
	f0 := fm.fits.Fits[0]
	in := &explainInput{
		backbone: fm.info.backbone, h: p.h, s: p.s, seed: p.seed,
		landmarkX: fm.info.landmarkX, landmarkIDs: fm.info.landmarkIDs,
		a: f0.A, b: f0.B,
		residual: certify.Residual{TraceR: fm.info.traceR, TraceK: fm.info.traceK, Exact: true},
	}
	c := fm.scale
	for l, w := range f0.Omega {
		in.omega = append(in.omega, c*w)
		in.omegaMean = append(in.omegaMean, c*fm.fits.OmegaMean[l])
		if fm.fits.OmegaVar != nil {
			in.tau2 = append(in.tau2, c*c*fm.fits.OmegaVar[l])
		}
	}
	return in
}
