package dataset

import "errors"

// Sentinel errors; every returned error wraps one of them (test with errors.Is) and adds
// the offending spec, split, file, line, column or value.
var (
	// ErrSpec reports an unknown or malformed dataset spec.
	ErrSpec = errors.New("dataset: bad spec")
	// ErrSplit reports a split other than "train" or "test" (or one a spec cannot serve).
	ErrSplit = errors.New("dataset: bad split")
	// ErrRows reports a row count n that is negative or larger than the split.
	ErrRows = errors.New("dataset: bad row count")
	// ErrNotFound reports that the files of a data set could not be located.
	ErrNotFound = errors.New("dataset: data not found")
	// ErrIDX reports a malformed IDX file (bad magic, type, dimensions or length).
	ErrIDX = errors.New("dataset: malformed IDX")
	// ErrFormat reports a malformed line of a text data file (Adult or CSV).
	ErrFormat = errors.New("dataset: malformed record")
	// ErrNotFinite reports a NaN or ±Inf value in the input.
	ErrNotFinite = errors.New("dataset: non-finite value")
)
