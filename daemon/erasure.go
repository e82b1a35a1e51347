package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// Data subjects' requests (internal/ingest, "Data subjects"). The training reader reads
// the erasures topic too, and the ingest applies its requests in the training batches
// (exactly once, with the batch's offsets); an erasure's audit is written by the refit
// that follows, like a deletion's. The daemon's part is small: the topic, and what
// /status and /metrics show, which never names a subject other than by its keyed hash.

// erasureState is what the daemon shows of the subjects' requests: the pending ones as
// of the last applied batch or refit (publishErasures), the ingest's counts last seen
// (to turn them into counter increments), and the last published audit.
type erasureState struct {
	pending atomic.Pointer[[]ingest.SubjectRequest]
	seen    ingest.Stats // under train.mu (publishErasures)

	mu   sync.Mutex
	last *ErasureDone
}

// ErasureStatus is the "erasures" part of /status: the subjects' requests applied
// whose audit is not published yet, and the last erasure whose audit was.
type ErasureStatus struct {
	Pending []ingest.SubjectRequest `json:"pending"`
	Last    *ErasureDone            `json:"last,omitempty"`
}

// ErasureDone is an erasure whose audit the broker acknowledged: Seconds is the
// erasure's deadline measure, from the request's Kafka timestamp to the acknowledgement
// (cairn_erasure_seconds), and AfterRefitSeconds how long the audit took to publish
// after the refit that wrote it finished.
type ErasureDone struct {
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

// ensureErasures creates the erasures topic when it is missing: compacted (the last
// request of each subject stays), with kafka.partitions partitions.
func (d *Daemon) ensureErasures(ctx context.Context) error {
	rf := 1
	if d.embedded != nil {
		rf = -1
	}
	t := stream.DefaultErasuresTopic
	err := stream.EnsureTopicsWithConfigs(ctx, d.kafka, d.cfg.Kafka.Partitions, rf,
		map[string]map[string]string{t: {"cleanup.policy": "compact"}}, t)
	if err != nil {
		return fmt.Errorf("daemon: create the erasures topic: %w", err)
	}
	return nil
}

// publishErasures publishes the ingest's pending subject requests for /status and the
// metrics, and counts the requests applied since the last call; d.train.mu is held.
func (d *Daemon) publishErasures(in *ingest.State) {
	p := in.PendingSubjects()
	d.erasures.pending.Store(&p)
	d.metrics.SetErasuresPending(len(p))
	s, seen := in.Stats(), &d.erasures.seen
	if s.Erasures < seen.Erasures || s.Unblocks < seen.Unblocks || s.ErasedPoints < seen.ErasedPoints {
		*seen = ingest.Stats{} // a rebuilt ingest counts from zero
	}
	for range s.Unblocks - seen.Unblocks {
		d.metrics.ObserveErasureRequest(string(stream.ErasureUnblock), 0)
	}
	for i := range s.Erasures - seen.Erasures {
		points := 0
		if i == 0 {
			points = int(s.ErasedPoints - seen.ErasedPoints)
		}
		d.metrics.ObserveErasureRequest(string(stream.ErasureErase), points)
	}
	*seen = s
}

// erasuresWritten is called with the messages the broker acknowledged (the writer's
// OnWritten): for each audit of a subject's request it records the deadline measure.
func (d *Daemon) erasuresWritten(msgs []stream.Message) {
	for _, m := range msgs {
		if m.Topic != d.cfg.Kafka.Topics.Audits || !bytes.Contains(m.Value, []byte(`"subject_hash"`)) {
			continue
		}
		var a stream.Audit
		var body ingest.SubjectAuditBody
		if json.Unmarshal(m.Value, &a) != nil || a.SubjectHash == "" || json.Unmarshal([]byte(a.Body), &body) != nil {
			continue
		}
		now := time.Now().UTC()
		done := &ErasureDone{Kind: body.Kind, Request: body.Request, SubjectHash: body.SubjectHash, Points: len(body.Points),
			Seq: a.Seq, Requested: body.Requested, Published: now, Seconds: now.Sub(body.Requested).Seconds(),
			AfterRefitSeconds: now.Sub(body.RefitDone).Seconds()}
		if body.Kind == ingest.KindErasure {
			d.metrics.ObserveErasure(done.Seconds)
			d.erasures.mu.Lock()
			d.erasures.last = done
			d.erasures.mu.Unlock()
		}
		d.log.Info().Str("kind", done.Kind).Str("request", done.Request).Str("subject_hash", done.SubjectHash).
			Int("points", done.Points).Uint64("seq", done.Seq).Float64("seconds", done.Seconds).
			Float64("after_refit_seconds", done.AfterRefitSeconds).Msg("data subject's request audited and published")
	}
}

// erasureStatus is the "erasures" part of /status.
func (d *Daemon) erasureStatus() *ErasureStatus {
	st := &ErasureStatus{Pending: []ingest.SubjectRequest{}}
	if p := d.erasures.pending.Load(); p != nil && *p != nil {
		st.Pending = *p
	}
	d.erasures.mu.Lock()
	st.Last = d.erasures.last
	d.erasures.mu.Unlock()
	return st
}
