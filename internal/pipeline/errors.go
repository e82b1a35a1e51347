package pipeline

import "errors"

// ErrConfig reports settings the pipeline cannot be built or run with (an architecture
// that does not parse, weights that do not match it, a sketch budget or fit option out of
// range). Returned errors wrap it and name the setting and its value.
var ErrConfig = errors.New("invalid configuration")

// ErrFoldedBatchNorm reports an ONNX export whose BatchNorm the exporter folded into the
// convolutions, refused unless model.allow_folded_batchnorm is set (config.Backbone).
// Errors wrapping it wrap ErrConfig too.
var ErrFoldedBatchNorm = errors.New("the export folded BatchNorm into the convolutions")
