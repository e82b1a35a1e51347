// Package admin is cairnd's operator HTTP endpoint: /healthz, /readyz, /metrics,
// /status, /model and /audit/key, routed by an http.ServeMux with method patterns (GET, which also
// matches HEAD; any other method is 405 with an Allow header, any other path 404).
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
