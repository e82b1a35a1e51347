package admin

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// ClientOptions say how a client authenticates to a guarded Server and trusts it: the
// other side of Security. The zero value is a plain client.
type ClientOptions struct {
	// TokenFile holds the bearer token sent with every request (ReadTokenFile's rules:
	// mode 0600 or stricter). It is sent only over HTTPS or to a loopback host: the
	// client refuses to put it on a network in clear.
	TokenFile string
	// CAFile is a PEM bundle of the CAs that may sign the server's certificate, in place
	// of the system roots (a private CA).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key for mutual TLS; both or
	// neither.
	CertFile, KeyFile string
	// Timeout bounds each request, 0 for none (the caller's context still applies).
	Timeout time.Duration
}

// TLS says whether o configures TLS (a CA or a client certificate), so that a bare
// host:port should be reached over https.
func (o ClientOptions) TLS() bool { return o.CAFile != "" || o.CertFile != "" }

// NewClient is the HTTP client of o (cairnctl's, for every command that talks to the
// daemon's HTTP surface). It follows no redirect, so the token goes only to the URL
// asked for. Every problem with the files is reported at once.
func NewClient(o ClientOptions) (*http.Client, error) {
	var errs []error
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pool, err := loadCAs(o.CAFile)
		if err != nil {
			errs = append(errs, err)
		}
		tc.RootCAs = pool
	}
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		errs = append(errs, fmt.Errorf("%w: client certificate %q and key %q go together", ErrSecurity, o.CertFile, o.KeyFile))
	case o.CertFile != "":
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: client certificate %s, key %s: %w", ErrSecurity, o.CertFile, o.KeyFile, err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	var token string
	if o.TokenFile != "" {
		tok, err := ReadTokenFile(o.TokenFile)
		if err != nil {
			errs = append(errs, err)
		}
		token = string(tok)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tc
	return &http.Client{
		Transport:     &bearer{base: base, token: token},
		Timeout:       o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// bearer adds the token to each request it sends.
type bearer struct {
	base  http.RoundTripper
	token string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.base.RoundTrip(r)
	}
	if r.URL.Scheme != "https" && !loopbackHost(r.URL.Hostname()) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%w: refusing to send the bearer token unencrypted to %s: use https://", ErrSecurity, r.URL.Host)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change its argument
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport underneath
// (http.Client.CloseIdleConnections reaches it through this method).
func (b *bearer) CloseIdleConnections() {
	if c, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// loopbackHost says whether host is localhost or a loopback IP address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
