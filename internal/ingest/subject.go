package ingest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairnhq/cairn/storage"
)

// SubjectKeyFile is the subject key's file name, in the directory of the state file
// (the daemon's data directory, beside audit.key).
const SubjectKeyFile = "subject.key"

// subjectKeyLen is the HMAC key's length in bytes (SHA-256's block is 64; 32 random
// bytes are SHA-256's full strength).
const subjectKeyLen = 32

// SubjectKey is the deployment's key for naming data subjects: a subject id is stored,
// logged and published only as its keyed hash (SubjectKey.Hash), so that the state
// file, the topics cairnd writes and its logs never hold a subject in plain text, and a
// hash cannot be reversed by trying likely ids without the key. The key is 32 random
// bytes kept as hex in SubjectKeyFile, mode 0600. A primary and its standbys must share
// it (copy the file before a standby's first start): their stores must file a subject
// under the same hash.
type SubjectKey struct{ key [subjectKeyLen]byte }

// ErrSubjectKey reports a subject key file that exists but cannot be used.
var ErrSubjectKey = errors.New("ingest: unusable subject key file")

// LoadOrCreateSubjectKey reads the key from path, or, when there is no file, generates
// one from crypto/rand and writes it there (mode 0600, fsynced; an existing file is
// never overwritten). created reports the latter.
func LoadOrCreateSubjectKey(path string) (k *SubjectKey, created bool, err error) {
	k, err = ReadSubjectKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return k, false, err
	}
	k = &SubjectKey{}
	if _, err := rand.Read(k.key[:]); err != nil {
		return nil, false, fmt.Errorf("ingest: generate the subject key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("ingest: create %s: %w", path, err)
	}
	_, werr := f.WriteString(hex.EncodeToString(k.key[:]) + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, false, fmt.Errorf("ingest: write %s: %w", path, err)
	}
	return k, true, syncDir(filepath.Dir(path))
}

// ReadSubjectKey reads the key from path (an error matching os.ErrNotExist when there
// is none). A file readable by group or others is refused, as audit.key is.
func ReadSubjectKey(path string) (*SubjectKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ingest: read the subject key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; it must not be readable by group or others (chmod 600)", ErrSubjectKey, path, fi.Mode().Perm())
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != subjectKeyLen {
		return nil, fmt.Errorf("%w: %s does not hold %d hex-encoded bytes", ErrSubjectKey, path, subjectKeyLen)
	}
	k := &SubjectKey{}
	copy(k.key[:], raw)
	return k, nil
}

// NewSubjectKey is the key of 32 bytes (for tests and tools that hold the key itself).
func NewSubjectKey(key [32]byte) *SubjectKey { return &SubjectKey{key: key} }

// Hash is the keyed hash of subject: HMAC-SHA256(key, the subject's UTF-8 bytes), what
// `printf %s SUBJECT | openssl dgst -sha256 -mac HMAC -macopt hexkey:KEY` prints.
func (k *SubjectKey) Hash(subject string) storage.SubjectHash {
	m := hmac.New(sha256.New, k.key[:])
	m.Write([]byte(subject))
	var h storage.SubjectHash
	m.Sum(h[:0])
	return h
}

// SubjectHex is a subject hash as it leaves cairn: 64 lower-case hex digits.
func SubjectHex(h storage.SubjectHash) string { return hex.EncodeToString(h[:]) }

// syncDir fsyncs directory dir, so that a file just created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("ingest: sync %s: %w", dir, err)
	}
	return errors.Join(d.Sync(), d.Close())
}
