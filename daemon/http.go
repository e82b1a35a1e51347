package daemon

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
	// is 400): 200 with the JSON encoding of the value; 404 when the error is
	// ErrUnknownModel, 503 when it is ErrNoModelExport (no model yet), 500 otherwise,
	// each with the error text. Nil makes /model answer 404.
	Model func(version uint64) (any, error)
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

var (
	errHTTPClosed = errors.New("daemon: http server closed")
	errHTTPRun    = errors.New("daemon: http server Run called twice")
)

// HTTP serves /healthz, /readyz, /metrics, /status and /model. ListenHTTP binds the address,
// Run serves, Close releases the listener when Run never ran. Only GET and HEAD are
// allowed (405 otherwise, with an Allow header); any other path is 404. Every non-2xx
// response is logged at debug level with fields method, path, status (and error for a
// failed check).
type HTTP struct {
	ln      net.Listener
	srv     *http.Server
	metrics *Metrics
	checks  Checks
	log     zerolog.Logger

	mu      sync.Mutex
	started bool // Run has taken the listener
	closed  bool
}

// ListenHTTP binds addr now, so that a port conflict fails startup and ":0" picks a
// free port (see Addr). m must not be nil.
func ListenHTTP(addr string, m *Metrics, checks Checks, log zerolog.Logger) (*HTTP, error) {
	if m == nil {
		panic("daemon: ListenHTTP with nil Metrics")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("daemon: http address %q: %w", addr, err)
	}
	h := &HTTP{ln: ln, metrics: m, checks: checks, log: log}
	h.srv = &http.Server{
		Handler:           h,
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
func (h *HTTP) Addr() string { return h.ln.Addr().String() }

// Run serves until ctx is done, then shuts the server down (http.Server.Shutdown,
// waiting at most 5 s for requests in flight, then closing what remains). It returns
// nil after a clean shutdown, the serve or shutdown error otherwise. It returns only
// after the serving goroutine it starts has exited. Run may be called once, and not
// after Close.
func (h *HTTP) Run(ctx context.Context) error {
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
	wg.Go(func() { errc <- h.srv.Serve(h.ln) })
	defer wg.Wait()

	select {
	case err := <-errc:
		// Serve failed on its own, or Close closed the server.
		if errors.Is(err, http.ErrServerClosed) {
			return errHTTPClosed
		}
		return fmt.Errorf("daemon: http serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	shutErr := h.srv.Shutdown(sctx)
	serveErr := <-errc // Serve returns ErrServerClosed as soon as Shutdown starts
	if shutErr != nil {
		// Requests still running after the bound: cut their connections.
		return errors.Join(fmt.Errorf("daemon: http shutdown: %w", shutErr), h.srv.Close())
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("daemon: http serve: %w", serveErr)
	}
	return nil
}

// Close releases the listener if Run never ran, and closes the server (listener and
// connections, without waiting) if it runs; Run then returns. It is idempotent: calls
// after the first return nil.
func (h *HTTP) Close() error {
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

// ServeHTTP answers one request; see HTTP for the endpoints.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics", "/status", "/model":
	default:
		h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.reply(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed", nil)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/healthz":
		h.check(w, r, h.checks.Live)
	case "/readyz":
		h.check(w, r, h.checks.Ready)
	case "/metrics":
		w.Header().Set("Content-Type", MetricsContentType)
		if _, err := h.metrics.WriteTo(w); err != nil {
			// The client went away; headers are sent, nothing else to tell it.
			h.log.Debug().Str("path", r.URL.Path).Err(err).Msg("http write")
		}
	case "/status":
		h.status(w, r)
	case "/model":
		if h.checks.Model == nil {
			h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
			return
		}
		h.model(w, r)
	}
}

func (h *HTTP) model(w http.ResponseWriter, r *http.Request) {
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
	switch {
	case err == nil:
		h.writeJSON(w, r, v)
	case errors.Is(err, ErrUnknownModel):
		h.reply(w, r, http.StatusNotFound, err.Error(), err)
	case errors.Is(err, ErrNoModelExport):
		h.reply(w, r, http.StatusServiceUnavailable, err.Error(), err)
	default:
		h.reply(w, r, http.StatusInternalServerError, err.Error(), err)
	}
}

func (h *HTTP) check(w http.ResponseWriter, r *http.Request, f func() error) {
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

func (h *HTTP) status(w http.ResponseWriter, r *http.Request) {
	if h.checks.Status == nil {
		h.reply(w, r, http.StatusNotFound, "404 page not found", nil)
		return
	}
	h.writeJSON(w, r, h.checks.Status())
}

// writeJSON answers 200 with v's JSON encoding, encoded to memory first so that a value
// that does not encode still gets a clean 500.
func (h *HTTP) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
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
func (h *HTTP) reply(w http.ResponseWriter, r *http.Request, status int, body string, err error) {
	if status/100 != 2 {
		e := h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", status)
		if err != nil {
			e = e.Err(err)
		}
		e.Msg("http response")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write([]byte(body + "\n")) //nolint:errcheck // a failed write means the client left
}
