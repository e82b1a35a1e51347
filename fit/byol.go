package fit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// byolState is what BYOL (Grill et al. 2020, "Bootstrap your own latent", section 3: the
// normalized-MSE loss, its symmetrized sum, the EMA target and its cosine schedule) adds
// to the kernel encoder for the length of one Adam fit. Three parameter sets take part:
//
//	online    θ = (Ã, b):      z = K Ã + 1bᵀ                  trained by Adam
//	predictor φ = (W, c):      q(z) = z W + 1cᵀ, W ∈ R^{k×k}  trained by Adam with θ
//	target    ξ = (Ã_t, b_t):  t = K Ã_t + 1b_tᵀ              ξ ← τ_s ξ + (1−τ_s) θ after step s
//
// and the batch loss is BYOL's normalized MSE symmetrized over the two views, with a
// stop-gradient on the target:
//
//	L = (1/B) Σ_i [ (2 − 2cos(q(z_A,i), t_B,i)) + (2 − 2cos(q(z_B,i), t_A,i)) ]
//
// so L ∈ [0, 8]. Only θ and φ receive gradient; ξ is a constant of every step. Adam's
// clipping (global norm over θ and φ together) and weight decay cover the predictor as
// they cover (Ã, b). The predictor and target are discarded when the fit returns: the
// Result's Ã, b are the online encoder's.
//
// Predictor: linear (k×k plus bias), not BYOL's MLP k→4096→k with BatchNorm and ReLU.
// The encoder under it is itself linear in θ, and this is the setting Tian, Chen &
// Ganguli (2021, "Understanding self-supervised learning dynamics without contrastive
// pairs") analyse: linear online network, linear predictor, EMA target and weight decay,
// where they explain why the dynamics do not collapse. (On ImageNet their DirectPred,
// which matches BYOL's two-layer predictor, beat a gradient-trained linear one by 2.5
// points at 300 epochs: the price of this choice on deep networks.)
// Without BatchNorm the loss is a mean of per-row terms, so it is defined for a
// validation split of any size and its gradient costs three 2B×k×k products per batch; a
// 4096-wide hidden layer would cost 2·4096/M times the encoder's own three products
// (16× at M = 512).
//
// Predictor initialization: W₀ = I + 0.1·R, c₀ = 0, R BYOL's reference draw (haiku's
// hk.Linear: N(0, 1/k) truncated at ±2σ) from the stream "fit/byol/predictor" of
// Options.Seed. Starting near the identity makes the first steps the stop-gradient
// invariance objective (pull q(z_A) toward t_B, with t = z at the start) rather than a
// regression onto a random map that the online encoder must first compensate, so Ã moves
// to make the views agree, which is what ω is read as; the random part keeps BYOL's seeded
// predictor draw, so repeated fits differ by it as well as by the minibatch order.
// Measured on the synthetic two-view problem of the tests (syntheticP, nuisance 0.7,
// bandwidth² 4), from Kaiming and PCI starts scaled by DefaultInitScale as cairnctl and
// the daemon run them, τ_base = 0.996; test k-NN accuracy init → fit, Kaiming then PCI:
//
//	                                          W₀ = R (BYOL's)         W₀ = I + 0.1·R
//	n 400, M 64, k 8, 10 epochs, 3 seeds      .857→.858, .982→.968    .857→.933, .982→.988
//	n 1500, M 128, k 32, 20 epochs, 2 seeds   .988→.998, .998→.998    .988→.993, .998→1.000
//	  mean ω there (SimCLR: .42, .43)         .82, .71                .33, .25
//
// W₀ = R gained nothing from Kaiming and lost 1.4 points from PCI on the small problem;
// on the larger one it gained 0.5 points more from Kaiming, none from PCI, and moved Ã
// 2.5–2.8× further. W₀ = I + 0.1·R never ended below its start; W₀ = I exactly was within
// 0.013 of it everywhere.
//
// Target: ξ₀ = θ₀ (a copy of the online encoder, as in BYOL), then BYOL's cosine
// schedule stepped once per minibatch over the planned T = Epochs·nb steps, like the
// learning rate:
//
//	τ_s = 1 − (1 − τ_base)(cos(π s/T) + 1)/2,  s = 0, …, T−1,  τ_base = LossParams.BYOLTauBase
//
// τ_base is BYOL's 0.996. Its time constant 1/(1 − τ_base) = 250 steps exceeds a
// paper-sized fit (20 epochs of n/512 batches: 160 steps at n = 4096, over which the
// target covers about 1 − e^{−0.32} ≈ 27% of the way to the online encoder), so the
// target stays near the initial encoder throughout. We keep BYOL's value rather than
// tune a faster one: on both problems above τ_base = 0.99, 0.996 and 1 (a frozen target)
// gave the same accuracy to three digits, and 0.9 (small problem) was within 0.005, so
// nothing measured asks for a departure. Only the loss's level depends on it (final
// epoch 0.42 at τ_base = 0.9 against 0.77 at 0.996, small problem from Kaiming): a faster
// target moves toward the online encoder that the predictor maps onto it.
type byolState struct {
	// w, c are the predictor (views of the model's θ tail); gw, gc its gradient (views of
	// the model's gradient tail).
	w, gw *mat.Dense
	c, gc []float64
	// target is ξ = (vec Ã_t row-major, b_t); ta and tb are views of it.
	target []float64
	ta     *mat.Dense
	tb     []float64
	// batch workspace: target latents, predictions and ∂L/∂q (2B×k each); the evaluator's
	// validation workspace (rows × k each).
	t, p, gp *mat.Dense
	vta, vtb *mat.Dense
	vpa, vpb *mat.Dense
}

