package auditsig

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestKeyFile: the first call creates a 0600 key file, the second reads the same key;
// a file readable by others, or not a hex seed, is refused.
func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.key")
	s1, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreate: %v, created %v", err, created)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	s2, created, err := LoadOrCreate(path)
	if err != nil || created || !s1.PublicKey().Equal(s2.PublicKey()) || s1.KeyID() != s2.KeyID() {
		t.Fatalf("second LoadOrCreate: %v, created %v, same key %v", err, created, s1.PublicKey().Equal(s2.PublicKey()))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(path); !errors.Is(err, ErrKeyFile) {
		t.Errorf("world-readable key: %v, want ErrKeyFile", err)
	}
	if err := os.WriteFile(path, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(path); !errors.Is(err, ErrKeyFile) {
		t.Errorf("garbage key: %v, want ErrKeyFile", err)
	}
}

// TestSignatures: a signature verifies for its record only: another seq, prev or hash,
// another key, a checkpoint signature used as a record's (the domain tags differ), or
// a flipped bit fail.
func TestSignatures(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	s := New(seed)
	other := New(append(make([]byte, ed25519.SeedSize-1), 1))
	prev, hash := [32]byte{1}, [32]byte{2}
	sig := s.SignRecord(7, prev, hash)
	if !VerifyRecord(s.PublicKey(), 7, prev, hash, sig) {
		t.Fatal("a record's own signature does not verify")
	}
	if string(sig) != string(s.SignRecord(7, prev, hash)) {
		t.Error("signatures are not deterministic")
	}
	bad := append([]byte(nil), sig...)
	bad[10] ^= 1
	for name, ok := range map[string]bool{
		"other seq":   VerifyRecord(s.PublicKey(), 8, prev, hash, sig),
		"other prev":  VerifyRecord(s.PublicKey(), 7, [32]byte{9}, hash, sig),
		"other hash":  VerifyRecord(s.PublicKey(), 7, prev, [32]byte{9}, sig),
		"other key":   VerifyRecord(other.PublicKey(), 7, prev, hash, sig),
		"flipped bit": VerifyRecord(s.PublicKey(), 7, prev, hash, bad),
		"checkpoint":  VerifyRecord(s.PublicKey(), 7, prev, hash, s.SignCheckpoint(7, hash)),
		"short key":   VerifyRecord(s.PublicKey()[:5], 7, prev, hash, sig),
	} {
		if ok {
			t.Errorf("%s: verifies", name)
		}
	}
	cp := s.SignCheckpoint(7, hash)
	if !VerifyCheckpoint(s.PublicKey(), 7, hash, cp) || VerifyCheckpoint(s.PublicKey(), 6, hash, cp) {
		t.Error("checkpoint signature does not verify exactly its head")
	}
	if s.KeyID() == other.KeyID() || len(s.KeyID()) != 16 {
		t.Errorf("key ids %q and %q", s.KeyID(), other.KeyID())
	}
}
