package modelbus

import "errors"

// ErrMessage marks a models-topic message that cannot be decoded: a bad magic, kind,
// key, length, checksum, shape or non-finite number. Test with errors.Is.
var ErrMessage = errors.New("modelbus: invalid message")

// ErrFeatures marks a version fitted under another feature pipeline than the reader's.
var ErrFeatures = errors.New("modelbus: model fitted under another feature pipeline")
