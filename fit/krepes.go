package fit

import (
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// KrepesOptions configure the KREPES baseline (paper Alg. krepes).
type KrepesOptions struct {
	Options
	// Damping is the Gauss–Newton damping λ (1e-3; the paper does not state KREPES's
	// value).
	Damping float64
	// MaxIter bounds the CG iterations (150, the horizon of the paper's Fig. krepes-residual).
	MaxIter int
	// Tol stops CG when ||r_i||/||g|| ≤ Tol (1e-6).
	Tol float64
	// SkipIterateEval leaves KrepesResult.IterateEval empty: the final iterate is still
	// evaluated (TestEval), and the solve's bits and IterateSeconds do not change. For
	// callers that need only the solution, such as reproduce's cairn-vs-krepes, where the
	// per-iterate test evaluations cost as much as the solve.
	SkipIterateEval bool
}

// DefaultKrepesOptions returns the baseline's settings for loss l.
func DefaultKrepesOptions(l Loss) KrepesOptions {
	return KrepesOptions{Options: DefaultOptions(l), Damping: 1e-3, MaxIter: 150, Tol: 1e-6}
}

// KrepesResult is the final CG iterate with the solve's trace.
type KrepesResult struct {
	Result
	// CGResiduals[i] = ||r_i||₂/||g||₂ after CG iteration i+1 (r the recursively updated
	// residual of (JᵀHJ + λI)Δ = −g).
	CGResiduals []float64
	// IterateEval[i] is the test evaluation of θ₀ + Δ_{i+1}.
	IterateEval []Eval
	// IterateSeconds[i] is the wall time from the start of the setup (gradient pass) to
	// the end of CG iteration i+1, excluding the iterate evaluations.
	IterateSeconds []float64
	// SetupSeconds is the time of the gradient pass.
	SetupSeconds float64
	// NegativeCurvature counts CG directions with pᵀ(JᵀHJ + λI)p ≤ 0 (the loss Hessian
	// in z is indefinite for all three objectives, so the system can be too).
	NegativeCurvature int
	// GradNorm is ||g||₂.
	GradNorm float64
}

// gn is the damped Gauss–Newton operator v ↦ Σ_b J_bᵀ H_b J_b v + λv at θ₀, matrix-free:
// J_b v = [K_A; K_B]_b V + 1βᵀ for v = (V, β) (z is linear in θ), J_bᵀ G = ([K_A; K_B]_bᵀ G,
// 1ᵀG), and H_b the exact Hessian of the batch loss in z (hand-differentiated gradient,
// hvp.go), so the operator is exact up to rounding.
type gn struct {
	p       *Problem
	md      *model
	opt     KrepesOptions
	batches [][]int
	zs      []*mat.Dense // latents of each batch at θ₀ (2B×k)
	// at holds each batch's SimCLR softmax and (W + Wᵀ)U at θ₀, filled by the first
	// operator application: 8·(4B² + 2Bk) bytes per batch (3 MiB at B = k = 256; 564 MiB
	// over the 188 batches of 48,000 MNIST points). They are what every later CG
	// iteration would recompute (the 2B×2B exponentials and two products of three), and
	// reading them gives the same bits. Empty for the other losses.
	at []simclrPoint
	// workspace
	hvp    hvpWS
	jv, hv *mat.Dense
	out    *mat.Dense
}

// hessVecZ writes H d into dst, the exact Hessian of the batch loss at z (2B×k, views
// stacked) applied to d (hvp.go).
func (o *gn) hessVecZ(dst, z, d *mat.Dense) {
	r, k := z.Dims()
	bs := r / 2
	top := func(m *mat.Dense) *mat.Dense { return m.Slice(0, bs, 0, k).(*mat.Dense) }
	bot := func(m *mat.Dense) *mat.Dense { return m.Slice(bs, r, 0, k).(*mat.Dense) }
	o.hvp.hessVecTo(top(dst), bot(dst), o.opt.Loss, o.opt.Params, top(z), bot(z), top(d), bot(d))
}

// apply writes (JᵀHJ + λI) v into dst (flat θ layout: vec Ã row-major, then b).
func (o *gn) apply(dst, v []float64) {
	m, k := o.md.m, o.md.k
	vm := mat.NewDense(m, k, v[:m*k])
	beta := v[m*k:]
	for i := range dst {
		dst[i] = 0
	}
	dA := mat.NewDense(m, k, dst[:m*k])
	dB := dst[m*k:]
	for bi, rows := range o.batches {
		o.md.gather(o.p, rows)
		r := 2 * len(rows)
		o.jv = ensure(o.jv, r, k)
		o.hv = ensure(o.hv, r, k)
		embedTo(o.jv, o.md.kcat, vm, beta)
		o.hvp.at = nil
		if o.opt.Loss == SimCLR {
			if o.at == nil {
				o.at = make([]simclrPoint, len(o.batches))
			}
			o.hvp.at = &o.at[bi]
		}
		o.hessVecZ(o.hv, o.zs[bi], o.jv)
		o.out = ensure(o.out, m, k)
		o.out.Mul(o.md.kcat.T(), o.hv)
		dA.Add(dA, o.out)
		for i := range r {
			floats.Add(dB, o.hv.RawRowView(i))
		}
	}
	floats.AddScaled(dst, o.opt.Damping, v)
}

// Krepes runs the KREPES baseline from Ã₀ and b₀ = BiasInit·1 (the same initialization
// as Adam, so the comparison isolates the solver): accumulate g = Σ_b ∇_θ L_b(θ₀) over the
// minibatches of the epoch-0 order, solve (JᵀHJ + λI)Δ = −g by conjugate gradients with
// the matrix-free operator of gn, and return θ₀ + Δ of the final CG iterate (as KREPES
// reports it), with the relative residual and test evaluation of every iterate.
// Loss BYOL is an ErrUnsupported error, returned before any work: it has no loss Hessian
// to solve with (package doc, the BYOL item).
func Krepes(p *Problem, a0 *mat.Dense, opt KrepesOptions) (*KrepesResult, error) {
	if err := checkKrepes(opt); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	md, k, err := startModel(p, a0, opt.BiasInit)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &KrepesResult{}
	res.A0, res.B0 = mat.DenseCopyOf(a0), slices.Clone(md.b)
	res.SelectedBy = SelectedByKrepes
	res.InitVal = math.NaN() // not scored: KREPES does no checkpoint selection, and it would cost timed work
	ev := newEvaluator(p, opt.Options, k)

	op := &gn{p: p, md: md, opt: opt}
	g, lossSum := op.gradient()
	res.SetupSeconds = time.Since(start).Seconds()
	res.GradNorm = floats.Norm(g, 2)
	if math.IsNaN(res.GradNorm) || math.IsInf(res.GradNorm, 0) {
		return nil, fmt.Errorf("%w: KREPES gradient norm %v", ErrNotFinite, res.GradNorm)
	}
	if res.InitEval, err = ev.test(md.a, md.b); err != nil {
		return nil, err
	}
	theta0 := slices.Clone(md.theta)
	x, err := op.solve(res, ev, g, theta0, start)
	if err != nil {
		return nil, err
	}
	floats.AddTo(md.theta, theta0, x)
	for _, v := range md.theta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: KREPES parameter after %d CG iterations", ErrNotFinite, res.Epochs)
		}
	}
	res.BestEpoch = res.Epochs
	res.History = []Epoch{{TrainLoss: lossSum / float64(len(op.batches)), ValMetric: math.NaN()}}
	res.A, res.B = mat.DenseCopyOf(md.a), slices.Clone(md.b)
	res.Omega = Omega(res.A, res.A0)
	if res.TestEval, err = ev.test(md.a, md.b); err != nil {
		return nil, err
	}
	// The probes run after the timed solve: the final iterate, then the initialization.
	if res.TestProbe, err = ev.probe(md.a, md.b); err != nil {
		return nil, err
	}
	copy(md.theta, theta0)
	if res.InitProbe, err = ev.probe(md.a, md.b); err != nil {
		return nil, err
	}
	return res, nil
}

