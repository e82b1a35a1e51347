// Package auditsig signs cairn's deletion audits with Ed25519, so that a record on
// cairn.audits can be told from one anybody with write access to the topic appended.
//
// # What is signed
//
// A record's signature covers its place in the hash chain: the domain tag
// "cairn-audit-v1", then seq (8 bytes, big-endian), prev_hash and hash (32 bytes
// each). hash already covers the canonical body (hash = SHA-256(prev_hash ‖ body)), so
// the signature authenticates the whole record and its position. A checkpoint (the
// chain head at some moment, published on cairn.status so that operators can anchor
// it elsewhere) signs "cairn-audit-checkpoint-v1", seq and hash. Ed25519 signatures
// are deterministic: re-publishing a record after a crash gives the same bytes.
//
// # Keys and rotation
//
// The key is generated at the daemon's first start from crypto/rand (the one random
// draw in cairn not taken from a seeded stream: a key derived from the configuration
// could be recomputed by anyone who reads it) and stored as the 32-byte seed, hex, in
// DataDir/audit.key with mode 0600. KeyID is the first 8 bytes of SHA-256 of the public
// key, in hex, and every signed record names it. To rotate: stop cairnd, move
// audit.key away (keep it: records signed before still verify against its public
// key), start cairnd; it generates a new key and publishes it (GET /audit/key, a
// cairn.status event of kind audit_key, `cairnctl audit key`). A verifier given several
// public keys accepts a record signed by any of them, each record by the key its
// key_id names.
package auditsig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrKeyFile reports an audit key file that exists but cannot be used.
var ErrKeyFile = errors.New("auditsig: unusable key file")

// Signer holds the daemon's audit key.
type Signer struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// LoadOrCreate reads the key seed from path, or, when there is no file, generates a
// key and writes it there (mode 0600, fsynced; an existing file is never overwritten).
// created reports the latter.
func LoadOrCreate(path string) (s *Signer, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, false, fmt.Errorf("auditsig: generate key: %w", err)
		}
		if err := writeNew(path, []byte(hex.EncodeToString(seed)+"\n")); err != nil {
			return nil, false, err
		}
		return New(seed), true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("auditsig: read %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("%w: %s has mode %v; it must not be readable by group or others (chmod 600)", ErrKeyFile, path, fi.Mode().Perm())
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, false, fmt.Errorf("%w: %s does not hold a %d-byte hex seed", ErrKeyFile, path, ed25519.SeedSize)
	}
	return New(seed), false, nil
}

func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("auditsig: create %s: %w", path, err)
	}
	_, werr := f.Write(b)
	return errors.Join(werr, f.Sync(), f.Close())
}

// New is the Signer of a 32-byte Ed25519 seed.
func New(seed []byte) *Signer {
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &Signer{priv: priv, pub: pub, id: KeyID(pub)}
}

// KeyID names a public key: the first 8 bytes of its SHA-256, hex.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

// PublicKey returns the public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// KeyID returns KeyID of the public key.
func (s *Signer) KeyID() string { return s.id }

// PublicKeyHex returns the public key in hex, as published.
func (s *Signer) PublicKeyHex() string { return hex.EncodeToString(s.pub) }

const (
	recordTag     = "cairn-audit-v1"
	checkpointTag = "cairn-audit-checkpoint-v1"
)

func message(tag string, seq uint64, hashes ...[32]byte) []byte {
	m := make([]byte, 0, len(tag)+8+32*len(hashes))
	m = append(m, tag...)
	m = binary.BigEndian.AppendUint64(m, seq)
	for _, h := range hashes {
		m = append(m, h[:]...)
	}
	return m
}

// SignRecord signs the audit record seq with its prev_hash and hash.
func (s *Signer) SignRecord(seq uint64, prev, hash [32]byte) []byte {
	return ed25519.Sign(s.priv, message(recordTag, seq, prev, hash))
}

// VerifyRecord reports whether sig is pub's signature of the record.
func VerifyRecord(pub ed25519.PublicKey, seq uint64, prev, hash [32]byte, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, message(recordTag, seq, prev, hash), sig)
}

// SignCheckpoint signs the chain head (seq, hash).
func (s *Signer) SignCheckpoint(seq uint64, hash [32]byte) []byte {
	return ed25519.Sign(s.priv, message(checkpointTag, seq, hash))
}

// VerifyCheckpoint reports whether sig is pub's signature of the chain head.
func VerifyCheckpoint(pub ed25519.PublicKey, seq uint64, hash [32]byte, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, message(checkpointTag, seq, hash), sig)
}
