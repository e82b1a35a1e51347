// Package lanczos is the symmetric Lanczos iteration shared by coreset and fit.
//
// Its users are coreset (stochastic Lanczos
// quadrature for the effective dimension tr(A(A+λI)⁻¹)) and fit (the PCI initializer's
// leading eigenpairs, paper section "Initialization", Prop. amplify).
//
// The matrix A is seen only through an Operator, dst = A v. Run builds the Lanczos
// decomposition
//
//	A Q_k = Q_k T_k + β_k q_{k+1} e_kᵀ,    Q_kᵀ Q_k = I,
//
// with T_k the symmetric tridiagonal matrix of diagonal α and off-diagonal β
// (Golub & Van Loan, Matrix Computations, 4th ed., Alg. 10.1.1). With reorth = true each
// step orthogonalizes the new vector against every previous one twice (classical
// Gram–Schmidt applied twice, "twice is enough": Giraud et al., Numer. Math. 2005), so Q
// stays orthonormal to working precision and the Ritz pairs of T are those of an exact
// Rayleigh–Ritz projection. This is the variant the paper uses for PCI (appendix "Details":
// float64, full reorthogonalization applied twice per step, 2k+20 iterations).
//
// # Contracts
//
//   - Operator must write A v into dst and must not modify v; A must be symmetric (not
//     checked: Lanczos on a non-symmetric A silently returns meaningless numbers).
//   - Run never modifies v0. It owns every slice it returns in Tridiag; the Tridiag is
//     immutable after Run returns and its methods may be called concurrently.
//   - Run calls op sequentially from the calling goroutine; op need not be safe for
//     concurrent use. The slices passed to op are reused between calls: op must not keep them.
//   - Breakdown: when the new residual norm β_j falls to at most 1e-12·max_i ||A q_i|| the
//     Krylov space is invariant (to that tolerance). Run stops there with fewer steps than
//     asked and sets Tridiag.Breakdown; it never divides by a vanishing β. The Ritz
//     values of an early stop are then eigenvalues of A (to the same tolerance).
//   - Without reorth only the last two Lanczos vectors are kept (O(n) memory); Q is nil,
//     Ritz returns no vectors. Loss of orthogonality then produces duplicate ("ghost")
//     Ritz values, but Gauss quadrature e1ᵀ f(T) e1 stays accurate (Knizhnerman 1996;
//     Ubaru, Chen & Saad 2017), which is why SLQ may run without it.
//   - Errors from data (zero start vector, non-finite operator output) are returned;
//     shape mistakes (len(v0) != n, n < 1, steps < 1) are programmer errors and panic.
package lanczos