// BYOL's constants.
const (
	// byolStream names the random stream of the predictor's initialization.
	byolStream = "fit/byol/predictor"
	// byolTrunc is the truncation of the predictor's initial normal draws, in standard
	// deviations (haiku's TruncatedNormal, the reference implementation's initializer).
	byolTrunc = 2
	// byolPerturb scales the random part of the predictor's initialization W₀ = I + 0.1·R:
	// R's spectral norm is below about 2 (a k×k matrix of variance-1/k entries), so W₀'s
	// singular values lie in about [0.8, 1.2].
	byolPerturb = 0.1
)

// predictorLen is the number of predictor parameters for latent width k (W then c).
func predictorLen(k int) int { return k*k + k }

// addBYOL extends the model's parameter vector θ = (vec Ã, b) with the predictor
// (vec W, c), seeds the predictor from seed and copies the current (Ã, b) into the target.
// It must be called once, right after startModel and before the optimizer is created.
func (md *model) addBYOL(seed uint64) {
	if md.byol != nil {
		panic("fit: addBYOL called twice")
	}
	ne := md.m*md.k + md.k
	np := predictorLen(md.k)
	th := make([]float64, ne+np)
	copy(th, md.theta)
	gr := make([]float64, ne+np)
	md.theta, md.grad = th, gr
	md.a, md.b = mat.NewDense(md.m, md.k, th[:md.m*md.k]), th[md.m*md.k:ne]
	md.ga = mat.NewDense(md.m, md.k, gr[:md.m*md.k])
	k := md.k
	s := &byolState{
		w: mat.NewDense(k, k, th[ne:ne+k*k]), c: th[ne+k*k:],
		gw: mat.NewDense(k, k, gr[ne:ne+k*k]), gc: gr[ne+k*k:],
		target: make([]float64, ne),
	}
	copy(s.target, th[:ne])
	s.ta, s.tb = mat.NewDense(md.m, k, s.target[:md.m*k]), s.target[md.m*k:]
	initPredictor(s.w, s.c, seed)
	md.byol = s
}

// initPredictor sets W = I + byolPerturb·R and c = 0, with R (k×k) BYOL's reference
// draw (haiku's hk.Linear default: i.i.d. N(0, 1/k) entries truncated at ±byolTrunc
// standard deviations, by rejection) taken row-major from the stream "fit/byol/predictor"
// of seed.
func initPredictor(w *mat.Dense, c []float64, seed uint64) {
	r := rng.New(seed, byolStream)
	k, _ := w.Dims()
	sd := byolPerturb / math.Sqrt(float64(k))
	for i := range k {
		row := w.RawRowView(i)
		for j := range row {
			x := r.NormFloat64()
			for math.Abs(x) > byolTrunc {
				x = r.NormFloat64()
			}
			row[j] = sd * x
		}
		row[i]++
	}
	for j := range c {
		c[j] = 0
	}
}

// emaTau is BYOL's target decay at step s of total (Grill et al. 2020, section 3):
//
//	τ_s = 1 − (1 − τ_base)(cos(π s/total) + 1)/2
//
// τ_0 = τ_base, rising to 1 as s → total along the learning rate's cosine.
func emaTau(base float64, s, total int) float64 {
	return 1 - (1-base)*cosineLR(1, s, total)
}

// follow moves the target toward the online parameters theta (vec Ã, b; the predictor
// tail, if present, is ignored): ξ ← τ ξ + (1−τ) θ, element by element.
func (s *byolState) follow(theta []float64, tau float64) {
	for i, x := range s.target {
		s.target[i] = tau*x + (1-tau)*theta[i]
	}
}

