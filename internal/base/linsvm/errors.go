package linsvm

import "errors"

// Sentinel errors; functions wrap them with the offending value.
var (
	// ErrEmpty reports a training set with no rows or no columns.
	ErrEmpty = errors.New("linsvm: empty training set")
	// ErrLabel reports a negative label or a training set with fewer than two classes.
	ErrLabel = errors.New("linsvm: bad labels")
	// ErrOption reports an invalid option.
	ErrOption = errors.New("linsvm: invalid option")
	// ErrNotConverged reports that dual coordinate descent hit Options.MaxEpochs.
	ErrNotConverged = errors.New("linsvm: dual coordinate descent did not converge")
)
