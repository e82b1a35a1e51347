package featrec

import "errors"

// ErrCorrupt reports bytes that are not a valid feature record: a wrong length, magic
// or version, a field out of range or a checksum that does not match. Decode's errors
// wrap it and name the field.
var ErrCorrupt = errors.New("featrec: invalid feature record")

// ErrEncode reports a Record that cannot be encoded (a field out of range, a feature
// that is not a float32, a fingerprint that is not 64 hex digits). Encode's errors wrap
// it and name the field and value.
var ErrEncode = errors.New("featrec: record cannot be encoded")
