package entk

import "errors"

// Sentinel errors of package entk. Returned errors wrap one of these with %w and name the
// offending spec part, tensor key, shape or byte offset, so callers classify with errors.Is
// and users read the detail.
var (
	// ErrArchSpec reports an architecture spec string that does not parse.
	ErrArchSpec = errors.New("entk: bad architecture spec")
	// ErrSafetensors reports a malformed safetensors file: bad header length, bad JSON,
	// unknown dtype, data offsets out of range, overlapping or leaving holes, or a byte
	// count that does not match dtype and shape.
	ErrSafetensors = errors.New("entk: malformed safetensors")
	// ErrMissingTensor reports a parameter the architecture needs that the file lacks.
	ErrMissingTensor = errors.New("entk: missing tensor")
	// ErrUnexpectedTensor reports a tensor in the file that the architecture does not have.
	ErrUnexpectedTensor = errors.New("entk: unexpected tensor")
	// ErrTensorShape reports a tensor whose shape differs from the architecture's.
	ErrTensorShape = errors.New("entk: tensor shape mismatch")
	// ErrNotFinite reports a NaN or infinite parameter value in a loaded file.
	ErrNotFinite = errors.New("entk: non-finite parameter")
	// ErrSketchSize reports a sketch budget out of range: h < 1, s < 0, s larger than the
	// padded parameter count, or an input length < 1.
	ErrSketchSize = errors.New("entk: sketch size out of range")
	// ErrTrain reports invalid training options or data (Train), or a divergence.
	ErrTrain = errors.New("entk: training")
)
