package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/admin"
	"github.com/cairnhq/cairn/stream"
)

// syncBuffer is a log sink written from the daemon's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// badTopicsBroker is an external cluster (the embedded broker, kfake) whose topics were
// created before cairnd with settings of their own: the training topic with Kafka's
// defaults (cleanup.policy delete, a week's retention) and the audits topic compacted.
func badTopicsBroker(t *testing.T, cfg config.Config) *stream.Broker {
	t.Helper()
	tp := cfg.Kafka.Topics
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: cfg.Kafka.Partitions,
		Topics:       []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status},
		TopicConfigs: map[string]map[string]string{tp.Audits: {"cleanup.policy": "compact"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// runUntil runs d until it returns or is ready; it returns a stop function and Run's
// error (nil: ready).
func runUntil(t *testing.T, d *Daemon) (func(), error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30 s")
		}
	}
	select {
	case err := <-done:
		cancel()
		return func() {}, err
	case <-d.Ready():
		return stop, nil
	case <-time.After(30 * time.Second):
		t.Fatal("daemon neither ready nor stopped after 30 s")
	}
	return stop, nil
}

// getAuth answers GET path at addr with the bearer token auth ("" for none), following
// no redirect.
func getAuth(t *testing.T, addr, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestTopicPolicyEnforce: on a cluster whose topics cannot keep erasure or the audit
// chain, cairnd (kafka.topic_policy enforce, the default) refuses to start, naming
// every setting.
func TestTopicPolicyEnforce(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	b := badTopicsBroker(t, cfg)
	cfg.Kafka.Brokers = []string{b.Addr()}
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runUntil(t, d)
	if !errors.Is(err, stream.ErrTopicSettings) {
		t.Fatalf("Run = %v, want a refusal matching stream.ErrTopicSettings", err)
	}
	for _, want := range []string{"kafka.topic_policy enforce", `"cairn.train": cleanup.policy=delete`,
		`"cairn.train": retention.ms=604800000`, `"cairn.audits": cleanup.policy=compact`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v\nwant it to name %s", err, want)
		}
	}
}

// TestTopicPolicyWarn: under kafka.topic_policy warn the same cluster starts cairnd,
// which logs each setting and answers /readyz 503 with them, while the open probe
// /healthz answers 200.
func TestTopicPolicyWarn(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	b := badTopicsBroker(t, cfg)
	cfg.Kafka.Brokers = []string{b.Addr()}
	cfg.Kafka.TopicPolicy = "warn"
	logs := &syncBuffer{}
	d, err := New(cfg, zerolog.New(logs).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := runUntil(t, d)
	if err != nil {
		t.Fatalf("Run under topic_policy warn: %v", err)
	}
	defer stop()
	code, body := getAuth(t, d.HTTPAddr(), "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "topics (kafka.topic_policy warn)") ||
		!strings.Contains(body, `"cairn.train": cleanup.policy=delete`) {
		t.Errorf("/readyz = %d %q, want 503 naming the training topic's cleanup.policy", code, body)
	}
	if code, _ := getAuth(t, d.HTTPAddr(), "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if l := logs.String(); !strings.Contains(l, `"setting":"cleanup.policy"`) || !strings.Contains(l, `"topic":"cairn.audits"`) {
		t.Errorf("log lacks the warnings per setting:\n%s", l)
	}
}

// TestTopicPolicyEmbedded: the embedded broker's topics are checked too. A data
// directory whose models topic was created (by an older cairnd, or by hand) deleting
// records on two partitions is refused at start; the training and audits topics are
// set right by the embedded broker itself.
func TestTopicPolicyEmbedded(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{cfg.Kafka.Topics.Models},
		DataDir: filepath.Join(cfg.DataDir, "kafka")})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runUntil(t, d)
	if !errors.Is(err, stream.ErrTopicSettings) || !strings.Contains(err.Error(), `"cairn.models": cleanup.policy=delete`) ||
		!strings.Contains(err.Error(), `"cairn.models": partitions=2`) || strings.Contains(err.Error(), "cairn.train") {
		t.Errorf("Run = %v, want a refusal naming the models topic's cleanup.policy and partitions only", err)
	}
}

// TestHTTPGuardDaemon: with http_auth.token_file the daemon's HTTP surface answers
// /status, /model and /ui only with the token (the open probes without), and a token
// file others may read stops the start. Beyond loopback without authentication New
// refuses the configuration.
func TestHTTPGuardDaemon(t *testing.T) {
	const token = "daemon-test-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t.TempDir())
	cfg.HTTPAuth.TokenFile = tokenFile
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := runUntil(t, d)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200}, {"/metrics", "", 200}, {"/readyz", "", 503}, // no model yet
		{"/status", "", 401}, {"/model", "", 401}, {"/audit/key", "", 401}, {"/ui", "", 303},
		{"/status", "wrong-token-wrong-token", 401},
		{"/status", token, 200}, {"/audit/key", token, 200}, {"/ui", token, 200}, {"/ui/login", "", 200},
	} {
		if got, _ := getAuth(t, d.HTTPAddr(), tc.path, tc.auth); got != tc.want {
			t.Errorf("GET %s (token %q): %d, want %d", tc.path, tc.auth, got, tc.want)
		}
	}

	open := e2eConfig(t.TempDir())
	open.HTTPAuth.TokenFile = tokenFile
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	d2, err := New(open, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runUntil(t, d2); !errors.Is(err, admin.ErrTokenFileMode) {
		t.Errorf("Run with a 0644 token file: %v, want admin.ErrTokenFileMode", err)
	}

	wide := e2eConfig(t.TempDir())
	wide.HTTP = "0.0.0.0:0"
	if _, err := New(wide, testLogger(t)); err == nil || !strings.Contains(err.Error(), "config: http = \"0.0.0.0:0\"") {
		t.Errorf("New on 0.0.0.0 without authentication: %v, want a refusal naming http", err)
	}
}

// TestPlaintextSASL: SASL without TLS is refused unless kafka.allow_plaintext_sasl,
// and then cairnd warns at start.
func TestPlaintextSASL(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"} // nothing answers: Run waits for it
	cfg.Kafka.SASL = config.SASL{Mechanism: "scram-sha-512", Username: "cairn", Password: "s3cret"}
	if _, err := New(cfg, testLogger(t)); err == nil || !strings.Contains(err.Error(), "kafka.sasl.mechanism") ||
		!strings.Contains(err.Error(), "kafka.allow_plaintext_sasl") {
		t.Fatalf("New with SASL and no TLS: %v, want a refusal naming the fields", err)
	}
	cfg.Kafka.AllowPlaintextSASL = true
	logs := &syncBuffer{}
	d, err := New(cfg, zerolog.New(logs).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "kafka.allow_plaintext_sasl") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if l := logs.String(); !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "unencrypted") || strings.Contains(l, "s3cret") {
		t.Errorf("log %s\nwant a warning about plaintext SASL, without the password", l)
	}
	if KafkaConfig(cfg).AllowPlaintextSASL != true {
		t.Errorf("KafkaConfig does not carry kafka.allow_plaintext_sasl")
	}
}
