package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"strings"
)

// A damaged file must give an error, never a crash. bbolt trusts its file: it maps it
// into memory and asserts (panics) when a page has an unexpected type, and a page
// beyond the end of a truncated file raises SIGBUS when touched. So Open checks the
// file's size against its meta pages before mapping it (checkSize), and every bbolt
// call of this package runs under recoverDamage, which turns a panic into a
// *DamageError naming the file and what bbolt said. CheckFile runs bbolt's own
// consistency check and this package's record checks (check.go).

// bbolt's file layout (go.etcd.io/bbolt, internal/common: page.go and meta.go), read
// here before bbolt maps the file: each meta page starts with a 16-byte page header,
// then magic, version, page size, flags (u32 each), the root bucket (root pgid,
// sequence), the freelist pgid, the high-water mark pgid, the txid and an FNV-64a
// checksum of the meta's bytes before it, all in the machine's byte order
// (little-endian on every platform cairn builds for).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltMetaOff    = 16 // page header
	boltMetaSumEnd = boltMetaOff + 56
	boltMetaLen    = boltMetaSumEnd + 8
	boltMinPage    = 512
	boltMaxPage    = 64 << 10
)

// boltMeta is the part of a bbolt meta page checkSize needs.
type boltMeta struct {
	pageSize int64
	pgid     uint64 // high-water mark: pages 0 … pgid-1 are in use
	txid     uint64
}

// readMeta reads and validates the meta page at off; ok is false for anything that is
// not a valid meta page (bbolt then uses the other one, or reports the file invalid).
func readMeta(r io.ReaderAt, off int64) (m boltMeta, ok bool) {
	var b [boltMetaLen]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return m, false
	}
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(b[boltMetaOff:boltMetaSumEnd])
	ps := int64(le.Uint32(b[24:]))
	if le.Uint32(b[16:]) != boltMagic || le.Uint32(b[20:]) != boltVersion || le.Uint64(b[boltMetaSumEnd:]) != h.Sum64() ||
		ps < boltMinPage || ps > boltMaxPage || ps&(ps-1) != 0 {
		return m, false
	}
	return boltMeta{pageSize: ps, pgid: le.Uint64(b[56:]), txid: le.Uint64(b[64:])}, true
}

// checkSize refuses a file shorter than its meta page says, the truncation that would
// otherwise raise SIGBUS once bbolt touches a page past the end. It reads the two meta
// pages as bbolt does (the first one's page size locates the second; without a valid
// first one, the system page size) and uses the valid one with the larger txid. A
// missing or empty file, or one without a valid meta page, passes: bbolt creates the
// former and refuses the latter with an error of its own.
func checkSize(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: stat %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	m0, ok0 := readMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if ok0 {
		pageSize = m0.pageSize
	}
	m1, ok1 := readMeta(f, pageSize)
	m := m0
	switch {
	case !ok0 && !ok1:
		return nil
	case !ok0 || (ok1 && m1.txid > m0.txid):
		m = m1
	}
	if m.pgid < 2 || m.pgid > uint64(1<<62)/uint64(m.pageSize) {
		return &DamageError{Path: path, Reason: fmt.Sprintf("meta page (txid %d) has high-water mark %d", m.txid, m.pgid)}
	}
	if need := int64(m.pgid) * m.pageSize; size < need {
		return &DamageError{Path: path, Reason: fmt.Sprintf("truncated: the meta page (txid %d) describes %d pages of %d bytes "+
			"(%d bytes), the file has %d bytes", m.txid, m.pgid, m.pageSize, need, size)}
	}
	return nil
}

// recoverDamage turns a panic raised while bbolt reads path into a *DamageError in
// *err. bbolt panics only on what it finds in the file (an assertion about a page's
// type, flags or bounds), or on a runtime error from a damaged page's counts; and a
// key or value whose damaged length reaches past the end of the file faults when read
// (SIGBUS or SIGSEGV), which the callers turn into a panic with
// debug.SetPanicOnFault for the goroutine while it is in bbolt. A panic of any other
// kind is re-raised. Deferred directly by the caller, before SetPanicOnFault's
// restore.
func recoverDamage(path string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if !isBoltPanic(r) {
		panic(r)
	}
	*err = &DamageError{Path: path, Reason: fmt.Sprintf("bbolt: %v", r)}
}

// isBoltPanic reports whether a recovered value comes from bbolt reading a damaged
// file: a memory fault at a mapped address (debug.SetPanicOnFault; a nil dereference
// faults below 64 KiB and is not one), or a string or runtime-error panic raised in
// package bbolt itself (its assertions and page checks, an index out of range on a page
// with nonsense counts). A panic raised by the caller's own code is not.
func isBoltPanic(r any) bool {
	if f, ok := r.(interface{ Addr() uintptr }); ok && f.Addr() >= 1<<16 {
		return true
	}
	switch r.(type) {
	case string, runtime.Error:
	default:
		return false
	}
	// recoverDamage was called by runtime.gopanic, which was called from the panicking
	// function (through runtime helpers such as goPanicIndex): the first frame above
	// recoverDamage that is not in package runtime is where it panicked.
	pc := make([]uintptr, 32)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}
