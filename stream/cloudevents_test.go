package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/schemas"
)

// contentIDOracle is ContentID written out by hand for short fields (every length
// below 127 is one varint byte).
func contentIDOracle(topic string, key, value []byte) string {
	b := []byte("cairn-ce-id-v1")
	b = append(b, byte(len(topic)))
	b = append(b, topic...)
	for _, f := range [][]byte{key, value} {
		if f == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, byte(len(f)+1))
		b = append(b, f...)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestCloudEventHeaders: the headers of each output type, in order, with ce_id from the
// record's content (checked against a hand-written oracle), ce_dataschema the type's
// schema $id, content-type by type; the same record gives the same bytes, and a record
// that differs in topic, key, value or null-ness gets another ce_id.
func TestCloudEventHeaders(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 5, time.FixedZone("CEST", 2*3600))
	m := Message{Topic: "cairn.audits", Key: []byte("r1"), Value: []byte(`{"v":1}`)}
	for _, c := range []struct {
		typ               EventType
		schema, ct, topic string
	}{
		{TypeAttribution, "attribution", "application/json", "cairn.attributions"},
		{TypeAudit, "audit", "application/json", "cairn.audits"},
		{TypeDeadLetter, "deadletter", "application/json", "cairn.dlq"},
		{TypeStatus, "status", "application/json", "cairn.status"},
		{TypeLineage, "lineage", "application/json", "cairn.lineage"},
		{TypeModel, "", "application/octet-stream", "cairn.models"},
	} {
		m.Topic = c.topic
		ev := CloudEvent{Type: c.typ, Source: "urn:cairn:test", Time: at, Subject: "r1"}
		hs, err := ev.Headers(m)
		if err != nil {
			t.Fatal(err)
		}
		want := []Header{
			{HeaderSpecVersion, []byte("1.0")}, {HeaderID, []byte(contentIDOracle(c.topic, m.Key, m.Value))},
			{HeaderSource, []byte("urn:cairn:test")}, {HeaderType, []byte(c.typ)},
			{HeaderTime, []byte("2026-05-01T10:00:00.000000005Z")}, {HeaderSubject, []byte("r1")},
		}
		if c.schema != "" {
			if !slices.Contains(schemas.Names(), c.schema) || c.typ.Schema() != c.schema {
				t.Errorf("%s: schema %q not in package schemas", c.typ, c.typ.Schema())
			}
			want = append(want, Header{HeaderDataSchema, []byte("https://cairn.dev/schemas/" + c.schema + ".v1.json")})
		}
		want = append(want, Header{HeaderContentType, []byte(c.ct)})
		if !slices.EqualFunc(hs, want, func(a, b Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			t.Errorf("%s headers\n%q\nwant\n%q", c.typ, hs, want)
		}
		again, _ := ev.Headers(Message{Topic: m.Topic, Key: slices.Clone(m.Key), Value: slices.Clone(m.Value)})
		if !slices.EqualFunc(hs, again, func(a, b Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			t.Errorf("%s: the same record gave other headers: %q", c.typ, again)
		}
	}
	ids := map[string]string{}
	for name, v := range map[string]Message{
		"base": {Topic: "t", Key: []byte("k"), Value: []byte("v")}, "topic": {Topic: "u", Key: []byte("k"), Value: []byte("v")},
		"key": {Topic: "t", Key: []byte("j"), Value: []byte("v")}, "value": {Topic: "t", Key: []byte("k"), Value: []byte("w")},
		"tombstone": {Topic: "t", Key: []byte("k")}, "empty": {Topic: "t", Key: []byte("k"), Value: []byte{}},
		"shifted": {Topic: "t", Key: []byte("kv"), Value: []byte{}}, "nokey": {Topic: "t", Value: []byte("v")},
	} {
		id := ContentID(v)
		if id != contentIDOracle(v.Topic, v.Key, v.Value) {
			t.Errorf("%s: ContentID %s, oracle %s", name, id, contentIDOracle(v.Topic, v.Key, v.Value))
		}
		if other, dup := ids[id]; dup {
			t.Errorf("records %s and %s share ce_id %s", name, other, id)
		}
		ids[id] = name
	}
	long := Message{Topic: strings.Repeat("t", 300), Value: bytes.Repeat([]byte("v"), 1000)}
	if ContentID(long) == ContentID(Message{Topic: long.Topic, Value: long.Value[:999]}) {
		t.Error("ContentID ignores a long value's last byte")
	}
}

// TestCloudEventHeadersRefuse: a missing or invalid attribute is an error naming it.
func TestCloudEventHeadersRefuse(t *testing.T) {
	m := Message{Topic: "t", Value: []byte("{}")}
	for _, c := range []struct {
		ev   CloudEvent
		want string
	}{
		{CloudEvent{Source: "urn:x"}, "type: empty"},
		{CloudEvent{Type: TypeAudit}, "source: empty"},
		{CloudEvent{Type: TypeAudit, Source: "http://a b/%zz"}, "not a URI-reference"},
		{CloudEvent{Type: TypeAudit, Source: "urn:x\n"}, "control character"},
		{CloudEvent{Type: TypeAudit, Source: "urn:x", ID: "a\x00"}, "id: control character"},
		{CloudEvent{Type: TypeAudit, Source: "urn:x", Subject: "\u0085"}, "subject: control character"},
		{CloudEvent{Type: TypeAudit, Source: "urn:x", DataSchema: "schemas/audit"}, "not an absolute URI"},
		{CloudEvent{Type: "io.cairn.x\u0000", Source: "urn:x"}, "type: control character"},
	} {
		if _, err := c.ev.Headers(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.ev, err, c.want)
		}
	}
	if err := ValidateSource("https://cairn.example.org/prod"); err != nil {
		t.Error(err)
	}
}

// TestParseCloudEvent: headers that Headers writes parse back to the same event; a
// record without ce_ headers is no event; each invalid header set is rejected with
// reason bad_header naming the header.
func TestParseCloudEvent(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 5, time.UTC)
	ev := CloudEvent{Type: "com.example.upsert", Source: "https://producer.example/a", ID: "e-1", Time: at, Subject: "p1",
		DataSchema: schemas.URI("train-upsert"), ContentType: "application/json; charset=utf-8"}
	m := Message{Topic: "cairn.train", Key: []byte("p1"), Value: []byte("{}")}
	hs, err := ev.Headers(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Headers = append([]Header{{Key: "traceparent", Value: []byte("00-ab")}}, hs...)
	got, ok, err := ParseCloudEvent(m, Limits{})
	if err != nil || !ok || got != ev {
		t.Errorf("ParseCloudEvent = %+v, %v, %v; want %+v", got, ok, err, ev)
	}
	for _, plain := range [][]Header{nil, {{Key: "content-type", Value: []byte("text/plain")}}, {{Key: "cex", Value: nil}}} {
		if got, ok, err := ParseCloudEvent(Message{Headers: plain}, Limits{}); ok || err != nil || got != (CloudEvent{}) {
			t.Errorf("headers %q: %+v, %v, %v; want no event", plain, got, ok, err)
		}
	}
	base := func() []Header { return slices.Clone(hs) }
	set := func(key, v string) []Header {
		out := base()
		for i := range out {
			if out[i].Key == key {
				out[i].Value = []byte(v)
			}
		}
		return out
	}
	drop := func(key string) []Header {
		return slices.DeleteFunc(base(), func(h Header) bool { return h.Key == key })
	}
	add := func(key, v string) []Header { return append(base(), Header{Key: key, Value: []byte(v)}) }
	for _, c := range []struct {
		hs    []Header
		field string
	}{
		{set(HeaderSpecVersion, "0.3"), HeaderSpecVersion},
		{drop(HeaderSpecVersion), HeaderSpecVersion},
		{drop(HeaderID), HeaderID},
		{drop(HeaderSource), HeaderSource},
		{drop(HeaderType), HeaderType},
		{set(HeaderID, ""), HeaderID},
		{set(HeaderID, strings.Repeat("i", 257)), HeaderID},
		{set(HeaderID, "a\tb"), HeaderID},
		{set(HeaderSource, ""), HeaderSource},
		{set(HeaderSource, "http://a b/%zz"), HeaderSource},
		{set(HeaderType, "\xff"), HeaderType},
		{set(HeaderTime, "yesterday"), HeaderTime},
		{set(HeaderTime, "2026-05-01 12:00:00Z"), HeaderTime},
		{set(HeaderSubject, ""), HeaderSubject},
		{set(HeaderDataSchema, "audit.v1.json"), HeaderDataSchema},
		{set(HeaderContentType, "application/octet-stream"), HeaderContentType},
		{set(HeaderContentType, "application/json; charset"), HeaderContentType},
		{add(HeaderID, "e-2"), HeaderID},
		{add("Content-Type", "application/json"), HeaderContentType},
		{add("ce_datacontenttype", "application/json"), "ce_datacontenttype"},
		{add("ce_Trace", "x"), "ce_Trace"},
		{add("ce_trace-id", "x"), "ce_trace-id"},
		{add("ce_", "x"), "ce_"},
		{add("ce_ext", strings.Repeat("x", 2049)), "ce_ext"},
		{[]Header{{Key: HeaderType, Value: []byte("t")}}, HeaderSpecVersion},
	} {
		_, ok, err := ParseCloudEvent(Message{Headers: c.hs}, Limits{})
		var re *RejectError
		if ok || !errors.As(err, &re) || re.Reason != ReasonBadHeader || re.Field != c.field || !errors.Is(err, ErrRejected) {
			t.Errorf("headers %q: ok %v, error %v; want bad_header on %s", c.hs, ok, err, c.field)
		}
	}
	if _, ok, err := ParseCloudEvent(Message{Headers: add("ce_traceparent", "00-ab")}, Limits{}); !ok || err != nil {
		t.Errorf("an extension attribute: ok %v, %v", ok, err)
	}
	dl := NewDeadLetter(Message{}, func() error { _, _, err := ParseCloudEvent(Message{Headers: drop(HeaderID)}, Limits{}); return err }())
	if dl.Reason != ReasonBadHeader {
		t.Errorf("dead letter reason %q, want %q", dl.Reason, ReasonBadHeader)
	}
}

// TestCloudEventsThroughPublisher: an outbox entry's CloudEvents headers go out through
// the Publisher and Writer and come back from a Reader unchanged, and parse to the
// event that made them.
func TestCloudEventsThroughPublisher(t *testing.T) {
	const topic = "t.ce"
	b := startBroker(t, 1, topic)
	w := newTestWriter(t, b.Addr(), nil)
	box := &memOutbox{}
	ev := CloudEvent{Type: TypeAudit, Source: "urn:cairn:test", Time: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Subject: "r1"}
	var want []string
	for i, v := range []string{`{"v":1,"seq":1}`, `{"v":1,"seq":2}`} {
		m := Message{Topic: topic, Key: []byte("r1"), Value: []byte(v)}
		hs, err := ev.Headers(m)
		if err != nil {
			t.Fatal(err)
		}
		box.entries = append(box.entries, OutboxEntry{Seq: uint64(i + 1), Topic: topic, Key: m.Key, Value: m.Value, Headers: hs})
		want = append(want, ContentID(m))
	}
	p, err := NewPublisher(w, box, PublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := p.Drain(ctx); n != 2 || err != nil {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(2), 15*time.Second)
	for i, m := range got {
		pe, ok, err := ParseCloudEvent(m, Limits{})
		if !ok || err != nil || pe.ID != want[i] || pe.Type != TypeAudit || !pe.Time.Equal(ev.Time) || pe.DataSchema != schemas.URI("audit") {
			t.Errorf("record %d: %+v, %v, %v; want ce_id %s", i, pe, ok, err, want[i])
		}
		if ContentID(m) != want[i] {
			t.Errorf("record %d read back: ContentID %s, want %s", i, ContentID(m), want[i])
		}
	}
}

// FuzzParseCloudEvent: ParseCloudEvent never panics; an event it accepts is written
// back by Headers to headers that parse to the same event.
func FuzzParseCloudEvent(f *testing.F) {
	f.Add("1.0", "id", "urn:x", "t", "2026-05-01T00:00:00Z", "s", "https://a/b", "application/json", "ce_x", "v")
	f.Add("1.0", "", "", "", "", "", "", "", "ce_", "")
	f.Add("0.3", "a\x00", "%zz", "\xff", "now", "", "rel", "text/plain", "CE_ID", "x")
	f.Fuzz(func(t *testing.T, spec, id, source, typ, tm, subject, schema, ct, extKey, extVal string) {
		var hs []Header
		for _, kv := range [][2]string{{HeaderSpecVersion, spec}, {HeaderID, id}, {HeaderSource, source}, {HeaderType, typ},
			{HeaderTime, tm}, {HeaderSubject, subject}, {HeaderDataSchema, schema}, {HeaderContentType, ct}, {extKey, extVal}} {
			if kv[1] != "" || kv[0] == extKey {
				hs = append(hs, Header{Key: kv[0], Value: []byte(kv[1])})
			}
		}
		ev, ok, err := ParseCloudEvent(Message{Headers: hs}, Limits{})
		if err != nil {
			if ReasonOf(err) != ReasonBadHeader {
				t.Fatalf("error %v is not bad_header", err)
			}
			return
		}
		if !ok {
			return
		}
		out, err := ev.Headers(Message{})
		if err != nil {
			t.Fatalf("accepted %+v, but Headers refuses it: %v", ev, err)
		}
		again, ok, err := ParseCloudEvent(Message{Headers: out}, Limits{})
		if !ok || err != nil || again.ID != ev.ID || again.Source != ev.Source || again.Type != ev.Type ||
			!again.Time.Equal(ev.Time) || again.Subject != ev.Subject || again.DataSchema != ev.DataSchema {
			t.Fatalf("round trip %+v -> %q -> %+v, %v, %v", ev, out, again, ok, err)
		}
	})
}
