package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/stream"
)

// startBroker starts an embedded broker with the default topics on a free port.
func startBroker(t *testing.T) *stream.Broker {
	t.Helper()
	tp := config.Default().Kafka.Topics
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3,
		Topics: []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newClient is a client of the broker b, closed when the test ends.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct {
		h    HTTP
		want string
	}{
		{HTTP{Addr: "127.0.0.1:8080"}, "http://127.0.0.1:8080"},
		{HTTP{Addr: "http://h:1/"}, "http://h:1"},
		{HTTP{Addr: "https://h:1"}, "https://h:1"},
		{HTTP{Addr: "h:1", CAFile: "ca.pem"}, "https://h:1"},
		{HTTP{Addr: "h:1", CertFile: "c.pem", KeyFile: "k.pem"}, "https://h:1"},
		{HTTP{Addr: "http://h:1", CAFile: "ca.pem"}, "http://h:1"},
	} {
		if got := tc.h.base(); got != tc.want {
			t.Errorf("%+v: base %q, want %q", tc.h, got, tc.want)
		}
	}
}

// TestConfigValidate: every problem is reported at once, each matching ErrConfig, and
// a valid configuration (also an empty, HTTP-only one) passes.
func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Kafka: stream.Config{Brokers: []string{"h:1"}}, AnswerTimeout: time.Second}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	err := Config{Kafka: stream.Config{Brokers: []string{"nohost"}}, Limits: stream.Limits{InputDim: -1, MaxK: -1}, AnswerTimeout: -1}.Validate()
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Validate = %v, want ErrConfig", err)
	}
	for _, want := range []string{`"nohost"`, "input dimension -1", "answer timeout", "limits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not name %q", err, want)
		}
	}
	if _, err := New(Config{Kafka: stream.Config{Brokers: []string{"nohost"}}}); !errors.Is(err, ErrConfig) {
		t.Errorf("New of an invalid configuration: %v, want ErrConfig", err)
	}
}

// TestHTTPOnly: a client without brokers reads the daemon over HTTP and its Kafka
// methods return ErrNoBrokers without touching anything.
func TestHTTPOnly(t *testing.T) {
	c := newClient(t, Config{})
	ctx := context.Background()
	_, e1 := c.SendQuery(ctx, stream.QueryEvent{ID: "a"})
	_, e2 := c.Ask(ctx, stream.QueryEvent{ID: "a"})
	e3 := c.Upsert(ctx, Point{ID: "a", X: []float64{1}})
	_, e4 := c.SendDelete(ctx, "a", "")
	_, e5 := c.DeleteAndWait(ctx, "a", "")
	_, e6 := c.Watch(ctx, "t")
	_, e7 := c.VerifyAudits(ctx, nil)
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
		if !errors.Is(err, ErrNoBrokers) {
			t.Errorf("call %d: %v, want ErrNoBrokers", i+1, err)
		}
	}
}

