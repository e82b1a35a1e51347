package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/metrics"
)

// testToken is the bearer token of the guarded servers under test.
const testToken = "s3cret-t0ken-of-32-characters-xx"

// pki is a CA made for one test, with the files of what it issued.
type pki struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

var serial struct {
	mu sync.Mutex
	n  int64
}

func nextSerial() *big.Int {
	serial.mu.Lock()
	defer serial.mu.Unlock()
	serial.n++
	return big.NewInt(serial.n)
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pki{dir: dir, cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.file, "CERTIFICATE", der)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue makes a leaf certificate valid from notBefore to notAfter, for the server
// (127.0.0.1) or a client, and returns its certificate and key files.
func (p *pki) issue(t *testing.T, name string, client bool, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// writeToken writes the token into a file of mode perm.
func writeToken(t *testing.T, token string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // not narrowed by the umask
		t.Fatal(err)
	}
	return p
}

// guarded is a Server under sec running on 127.0.0.1:0 until the test ends, with every
// endpoint answering.
type guarded struct {
	h    *Server
	logs *httpLogBuffer
	base string // scheme://host:port
}

func startGuarded(t *testing.T, sec Security) *guarded {
	t.Helper()
	logs := &httpLogBuffer{}
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ui page "+r.URL.Path) })
	checks := Checks{
		Status:   func() any { return map[string]int{"points": 3} },
		Model:    func(uint64) (any, error) { return map[string]string{"landmarks": "training inputs"}, nil },
		AuditKey: func() any { return map[string]string{"public_key": "ab"} },
		UI:       ui,
	}
	h, err := Listen("127.0.0.1:0", metrics.New().Handler(), checks, sec, zerolog.New(logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	scheme := "http"
	if sec.CertFile != "" {
		scheme = "https"
	}
	return &guarded{h: h, logs: logs, base: scheme + "://" + h.Addr()}
}

// client trusts ca (nil: plain HTTP) and presents the certificate in files (if any);
// it follows no redirect and keeps no cookie.
func client(t *testing.T, ca *pki, files ...string) *http.Client {
	t.Helper()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AddCert(ca.cert)
	}
	if len(files) == 2 {
		cert, err := tls.LoadX509KeyPair(files[0], files[1])
		if err != nil {
			t.Fatal(err)
		}
		// Presented whatever CAs the server names, so that the server's own check is
		// what a foreign certificate meets.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends method path with the header pairs kv and returns the response and body.
func (g *guarded) do(t *testing.T, c *http.Client, method, path string, body io.Reader, kv ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, g.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// TestReadTokenFile: the token file's mode must be 0600 or stricter and its contents a
// usable token; Listen refuses to start on a bad one and binds nothing.
func TestReadTokenFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token string
		perm  os.FileMode
		want  error // nil: accepted
	}{
		{"0600", testToken, 0o600, nil},
		{"0400", testToken, 0o400, nil},
		{"0644", testToken, 0o644, ErrTokenFileMode},
		{"0640", testToken, 0o640, ErrTokenFileMode},
		{"0602", testToken, 0o602, ErrTokenFileMode},
		{"short", "short", 0o600, ErrTokenFile},
		{"space inside", "s3cret t0ken of 32 characters xx", 0o600, ErrTokenFile},
	} {
		p := writeToken(t, tc.token, tc.perm)
		tok, err := ReadTokenFile(p)
		switch {
		case tc.want == nil && (err != nil || string(tok) != tc.token):
			t.Errorf("%s: ReadTokenFile = %q, %v; want %q (newline trimmed)", tc.name, tok, err, tc.token)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: ReadTokenFile error %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == ErrTokenFileMode && !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("%s: %v does not say how to fix it", tc.name, err)
		}
	}
	if _, err := ReadTokenFile(t.TempDir()); !errors.Is(err, ErrTokenFile) {
		t.Errorf("a directory: %v, want ErrTokenFile", err)
	}
	if _, err := ReadTokenFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrTokenFile) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrTokenFile and ErrNotExist", err)
	}

	// Listen refuses the open file before binding: the port stays free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Listen(addr, metrics.New().Handler(), Checks{}, Security{TokenFile: writeToken(t, testToken, 0o644)}, zerolog.Nop())
	if !errors.Is(err, ErrTokenFileMode) {
		t.Fatalf("Listen with a 0644 token file: %v, want ErrTokenFileMode", err)
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("the refused Listen left %s bound: %v", addr, err)
	} else {
		ln.Close()
	}
}

// TestGuardToken runs a token-guarded HTTPS server over TCP: wrong token, no token,
// right token, the open paths open and every other path closed.
func TestGuardToken(t *testing.T) {
	ca := newPKI(t, "server")
	cert, key := ca.issue(t, "cairnd", false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	g := startGuarded(t, Security{CertFile: cert, KeyFile: key, TokenFile: writeToken(t, testToken, 0o600),
		OpenPaths: []string{"/healthz", "/readyz", "/metrics"}})
	c := client(t, ca)
	right, wrong := "Bearer "+testToken, "Bearer "+strings.ToUpper(testToken)
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200}, {"/metrics", "", 200},
		{"/status", "", 401}, {"/model", "", 401}, {"/audit/key", "", 401}, {"/nowhere", "", 401},
		{"/status", wrong, 401}, {"/model", wrong, 401}, {"/status", "Bearer", 401}, {"/status", "Basic " + testToken, 401},
		{"/status", "Bearer " + testToken[:20], 401},
		{"/status", right, 200}, {"/model", right, 200}, {"/audit/key", right, 200}, {"/ui", right, 200},
		{"/status", "bearer  " + testToken, 200}, {"/nowhere", right, 404},
		{"/healthz/../model", "", 401},
	} {
		resp, body, err := g.do(t, c, "GET", tc.path, nil, "Authorization", tc.auth)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with %q: %d %q, want %d", tc.path, tc.auth, resp.StatusCode, body, tc.want)
		}
		if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") != `Bearer realm="cairn"` {
			t.Errorf("GET %s: 401 without WWW-Authenticate", tc.path)
		}
		if resp.StatusCode == 401 && strings.Contains(body, "training inputs") {
			t.Errorf("GET %s: 401 leaks the body %q", tc.path, body)
		}
	}
	// Plain HTTP to the HTTPS port is not served.
	if resp, _, err := (&guarded{base: "http://" + g.h.Addr()}).do(t, client(t, nil), "GET", "/healthz", nil); err == nil && resp.StatusCode == 200 {
		t.Errorf("plain HTTP to the TLS server answered 200")
	}
	// open_paths empty closes the probes too.
	g2 := startGuarded(t, Security{TokenFile: writeToken(t, testToken, 0o600)})
	if resp, _, err := g2.do(t, client(t, nil), "GET", "/healthz", nil); err != nil || resp.StatusCode != 401 {
		t.Errorf("GET /healthz with no open path: %v %v, want 401", resp, err)
	}
}

