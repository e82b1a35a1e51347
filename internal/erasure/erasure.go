package erasure

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// Metrics are the metrics a Tracker keeps (internal/metrics.Metrics).
type Metrics interface {
	SetErasuresPending(n int)
	ObserveErasureRequest(kind string, points int)
	ObserveErasure(seconds float64)
}

// Tracker is what the daemon shows of the subjects' requests: the pending ones as of
// the last applied batch or refit (Publish), the ingest's counts last seen (to turn
// them into counter increments), and the last published audit (Written).
type Tracker struct {
	// Audits is the audit topic; Metrics receives the measures.
	Audits  string
	Metrics Metrics

	pending atomic.Pointer[[]ingest.SubjectRequest]
	seen    ingest.Stats // Publish's

	mu   sync.Mutex
	last *Done
}

// Status is the "erasures" part of /status: the subjects' requests applied whose audit
// is not published yet, and the last erasure whose audit was.
type Status struct {
	Pending []ingest.SubjectRequest `json:"pending"`
	Last    *Done                   `json:"last,omitempty"`
}

// Done is an erasure whose audit the broker acknowledged: Seconds is the erasure's
// deadline measure, from the request's Kafka timestamp to the acknowledgement
// (cairn_erasure_seconds), and AfterRefitSeconds how long the audit took to publish
// after the refit that wrote it finished.
type Done struct {
	Kind              string    `json:"kind"`
	Request           string    `json:"request"`
	SubjectHash       string    `json:"subject_hash"`
	Points            int       `json:"points"`
	Seq               uint64    `json:"seq"`
	Requested         time.Time `json:"requested"`
	Published         time.Time `json:"published"`
	Seconds           float64   `json:"seconds"`
	AfterRefitSeconds float64   `json:"after_refit_seconds"`
}

// Publish publishes the ingest's pending subject requests for Status and the metrics,
// and counts the requests applied since the last call.
func (t *Tracker) Publish(in *ingest.State) {
	p := in.PendingSubjects()
	t.pending.Store(&p)
	t.Metrics.SetErasuresPending(len(p))
	s, seen := in.Stats(), &t.seen
	if s.Erasures < seen.Erasures || s.Unblocks < seen.Unblocks || s.ErasedPoints < seen.ErasedPoints {
		*seen = ingest.Stats{} // a rebuilt ingest counts from zero
	}
	for range s.Unblocks - seen.Unblocks {
		t.Metrics.ObserveErasureRequest(string(stream.ErasureUnblock), 0)
	}
	for i := range s.Erasures - seen.Erasures {
		points := 0
		if i == 0 {
			points = int(s.ErasedPoints - seen.ErasedPoints)
		}
		t.Metrics.ObserveErasureRequest(string(stream.ErasureErase), points)
	}
	*seen = s
}

// Written is called with the messages the broker acknowledged (the writer's
// OnWritten): for each audit of a subject's request it records the deadline measure and
// logs it to log.
func (t *Tracker) Written(log zerolog.Logger, msgs []stream.Message) {
	for _, m := range msgs {
		if m.Topic != t.Audits || !bytes.Contains(m.Value, []byte(`"subject_hash"`)) {
			continue
		}
		var a stream.Audit
		var body ingest.SubjectAuditBody
		if json.Unmarshal(m.Value, &a) != nil || a.SubjectHash == "" || json.Unmarshal([]byte(a.Body), &body) != nil {
			continue
		}
		now := time.Now().UTC()
		done := &Done{Kind: body.Kind, Request: body.Request, SubjectHash: body.SubjectHash, Points: len(body.Points),
			Seq: a.Seq, Requested: body.Requested, Published: now, Seconds: now.Sub(body.Requested).Seconds(),
			AfterRefitSeconds: now.Sub(body.RefitDone).Seconds()}
		if body.Kind == ingest.KindErasure {
			t.Metrics.ObserveErasure(done.Seconds)
			t.mu.Lock()
			t.last = done
			t.mu.Unlock()
		}
		log.Info().Str("kind", done.Kind).Str("request", done.Request).Str("subject_hash", done.SubjectHash).
			Int("points", done.Points).Uint64("seq", done.Seq).Float64("seconds", done.Seconds).
			Float64("after_refit_seconds", done.AfterRefitSeconds).Msg("data subject's request audited and published")
	}
}

// Status is the "erasures" part of /status.
func (t *Tracker) Status() *Status {
	st := &Status{Pending: []ingest.SubjectRequest{}}
	if p := t.pending.Load(); p != nil && *p != nil {
		st.Pending = *p
	}
	t.mu.Lock()
	st.Last = t.last
	t.mu.Unlock()
	return st
}
