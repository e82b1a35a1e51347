package offline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// exactTermsBudget bounds d·P for which Explain computes the exact two-axis variance of
// every landmark–query pair (Prop. two-axis, O(d²P) each plus d backward passes); above it
// the conservative bound with exact diagonals is used (eq. conservative-variance).
const exactTermsBudget = 1 << 24

// Explanation is the attribution of one query against a fitted pool: the offline twin of
// the daemon's attribution event, and the output of cairnctl explain.
type Explanation struct {
	Query      int             `json:"query"`
	QueryID    string          `json:"query_id"`
	TopK       []ExplainEntry  `json:"topk"`
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

// ExplainEntry is one landmark of an explanation's top-K.
type ExplainEntry struct {
	ID     string  `json:"id"`
	Score  float64 `json:"score"`
	Radius float64 `json:"radius"`
}

// ExplainInput is what Explain needs from a fitted model: the backbone and sketch budget,
// the landmark inputs (M×D, the augmented views the pool selected) and ids, the fitted
// displacements in raw-kernel units (ω of the first fit, and ω̄, τ² over R fits), the
// encoder for the model id, and the pool's residual certificate.
type ExplainInput struct {
	Backbone    entk.Backbone
	H, S        int
	Seed        uint64
	LandmarkX   []float64
	LandmarkIDs []string
	Omega       []float64
	OmegaMean   []float64
	Tau2        []float64 // nil with one fit
	A           *mat.Dense
	B           []float64
	Residual    certify.Residual
}

// ExplainQuery is cairnctl explain: fit fits models on the data (FitModel with o, the
// same pipeline as cairnctl fit), then certify the top-k landmarks for row query of the
// data set's test split under a fresh evaluation draw (Explain), with the fit floor when
// fits > 1. The fit's timings join the explanation's.
func ExplainQuery(ctx context.Context, o *ModelOptions, query, k int, delta float64, fits int) (*Explanation, error) {
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("--delta: %v must be in (0, 1)", delta)
	}
	x, qid, err := QueryRow(o.Pipeline.Data, query)
	if err != nil {
		return nil, err
	}
	fm, err := FitModel(ctx, o, fits, 0)
	if err != nil {
		return nil, err
	}
	if len(x) != fm.Info.Backbone.InDim() {
		return nil, fmt.Errorf("--query %d: test row has %d values, the backbone takes %d", query, len(x), fm.Info.Backbone.InDim())
	}
	e, err := Explain(fm.ExplainInput(&o.Pipeline), x, k, delta)
	if err != nil {
		return nil, err
	}
	e.Query, e.QueryID = query, qid
	for name, v := range fm.Seconds {
		e.Seconds[name] = v
	}
	return e, nil
}

// Explain certifies the top-k landmarks for query x (paper Thm. topk and Thm. fit-floor):
// scores Î_ℓt = K^eval(x_ℓ, x_t)·ω_ℓ under a fresh evaluation draw (heads and SRHT named
// "eval", seeded independently of the fit draw), radii from the exact two-axis variance
// when d·P ≤ exactTermsBudget, else from the conservative bound with exact diagonals.
func Explain(in *ExplainInput, x []float64, k int, delta float64) (*Explanation, error) {
	m := len(in.LandmarkIDs)
	if k < 1 || k >= m {
		return nil, fmt.Errorf("--k %d: must be in [1, %d) for %d landmarks", k, m, m)
	}
	secs := map[string]float64{}
	t0 := time.Now()
	evalSeed := rng.Seed(in.Seed, "cairnctl/explain/eval")
	kernel, err := in.evalRow(x, evalSeed)
	if err != nil {
		return nil, err
	}
	secs["eval_sketch"] = time.Since(t0).Seconds()

	t0 = time.Now()
	kappa, vbar, model := in.exactTerms(x)
	secs["variance"] = time.Since(t0).Seconds()

	t0 = time.Now()
	alloc, err := certify.UniformAllocation(delta, m, 1)
	if err != nil {
		return nil, fmt.Errorf("--delta: %w", err)
	}
	var c certify.Certificate
	var r certify.Ranker
	if err := r.CertifyTo(&c, kernel, in.Omega, vbar, k, alloc); err != nil {
		return nil, err
	}
	c.SetIDs(in.LandmarkIDs)
	c.Budget = certify.Budget{H: in.H, S: in.S, M: m, Pool: m, PaddedP: entk.PaddedLen(in.Backbone.NumParams())}
	c.VarianceModel = model
	c.EvalSeed = evalSeed
	c.EvalDraw = "eval"
	c.Residual = in.Residual
	shares := map[string]float64{"kernel": 1, "weight": 0, "cross": 0}
	if in.Tau2 != nil {
		// κ is exact under the exact model; otherwise the evaluation draw's kernel row is
		// its plug-in estimate, and the floor is diagnostic (paper §3.2).
		plugIn := true // τ² is a sample estimate over R fits in any case
		kap := kappa
		if model != "exact_two_axis" {
			kap = kernel
		}
		fl, err := certify.FitFloor(kap, vbar, in.OmegaMean, in.Tau2, k, alloc, plugIn)
		if err != nil {
			return nil, err
		}
		c.ApplyFloor(fl)
		shares = map[string]float64{"kernel": fl.KernelShare, "weight": fl.WeightShare, "cross": fl.CrossShare}
	}
	secs["certificate"] = time.Since(t0).Seconds()

	e := &Explanation{
		Separation: c.Separation, Verdict: c.Verdict, FitFloor: c.Floor,
		VarianceShares: shares, EvalSeed: evalSeed, EvalDraw: "eval",
		Model: ModelID(in.A, in.B), Certificate: c, Seconds: secs,
	}
	for _, t := range c.TopK {
		e.TopK = append(e.TopK, ExplainEntry{ID: t.ID, Score: t.Score, Radius: t.Radius})
	}
	return e, nil
}

