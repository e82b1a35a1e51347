package admin

import (
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
)

// TestSecurityOf: every http_tls and http_auth setting reaches the guard.
func TestSecurityOf(t *testing.T) {
	cfg := config.Default()
	cfg.HTTPTLS.CertFile, cfg.HTTPTLS.KeyFile = "c.pem", "k.pem"
	cfg.HTTPAuth.ClientCAFile, cfg.HTTPAuth.TokenFile = "ca.pem", "token"
	cfg.HTTPAuth.OpenPaths, cfg.HTTPAuth.SessionTTL = []string{"/healthz"}, time.Hour
	got := SecurityOf(cfg)
	want := Security{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem", TokenFile: "token",
		OpenPaths: []string{"/healthz"}, SessionTTL: time.Hour}
	if got.CertFile != want.CertFile || got.KeyFile != want.KeyFile || got.ClientCAFile != want.ClientCAFile ||
		got.TokenFile != want.TokenFile || !slices.Equal(got.OpenPaths, want.OpenPaths) || got.SessionTTL != want.SessionTTL {
		t.Errorf("SecurityOf = %+v, want %+v", got, want)
	}
}
