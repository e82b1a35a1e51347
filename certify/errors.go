package certify

import "errors"

// Sentinel errors. Functions wrap them with the offending field and value, so callers test
// with errors.Is and users read the wrapped message.
var (
	// ErrBudget reports an invalid evaluation budget: h < 1, s < 0, s greater than the
	// padded parameter count, or a padded count that is not a power of two ≥ 2.
	ErrBudget = errors.New("certify: invalid budget")
	// ErrDelta reports a failure probability outside (0, 1) or an allocation whose parts
	// are not positive or sum to more than δ.
	ErrDelta = errors.New("certify: invalid failure probability")
	// ErrTopK reports K outside 1 ≤ K < m.
	ErrTopK = errors.New("certify: invalid K")
	// ErrValue reports a non-finite score, weight or variance, a negative weight, or a
	// negative variance bound.
	ErrValue = errors.New("certify: invalid value")
	// ErrEmpty reports an empty sample where at least one value is needed.
	ErrEmpty = errors.New("certify: empty input")
)
