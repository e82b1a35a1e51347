package erasure

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

type fakeMetrics struct {
	pending  int
	requests []string
	seconds  []float64
}

func (f *fakeMetrics) SetErasuresPending(n int) { f.pending = n }
func (f *fakeMetrics) ObserveErasureRequest(kind string, points int) {
	f.requests = append(f.requests, kind)
}
func (f *fakeMetrics) ObserveErasure(seconds float64) { f.seconds = append(f.seconds, seconds) }

// auditMsg is an acknowledged audit record of a subject's request of kind on topic.
func auditMsg(t *testing.T, topic, kind string, seq uint64, requested time.Time) stream.Message {
	t.Helper()
	body, err := json.Marshal(ingest.SubjectAuditBody{Kind: kind, Request: "req-1", SubjectHash: "ab12",
		Points: []ingest.ErasureAuditPoint{{}, {}}, Requested: requested, RefitDone: requested.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := json.Marshal(stream.Audit{Request: "req-1", Seq: seq, SubjectHash: "ab12", Body: string(body)})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Topic: topic, Value: v}
}

// TestWritten: an acknowledged erasure's audit becomes Status's Last, observes the
// deadline measure and is logged; an unblock is logged only, and another topic's
// message or a point's audit is ignored.
func TestWritten(t *testing.T) {
	m := &fakeMetrics{}
	tr := &Tracker{Audits: "audits", Metrics: m}
	var logs bytes.Buffer
	requested := time.Now().UTC().Add(-time.Minute)
	tr.Written(zerolog.New(&logs), []stream.Message{
		auditMsg(t, "other", ingest.KindErasure, 1, requested),
		{Topic: "audits", Value: []byte(`{"request":"p","seq":2}`)},
		auditMsg(t, "audits", ingest.KindErasure, 3, requested),
		auditMsg(t, "audits", string(stream.ErasureUnblock), 4, requested),
	})
	st := tr.Status()
	if st.Last == nil || st.Last.Seq != 3 || st.Last.Points != 2 || st.Last.SubjectHash != "ab12" {
		t.Fatalf("last = %+v, want the erasure of seq 3 with 2 points", st.Last)
	}
	// The measure is the time from the request to now: at least the minute it is old.
	if len(m.seconds) != 1 || m.seconds[0] < 60 || st.Last.AfterRefitSeconds > st.Last.Seconds {
		t.Errorf("erasure seconds %v, last %+v: want one measure of at least 60 s", m.seconds, st.Last)
	}
	if got := strings.Count(logs.String(), "data subject's request audited and published"); got != 2 {
		t.Errorf("%d log lines, want 2:\n%s", got, logs.String())
	}
	if st.Pending == nil || len(st.Pending) != 0 {
		t.Errorf("pending = %#v before any Publish, want an empty list", st.Pending)
	}
}
