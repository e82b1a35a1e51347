// Package linsvm is the linear probe of the paper's evaluation protocol (appendix
// "Training and evaluation"): an ℓ2-regularized linear SVM with the squared hinge loss
// (liblinear's L2R_L2LOSS_SVC_DUAL, the default of scikit-learn's LinearSVC), C = 1, class
// weights inversely proportional to class frequency, fit on normalized validation
// embeddings and scored on the test split.
//
// # Contracts
//
//   - Each binary problem minimizes the primal
//     P(w) = ½‖w‖² + Σᵢ Cᵢ max(0, 1 − yᵢ wᵀx̃ᵢ)², x̃ᵢ = (xᵢ, 1),
//     so the bias is the last coordinate of w and is regularized (liblinear -B 1). It is
//     solved by dual coordinate descent (Hsieh et al. 2008, Alg. 1, without shrinking) until
//     every projected dual gradient is below Options.Tol in magnitude; Train returns
//     ErrNotConverged if that takes more than Options.MaxEpochs passes.
//   - Two classes give one problem (class 1 is y = +1 with Cᵢ = C·weight₁, class 0 is
//     y = −1 with C·weight₀). More classes give one-vs-rest problems in liblinear's
//     convention: the class's own rows get C·weight_c and all other rows get C. Balanced
//     weights are n / (classes·n_c) (scikit-learn's class_weight="balanced").
//   - Prediction: class 1 when w·x̃ > 0 in the binary case, else the class of the largest
//     decision value, ties to the smaller class; a class absent from training is never
//     predicted.
//   - Inputs are never modified. The coordinate order of each pass is a seeded permutation
//     (stream "linsvm/order/<pass>"), so Train is a deterministic function of its inputs
//     and Options.Seed. A Model is immutable and safe for concurrent use.
//   - Shape mismatches panic; negative labels, fewer than two classes and empty inputs are
//     returned as errors.
package linsvm
