// Package verify runs cairnctl's verify commands: Monte-Carlo checks of the error model of
// the sketched eNTK and of the certificates built on it, each measured quantity printed
// beside the paper's prediction.
//
//	SRHT         Var⟨Su, Sv⟩ over SRHT draws vs Thm. srht-exact and the JL rate
//	TwoAxis      Var K_{h,s}(x, y) over sketches vs Prop. two-axis
//	Certificate  incorrect certificates of Thm. topk against the exact kernel
//	ProductRule  Var(K·Ω) vs eq. product-rule
//
// # Contracts
//
//   - Every draw is a named stream of internal/base/rng under the options' seed
//     ("cairnctl/verify/<command>/..."), so a report is a function of its options,
//     timings aside; a draw's stream does not depend on how many draws run.
//   - The inputs are seeded Gaussian rows (GaussianInputs) of a seeded --arch network,
//     except Certificate's ω, which by default comes from a real fit (CertificateOmega,
//     offline.FitModel with offline.DefaultModelOptions).
//   - Errors name the offending setting by its cairnctl flag; a ratio against a
//     prediction of exactly 0 is reported as JSON null, never as a number.
//   - Nothing keeps state between calls, and nothing starts a goroutine of its own
//     except the real-ω fit, which joins its workers before it returns.
package verify
