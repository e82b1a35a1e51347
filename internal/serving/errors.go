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
	// ErrRowsDisk reports exact rows that fit query.exact_disk_bytes but could not be
	// written or mapped (a full disk, a directory that cannot be made): the model then
	// answers on the sketched path (Model.ExactRowsErr).
	ErrRowsDisk = errors.New("exact rows on disk unavailable")
	// ErrRowsDamaged reports a rows file whose size, header or CRC-32C differs from what
	// was written: its rows are not used.
	ErrRowsDamaged = errors.New("exact rows file damaged")
)
