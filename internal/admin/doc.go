// Package admin is cairnd's operator HTTP endpoint: /healthz, /readyz, /metrics,
// /status, /model, /audit/key, /ui and /schemas/ (the events' JSON Schemas, package
// schemas), routed by an http.ServeMux with method patterns (GET, which also
// matches HEAD, and POST for /ui/login only; any other method is 405 with an Allow
// header, any other path 404), behind a guard (Security).
//
// # Guard
//
// The zero Security serves plain HTTP with every path open (cairnd on loopback, its
// default; config.Validate refuses an address beyond loopback without TLS and
// authentication). With a certificate and key the server speaks HTTPS only. With a
// token file or a client CA every request must authenticate, except the paths of
// Security.OpenPaths (exact, or below one that ends in "/", such as /schemas/) and the
// login page, by any one of:
//
//   - a client certificate that verified against the client CA (mutual TLS: the
//     handshake asks for one without requiring it, so probes of open paths need none,
//     and fails for one that is expired, not yet valid or of another CA);
//   - "Authorization: Bearer TOKEN", compared in constant time (SHA-256 of both sides,
//     subtle.ConstantTimeCompare), so neither contents nor length leak;
//   - under /ui only, a session cookie from the login page.
//
// A refused request gets 401 with WWW-Authenticate (Bearer) and no body of the path,
// except a GET or HEAD under /ui when a token is configured, which gets 303 to
// /ui/login?next=PATH. The token file is read once, at Listen: a regular file, mode
// 0600 or stricter (ErrTokenFileMode otherwise, the start fails), at least MinTokenLen
// printable ASCII characters.
//
// # UI login and sessions
//
// GET /ui/login is a script-free form (its own CSP: only a form posted to this origin);
// POST /ui/login with the right token sets the cookie cairn_session: 32 random bytes
// (crypto/rand, base64url), Path /ui, Max-Age the session lifetime (12 h by default),
// Secure, HttpOnly, SameSite=Strict, then answers 303 to next (a page under /ui of this
// origin, else /ui). Sessions are server-side: a map from the SHA-256 of the id to its
// expiry, under a mutex, at most 1024 (the one expiring first makes room), checked and
// expired on each request; a restart forgets them. A wrong token answers the form again
// with 401 and a warning in the log (remote_addr). Cross-origin posts are refused
// (http.CrossOriginProtection: Sec-Fetch-Site, Origin), the body is bounded to 4 KiB.
// Secure cookies over plain HTTP work on loopback (browsers treat localhost and
// 127.0.0.1 as secure contexts); beyond loopback the server speaks HTTPS anyway.
//
// # Client
//
// NewClient is the other side, for cairnctl: it sends the token of a token file (same
// rules), trusts a CA file in place of the system roots, presents a client certificate,
// follows no redirect, and refuses to send the token over plain HTTP beyond loopback.
//
// # Contract
//
// Listen binds the address at once, so a port conflict fails the daemon's start and
// ":0" picks a free port. Run serves until its context ends, then shuts down
// gracefully (requests in flight get up to five seconds) and returns only after its
// serving goroutine has exited; Close releases the listener if Run never ran and is
// idempotent. The checks are the caller's functions, called concurrently on the
// server's goroutines, once per request: /healthz and /readyz answer 200 "ok" or 503
// with the check's error text; /status and /model answer JSON encoded in memory first,
// so a value that does not encode is a clean 500. A panic in a check costs only its
// request (net/http recovers it and the structured log gets a warning). Every non-2xx
// answer is logged at debug level with fields method, path, status and, for a failed
// check, error. Timeouts and a header size bound keep a slow or hostile client from
// holding a connection.
package admin