// TestValidatedBeforeSending: inputs the daemon would reject are refused with stream's
// reject error naming the field, before any network use (the broker address does not
// exist), and a batch with one bad point names it.
func TestValidatedBeforeSending(t *testing.T) {
	c := newClient(t, Config{Kafka: stream.Config{Brokers: []string{"127.0.0.1:1"}}, Limits: stream.Limits{MaxK: 10, InputDim: 2}})
	ctx := context.Background()
	good := Point{ID: "a", X: []float64{1, 2}}
	for _, tc := range []struct {
		name  string
		err   error
		field string
	}{
		{"non-finite", c.Upsert(ctx, good, Point{ID: "b", X: []float64{1, math.NaN()}}), `upsert 1 of 2 (id "b")`},
		{"wrong width", c.Upsert(ctx, Point{ID: "b", X: []float64{1}}), `"x"`},
		{"empty id", c.Upsert(ctx, Point{X: []float64{1, 2}}), `"id"`},
		{"control character", c.Upsert(ctx, Point{ID: "a\x01", X: []float64{1, 2}}), `"id"`},
		{"k over the limit", second(c.SendQuery(ctx, stream.QueryEvent{ID: "a", K: 11})), `"k"`},
		{"unknown ranking", second(c.SendQuery(ctx, stream.QueryEvent{ID: "a", Score: "nope"})), `"score"`},
		{"id and x", second(c.SendQuery(ctx, stream.QueryEvent{ID: "a", X: []float64{1, 2}})), "query not sent"},
		{"delete of no id", second(c.SendDelete(ctx, "", "")), `"id"`},
		{"ask", second(c.Ask(ctx, stream.QueryEvent{ID: "a", Delta: 2})), `"delta"`},
		{"delete and wait", second(c.DeleteAndWait(ctx, strings.Repeat("x", 300), "")), `"id"`},
	} {
		if !errors.Is(tc.err, stream.ErrRejected) || !strings.Contains(tc.err.Error(), tc.field) {
			t.Errorf("%s: %v, want a stream rejection naming %s", tc.name, tc.err, tc.field)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestKeysAndRequestIDs: upserts and deletes reach the training topic keyed by their
// id, queries the query topic keyed by their request id (generated q-… and d-… ids
// when none is given), and the bytes decode with the daemon's decoders.
func TestKeysAndRequestIDs(t *testing.T) {
	b := startBroker(t)
	c := newClient(t, Config{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, c.Topics().Train, c.Topics().Queries)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := int64(2)
	if err := c.Upsert(ctx, Point{ID: "p1", X: []float64{1, 2}, Label: &l}, Point{ID: "p2", X: []float64{3, 4}}); err != nil {
		t.Fatal(err)
	}
	d, err := c.SendDelete(ctx, "p1", "")
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.SendQuery(ctx, stream.QueryEvent{X: []float64{0.5, 1}, K: 3, Score: "representer"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Request, "d-") || !strings.HasPrefix(q.Request, "q-") || len(q.Request) != 18 {
		t.Errorf("generated request ids %q, %q; want d-… and q-… with 16 hex digits", d.Request, q.Request)
	}
	lim := stream.Limits{InputDim: 2}
	var got []string
	for len(got) < 4 {
		m, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Topic {
		case c.Topics().Train:
			ev, err := stream.DecodeTrain(m.Value, lim)
			if err != nil || stream.CheckTrainKey(m.Key, ev) != nil {
				t.Errorf("training message %s / %s: %v, key rule %v", m.Key, m.Value, err, stream.CheckTrainKey(m.Key, ev))
			}
			got = append(got, fmt.Sprintf("%s %s %s", ev.Op, ev.ID, ev.Request))
		case c.Topics().Queries:
			ev, err := stream.DecodeQuery(m.Value, lim)
			if err != nil || string(m.Key) != ev.Request || ev.K != 3 || ev.Score != "representer" {
				t.Errorf("query message %s / %s: %v", m.Key, m.Value, err)
			}
			got = append(got, "query "+ev.Request)
		}
	}
	slices.Sort(got)
	want := []string{"delete p1 " + d.Request, "query " + q.Request, "upsert p1 ", "upsert p2 "}
	if !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
}

// TestWatchSeesOnlyNewMessages: a watcher opened between two writes delivers the
// second and never the first, and Close joins its reader (twice, idempotently).
func TestWatchSeesOnlyNewMessages(t *testing.T) {
	b := startBroker(t)
	kc := stream.Config{Brokers: []string{b.Addr()}}
	c := newClient(t, Config{Kafka: kc})
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const topic = "cairn.attributions"
	var old []stream.Message
	for i := range 20 {
		old = append(old, stream.Message{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("old")})
	}
	if err := w.Write(ctx, old...); err != nil {
		t.Fatal(err)
	}
	tl, err := c.Watch(ctx, topic, "cairn.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, stream.Message{Topic: topic, Key: []byte("k3"), Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	m, err := tl.Next(ctx)
	if err != nil || string(m.Value) != "new" || string(m.Key) != "k3" {
		t.Fatalf("Next = %q/%q, %v; want the new message k3", m.Key, m.Value, err)
	}
	short, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	if m, err := tl.Next(short); err == nil {
		t.Errorf("Next after the only new message = %q/%q, want a timeout", m.Key, m.Value)
	}
	if err := tl.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := tl.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := tl.Next(ctx); err == nil || !strings.Contains(err.Error(), topic) {
		t.Errorf("Next after Close: %v, want an error naming the topics", err)
	}
}

// TestNoAnswer: a request nobody answers ends with ErrNoAnswer after AnswerTimeout,
// naming the request and the topics; a context that ends first ends it too.
func TestNoAnswer(t *testing.T) {
	b := startBroker(t)
	c := newClient(t, Config{Kafka: stream.Config{Brokers: []string{b.Addr()}}, AnswerTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.Ask(context.Background(), stream.QueryEvent{Request: "lonely", ID: "p"})
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "lonely") || !strings.Contains(err.Error(), "cairn.dlq") {
		t.Errorf("Ask: %v, want ErrNoAnswer naming the request and the dead-letter topic", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Ask took %v with a 300ms answer timeout", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c2 := newClient(t, Config{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
	if _, err := c2.DeleteAndWait(ctx, "p", "forget"); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("DeleteAndWait: %v, want ErrNoAnswer", err)
	}
}

// TestAwaitDeadLetter: Await returns a dead letter of the message sent as a
// *DeadLetterError, skipping dead letters of other messages and answers to other
// requests.
func TestAwaitDeadLetter(t *testing.T) {
	b := startBroker(t)
	kc := stream.Config{Brokers: []string{b.Addr()}}
	c := newClient(t, Config{Kafka: kc})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, c.Topics().Attributions, c.Topics().DLQ)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s, err := c.SendQuery(ctx, stream.QueryEvent{Request: "r1", ID: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	rej := &stream.RejectError{Reason: stream.ReasonUnknownID, Field: "id", Msg: `"ghost": not stored`}
	other, _ := stream.DeadLetterMessage(c.Topics().DLQ, stream.Message{Topic: s.Topic, Key: s.Key, Value: append([]byte(" "), s.Value...)}, rej, false)
	mine, err := stream.DeadLetterMessage(c.Topics().DLQ, stream.Message{Topic: s.Topic, Key: s.Key, Value: s.Value}, rej, false)
	if err != nil {
		t.Fatal(err)
	}
	att, _ := stream.Attribution{Request: "r2", Verdict: stream.VerdictCertified}.Encode()
	if err := c.w.Write(ctx, other, stream.Message{Topic: c.Topics().Attributions, Key: []byte("r2"), Value: att}, mine); err != nil {
		t.Fatal(err)
	}
	_, err = w.Await(ctx, s)
	var dl *DeadLetterError
	if !errors.As(err, &dl) || !errors.Is(err, ErrDeadLettered) || dl.DeadLetter.Reason != stream.ReasonUnknownID || dl.Request != "r1" || !json.Valid(dl.Raw) {
		t.Errorf("Await = %v, want the dead letter of r1 (unknown_id)", err)
	}
}

// TestHTTPErrors: the HTTP methods classify what goes wrong (unreachable, 401, not
// JSON, another schema) and ask for the model version given.
func TestHTTPErrors(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.RequestURI())
		switch r.URL.Path {
		case "/status":
			w.Write([]byte(`{"ready":"yes"}`)) // another schema
		case "/model":
			w.Write([]byte(`<html>`))
		case "/audit/key":
			http.Error(w, "401 unauthorized", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	c := newClient(t, Config{HTTP: HTTP{Addr: srv.URL}})
	ctx := context.Background()
	st, err := c.Status(ctx)
	if !errors.Is(err, ErrSchema) || string(st.Raw) != `{"ready":"yes"}` {
		t.Errorf("Status = %s, %v; want the raw body and ErrSchema", st.Raw, err)
	}
	if _, err := c.Model(ctx, 7); !errors.Is(err, ErrNotJSON) {
		t.Errorf("Model: %v, want ErrNotJSON", err)
	}
	if _, err := c.AuditKeys(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("AuditKeys: %v, want ErrUnauthorized", err)
	}
	if want := []string{"/status", "/model?model=7", "/audit/key"}; !slices.Equal(paths, want) {
		t.Errorf("requested %v, want %v", paths, want)
	}
	down := newClient(t, Config{HTTP: HTTP{Addr: "127.0.0.1:1"}})
	if _, err := down.Status(ctx); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "http://127.0.0.1:1/status") {
		t.Errorf("Status of nobody: %v, want ErrUnreachable naming the URL", err)
	}
}

// TestCloseWhileWaiting: Close ends a request still waiting for its answer with
// ErrClosed, joins the answer reader, and refuses later waits.
func TestCloseWhileWaiting(t *testing.T) {
	b := startBroker(t)
	c, err := New(Config{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Ask(context.Background(), stream.QueryEvent{Request: "waits", ID: "p"})
		errc <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !c.waiting("waits") {
		if time.Now().After(deadline) {
			t.Fatal("the request never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Ask during Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ask still waiting after Close")
	}
	if !isClosed(c.ans.done) {
		t.Error("the answer reader still runs after Close")
	}
	if _, err := c.DeleteAndWait(context.Background(), "p", ""); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteAndWait after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// waiting reports whether request is registered with the answer reader.
func (c *Client) waiting(request string) bool {
	c.ans.mu.Lock()
	defer c.ans.mu.Unlock()
	_, ok := c.ans.waiting[request]
	return ok
}