// evalRow returns the kernel row K^eval(x_ℓ, x) of x against every landmark under the
// evaluation draw "eval" seeded by evalSeed.
func (in *ExplainInput) evalRow(x []float64, evalSeed uint64) ([]float64, error) {
	m := len(in.LandmarkIDs)
	sk, err := entk.NewSketch(in.Backbone, in.H, in.S, evalSeed, "eval")
	if err != nil {
		return nil, err
	}
	q := sk.Dim()
	lf := make([]float64, m*q)
	sk.FeaturesBatchTo(lf, in.LandmarkX, m)
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
	return kernel, nil
}

// exactTerms returns the exact per-landmark terms of query x: κ_ℓt = k*(x_ℓ, x_t) and
// V_ℓt (Prop. two-axis) when d·P ≤ exactTermsBudget, else κ NaN (not computed) and the
// conservative bound with exact diagonals; model names which.
func (in *ExplainInput) exactTerms(x []float64) (kappa, vbar []float64, model string) {
	b := in.Backbone
	m := len(in.LandmarkIDs)
	d, dim := b.OutDim(), b.InDim()
	pad := entk.PaddedLen(b.NumParams())
	kappa = make([]float64, m)
	vbar = make([]float64, m)
	ws := b.NewWorkspace()
	if d*b.NumParams() > exactTermsBudget {
		kqq := entk.ExactDiag(b, x, ws)
		for l := 0; l < m; l++ {
			kll := entk.ExactDiag(b, in.LandmarkX[l*dim:(l+1)*dim], ws)
			vbar[l] = certify.ConservativeVariance(kll, kqq, in.H, in.S, pad)
			kappa[l] = math.NaN() // not computed; the floor then uses the plug-in
		}
		return kappa, vbar, "conservative"
	}
	jac := func(v []float64) *certify.Jacobian {
		j := make([]float64, d*b.NumParams())
		entk.JacobianTo(j, b, v, ws)
		return certify.NewJacobian(j, d, b.NumParams())
	}
	qj := jac(x)
	var pws certify.Workspace
	for l := 0; l < m; l++ {
		t := certify.ComputePairTerms(jac(in.LandmarkX[l*dim:(l+1)*dim]), qj, pad, &pws)
		kappa[l] = t.Mean()
		vbar[l] = t.Variance(in.H, in.S).Total
	}
	return kappa, vbar, "exact_two_axis"
}

// ModelID names a fitted encoder by content: "sha256:" and the first 16 hex digits of the
// hash of (M, k, Ã, b) as little-endian float64s, so the same fit always has the same id.
func ModelID(a *mat.Dense, b []float64) string {
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

// QueryRow loads row index of the data set's test split (the query x_t) and its id.
func QueryRow(spec string, index int) ([]float64, string, error) {
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
