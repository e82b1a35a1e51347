package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/schemas"
)

// Checks are the probes the HTTP endpoints report. A nil Live or Ready always passes;
// a nil Status makes /status answer 404. They are called on the server's goroutines,
// concurrently, once per request, so they must be safe for concurrent use and quick.
type Checks struct {
	// Live answers /healthz: 200 "ok" when it returns nil, else 503 with the error text.
	Live func() error
	// Ready answers /readyz, the same way.
	Ready func() error
	// Status answers /status: 200 with the JSON encoding of the value it returns
	// (500 when it does not encode).
	Status func() any
	// Model answers /model (version 0) and /model?model=V (version V > 0; anything else
	// is 400): 200 with the JSON encoding of the value, or the status ModelStatus gives
	// its error (500 without ModelStatus) with the error text. Nil makes /model answer
	// 404.
	Model func(version uint64) (any, error)
	// AuditKey answers /audit/key: 200 with the JSON encoding of the value (the public
	// half of the audit signing key). Nil makes /audit/key answer 404.
	AuditKey func() any
	// ModelStatus maps an error of Model to an HTTP status (the daemon: 404 for a
	// version that is not stored, 503 before the first model).
	ModelStatus func(error) int
	// UI serves /ui and everything under it (internal/ui). Nil makes /ui answer 404.
	UI http.Handler
}

// Bounds of the HTTP server. Every endpoint answers from memory, so requests are small
// and quick; the bounds only stop a slow or hostile client from holding a connection.
const (
	httpShutdownTimeout   = 5 * time.Second
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpIdleTimeout       = 60 * time.Second
	httpMaxHeaderBytes    = 16 << 10
)

// Server serves /healthz, /readyz, /metrics, /status, /model, /audit/key, /ui and
// /schemas/, routed
// by an http.ServeMux with method patterns, behind its guard (Security). Listen binds
// the address, Run serves, Close releases the listener when Run never ran. Only GET and
// HEAD are allowed, and POST on /ui/login (405 otherwise, with an Allow header); any
// other path is 404. Every non-2xx response is logged at debug level with fields
// method, path, status (and error for a failed check).
type Server struct {
	ln      net.Listener
	srv     *http.Server
	metrics http.Handler
	checks  Checks
	guard   *guard
	log     zerolog.Logger

	mu      sync.Mutex
	started bool // Run has taken the listener
	closed  bool
}

// Listen binds addr now, so that a port conflict fails startup and ":0" picks a free
// port (see Addr). metrics serves /metrics (metrics.Set.Handler); it must not be nil.
// sec guards the server (the zero Security: plain HTTP, every path open); its files are
// read here, and every problem with them (a token file others may read: ErrTokenFileMode)
// fails Listen before anything is bound.
func Listen(addr string, metrics http.Handler, checks Checks, sec Security, log zerolog.Logger) (*Server, error) {
	if metrics == nil {
		panic("admin: Listen with a nil metrics handler")
	}
	g, tc, err := sec.build()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: http address %q: %w", addr, err)
	}
	h := &Server{ln: ln, metrics: metrics, checks: checks, guard: g, log: log}
	h.srv = &http.Server{
		TLSConfig:         tc,
		Handler:           h.routes(),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		// net/http reports connection-level trouble (TLS probes, panics in a check)
		// through a standard logger; route it into the structured log.
		ErrorLog: stdlog.New(httpErrorLog{log}, "", 0),
	}
	return h, nil
}

// Addr is the bound address, host:port.
func (h *Server) Addr() string { return h.ln.Addr().String() }

// Run serves until ctx is done, then shuts the server down (http.Server.Shutdown,
// waiting at most 5 s for requests in flight, then closing what remains). It returns
// nil after a clean shutdown, the serve or shutdown error otherwise. It returns only
// after the serving goroutine it starts has exited. Run may be called once, and not
// after Close.
func (h *Server) Run(ctx context.Context) error {
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return errHTTPClosed
	case h.started:
		h.mu.Unlock()
		return errHTTPRun
	}
	h.started = true
	h.mu.Unlock()

	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if h.srv.TLSConfig != nil {
			errc <- h.srv.ServeTLS(h.ln, "", "") // the certificate is in TLSConfig
			return
		}
		errc <- h.srv.Serve(h.ln)
	})
	defer wg.Wait()

	select {
	case err := <-errc:
		// Serve failed on its own, or Close closed the server.
		if errors.Is(err, http.ErrServerClosed) {
			return errHTTPClosed
		}
		return fmt.Errorf("admin: http serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	shutErr := h.srv.Shutdown(sctx)
	serveErr := <-errc // Serve returns ErrServerClosed as soon as Shutdown starts
	if shutErr != nil {
		// Requests still running after the bound: cut their connections.
		return errors.Join(fmt.Errorf("admin: http shutdown: %w", shutErr), h.srv.Close())
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("admin: http serve: %w", serveErr)
	}
	return nil
}

// Close releases the listener if Run never ran, and closes the server (listener and
// connections, without waiting) if it runs; Run then returns. It is idempotent: calls
// after the first return nil.
func (h *Server) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if !h.started {
		return h.ln.Close()
	}
	return h.srv.Close()
}