// TestGuardMTLS: a client certificate of the configured CA authenticates; an expired one,
// one not yet valid and one of a foreign CA fail the handshake; without a certificate
// only the open paths answer. With a token as well, either one suffices.
func TestGuardMTLS(t *testing.T) {
	srvCA, clientCA, foreign := newPKI(t, "server"), newPKI(t, "clients"), newPKI(t, "foreign")
	cert, key := srvCA.issue(t, "cairnd", false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	now := time.Now()
	goodC, goodK := clientCA.issue(t, "ops", true, now.Add(-time.Hour), now.Add(time.Hour))
	expiredC, expiredK := clientCA.issue(t, "expired", true, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	futureC, futureK := clientCA.issue(t, "future", true, now.Add(24*time.Hour), now.Add(48*time.Hour))
	foreignC, foreignK := foreign.issue(t, "intruder", true, now.Add(-time.Hour), now.Add(time.Hour))

	for _, withToken := range []bool{false, true} {
		sec := Security{CertFile: cert, KeyFile: key, ClientCAFile: clientCA.file, OpenPaths: []string{"/healthz"}}
		if withToken {
			sec.TokenFile = writeToken(t, testToken, 0o600)
		}
		g := startGuarded(t, sec)
		if resp, body, err := g.do(t, client(t, srvCA, goodC, goodK), "GET", "/model", nil); err != nil || resp.StatusCode != 200 {
			t.Errorf("token %v: GET /model with a good client certificate: %v %q %v, want 200", withToken, resp, body, err)
		}
		for name, files := range map[string][]string{"expired": {expiredC, expiredK}, "not yet valid": {futureC, futureK}, "foreign CA": {foreignC, foreignK}} {
			resp, _, err := g.do(t, client(t, srvCA, files...), "GET", "/status", nil)
			if err == nil {
				t.Errorf("token %v: GET /status with the %s client certificate answered %d, want a failed handshake", withToken, name, resp.StatusCode)
			}
		}
		noCert := client(t, srvCA)
		if resp, _, err := g.do(t, noCert, "GET", "/healthz", nil); err != nil || resp.StatusCode != 200 {
			t.Errorf("token %v: GET /healthz without a certificate: %v %v, want 200", withToken, resp, err)
		}
		if resp, _, err := g.do(t, noCert, "GET", "/status", nil); err != nil || resp.StatusCode != 401 {
			t.Errorf("token %v: GET /status without a certificate: %v %v, want 401", withToken, resp, err)
		}
		want := 401
		if withToken {
			want = 200
		}
		if resp, _, err := g.do(t, noCert, "GET", "/status", nil, "Authorization", "Bearer "+testToken); err != nil || resp.StatusCode != want {
			t.Errorf("token %v: GET /status with the token and no certificate: %v %v, want %d", withToken, resp, err, want)
		}
	}
}

// TestLoginFlow: a browser without a session is sent to the login form; the right token
// gets a Secure, HttpOnly, SameSite=Strict session cookie scoped to /ui, with which the
// UI answers (and nothing else does); a wrong token, a forged or expired session and a
// cross-site post do not.
func TestLoginFlow(t *testing.T) {
	ca := newPKI(t, "server")
	cert, key := ca.issue(t, "cairnd", false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	g := startGuarded(t, Security{CertFile: cert, KeyFile: key, TokenFile: writeToken(t, testToken, 0o600), SessionTTL: time.Hour})
	c := client(t, ca)
	form := func(token, next string) io.Reader {
		return strings.NewReader(url.Values{"token": {token}, "next": {next}}.Encode())
	}
	formType := "application/x-www-form-urlencoded"

	resp, _, err := g.do(t, c, "GET", "/ui/audits?x=1", nil)
	if err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Faudits%3Fx%3D1" {
		t.Fatalf("GET /ui/audits without a session: %v %v, want 303 to the login page", resp, err)
	}
	resp, body, err := g.do(t, c, "GET", "/ui/login?next=%2Fui%2Faudits", nil)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `value="/ui/audits"`) ||
		resp.Header.Get("Content-Security-Policy") != loginCSP || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("GET /ui/login: %v %q %v, want the form with next and its headers", resp, body, err)
	}

	resp, body, err = g.do(t, c, "POST", "/ui/login", form("wrong-token-wrong-token", "/ui/audits"), "Content-Type", formType)
	if err != nil || resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !strings.Contains(body, "Wrong token") {
		t.Errorf("POST /ui/login with a wrong token: %v %q %v, want 401, the form again, no cookie", resp, body, err)
	}
	warned := false
	for _, e := range g.logs.entries(t) {
		warned = warned || e["level"] == "warn" && e["message"] == "ui login with a wrong token"
	}
	if !warned {
		t.Errorf("a failed login was not logged at warn level")
	}

	resp, _, err = g.do(t, c, "POST", "/ui/login", form(testToken, "/ui/audits"), "Content-Type", formType, "Sec-Fetch-Site", "cross-site")
	if err != nil || resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("cross-site POST /ui/login: %v %v, want 403 and no cookie", resp, err)
	}

	resp, _, err = g.do(t, c, "POST", "/ui/login", form(testToken, "/ui/audits"), "Content-Type", formType)
	if err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/audits" {
		t.Fatalf("POST /ui/login with the token: %v %v, want 303 to /ui/audits", resp, err)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			session = ck
		}
	}
	if session == nil {
		t.Fatalf("no %s cookie in %q", SessionCookie, resp.Header["Set-Cookie"])
	}
	if !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui" ||
		session.MaxAge != 3600 || len(session.Value) < 40 {
		t.Errorf("session cookie %q: want Secure, HttpOnly, SameSite=Strict, Path=/ui, Max-Age=3600 and a long random value",
			resp.Header.Get("Set-Cookie"))
	}
	withCookie := func(path, value string) (int, string) {
		t.Helper()
		resp, body, err := g.do(t, c, "GET", path, nil, "Cookie", SessionCookie+"="+value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	if code, body := withCookie("/ui/audits", session.Value); code != 200 || body != "ui page /ui/audits" {
		t.Errorf("GET /ui/audits with the session: %d %q, want the page", code, body)
	}
	if code, _ := withCookie("/model", session.Value); code != 401 {
		t.Errorf("GET /model with the UI session: %d, want 401 (the cookie is for /ui only)", code)
	}
	if code, _ := withCookie("/ui", "forged"+session.Value[6:]); code != http.StatusSeeOther {
		t.Errorf("GET /ui with a forged session: %d, want 303 to the login page", code)
	}

	// A second login gets another session; a login to an outside next goes to /ui.
	resp, _, err = g.do(t, c, "POST", "/ui/login", form(testToken, "//evil.example/ui"), "Content-Type", formType)
	if err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui" {
		t.Errorf("POST /ui/login with next //evil.example/ui: %v %v, want 303 to /ui", resp, err)
	}
	for _, next := range []string{"https://evil.example/ui", "/model", "/ui/../model", `/\evil.example`, "/ui/login"} {
		if got := safeNext(next); got != "/ui" {
			t.Errorf("safeNext(%q) = %q, want /ui", next, got)
		}
	}

	// Expiry: an hour later the session is gone.
	g.h.guard.sessions.mu.Lock()
	g.h.guard.sessions.now = func() time.Time { return time.Now().Add(time.Hour + time.Second) }
	g.h.guard.sessions.mu.Unlock()
	if code, _ := withCookie("/ui/audits", session.Value); code != http.StatusSeeOther {
		t.Errorf("GET /ui/audits with an expired session: %d, want 303 to the login page", code)
	}
}

