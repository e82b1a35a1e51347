package main

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
)

// TestAuditKeyCommand: `audit key` prints the daemon's /audit/key, and a daemon that
// does not answer is an error naming the address.
func TestAuditKeyCommand(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	want := daemon.AuditKey{PublicKey: s.PublicKeyHex(), KeyID: s.KeyID()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/audit/key" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	code, out, errs := runCmd("audit", "key", "--http", srv.URL)
	var got daemon.AuditKey
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got != want {
		t.Errorf("audit key: exit %d, %s (%v), stderr %s; want %+v", code, out, err, errs, want)
	}
	if code, _, errs := runCmd("audit", "key", "--http", "127.0.0.1:1", "--timeout", "1s"); code == 0 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("audit key of no daemon: exit %d, stderr %q", code, errs)
	}
}

// TestAuditVerifyKeyFlag: a --key file that is not a key is refused naming --key,
// before any broker is asked.
func TestAuditVerifyKeyFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("zz"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".missing"} {
		if code, _, errs := runCmd("audit", "verify", "--key", p, "--brokers", "127.0.0.1:1"); code != 1 || !strings.Contains(errs, "--key") {
			t.Errorf("audit verify --key %s: exit %d, stderr %q; want one naming --key", p, code, errs)
		}
	}
}