// routes is the server's handler: a ServeMux with one GET pattern per endpoint (GET
// patterns match HEAD too; any other method gets 405 with an Allow header, any other
// path 404), behind the guard (which answers what it refuses: guard.go) and logged,
// which logs the non-2xx answers the handlers did not log.
func (h *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { h.check(w, r, h.checks.Live) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { h.check(w, r, h.checks.Ready) })
	mux.Handle("GET /metrics", h.metrics)
	mux.HandleFunc("GET /status", h.status)
	if h.checks.UI != nil {
		mux.Handle("GET /ui", h.checks.UI)
		mux.Handle("GET /ui/", h.checks.UI)
		if h.guard.sessions != nil {
			mux.HandleFunc("GET "+LoginPath, func(w http.ResponseWriter, r *http.Request) {
				h.loginForm(w, r, http.StatusOK, r.URL.Query().Get("next"), false)
			})
			// Cross-origin posts (Sec-Fetch-Site, Origin) are refused: no login CSRF.
			mux.Handle("POST "+LoginPath, http.NewCrossOriginProtection().Handler(http.HandlerFunc(h.login)))
		}
	}
	mux.HandleFunc("GET /model", h.model)
	// The events' JSON Schemas (package schemas): public, the same for every deployment.
	mux.Handle("GET /schemas/", schemas.Handler())
	mux.HandleFunc("GET /audit/key", func(w http.ResponseWriter, r *http.Request) {
		if h.checks.AuditKey == nil {
			h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
			return
		}
		h.writeJSON(w, r, h.checks.AuditKey())
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		lw := &loggedWriter{ResponseWriter: w, status: http.StatusOK}
		if h.guard.authorize(r) {
			mux.ServeHTTP(lw, r)
		} else {
			h.deny(lw, r)
		}
		if lw.status/100 != 2 && !lw.logged {
			h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", lw.status).Msg("http response")
		}
	})
}

// loggedWriter records the status written through it, and whether reply logged it.
type loggedWriter struct {
	http.ResponseWriter
	status int
	logged bool
}

func (w *loggedWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *loggedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (h *Server) model(w http.ResponseWriter, r *http.Request) {
	if h.checks.Model == nil {
		h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
		return
	}
	var version uint64
	if q := r.URL.Query(); q.Has("model") {
		v, err := strconv.ParseUint(q.Get("model"), 10, 64)
		if err != nil || v == 0 {
			h.reply(w, r, http.StatusBadRequest, fmt.Sprintf("model=%q: want a model version, an integer ≥ 1", q.Get("model")), nil)
			return
		}
		version = v
	}
	v, err := h.checks.Model(version)
	if err == nil {
		h.writeJSON(w, r, v)
		return
	}
	status := http.StatusInternalServerError
	if h.checks.ModelStatus != nil {
		status = h.checks.ModelStatus(err)
	}
	h.reply(w, r, status, err.Error(), err)
}

func (h *Server) check(w http.ResponseWriter, r *http.Request, f func() error) {
	var err error
	if f != nil {
		err = f()
	}
	if err != nil {
		h.reply(w, r, http.StatusServiceUnavailable, err.Error(), err)
		return
	}
	h.reply(w, r, http.StatusOK, "ok", nil)
}

func (h *Server) status(w http.ResponseWriter, r *http.Request) {
	if h.checks.Status == nil {
		h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
		return
	}
	h.writeJSON(w, r, h.checks.Status())
}

// writeJSON answers 200 with v's JSON encoding, encoded to memory first so that a value
// that does not encode still gets a clean 500.
func (h *Server) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		h.reply(w, r, http.StatusInternalServerError, "status: "+err.Error(), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes()) //nolint:errcheck // a failed write means the client left
}

// httpErrorLog turns net/http's standard-library log lines into warnings.
type httpErrorLog struct{ log zerolog.Logger }

func (l httpErrorLog) Write(p []byte) (int, error) {
	l.log.Warn().Str("component", "http").Msg(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// reply writes a plain-text answer and logs it when it is not a success.
func (h *Server) reply(w http.ResponseWriter, r *http.Request, status int, body string, err error) {
	if status/100 != 2 {
		e := h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", status)
		if err != nil {
			e = e.Err(err)
		}
		e.Msg("http response")
		if lw, ok := w.(*loggedWriter); ok {
			lw.logged = true
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write([]byte(body + "\n")) //nolint:errcheck // a failed write means the client left
}