// TestSessionsBounded: the server keeps at most maxSessions; the one expiring first
// makes room.
func TestSessionsBounded(t *testing.T) {
	now := time.Now()
	s := &sessions{ttl: time.Hour, now: func() time.Time { return now }, byID: map[[32]byte]time.Time{}}
	first := s.create()
	for range maxSessions {
		now = now.Add(time.Millisecond)
		s.create()
	}
	if len(s.byID) != maxSessions || s.valid(first) {
		t.Errorf("%d sessions, first still valid %v; want %d and the first one dropped", len(s.byID), s.valid(first), maxSessions)
	}
}

// TestNewClient: the client sends the token and trusts the CA of ClientOptions; it
// refuses to send the token in clear beyond loopback, follows no redirect and refuses
// a token file others may read.
func TestNewClient(t *testing.T) {
	ca, clients := newPKI(t, "server"), newPKI(t, "clients")
	cert, key := ca.issue(t, "cairnd", false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ccert, ckey := clients.issue(t, "ops", true, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	tokenFile := writeToken(t, testToken, 0o600)
	g := startGuarded(t, Security{CertFile: cert, KeyFile: key, TokenFile: tokenFile, ClientCAFile: clients.file})

	for name, o := range map[string]ClientOptions{
		"token":       {TokenFile: tokenFile, CAFile: ca.file},
		"certificate": {CAFile: ca.file, CertFile: ccert, KeyFile: ckey},
	} {
		c, err := NewClient(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections) // before the server's Shutdown
		resp, body, err := g.do(t, c, "GET", "/status", nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: GET /status: %v %q %v, want 200", name, resp, body, err)
		}
		if resp, _, err := g.do(t, c, "GET", "/ui", nil, "Authorization", ""); name == "certificate" && (err != nil || resp.StatusCode != 200) {
			t.Errorf("%s: GET /ui: %v %v, want 200", name, resp, err)
		}
	}
	c, err := NewClient(ClientOptions{CAFile: ca.file})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	if resp, _, err := g.do(t, c, "GET", "/ui", nil); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("no credentials: GET /ui: %v %v, want the login redirect unfollowed (303)", resp, err)
	}
	if _, _, err := g.do(t, c, "GET", "/status", nil); err != nil {
		t.Errorf("no credentials: %v, want an answer (401)", err)
	}

	tc, err := NewClient(ClientOptions{TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Get("http://cairn.example:8080/status"); !errors.Is(err, ErrSecurity) || !strings.Contains(err.Error(), "unencrypted") {
		t.Errorf("token over plain HTTP beyond loopback: %v, want a refusal", err)
	}
	if _, err := NewClient(ClientOptions{TokenFile: writeToken(t, testToken, 0o644)}); !errors.Is(err, ErrTokenFileMode) {
		t.Errorf("NewClient with a 0644 token file: %v, want ErrTokenFileMode", err)
	}
	if _, err := NewClient(ClientOptions{CertFile: ccert}); !errors.Is(err, ErrSecurity) {
		t.Errorf("NewClient with a certificate and no key: %v, want ErrSecurity", err)
	}
}

// TestSecurityErrors: Listen reports every problem of its Security at once, each
// naming its file.
func TestSecurityErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	_, err := Listen("127.0.0.1:0", metrics.New().Handler(), Checks{}, Security{CertFile: missing, KeyFile: missing,
		ClientCAFile: filepath.Join(dir, "ca.pem"), TokenFile: filepath.Join(dir, "token")}, zerolog.Nop())
	for _, want := range []string{"missing.pem", "ca.pem", "token"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Listen = %v, want it to name %s", err, want)
		}
	}
	if _, err := Listen("127.0.0.1:0", metrics.New().Handler(), Checks{}, Security{ClientCAFile: newPKI(t, "c").file}, zerolog.Nop()); !errors.Is(err, ErrSecurity) {
		t.Errorf("a client CA without TLS: %v, want ErrSecurity", err)
	}
}
