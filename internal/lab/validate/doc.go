// Package validate is the arithmetic of cairn's validation against retraining: the seeded
// random halves of the stored points, the linear datamodeling score (LDS) of a ranking,
// the rankings' per-landmark scores and their sum over points, the TRAK-style and random
// baselines, the correct-class 50-NN cosine confidence, the per-query top-K deletion test
// and the report that cairnctl validate prints.
//
// # The study
//
// A ranking gives every stored point i a score s_i(t) for a query t (landmark rankings
// give non-landmarks 0 and a point that is a landmark of both views the sum of its two
// terms, PointSumTo). Its datamodel predicts a target measured after training on a subset
// S of the stored points by Σ_{i∈S} s_i(t) (PredictTo). Over H seeded halves S_1…S_H
// (Halves) the LDS of query t is the Spearman correlation (Spearman) between the H
// predictions and the H measured targets, and a ranking's LDS is the mean over queries
// with its standard error (Score; the linear datamodeling score of Park et al. 2023,
// "TRAK: Attributing Model Behavior at Scale", section 2).
//
// The rankings are those of docs/architecture.md ("Certificates and verdicts"), on a
// landmark row ℓ of the served model with kernel row k_ℓ = k(x_t, x̃_ℓ) in raw kernel
// units:
//
//	displacement  k_ℓ·ω_ℓ                        ω_ℓ = ‖Ã_ℓ − Ã_{0,ℓ}‖₂ in raw units (paper eq. influence)
//	representer   c·k_ℓ·⟨Ã_ℓ, z⟩/‖z‖              z = c·Σ_ℓ k_ℓ Ã_ℓ + b, c the model's kernel scale
//	entk          k_ℓ                            the exact eNTK similarity, independent of the fit
//	entk_cosine   k_ℓ/√k(x̃_ℓ, x̃_ℓ)               entk with the landmark's norm divided out (CosineTo;
//	                                             a study row that no answer serves)
//
// and the linearized-margin rows (margin.go, MarginRows):
// ⟨J_tᵀ u_t, J_iᵀ g_i⟩, the first-order change of the query's predicted-class margin
// under a gradient step on point i, with g_i the point's loss gradient in its logits
// (graddot) or its label alone (label_ntk), on the landmark points and, as *_all, on
// every stored point: the pair measures what the restriction to landmarks costs.
// graddot_all is also reported as "gradient" (Gradient), the ranking answers serve
// (certify.Gradient), with its top-K checked against the served model's; the other
// margin rows are study rows that no answer serves. Among them graddot_all_if and
// graddot_all_if_damped precondition graddot_all by the inverse damped Gram matrix of the
// points' rows J_iᵀg_i (Influence: the influence-function form, (GGᵀ + λI)⁻¹ a).
//
// None of them looks at labels. SignedTo signs a ranking's point scores by class (minus
// for the points of another class than the one the query is taken to be), the diagnostic
// of how much a label-free ranking loses to similar points of other classes. The
// baselines score every stored point: random (RandomScoresTo), TRAK (TRAK) and class
// (ClassScoresTo: 1 for the query's class), the last a label-only reference for what the
// class composition of a half alone predicts.
//
// The deletion test (Deletion) removes landmark terms from a kernel encoder and ranks the
// drop of one query's correct-class confidence (CorrectConfidenceTo) among the drops of
// random removals of the same size (RandomSets), strictly as the paper's π
// (certify.Percentile) and with ties counted half (MidrankPercentile).
//
// # Contracts
//
//   - Every random draw is a named stream of internal/base/rng under the caller's seed:
//     half j is stream "lab/validate/half/<j>" (HalfStream), random baseline scores of
//     query t stream "lab/validate/random/<t>", random deletion sets of size K stream
//     "lab/validate/deletion/<K>". Half j does not depend on how many halves are drawn.
//   - Functions with a To suffix write into their first argument and modify nothing
//     else; no function modifies its inputs. Shape mismatches are programmer errors and
//     panic; data-dependent failures (a system that is not positive definite, a reference
//     set without rows, a non-finite effect) are returned as errors wrapping the
//     sentinels of errors.go.
//   - An undefined correlation (fewer than two halves, or a constant prediction or target)
//     is NaN; Score leaves such queries out and counts them. A Report writes every NaN as
//     JSON null.
//   - Nothing here keeps state between calls; a TRAK or Deletion value is immutable after
//     its constructor and safe for concurrent use.
package validate
