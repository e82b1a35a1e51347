package coreset

import "errors"

// Sentinel errors. Functions wrap them with the offending field and value, so callers
// test them with errors.Is.
var (
	// ErrDim reports a feature vector whose length differs from the pool's dimension.
	ErrDim = errors.New("coreset: feature dimension mismatch")
	// ErrNotFinite reports a NaN or ±Inf in a feature vector or a computed quantity.
	ErrNotFinite = errors.New("coreset: non-finite value")
	// ErrDuplicateID reports an Insert of an id that is already stored.
	ErrDuplicateID = errors.New("coreset: id already stored")
	// ErrUnknownID reports a Delete (or a feature lookup) of an id that is not stored.
	ErrUnknownID = errors.New("coreset: unknown id")
	// ErrEmptyID reports an empty point id.
	ErrEmptyID = errors.New("coreset: empty id")
	// ErrBudget reports an unusable budget (m < 1, a bad "deff:λ" rule, λ ≤ 0).
	ErrBudget = errors.New("coreset: bad budget")
	// ErrState reports a State that cannot be restored (inconsistent shapes or values), or
	// bytes that are not a valid binary State or pair record (DecodeState,
	// DecodePairRecord).
	ErrState = errors.New("coreset: inconsistent state")
	// ErrSelector reports an unknown selector name or unusable selector input.
	ErrSelector = errors.New("coreset: bad selector")
	// ErrEigen reports a failed dense eigendecomposition.
	ErrEigen = errors.New("coreset: eigendecomposition failed")
	// ErrFit reports a power-law fit without enough positive points.
	ErrFit = errors.New("coreset: not enough positive points for a power-law fit")
)
