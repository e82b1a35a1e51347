// Package fit fits cairn's kernel encoder by self-supervised learning: stage 2 of the method.
//
// Following paper Alg. cairn-stage2, it fits the kernel encoder
//
//	z(x) = Σ_ℓ k(x, x_ℓ) Ã_ℓ + b,   Ã ∈ R^{M×k}, b ∈ R^k   (paper eq. app-encoder)
//
// on two augmented views K_A, K_B ∈ R^{n×M} of n points against M landmarks, with a
// self-supervised loss (Barlow Twins, SimCLR, VICReg, BYOL), from one of the initializers of
// paper section "Initialization" (Kaiming, PCI dense or by Lanczos, CSI, AUI, KREPES's own
// PCI), by minibatch Adam (Adam, Repeat) or by the KREPES baseline's single damped
// Gauss–Newton step solved by conjugate gradients (Krepes). It evaluates encoders by k-NN
// (internal/base/knn) and returns ω_ℓ = ||Ã_ℓ − Ã₀,ℓ||₂, and, over repeated fits, ω̄_ℓ and τ_ℓ².
// It takes and returns plain gonum matrices; it knows nothing of storage, streams or
// logging.
//
// # Contracts
//
//   - Inputs are never modified (Problem blocks, Ã₀ and options are read only), except
//     by ScaleKernels and ScaleInit, which exist to scale them in place once. Results own
//     all their matrices and slices. A Problem may be shared by concurrent fits (Repeat
//     does exactly that on up to its workers goroutines, all joined before it returns).
//   - Determinism: a fit is a pure function of (Problem, Ã₀, Options). The minibatch order
//     of epoch e sorts the points by SplitMix64(FNV-1a(id) ⊕ rng.Seed(Seed,
//     "fit/minibatch/e")), ties by id, so it depends on the ids and never on the row order
//     or arrival order: permuting the rows of K_A, K_B and IDs together gives a
//     bit-identical fit. Batches are n/nb rows (±1) with nb = max(1, n/BatchSize).
//     Kaiming and the Lanczos start vector have their own streams ("fit/init/kaiming",
//     "fit/init/pci/lanczos") so no initializer changes the training trajectory; BYOL's
//     predictor is drawn from "fit/byol/predictor" of Seed, its only random draw. The only
//     non-deterministic outputs are the wall-clock fields (KrepesResult's, Epoch.Seconds).
//   - Cores: an Adam step's row loops (the batch's gather and conversions, SimCLR's
//     normalization, softmax rows, W + Wᵀ tiles and gradient rows, the bias sums, the
//     Adam update), the validation embeddings and the k-NN vote run in fixed chunks on
//     GOMAXPROCS goroutines (internal/base/par), the products on the installed BLAS
//     (internal/base/gemm's are split by rows); every entry gets the serial loop's operations
//     and sums across rows are formed in row order, so a fit gives the same bits at any
//     GOMAXPROCS (TestStepCores, TestAdamCores). The spectral initializers' dense
//     eigensolver splits its tridiagonal reduction's matrix-vector products by columns
//     (sytrd.go) and applies the QL/QR sweeps' rotations to blocks of rows (eigen.go),
//     with mat.EigenSym's bits (TestEigenSymCores).
//   - Precision: θ, Adam's moments, the losses and every evaluation are float64. With
//     Options.Float32 (the default) each batch's matrix products and SimCLR's softmax
//     exponentials are float32 (f32.go: about half the time of a step; the gradient
//     agrees with the float64 one to ~10⁻⁶), and the products' bits are those of the
//     installed blas.Float32, fixed on a given machine.
//   - Adam (paper Table hparams): lr 1.25e-2 at the peak of a per-step cosine schedule to
//     0 over Epochs·nb steps; the loss gradient is clipped to global norm 1 over (Ã, b);
//     then L2 weight decay 3e-5 is added to the gradient of both Ã and b (PyTorch's
//     Adam(weight_decay=…) order: clip, then decay inside the step); β = (0.9, 0.999),
//     ε = 1e-8; b₀ = 0.1·1. The learning rate is in units of Ã: Adam moves every
//     coefficient by about LR per step whatever the gradient's scale, so LR must match the
//     scale of Ã₀. PCI's Ã₀ = U(Λ+ε)^{-1/2} has its leading columns' entries of order
//     (M·λ₁)^{-1/2}, which the paper's 1.25e-2 overwrites in a few steps when K has unit
//     mean diagonal; ScaleInit with DefaultInitScale (what cairnctl fit and the daemon
//     use) therefore rescales Ã₀ to unit latent variance (DefaultInitScale
//     documents the measurements).
//   - Checkpoints (Result.SelectedBy): "val_knn_accuracy" (leave-one-out majority-vote
//     k-NN accuracy, k = Options.KNN = 50, within the labelled validation split; balanced
//     accuracy when Options.Balanced) when validation labels exist; else "val_loss" (the
//     loss between the validation split's two views K and KB); else "final_epoch". A
//     checkpoint is taken after each epoch (the initialization is not a candidate: it
//     would give ω = 0; Result.InitVal is its validation score under the same criterion,
//     so a caller can see whether training beat it);
//     training stops after Patience epochs without a strict gain. Test accuracy is k-NN
//     of the test embeddings against the labelled validation embeddings, the paper's
//     probe protocol (probe fit on validation, scored on test) with k-NN in place of the
//     linear SVM; no test label touches training or selection.
//   - The paper's own probe is available too (Options.Probe; Result.InitProbe,
//     Result.TestProbe): the class-weighted ℓ2 linear SVM of internal/base/linsvm, C = 1, fit
//     on the row-normalized validation embeddings and scored on the test split, NaN when
//     the two splits' label sets differ (the paper's probe refuses to run then). It is
//     computed for the initialization and the reported point only, after the timed part
//     of either solver, and selects nothing: selection stays k-NN.
//   - Options.TraceEvery scores the test split every that many Adam steps (Result.Trace),
//     the Adam side of the paper's Fig. acc-vs-time next to KREPES's per-iterate scores;
//     it changes nothing in the fit and its time is left out of every Seconds field.
//   - Options.DecoupledDecay replaces the L2 form of the weight decay by AdamW's shrink
//     θ ← θ − lr·wd·θ (moments see the loss gradient alone). Off by default (cairnctl fit
//     --decay; docs/performance.md, "Fitting: Adam against the KREPES baseline, and the
//     initializers", has its measured effect).
//   - Losses, and the constants the paper leaves open, are documented on their functions:
//     Barlow Twins uses means over the k diagonal and the k(k−1) off-diagonal entries
//     (weight 35 on the latter) with PyTorch-BatchNorm standardization (ε = 1e-5); SimCLR
//     is NT-Xent over 2B rows, τ = 0.107; VICReg follows the reference code with
//     (λ, μ, ν) = (1.85, 1.61, 0.161). Every gradient is analytic and checked by central
//     differences in the tests.
//   - BYOL (Grill et al. 2020) is the one loss with parameters of its own. During an Adam
//     fit the trained vector is (Ã, b) followed by a linear predictor q(z) = zW + 1cᵀ
//     (W k×k, started at I + 0.1·R with R BYOL's truncated-normal draw, c = 0), and an EMA
//     target (Ã_t, b_t), started at (Ã₀, b₀), follows the online encoder after every
//     step with BYOL's cosine decay from τ_base = 0.996 (LossParams.BYOLTauBase) toward 1
//     over the planned Epochs·nb steps. The loss is the symmetrized 2 − 2cos(q(z_A),
//     sg(t_B)) + 2 − 2cos(q(z_B), sg(t_A)), mean over the batch (range [0, 8]);
//     clipping and weight decay cover the predictor too. Predictor and target are owned by
//     the fit and dropped when it returns: Result's Ã, b are the online encoder's, and
//     checkpoints, ω and every evaluation use only them. The validation-loss criterion
//     evaluates BYOL with the fit's current predictor and target, so successive epochs
//     are scored against a target that moves (slowly, at the default τ_base); labels,
//     when present, take precedence as for every loss. byol.go gives the reasons for the
//     linear predictor, its initialization and τ_base, with measurements. BYOL is not a
//     function of (z_A, z_B) alone, so LossGradTo panics on it. Krepes returns
//     ErrUnsupported for it: BYOL's step is a semi-gradient whose target tracks θ, not
//     the gradient of one objective of θ, so there is no loss Hessian H_b to solve with;
//     freezing the target at θ₀ and the predictor at its start would make one, but a
//     Gauss–Newton step on it regresses the latents onto the initial encoder's through
//     a fixed map, which is not BYOL (and its hvp would be a different method's).
//   - Initializers: PCI double-centers and symmetrizes K_mm, ε = 1e-6·max|λ|, and keeps
//     the k algebraically largest eigenpairs. The spectral initializers return only
//     usable eigenpairs, so Ã₀ may have fewer than k columns and the encoder's output
//     dimension is then that number (InitResult.Retained): not beyond M, not after an
//     early Lanczos breakdown, and not for eigenvalues λ ≤ ε (CSI: |λ| ≤ ε; AUI:
//     |μ| ≤ 1e-6·max|μ|), which are numerically null — at least the constant vector that
//     centering annihilates, and every direction beyond rank K_mm — and would be scaled
//     by up to ε^{-1/2}, ~1e3 times the leading direction. Zero-padding to k was tried
//     and rejected (InitResult.A0 says why). KREPES's arm keeps its own rule (every
//     λ + 1e-6 > 0).
//     PCI-Lanczos runs min(2k+20, M)
//     steps of internal/base/lanczos with full reorthogonalization; its accuracy is reported
//     as LanczosError (distance of the retained subspaces' projectors to dense PCI) and
//     the explicitly recomputed Ritz residuals.
//   - KREPES (paper Alg. krepes; Barlow Twins, SimCLR and VICReg only) starts from the
//     same (Ã₀, b₀) as Adam and solves
//     (Σ_b J_bᵀ H_b J_b + λI)Δ = −Σ_b ∇L_b over the epoch-0 batches. J is applied exactly
//     (z is linear in (Ã, b)) and so is the loss Hessian in z, H_b: its products are the
//     forward-mode derivatives of the analytic gradients, derived by hand per loss
//     (hvp.go) and checked against differences of the gradient; no finite differences
//     in the solver. Under SimCLR each batch's softmax and (W + Wᵀ)U at θ₀ are kept from
//     the first product (3 MiB per batch at B = k = 256) and read by every later one,
//     with the bits of recomputing them. The final CG iterate is returned, with the
//     relative residual, test accuracy and elapsed time of every iterate.
//   - Errors: data-dependent failures (bad shapes of caller blocks, duplicate ids,
//     non-finite values, failed eigensolvers, non-finite losses) are returned wrapping
//     the sentinels of errors.go; length mismatches inside the package's own helpers
//     panic.
package fit