// checkKrepes validates opt for Krepes: the shared Options, a loss with a Hessian (BYOL is
// an ErrUnsupported error), and the solver's Damping ≥ 0, MaxIter ≥ 1 and Tol ≥ 0.
func checkKrepes(opt KrepesOptions) error {
	if err := opt.Options.Validate(); err != nil {
		return err
	}
	if opt.Loss == BYOL {
		// BYOL's step is the semi-gradient ∂L(θ, φ; ξ)/∂(θ, φ) with the target ξ tracking θ:
		// not the gradient of one objective of θ, so there is no H_b. Freezing ξ = θ₀ and
		// the predictor φ₀ would give one, but Gauss–Newton on it regresses the latents onto
		// the initial encoder's through a fixed map: another method, not KREPES on BYOL.
		return fmt.Errorf("%w: KREPES needs a loss Hessian in z and loss %v has none (stop-gradient EMA target, learned predictor); use Adam", ErrUnsupported, opt.Loss)
	}
	if !(opt.Damping >= 0) || opt.MaxIter < 1 || !(opt.Tol >= 0) {
		return errorf(ErrOption, "Damping = %v, MaxIter = %d, Tol = %v", opt.Damping, opt.MaxIter, opt.Tol)
	}
	return nil
}

// gradient makes one pass over the minibatches of the epoch-0 order at θ₀ and returns
// g = Σ_b ∇_θ L_b(θ₀) with the sum of the batch losses. It records each batch's rows and
// latents in o (batches, zs) for the operator's later applications.
func (o *gn) gradient() (g []float64, lossSum float64) {
	n, _ := o.p.KA.Dims()
	order := batchOrder(nil, o.p.IDs, hashIDs(o.p.IDs), o.opt.Seed, 0)
	bounds := batchBounds(n, o.opt.BatchSize)
	g = make([]float64, len(o.md.theta))
	for bi := 0; bi+1 < len(bounds); bi++ {
		rows := order[bounds[bi]:bounds[bi+1]]
		o.batches = append(o.batches, rows)
		o.md.gather(o.p, rows)
		lossSum += o.md.lossGrad(o.opt.Loss, o.opt.Params)
		o.zs = append(o.zs, mat.DenseCopyOf(o.md.z))
		floats.Add(g, o.md.grad)
	}
	return g, lossSum
}

