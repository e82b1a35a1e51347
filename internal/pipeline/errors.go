package pipeline

import "errors"

// ErrConfig reports settings the pipeline cannot be built or run with (an architecture
// that does not parse, weights that do not match it, a sketch budget or fit option out of
// range). Returned errors wrap it and name the setting and its value.
var ErrConfig = errors.New("invalid configuration")
