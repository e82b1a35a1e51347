package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/metrics"
)

// httpLogBuffer collects log lines written from the server's goroutines.
type httpLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *httpLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// entries returns the JSON log entries written so far.
func (l *httpLogBuffer) entries(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// httpTestStatus stands for whatever value Checks.Status returns.
type httpTestStatus struct {
	Ready  bool             `json:"ready"`
	Points int              `json:"points"`
	Lag    map[string]int64 `json:"lag"`
}

// httpFixture is a running HTTP on 127.0.0.1:0 with switchable checks.
type httpFixture struct {
	h    *Server
	live atomic.Pointer[error]
	// panicLive makes the Live check panic.
	panicLive atomic.Bool
	ready     atomic.Pointer[error]
	logs      *httpLogBuffer
	client    *http.Client
	cancel    context.CancelFunc
	done      chan error
}

func startHTTPFixture(t *testing.T, m *metrics.Set, status func() any) *httpFixture {
	t.Helper()
	s := &httpFixture{logs: &httpLogBuffer{}, done: make(chan error, 1)}
	checks := Checks{
		Live: func() error {
			if s.panicLive.Load() {
				panic("check exploded")
			}
			if p := s.live.Load(); p != nil {
				return *p
			}
			return nil
		},
		Ready: func() error {
			if p := s.ready.Load(); p != nil {
				return *p
			}
			return nil
		},
		Status: status,
	}
	h, err := Listen("127.0.0.1:0", m.Handler(), checks, Security{}, zerolog.New(s.logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- h.Run(ctx) }()
	tr := &http.Transport{}
	s.client = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.stop(t)
	})
	return s
}

// stop cancels Run and waits for it; it is safe to call twice.
func (s *httpFixture) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok {
			close(s.done)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of cancel")
	}
	return nil
}

func (s *httpFixture) do(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.h.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, string(body)
}

func TestHTTPEndpoints(t *testing.T) {
	m := metrics.New()
	m.AddEvents("cairn.train", "applied", 3)
	st := httpTestStatus{Ready: true, Points: 42, Lag: map[string]int64{"cairn.train/0": 5}}
	s := startHTTPFixture(t, m, func() any { return st })
	notLive := errors.New("store closed")
	notReady := errors.New("broker unreachable")

	for _, tc := range []struct {
		name           string
		method, path   string
		live, ready    error
		wantStatus     int
		wantBody       string // exact, after trimming the final newline; "" = not checked
		wantType       string // prefix of Content-Type
		wantLogged     bool
		wantLogMessage string // the error field of the log entry, when logged with one
	}{
		{"healthz ok", "GET", "/healthz", nil, nil, 200, "ok", "text/plain", false, ""},
		{"healthz failing", "GET", "/healthz", notLive, nil, 503, "store closed", "text/plain", true, "store closed"},
		{"readyz ok", "GET", "/readyz", nil, nil, 200, "ok", "text/plain", false, ""},
		{"readyz failing", "GET", "/readyz", nil, notReady, 503, "broker unreachable", "text/plain", true, "broker unreachable"},
		{"readyz independent of live", "GET", "/readyz", notLive, nil, 200, "ok", "text/plain", false, ""},
		{"head healthz", "HEAD", "/healthz", nil, nil, 200, "", "text/plain", false, ""},
		{"metrics", "GET", "/metrics", nil, nil, 200, "", "text/plain; version=0.0.4", false, ""},
		{"status", "GET", "/status", nil, nil, 200, "", "application/json", false, ""},
		{"post metrics", "POST", "/metrics", nil, nil, 405, "", "text/plain", true, ""},
		{"delete healthz", "DELETE", "/healthz", nil, nil, 405, "", "text/plain", true, ""},
		{"unknown path", "GET", "/nope", nil, nil, 404, "", "text/plain", true, ""},
		{"root", "GET", "/", nil, nil, 404, "", "text/plain", true, ""},
		{"trailing slash", "GET", "/metrics/", nil, nil, 404, "", "text/plain", true, ""},
	} {
		s.live.Store(&tc.live)
		s.ready.Store(&tc.ready)
		before := len(s.logs.entries(t))
		resp, body := s.do(t, tc.method, tc.path)
		if resp.StatusCode != tc.wantStatus {
			t.Errorf("%s: status = %d, want %d (body %q)", tc.name, resp.StatusCode, tc.wantStatus, body)
		}
		if got := strings.TrimSuffix(body, "\n"); tc.wantBody != "" && got != tc.wantBody {
			t.Errorf("%s: body = %q, want %q", tc.name, got, tc.wantBody)
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tc.wantType) {
			t.Errorf("%s: Content-Type = %q, want %q", tc.name, got, tc.wantType)
		}
		if tc.wantStatus == 405 {
			if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s: Allow = %q, want %q", tc.name, got, "GET, HEAD")
			}
		}
		if tc.method == "HEAD" && body != "" {
			t.Errorf("%s: HEAD body = %q, want empty", tc.name, body)
		}
		logs := s.logs.entries(t)[before:]
		if got := len(logs) > 0; got != tc.wantLogged {
			t.Errorf("%s: logged %v (%v), want %v", tc.name, got, logs, tc.wantLogged)
		}
		if tc.wantLogged && len(logs) == 1 {
			e := logs[0]
			if e["level"] != "debug" || e["path"] != tc.path || e["status"] != float64(tc.wantStatus) || e["method"] != tc.method {
				t.Errorf("%s: log entry %v, want level debug, path %s, status %d, method %s", tc.name, e, tc.path, tc.wantStatus, tc.method)
			}
			if tc.wantLogMessage != "" && e["error"] != tc.wantLogMessage {
				t.Errorf("%s: log error = %v, want %q", tc.name, e["error"], tc.wantLogMessage)
			}
		}
		switch tc.path {
		case "/metrics":
			if tc.wantStatus != 200 {
				break
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(body))
			if err != nil {
				t.Fatalf("/metrics does not parse: %v", err)
			}
			var got float64
			for _, m := range fams["cairn_events_total"].GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["topic"] == "cairn.train" && l["result"] == "applied" {
					got = m.GetCounter().GetValue()
				}
			}
			if got != 3 {
				t.Errorf("/metrics cairn_events_total{topic=cairn.train,result=applied} = %v, want 3", got)
			}
		case "/status":
			if tc.wantStatus != 200 {
				break
			}
			var got httpTestStatus
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("/status body %q: %v", body, err)
			}
			if got.Points != 42 || !got.Ready || got.Lag["cairn.train/0"] != 5 {
				t.Errorf("/status = %+v, want %+v", got, st)
			}
		}
	}
	if err := s.stop(t); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if conn, err := net.DialTimeout("tcp", s.h.Addr(), time.Second); err == nil {
		conn.Close()
		t.Errorf("port %s still accepts connections after Run returned", s.h.Addr())
	}
	if err := s.h.Close(); err != nil {
		t.Errorf("Close after Run = %v, want nil", err)
	}
}

func TestHTTPStatusEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     func() any
		wantStatus int
	}{
		{"nil Status", nil, 404},
		{"unencodable", func() any { return math.NaN() }, 500},
		{"null", func() any { return nil }, 200},
	} {
		s := startHTTPFixture(t, metrics.New(), tc.status)
		resp, body := s.do(t, "GET", "/status")
		if resp.StatusCode != tc.wantStatus {
			t.Errorf("%s: status = %d, want %d (body %q)", tc.name, resp.StatusCode, tc.wantStatus, body)
		}
		if err := s.stop(t); err != nil {
			t.Errorf("%s: Run = %v, want nil", tc.name, err)
		}
	}
}

// TestHTTPShutdownWaitsForRequests cancels Run while a request is in flight: the
// request completes, and Run returns only afterwards.
func TestHTTPShutdownWaitsForRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := startHTTPFixture(t, metrics.New(), func() any {
		close(entered)
		<-release
		return "done"
	})
	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := s.client.Get("http://" + s.h.Addr() + "/status")
		if err != nil {
			got <- result{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b)}
	})
	<-entered
	s.cancel()
	select {
	case err := <-s.done:
		t.Fatalf("Run returned %v while a request was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if r := <-got; r.code != 200 || r.body != "\"done\"\n" {
		t.Errorf("in-flight request = %d %q, want 200 \"done\"", r.code, r.body)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestHTTPCloseAndPortConflict(t *testing.T) {
	h, err := Listen("127.0.0.1:0", metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	addr := h.Addr()
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("Addr = %q, want 127.0.0.1:<port>", addr)
	}

	// The port is bound by ListenHTTP itself, before Run.
	_, err = Listen(addr, metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), addr) {
		t.Errorf("second ListenHTTP(%s) = %v, want an address-in-use error naming the address", addr, err)
	}

	for i := range 2 {
		if err := h.Close(); err != nil {
			t.Errorf("Close #%d = %v, want nil", i+1, err)
		}
	}
	// Close released the port.
	h2, err := Listen(addr, metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err != nil {
		t.Fatalf("ListenHTTP after Close: %v", err)
	}
	defer h2.Close()
	if err := h.Run(context.Background()); err == nil {
		t.Errorf("Run after Close = nil, want an error")
	}

	if _, err := Listen("127.0.0.1:notaport", metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop()); err == nil {
		t.Errorf("ListenHTTP with a bad port = nil error")
	}
}

func TestHTTPCloseStopsRun(t *testing.T) {
	h, err := Listen("127.0.0.1:0", metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	// Wait until the server answers, so Close meets a running server.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + h.Addr() + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never answered: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Run(ctx); err == nil {
		t.Errorf("second concurrent Run = nil, want an error")
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close while running = %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Run after Close = nil, want the closed error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

// TestHTTPRunCancelledBeforeStart checks that Run with a done context returns nil at
// once and releases the port.
func TestHTTPRunCancelledBeforeStart(t *testing.T) {
	h, err := Listen("127.0.0.1:0", metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context = %v, want nil", err)
	}
	h2, err := Listen(h.Addr(), metrics.New().Handler(), Checks{}, Security{}, zerolog.Nop())
	if err != nil {
		t.Fatalf("port not released after Run: %v", err)
	}
	h2.Close()
}

// TestHTTPPanickingCheck checks that a panic in a check costs only its request: the
// server logs it as a warning through the structured log and keeps serving.
func TestHTTPPanickingCheck(t *testing.T) {
	s := startHTTPFixture(t, metrics.New(), nil)
	s.panicLive.Store(true)
	req, _ := http.NewRequest("GET", "http://"+s.h.Addr()+"/healthz", nil)
	if resp, err := s.client.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("request to a panicking check got %d, want a dropped connection", resp.StatusCode)
	}
	if resp, body := s.do(t, "GET", "/readyz"); resp.StatusCode != 200 {
		t.Errorf("after a panic: /readyz = %d %q, want 200", resp.StatusCode, body)
	}
	found := false
	for _, e := range s.logs.entries(t) {
		if e["level"] == "warn" && e["component"] == "http" && strings.Contains(e["message"].(string), "check exploded") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warn entry for the panic in %v", s.logs.entries(t))
	}
}
