package admin

import "errors"

// Sentinel errors. Callers classify failures with errors.Is.
var (
	// ErrTokenFileMode marks a bearer token file that others than its owner may read
	// or write (any permission bit in 0o077): Listen and NewClient refuse it, since the
	// token is the key to the training inputs.
	ErrTokenFileMode = errors.New("admin: token file mode too open")

	// ErrTokenFile marks a token file that is not a usable token: not a regular file,
	// shorter than MinTokenLen after trimming surrounding whitespace, or with
	// characters other than printable ASCII.
	ErrTokenFile = errors.New("admin: bad token file")

	// ErrSecurity marks Security or ClientOptions settings that do not go together, or
	// a certificate, key or CA file that does not load. Each problem names its file.
	ErrSecurity = errors.New("admin: invalid security settings")

	errHTTPClosed = errors.New("admin: http server closed")
	errHTTPRun    = errors.New("admin: http server Run called twice")
)
