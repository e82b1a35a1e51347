package validate

import "errors"

// Sentinel errors; functions wrap them with the offending value.
var (
	// ErrNotPositive reports a TRAK system ΦᵀΦ + λI that Cholesky could not factor.
	ErrNotPositive = errors.New("validate: system is not positive definite")
	// ErrEmpty reports an empty reference set or set of candidates.
	ErrEmpty = errors.New("validate: empty input")
	// ErrNotFinite reports a NaN or infinite value where a number is needed.
	ErrNotFinite = errors.New("validate: value is not finite")
)
