package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors. Typed errors below match them with errors.Is, so a caller can
// classify a failure without knowing its fields.
var (
	// ErrClosed is returned by every method of a Store after Close.
	ErrClosed = errors.New("storage: store is closed")
	// ErrUnknownFormat is matched by *FormatError: the file was written by an
	// incompatible version of this package, or is not a cairn store at all.
	ErrUnknownFormat = errors.New("storage: unknown file format version")
	// ErrCorrupt is matched by *CorruptError: a stored value failed its checksum
	// or could not be decoded.
	ErrCorrupt = errors.New("storage: corrupted value")
	// ErrDamaged is matched by *DamageError: the file's structure is damaged (a
	// truncation, a page bbolt cannot read, a failed consistency check).
	ErrDamaged = errors.New("storage: damaged file")
	// ErrAuditBroken is matched by *AuditBreakError: the audit hash chain does not
	// verify.
	ErrAuditBroken = errors.New("storage: audit chain broken")
	// ErrModelExists is returned by Tx.PutModel for a version already stored;
	// model versions are immutable.
	ErrModelExists = errors.New("storage: model version already exists")
	// ErrInvalid is wrapped by errors about arguments that cannot be stored (empty
	// id, oversized key, topic with a NUL byte, malformed matrix).
	ErrInvalid = errors.New("storage: invalid argument")
	// ErrTxDone is returned by a Tx or ReadTx method called after the function
	// given to Apply or View has returned.
	ErrTxDone = errors.New("storage: transaction is finished")
)

// FormatError reports a file whose format version this package does not read.
type FormatError struct {
	Path string
	Got  uint32 // version found in the file; 0 when the meta bucket is missing
	Want uint32 // FormatVersion
	// Reason is set when the version could not be read at all.
	Reason string
}

func (e *FormatError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("storage: %s: unknown file format: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("storage: %s: unknown file format version %d (this build reads version %d)", e.Path, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrUnknownFormat) true.
func (e *FormatError) Is(target error) bool { return target == ErrUnknownFormat }

// CorruptError reports a value that failed its checksum or its decoding.
type CorruptError struct {
	Bucket string
	Key    []byte
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("storage: corrupted value in bucket %q key %x: %s", e.Bucket, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// DamageError reports a state file whose structure is damaged: shorter than its meta
// page says, a page bbolt cannot read (bbolt's panic message, turned into this error),
// or a problem found by CheckFile. The file is left as it was.
type DamageError struct {
	Path   string
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("storage: %s is damaged: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// AuditBreakError reports the first audit record at which the hash chain fails.
type AuditBreakError struct {
	Seq    uint64 // sequence number of the first record that does not verify
	Reason string
}

func (e *AuditBreakError) Error() string {
	return fmt.Sprintf("storage: audit chain broken at seq %d: %s", e.Seq, e.Reason)
}

// Is makes errors.Is(err, ErrAuditBroken) true.
func (e *AuditBreakError) Is(target error) bool { return target == ErrAuditBroken }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
