package serving

import "errors"

// Sentinel errors; returned errors wrap them with the model version.
var (
	// ErrModel reports a model that cannot be served: stored metadata that does not
	// decode, matrices whose shapes disagree, a landmark input of the wrong size, or
	// non-finite weights.
	ErrModel = errors.New("unusable model")
	// ErrNoModel is returned by answers before the first model version exists.
	ErrNoModel = errors.New("no model fitted yet")
	// ErrNoModelExport is returned by NewExport when every landmark is masked.
	ErrNoModelExport = errors.New("no model to export")
)
