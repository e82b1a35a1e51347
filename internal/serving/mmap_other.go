//go:build !unix

package serving

import (
	"fmt"
	"os"
)

// mapFile fails off unix: rows do not go to disk there (answers use the sketched path).
func mapFile(*os.File, int) ([]byte, error) {
	return nil, fmt.Errorf("%w: memory-mapped files need a unix system", ErrRowsDisk)
}

// unmap is never reached off unix.
func unmap([]byte) error { return nil }
