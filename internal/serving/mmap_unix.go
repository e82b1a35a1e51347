//go:build unix

package serving

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only and shared: the pages are the page
// cache's, read from the file on first touch and dropped under memory pressure.
func mapFile(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmap releases a mapping made by mapFile.
func unmap(mp []byte) error { return syscall.Munmap(mp) }
