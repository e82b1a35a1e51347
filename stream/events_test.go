package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/schemas"
)

func testEvents() *Events {
	return &Events{Source: "urn:cairn:test", Types: map[string]EventType{
		"cairn.audits": TypeAudit, "cairn.dlq": TypeDeadLetter, "cairn.models": TypeModel}}
}

func headerMap(hs []Header) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

func TestEventsStamp(t *testing.T) {
	e := testEvents()
	at := time.Date(2026, 5, 1, 12, 0, 0, 5, time.FixedZone("x", 7200))
	audit := Message{Topic: "cairn.audits", Key: []byte("req-1"), Value: []byte(`{"v":1}`), Time: at,
		Headers: []Header{{Key: "trace", Value: []byte("t")}}}
	hs, err := e.Stamp(audit)
	if err != nil {
		t.Fatal(err)
	}
	got := headerMap(hs)
	want := map[string]string{"trace": "t", HeaderSpecVersion: "1.0", HeaderID: ContentID(audit), HeaderSource: "urn:cairn:test",
		HeaderType: string(TypeAudit), HeaderTime: "2026-05-01T10:00:00.000000005Z", HeaderSubject: "req-1",
		HeaderDataSchema: schemas.URI("audit"), HeaderContentType: "application/json"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("headers %v, want %d", got, len(want))
	}
	if len(audit.Headers) != 1 {
		t.Errorf("Stamp modified the message's headers: %v", audit.Headers)
	}
	// The same record gets the same headers: a re-send is recognized by ce_id.
	again, _ := e.Stamp(audit)
	if !slices.EqualFunc(hs, again, func(a, b Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
		t.Errorf("second stamp differs: %v vs %v", hs, again)
	}
	// What a consumer parses back (JSON types only: ParseCloudEvent reads inputs).
	ev, ok, err := ParseCloudEvent(Message{Headers: hs}, Limits{})
	if err != nil || !ok || ev.ID != ContentID(audit) || !ev.Time.Equal(at) || ev.Subject != "req-1" {
		t.Errorf("ParseCloudEvent = %+v, %v, %v", ev, ok, err)
	}
}

func TestEventsStampCases(t *testing.T) {
	e := testEvents()
	tests := []struct {
		name  string
		m     Message
		check func(t *testing.T, h map[string]string, n int)
	}{
		{"topic not listed", Message{Topic: "cairn.train", Key: []byte("p1"), Value: nil},
			func(t *testing.T, h map[string]string, n int) {
				if n != 0 {
					t.Errorf("headers on an unlisted topic: %v", h)
				}
			}},
		{"headers kept", Message{Topic: "cairn.dlq", Key: []byte("k"), Headers: []Header{{Key: HeaderID, Value: []byte("mine")}}},
			func(t *testing.T, h map[string]string, n int) {
				if n != 1 || h[HeaderID] != "mine" {
					t.Errorf("a record with ce_ headers was restamped: %v", h)
				}
			}},
		{"no time, no ce_time", Message{Topic: "cairn.dlq", Key: []byte("cairn.train/0/7"), Value: []byte(`{}`)},
			func(t *testing.T, h map[string]string, n int) {
				if _, ok := h[HeaderTime]; ok || h[HeaderSubject] != "cairn.train/0/7" {
					t.Errorf("headers %v: want no ce_time and the key as subject", h)
				}
			}},
		{"control character in key: no subject", Message{Topic: "cairn.dlq", Key: []byte("a\nb"), Value: []byte(`{}`)},
			func(t *testing.T, h map[string]string, n int) {
				if _, ok := h[HeaderSubject]; ok || h[HeaderID] == "" {
					t.Errorf("headers %v: want no ce_subject, an id", h)
				}
			}},
		{"binary model tombstone", Message{Topic: "cairn.models", Key: []byte("chunk/1")},
			func(t *testing.T, h map[string]string, n int) {
				if h[HeaderContentType] != "application/octet-stream" || h[HeaderDataSchema] != "" || h[HeaderType] != string(TypeModel) {
					t.Errorf("headers %v: want octet-stream, no schema", h)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := e.Stamp(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, headerMap(hs), len(hs))
		})
	}
}

func TestEventsValidate(t *testing.T) {
	bad := &Events{Source: "", Types: map[string]EventType{"": TypeAudit, "x": ""}}
	err := bad.Validate()
	if !errors.Is(err, ErrConfig) || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("Validate = %v, want three problems, each ErrConfig", err)
	}
	if err := testEvents().Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	if _, err := NewWriter(WriterConfig{Kafka: Config{Brokers: []string{"localhost:1"}}, Events: bad}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewWriter with bad events = %v, want ErrConfig", err)
	}
}

// TestEventsThroughPublisher: a Writer with Events stamps the Publisher's outbox
// entries, ce_time being the entry's stored Time; an entry published twice (a re-send
// after a crash between the write and the ack) comes back with the same headers both
// times.
func TestEventsThroughPublisher(t *testing.T) {
	const topic = "t.audits"
	b := startBroker(t, 1, topic)
	e := &Events{Source: "urn:cairn:test", Types: map[string]EventType{topic: TypeAudit}}
	w := newTestWriter(t, b.Addr(), func(c *WriterConfig) { c.Events = e })
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	entry := OutboxEntry{Seq: 1, Topic: topic, Key: []byte("r1"), Value: []byte(`{"v":1,"seq":1}`), Time: at}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 2 {
		box := &memOutbox{entries: []OutboxEntry{entry}}
		p, err := NewPublisher(w, box, PublisherConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := p.Drain(ctx); n != 1 || err != nil {
			t.Fatalf("Drain: %d, %v", n, err)
		}
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(2), 15*time.Second)
	if len(got) != 2 {
		t.Fatalf("read %d records, want 2", len(got))
	}
	for i, m := range got {
		ev, ok, err := ParseCloudEvent(m, Limits{})
		if !ok || err != nil || ev.ID != ContentID(m) || !ev.Time.Equal(at) || ev.Subject != "r1" || ev.Source != e.Source {
			t.Errorf("record %d: %+v, %v, %v", i, ev, ok, err)
		}
	}
	if a, b := headerMap(got[0].Headers), headerMap(got[1].Headers); len(a) != len(b) || a[HeaderID] != b[HeaderID] || a[HeaderTime] != b[HeaderTime] {
		t.Errorf("re-sent record's headers differ: %v vs %v", a, b)
	}
}
