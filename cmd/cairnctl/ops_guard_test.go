package main

import (
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardedDaemonFlags: the commands that talk to the daemon's HTTP surface send the
// bearer token of --token-file and trust the CA of --ca-file (a bare --http host:port
// then means https), against a stand-in daemon over TLS that answers only with the
// token; without the token they fail saying what is missing.
func TestGuardedDaemonFlags(t *testing.T) {
	const token = "cairnctl-test-token-0123456789"
	pub := strings.Repeat("ab", 32)
	mux := http.NewServeMux()
	answer := map[string]string{
		"/status":    `{"ready":true,"points":12}`,
		"/audit/key": `{"public_key":"` + pub + `","key_id":"k"}`,
		"/model":     `{"model":3,"landmarks":[]}`,
	}
	for path, body := range answer {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "401 unauthorized", http.StatusUnauthorized)
				return
			}
			w.Write([]byte(body))
		})
	}
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	guard := []string{"--http", addr, "--ca-file", caFile, "--token-file", tokenFile}

	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"status"}, `"points": 12`},
		{[]string{"audit", "key"}, pub},
		{[]string{"model", "export"}, `"model": 3`},
	} {
		code, out, errs := runCmd(append(tc.cmd, guard...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s with the token: exit %d, out %q, stderr %q; want %q", tc.cmd, code, out, errs, tc.want)
		}
		code, _, errs = runCmd(append(tc.cmd, "--http", addr, "--ca-file", caFile)...)
		if code == 0 || !strings.Contains(errs, "needs authentication") || !strings.Contains(errs, "--token-file") {
			t.Errorf("%s without the token: exit %d, stderr %q; want a failure naming --token-file", tc.cmd, code, errs)
		}
	}
	if code, _, errs := runCmd("status", "--http", srv.URL, "--token-file", tokenFile); code == 0 || !strings.Contains(errs, "certificate") {
		t.Errorf("status without --ca-file: exit %d, stderr %q; want an untrusted certificate", code, errs)
	}
	if code, _, errs := runCmd("status", "--http", "http://cairn.invalid:8080", "--token-file", tokenFile); code == 0 || !strings.Contains(errs, "unencrypted") {
		t.Errorf("status with a token over plain http: exit %d, stderr %q; want a refusal to send it", code, errs)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd(append([]string{"status"}, guard...)...); code == 0 || !strings.Contains(errs, "chmod 600") {
		t.Errorf("status with a 0644 token file: exit %d, stderr %q; want a refusal saying chmod 600", code, errs)
	}
	if _, err := hex.DecodeString(pub); err != nil {
		t.Fatal(err)
	}
}
