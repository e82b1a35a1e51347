package admin

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// Security guards a Server: TLS from a certificate and key, and authentication by a
// bearer token, a client certificate (mutual TLS), or either of the two when both are
// set. The zero value serves plain HTTP with every path open, as cairnd does on
// loopback by default; the rule that an address beyond loopback needs TLS and
// authentication is config.Validate's.
type Security struct {
	// CertFile and KeyFile are the PEM certificate chain and private key the server
	// presents; both set, it speaks HTTPS only (TLS 1.2 or later, HTTP/2 offered).
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of the CAs whose client certificates authenticate
	// a request. It needs CertFile. The handshake asks for a certificate without
	// requiring one (so that OpenPaths stay open to probes without one), and fails when
	// the one presented does not verify: expired, not yet valid, or of another CA.
	ClientCAFile string
	// TokenFile holds the bearer token (ReadTokenFile's rules, the file's mode
	// included). It also enables the UI's login page (GET and POST /ui/login).
	TokenFile string
	// OpenPaths are served without authentication, matched exactly (e.g. "/healthz"),
	// or, for a path that ends in "/" (e.g. "/schemas/"), that path without its slash
	// and every path below it, cleaned first (so "/schemas/../status" is not below it).
	OpenPaths []string
	// SessionTTL is how long a UI login lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
}

// Guard constants.
const (
	// MinTokenLen is the shortest token ReadTokenFile accepts.
	MinTokenLen = 16
	// DefaultSessionTTL is a UI login's lifetime when Security.SessionTTL is 0.
	DefaultSessionTTL = 12 * time.Hour
	// SessionCookie is the UI session cookie's name; its Path is /ui.
	SessionCookie = "cairn_session"
	// LoginPath is the UI's login page.
	LoginPath = "/ui/login"
	// maxSessions bounds the server-side sessions; the one expiring first makes room.
	maxSessions = 1024
	// maxLoginBytes bounds a login form's body.
	maxLoginBytes = 4 << 10
)

// ReadTokenFile reads a bearer token: the file must be a regular file that only its
// owner may read or write (mode 0600 or stricter, else an error matching
// ErrTokenFileMode), and hold at least MinTokenLen printable ASCII characters without
// spaces once surrounding whitespace (a trailing newline) is trimmed (else
// ErrTokenFile). The mode is taken from the opened file, so a file swapped between the
// check and the read is not read.
func ReadTokenFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrTokenFile, name)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: only its owner may read it (chmod 600 %s)", ErrTokenFileMode, name, perm, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTokenFile, name, err)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) < MinTokenLen {
		return nil, fmt.Errorf("%w: %s: a token of %d characters, want at least %d", ErrTokenFile, name, len(tok), MinTokenLen)
	}
	for _, c := range tok {
		if c < 0x21 || c > 0x7e {
			return nil, fmt.Errorf("%w: %s: the token must be printable ASCII without spaces", ErrTokenFile, name)
		}
	}
	return tok, nil
}

// guard decides, per request, whether it may reach the routes (authorize) and answers
// the ones that may not.
type guard struct {
	token    *[sha256.Size]byte // SHA-256 of the token; nil without one
	mtls     bool               // a verified client certificate authenticates
	open     map[string]bool
	sessions *sessions // UI logins; nil without a token
}

// build loads the files of s (every problem joined) into the guard and the server's
// TLS configuration (nil for plain HTTP).
func (s Security) build() (*guard, *tls.Config, error) {
	var errs []error
	g := &guard{open: map[string]bool{}}
	var tc *tls.Config
	switch {
	case (s.CertFile == "") != (s.KeyFile == ""):
		errs = append(errs, fmt.Errorf("%w: certificate %q and key %q go together", ErrSecurity, s.CertFile, s.KeyFile))
	case s.CertFile != "":
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: certificate %s, key %s: %w", ErrSecurity, s.CertFile, s.KeyFile, err))
		}
		tc = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if s.ClientCAFile != "" {
		g.mtls = true
		pool, err := loadCAs(s.ClientCAFile)
		switch {
		case err != nil:
			errs = append(errs, err)
		case s.CertFile == "":
			errs = append(errs, fmt.Errorf("%w: client CA file %s needs the server's certificate and key (TLS)", ErrSecurity, s.ClientCAFile))
		case tc != nil:
			tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
	}
	if s.TokenFile != "" {
		tok, err := ReadTokenFile(s.TokenFile)
		if err != nil {
			errs = append(errs, err)
		} else {
			sum := sha256.Sum256(tok)
			g.token = &sum
			ttl := s.SessionTTL
			if ttl <= 0 {
				ttl = DefaultSessionTTL
			}
			g.sessions = &sessions{ttl: ttl, now: time.Now, byID: map[[sha256.Size]byte]time.Time{}}
		}
	}
	for _, p := range s.OpenPaths {
		g.open[p] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return g, tc, nil
}

// loadCAs reads a PEM bundle of certificates into a pool.
func loadCAs(name string) (*x509.CertPool, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %w", ErrSecurity, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: CA file %s: no PEM certificate", ErrSecurity, name)
	}
	return pool, nil
}

// on says whether requests must authenticate at all.
func (g *guard) on() bool { return g.token != nil || g.mtls }

