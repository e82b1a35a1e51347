package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatus serves /status from a stand-in daemon and checks that the command prints
// its JSON, and that non-JSON answers and HTTP errors fail clearly.
func TestStatus(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ready":true,"points":12,"model":3}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	code, out, errs := runCmd("status", "--http", addr)
	if code != 0 || !strings.Contains(out, `"points": 12`) || !strings.Contains(out, `"ready": true`) {
		t.Errorf("status: exit %d, out %q, stderr %q; want the daemon's JSON", code, out, errs)
	}

	bad := http.NewServeMux()
	bad.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) })
	srvHTML := httptest.NewServer(bad)
	defer srvHTML.Close()
	if code, _, errs := runCmd("status", "--http", srvHTML.URL); code == 0 || !strings.Contains(errs, "not JSON") {
		t.Errorf("status of a non-JSON server: exit %d, stderr %q; want failure saying not JSON", code, errs)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	defer down.Close()
	if code, _, errs := runCmd("status", "--http", down.URL); code == 0 || !strings.Contains(errs, "404") {
		t.Errorf("status of a 404: exit %d, stderr %q; want failure naming the HTTP status", code, errs)
	}
}
