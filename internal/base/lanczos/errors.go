package lanczos

import "errors"

// Sentinel errors. Run and the methods of Tridiag wrap them with the offending value, so
// callers test them with errors.Is.
var (
	// ErrZeroStart reports a start vector of zero (or non-finite) norm.
	ErrZeroStart = errors.New("lanczos: start vector has zero or non-finite norm")
	// ErrNotFinite reports a NaN or ±Inf produced by the operator or the recurrence.
	ErrNotFinite = errors.New("lanczos: non-finite value")
	// ErrEigen reports that the dense eigensolver failed on the tridiagonal matrix.
	ErrEigen = errors.New("lanczos: eigendecomposition of the tridiagonal matrix failed")
)