// tokenOK compares tok with the token in constant time (both hashed first, so that
// neither the contents nor the length leak through timing).
func (g *guard) tokenOK(tok string) bool {
	if g.token == nil {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// isOpen says whether p is an open path (Security.OpenPaths).
func (g *guard) isOpen(p string) bool {
	if g.open[p] {
		return true
	}
	c := path.Clean(p) + "/"
	for q := range g.open {
		if strings.HasSuffix(q, "/") && strings.HasPrefix(c, q) {
			return true
		}
	}
	return false
}

// underUI says whether p (cleaned first, so "/ui/../model" is not) is /ui or below it.
func underUI(p string) bool {
	p = path.Clean(p)
	return p == "/ui" || strings.HasPrefix(p, "/ui/")
}

// authorize says whether r may reach the routes: every request when the guard is
// off; else an open path, the login page, a verified client certificate, the bearer
// token, or under /ui a live session cookie.
func (g *guard) authorize(r *http.Request) bool {
	if !g.on() || g.isOpen(r.URL.Path) {
		return true
	}
	if g.sessions != nil && r.URL.Path == LoginPath {
		return true
	}
	if g.mtls && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && g.tokenOK(strings.TrimSpace(tok)) {
		return true
	}
	if g.sessions != nil && underUI(r.URL.Path) {
		if c, err := r.Cookie(SessionCookie); err == nil && g.sessions.valid(c.Value) {
			return true
		}
	}
	return false
}

// deny answers a request authorize refused: a browser's GET under /ui goes to the
// login page (303, with the page it asked for in next) when there is one (a token and
// a UI); anything else is 401.
func (h *Server) deny(w http.ResponseWriter, r *http.Request) {
	if h.guard.sessions != nil && h.checks.UI != nil && underUI(r.URL.Path) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		http.Redirect(w, r, LoginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	var how []string
	if h.guard.token != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
		how = append(how, "a bearer token (Authorization: Bearer TOKEN)")
	}
	if h.guard.mtls {
		how = append(how, "a client certificate")
	}
	h.reply(w, r, http.StatusUnauthorized, "401 unauthorized: this path needs "+strings.Join(how, " or "), nil)
}

// sessions are the UI's logins: random ids (32 bytes from crypto/rand, base64url in
// the cookie) kept server-side by their SHA-256, each with its expiry. A restart
// forgets them all; at most maxSessions live at once.
type sessions struct {
	mu   sync.Mutex
	ttl  time.Duration
	now  func() time.Time
	byID map[[sha256.Size]byte]time.Time // SHA-256 of the id → expiry
}

// create starts a session and returns its id.
func (s *sessions) create() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var first [sha256.Size]byte
	var firstExp time.Time
	for k, exp := range s.byID {
		if !now.Before(exp) {
			delete(s.byID, k)
		} else if firstExp.IsZero() || exp.Before(firstExp) {
			first, firstExp = k, exp
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, first)
	}
	s.byID[sha256.Sum256([]byte(id))] = now.Add(s.ttl)
	return id
}

// valid says whether id is a live session; an expired one is forgotten.
func (s *sessions) valid(id string) bool {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.byID[k]
	if ok && !s.now().Before(exp) {
		delete(s.byID, k)
		return false
	}
	return ok
}

// loginPage is the login form: no script, no outside resource.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cairn: sign in</title></head>
<body><h1>cairn</h1>
<form method="post" action="/ui/login">
<input type="hidden" name="next" value="{{.Next}}">
<p><label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Sign in</button></p>
</form>
{{if .Failed}}<p role="alert">Wrong token.</p>{{end}}
</body></html>
`))

// loginCSP is the login page's Content-Security-Policy: nothing but a form posted here.
const loginCSP = "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// safeNext is where a login sends the browser: next when it is a page of the UI on
// this origin, else /ui.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(next, "/") ||
		strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') || !underUI(u.Path) || u.Path == LoginPath {
		return "/ui"
	}
	return next
}

// loginForm renders the login page with status.
func (h *Server) loginForm(w http.ResponseWriter, r *http.Request, status int, next string, failed bool) {
	var b bytes.Buffer
	if err := loginPage.Execute(&b, struct {
		Next   string
		Failed bool
	}{safeNext(next), failed}); err != nil {
		h.reply(w, r, http.StatusInternalServerError, "login page: "+err.Error(), err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", loginCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	w.Write(b.Bytes()) //nolint:errcheck // a failed write means the client left
}

// login is POST /ui/login: the right token starts a session (the cookie, then 303 to
// next); a wrong one answers the form again with 401 and is logged at warn level.
func (h *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		h.reply(w, r, http.StatusBadRequest, "login: "+err.Error(), err)
		return
	}
	next := r.PostForm.Get("next")
	if !h.guard.tokenOK(r.PostForm.Get("token")) {
		h.log.Warn().Str("remote_addr", r.RemoteAddr).Msg("ui login with a wrong token")
		if lw, ok := w.(*loggedWriter); ok {
			lw.logged = true
		}
		h.loginForm(w, r, http.StatusUnauthorized, next, true)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: h.guard.sessions.create(), Path: "/ui",
		MaxAge: int(h.guard.sessions.ttl / time.Second), HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}
