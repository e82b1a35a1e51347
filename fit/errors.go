package fit

import (
	"errors"
	"fmt"
)

// Sentinel errors; functions wrap them with the offending field and value.
var (
	// ErrLoss reports an unknown loss name.
	ErrLoss = errors.New("fit: unknown loss")
	// ErrInit reports an unknown initializer name.
	ErrInit = errors.New("fit: unknown initializer")
	// ErrShape reports blocks whose dimensions do not fit together.
	ErrShape = errors.New("fit: inconsistent block shapes")
	// ErrOption reports an option outside its valid range.
	ErrOption = errors.New("fit: invalid option")
	// ErrNotFinite reports a NaN or infinity in the input or produced by the fit.
	ErrNotFinite = errors.New("fit: non-finite value")
	// ErrEigen reports a failed eigendecomposition.
	ErrEigen = errors.New("fit: eigendecomposition failed")
	// ErrIDs reports missing or duplicated point ids.
	ErrIDs = errors.New("fit: bad point ids")
	// ErrUnsupported reports a solver that does not apply to the chosen loss (KREPES
	// with BYOL).
	ErrUnsupported = errors.New("fit: solver does not support this loss")
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
