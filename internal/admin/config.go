package admin

import "github.com/cairnhq/cairn/config"

// SecurityOf is the guard of cairnd's HTTP surface under cfg (http_tls, http_auth). The
// files are read by Listen, which fails the start on a bad one (a token file others
// may read included); config.Validate has already refused an address beyond loopback
// without TLS and authentication.
func SecurityOf(cfg config.Config) Security {
	return Security{
		CertFile: cfg.HTTPTLS.CertFile, KeyFile: cfg.HTTPTLS.KeyFile,
		ClientCAFile: cfg.HTTPAuth.ClientCAFile, TokenFile: cfg.HTTPAuth.TokenFile,
		OpenPaths: cfg.HTTPAuth.OpenPaths, SessionTTL: cfg.HTTPAuth.SessionTTL,
	}
}
