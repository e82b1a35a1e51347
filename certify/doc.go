// Package certify computes cairn's error model and the certificates every answer carries.
//
// It holds the exact variance of the
// sketched multi-head eNTK (Thm. srht-exact, Prop. two-axis), its conservative bound
// (eq. conservative-variance), influence ranking and the fixed-fit top-K certificate
// (Thm. topk), the repeated-fit product rule and coefficient-fit floor (eq. product-rule,
// Thm. fit-floor), and appendix D: the deletion effect (the encoder with landmarks dropped,
// scored by the 50-NN cosine confidence of internal/base/knn), the displacement, contribution
// and leave-one-out rankings, and the audit statistics.
//
// It is numerical only: it takes and returns numbers and plain structs, and imports no
// other cairn package besides internal ones. Callers (cairnctl, the daemon) compute kernel
// rows and Jacobians with package entk and pass them in.
//
// # Invariants
//
//   - Padded length. Every SRHT formula takes P, the zero-padded power of two ≥ 2 the
//     sketch acts on (entk.PaddedLen), never the raw parameter count; zero padding changes
//     none of the Φ terms, only the factor (P−s)/((P−1)s). s == 0 means "no sketch" and
//     gives factor 0, as does s == P (an exact rotation).
//   - Φ is a positive semidefinite quadratic form, so Φ(C̄_1) ≥ 0 and E Φ(C_1) ≥ Φ(C̄_1);
//     the exact two-axis variance never exceeds eq. conservative-variance.
//   - Variance bounds passed to Ranker.CertifyTo must be fixed before the evaluation draw
//     and the draw must be independent of the fit; a plug-in sample variance voids the
//     guarantee (paper §3.2). The package cannot check this: it is the caller's protocol.
//   - Ranking order is score descending with ties broken by the lower index, everywhere
//     (T̂, T*, κ_C). Separation is strict: tied scores at the cut never certify.
//   - Residual certificate and rounding. The pool is selected on the stored fit-draw
//     features ψ̃ = fl32(ψ) (float32, see internal/pipeline), and Residual.TraceR is
//     tr R of the kernel of ψ̃, exact for it. RoundingBound turns it into an upper bound
//     on tr R of the same landmarks under the unrounded ψ, from the greedy factor alone;
//     a model's Residual carries it as UnroundedBound. The answers' kernel rows are exact
//     eNTK rows or a fresh evaluation draw, never ψ̃; ψ̃ enters only through the fitted
//     coefficients, which are the served model the top-K certificate is about.
//   - Verdicts. "certified" means the top-K holds against the arithmetic AND against a
//     refit with another seed: eq. observed-separation holds (the top-K set is the exact
//     one of the served fit, with certainty on exact rows or probability 1 − δ on a
//     sketch) and the answer is Stable (its Stability, the expected top-K Jaccard under a
//     refit with another seed, is known and at least the caller's target,
//     query.stable_jaccard). A separating answer that is not Stable is "unstable": right
//     for the served fit, not expected to survive a refit. One that does not separate is
//     "fit_limited" when an attached Floor shows eq. floor-overlap, else "uncertified".
//     What the stability covers: the seeds behind the model, in two parts whose product
//     it is. The pool part is measured by the caller at each fit (the daemon selects the
//     pool again under another model.seed's sketch and compares the exact-eNTK top-K of
//     sample queries under both pools: ingest.MeasureReseed); the fit part covers the
//     fit's draws (initializer, minibatch order) on the served pool: 1 for a fit-free
//     ranking (Similarity; Gradient has no pool part either and is 1 whole), FitStability from R ≥ 2 fits for the displacement (a plug-in
//     estimate), unknown for the representer (no per-fit coefficients are kept), which
//     therefore never certifies. Either part unknown leaves the answer unstable.
//
// # Rankings
//
// Five scores rank the training points for a query t (Ranking, ParseRanking). The
// first two rank every labelled stored point of the served model, the other three its
// landmarks:
//
//   - "gradient_cosine" (GradientCosine, the default): the cosine of J_tᵀu_t and J_iᵀg_i, the two
//     gradients of "gradient" below with their sizes divided out
//     (GradientCosineRadius). The few points with large loss gradients no longer top
//     most queries, and its top point, left out of training, moves the query more
//     reliably across training seeds than "gradient"'s (docs/validate). Stability 1 and
//     the same rows as "gradient".
//   - "gradient" (Gradient): ⟨J_tᵀu_t, J_iᵀg_i⟩, the first-order change of
//     the query's predicted-class margin under one gradient step on point i, from the
//     served backbone's exact gradients. Neither the fit, the pool nor a seed enters
//     it, so its stability is 1; it has the highest LDS (docs/validate), but its top
//     points are mostly points with large loss gradients, whose removal from training
//     does not move the query reliably. Both gradient rankings need the points' labels
//     and their rows in memory (internal/serving's GradRows); without them the daemon's
//     default falls back to "entk".
//   - "entk" (Similarity): k*(x_t, x_ℓ), the exact eNTK similarity; no fit enters it.
//   - "displacement": the paper's I_ℓt = k(x_t, x_ℓ)·ω_ℓ (eq. conditional-score), what
//     cairnctl reproduce uses for the paper's tables.
//   - "representer": k(x_t, x_ℓ)·⟨Ã_ℓ, ẑ(x_t)⟩, the landmark's term of the query's latent
//     projected on it (RepresenterTo, whose radii carry the row's error through ẑ).
//
// Each is certified against its exact computation as the displacement is: kernel-times-
// weight rankings through CertifyTo/CertifyBoundedTo (ω = 1 for the similarity), the
// representer and the gradient ranking through CertifyIntervalsTo (the gradient's radii
// bound the float32 rounding of the stored rows and of the dot products, so its
// intervals are deterministic).
//
// # Memory and concurrency
//
//   - Inputs are never modified. NewJacobian retains its slice (no copy): do not modify it
//     afterwards. Jacobian and PairTerms values are immutable and safe for concurrent reads.
//   - Workspace and Ranker hold scratch that grows to the largest size seen; one per
//     goroutine. With them, ComputePairTerms and Ranker.CertifyTo allocate nothing.
//     CertifyTo reuses the TopK slice of the Certificate it fills.
//   - FitFloor, CoverageNumber and the audit statistics allocate; they are not per-event
//     hot paths.
//
// # Errors
//
// Wrong slice lengths are programmer errors and panic. Data-dependent problems (K out of
// range, δ outside (0,1), NaN or negative weights and variances, empty samples) return
// errors wrapping the sentinels of errors.go, naming the field and value.
package certify