// solve runs conjugate gradients (Hestenes & Stiefel 1952) on (JᵀHJ + λI) x = −g from
// x = 0 for at most MaxIter iterations, stopping at relative residual Tol, at zero or
// non-finite curvature, or at once when g = 0 (res.GradNorm holds ||g||₂). It returns
// the final iterate and records in res every iterate's relative residual, its time since
// start (evaluations excluded), its test evaluation at θ₀ + x (unless SkipIterateEval;
// md.theta is left at the last one evaluated), the iteration count (Epochs) and the
// count of non-positive curvatures.
func (o *gn) solve(res *KrepesResult, ev *evaluator, g, theta0 []float64, start time.Time) ([]float64, error) {
	md := o.md
	x := make([]float64, len(g))
	r := make([]float64, len(g))
	floats.ScaleTo(r, -1, g)
	d := slices.Clone(r)
	ad := make([]float64, len(g))
	rr := floats.Dot(r, r)
	evalTime := time.Duration(0)
	for it := 0; it < o.opt.MaxIter && res.GradNorm > 0; it++ {
		o.apply(ad, d)
		dad := floats.Dot(d, ad)
		if dad <= 0 {
			res.NegativeCurvature++
		}
		if dad == 0 || math.IsNaN(dad) || math.IsInf(dad, 0) {
			break
		}
		alpha := rr / dad
		floats.AddScaled(x, alpha, d)
		floats.AddScaled(r, -alpha, ad)
		rrNew := floats.Dot(r, r)
		rel := math.Sqrt(rrNew) / res.GradNorm
		res.CGResiduals = append(res.CGResiduals, rel)
		res.IterateSeconds = append(res.IterateSeconds, (time.Since(start) - evalTime).Seconds())
		if !o.opt.SkipIterateEval {
			t0 := time.Now()
			floats.AddTo(md.theta, theta0, x)
			e, err := ev.test(md.a, md.b)
			if err != nil {
				return nil, err
			}
			res.IterateEval = append(res.IterateEval, e)
			evalTime += time.Since(t0)
		}
		res.Epochs = it + 1
		if rel <= o.opt.Tol {
			break
		}
		floats.AddScaledTo(d, r, rrNew/rr, d)
		rr = rrNew
	}
	return x, nil
}