// gradTo evaluates the BYOL loss of one gathered batch and writes ∂L/∂z into gz and the
// predictor's gradient into the model's gradient tail (s.gw, s.gc). kcat is [K_A; K_B]
// (2B×M) and z = kcat Ã + 1bᵀ its online latents (2B×k); gz must be 2B×k and not alias z.
//
//	T = kcat Ã_t + 1b_tᵀ,  Q = Z W + 1cᵀ,  G_Q = ∂L/∂Q (byolLossTo)
//	∂L/∂W = Zᵀ G_Q,  ∂L/∂c = 1ᵀ G_Q,  ∂L/∂Z = G_Q Wᵀ
//
// T enters as a constant (the stop-gradient).
func (s *byolState) gradTo(gz, kcat, z *mat.Dense) float64 {
	r, k := z.Dims()
	bs := r / 2
	s.t, s.p, s.gp = ensure(s.t, r, k), ensure(s.p, r, k), ensure(s.gp, r, k)
	embedTo(s.t, kcat, s.ta, s.tb)
	embedTo(s.p, z, s.w, s.c)
	top := func(m *mat.Dense) *mat.Dense { return m.Slice(0, bs, 0, k).(*mat.Dense) }
	bot := func(m *mat.Dense) *mat.Dense { return m.Slice(bs, r, 0, k).(*mat.Dense) }
	l := byolLossTo(top(s.gp), bot(s.gp), top(s.p), bot(s.p), top(s.t), bot(s.t))
	s.gw.Mul(z.T(), s.gp)
	for j := range s.gc {
		s.gc[j] = 0
	}
	for i := range r {
		floats64AddTo(s.gc, s.gp.RawRowView(i))
	}
	gz.Mul(s.gp, s.w.T())
	return l
}

// valLoss is the BYOL loss of a validation split's two views under the current online
// encoder (za = ka Ã + 1bᵀ, zb = kb Ã + 1bᵀ, already embedded), predictor and target. ga
// and gb (rows × k) receive ∂L/∂q and are scratch to the caller.
func (s *byolState) valLoss(ga, gb, ka, kb, za, zb *mat.Dense) float64 {
	r, k := za.Dims()
	s.vta, s.vtb = ensure(s.vta, r, k), ensure(s.vtb, r, k)
	s.vpa, s.vpb = ensure(s.vpa, r, k), ensure(s.vpb, r, k)
	embedTo(s.vta, ka, s.ta, s.tb)
	embedTo(s.vtb, kb, s.ta, s.tb)
	embedTo(s.vpa, za, s.w, s.c)
	embedTo(s.vpb, zb, s.w, s.c)
	return byolLossTo(ga, gb, s.vpa, s.vpb, s.vta, s.vtb)
}

// byolLossTo returns BYOL's symmetrized loss of predictions qa, qb against the other
// view's targets tb, ta (B×k each, not modified) and writes ∂L/∂qa, ∂L/∂qb into ga, gb
// (which must not alias the inputs); the targets receive no gradient. With q̂ = q/||q||,
// t̂ = t/||t|| (norms floored at normEps, as F.normalize):
//
//	L = (1/B) Σ_i [(2 − 2 q̂_A,i·t̂_B,i) + (2 − 2 q̂_B,i·t̂_A,i)]
//	∂L/∂q_A,i = −(2/B)(t̂_B,i − q̂_A,i (q̂_A,i·t̂_B,i))/||q_A,i||   (and A ↔ B)
//
// each term being BYOL's normalized MSE ‖q̂ − t̂‖² = 2 − 2cos.
func byolLossTo(ga, gb, qa, qb, ta, tb *mat.Dense) float64 {
	br, k := qa.Dims()
	for _, m := range []*mat.Dense{qb, ta, tb, ga, gb} {
		if r, c := m.Dims(); r != br || c != k {
			panic(fmt.Sprintf("fit: BYOL block is %d×%d, want %d×%d", r, c, br, k))
		}
	}
	scale := 2 / float64(br)
	var total float64
	for _, v := range []struct{ g, q, t *mat.Dense }{{ga, qa, tb}, {gb, qb, ta}} {
		for i := range br {
			q, t, g := v.q.RawRowView(i), v.t.RawRowView(i), v.g.RawRowView(i)
			var qq, tt, qt float64
			for j := range k {
				qq += q[j] * q[j]
				tt += t[j] * t[j]
				qt += q[j] * t[j]
			}
			rq := math.Max(math.Sqrt(qq), normEps)
			rt := math.Max(math.Sqrt(tt), normEps)
			cos := qt / (rq * rt)
			total += 2 - 2*cos
			// g = −scale·(t/rt − q·cos/rq)/rq
			a, b := -scale/(rq*rt), scale*cos/(rq*rq)
			for j := range k {
				g[j] = a*t[j] + b*q[j]
			}
		}
	}
	return total / float64(br)
}
