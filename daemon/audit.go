package daemon

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/knn"
	"github.com/cairnhq/cairn/internal/rng"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// deletionRecord is one applied deletion awaiting its audit. It is stored (JSON) in the
// store's pending bucket in the deletion's own transaction, so an audit survives a crash
// between the deletion and its refit. It never holds the point's input.
type deletionRecord struct {
	Seq     uint64 `json:"-"` // the pending key
	Request string `json:"request"`
	ID      string `json:"id"`
	// Known is false for a deletion of an id that was not stored.
	Known bool `json:"known"`
	// WasLandmark: the id was a landmark of the serving model ModelBefore (either view);
	// PoolLandmark: of the landmark pool.
	WasLandmark  bool   `json:"was_landmark"`
	PoolLandmark bool   `json:"pool_landmark"`
	ModelBefore  uint64 `json:"model_before"`
	// ResidualBefore and ResidualAfter are the pool's certificates (views A, B) just
	// before and after the point left it.
	ResidualBefore [2]coreset.ResidualCertificate `json:"residual_before"`
	ResidualAfter  [2]coreset.ResidualCertificate `json:"residual_after"`
	// Requested is the Kafka timestamp of the delete message, Applied its commit time.
	Requested time.Time `json:"requested"`
	Applied   time.Time `json:"applied"`
	// Source names the delete message: topic/partition/offset.
	Source string `json:"source"`

	// before is the serving model the deletion was applied to (nil after a restart:
	// the audit then uses the model serving at audit time and says which), and effect
	// the deletion effect computed on it before the audit is written.
	before *serving
	effect *effect
	// poolLandmark[v]: the id was a landmark of view v's pool (PoolLandmark is their or).
	poolLandmark [2]bool
}

func (r *deletionRecord) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("daemon: encode deletion record %q: %w", r.ID, err)
	}
	return b, nil
}

func decodeDeletion(b []byte) (*deletionRecord, error) {
	var r deletionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.ID == "" || r.Request == "" {
		return nil, fmt.Errorf("deletion record without id or request")
	}
	return &r, nil
}

// effect is the deletion effect of appendix D for one deleted point: Δ(S) for S its
// landmark terms in the serving model, against N random landmark sets of the same size.
type effect struct {
	Model      uint64    `json:"model"`
	Landmarks  int       `json:"landmarks"` // |S|
	Effect     float64   `json:"effect"`
	Percentile float64   `json:"percentile"`
	PValue     float64   `json:"p_value"`
	Random     []float64 `json:"random"`
	// Reason says why no effect was computed (no model, no labels, not a landmark).
	Reason string `json:"reason,omitempty"`
}

// auditBody is the canonical audit record the hash chain covers (stream.Audit.Body):
// json.Marshal of this struct, whose field order is fixed, so equal audits give equal
// bytes. It holds no input data.
type auditBody struct {
	Request        string              `json:"request"`
	ID             string              `json:"id"`
	Known          bool                `json:"known"`
	WasLandmark    bool                `json:"was_landmark"`
	PoolLandmark   bool                `json:"pool_landmark"`
	ModelBefore    uint64              `json:"model_before"`
	ModelAfter     uint64              `json:"model_after"`
	ModelAfterID   string              `json:"model_after_id"`
	ResidualBefore [2]certify.Residual `json:"residual_before"`
	ResidualAfter  [2]certify.Residual `json:"residual_after"`
	Effect         effect              `json:"effect"`
	Percentile     float64             `json:"percentile"`
	PValue         float64             `json:"p_value"`
	Requested      time.Time           `json:"requested"`
	Applied        time.Time           `json:"applied"`
	RefitDone      time.Time           `json:"refit_done"`
	Source         string              `json:"source"`
}

func residualOf(c coreset.ResidualCertificate) certify.Residual {
	return certify.Residual{TraceR: c.Trace, TraceK: c.TraceK, Exact: c.Exact}
}

// appendAudit writes the audit of rec into tx: the hash-chained record and the
// cairn.audits event (keyed by the request id) in the outbox. after is the model the
// audit attests (nil: none yet), done the time the refit that removed the point
// finished (the deletion time for unknown ids). It returns the event.
func appendAudit(tx *storage.Tx, topic string, rec *deletionRecord, after *serving, done time.Time) (stream.Audit, error) {
	b := auditBody{
		Request: rec.Request, ID: rec.ID, Known: rec.Known, WasLandmark: rec.WasLandmark,
		PoolLandmark: rec.PoolLandmark, ModelBefore: rec.ModelBefore,
		ResidualBefore: [2]certify.Residual{residualOf(rec.ResidualBefore[0]), residualOf(rec.ResidualBefore[1])},
		ResidualAfter:  [2]certify.Residual{residualOf(rec.ResidualAfter[0]), residualOf(rec.ResidualAfter[1])},
		Requested:      rec.Requested, Applied: rec.Applied, RefitDone: done.UTC(), Source: rec.Source,
		Percentile: -1, PValue: 1,
	}
	if after != nil {
		b.ModelAfter, b.ModelAfterID = after.version, after.id
	}
	switch {
	case !rec.Known:
		b.Effect = effect{Reason: "unknown id: nothing was stored under it"}
	case rec.effect != nil:
		b.Effect = *rec.effect
	default:
		b.Effect = effect{Reason: "not computed"}
	}
	if b.Effect.Reason == "" {
		b.Percentile, b.PValue = b.Effect.Percentile, b.Effect.PValue
	}
	body, err := json.Marshal(b)
	if err != nil {
		return stream.Audit{}, fmt.Errorf("daemon: audit body of %q: %w", rec.ID, err)
	}
	link, err := tx.AppendAudit(body)
	if err != nil {
		return stream.Audit{}, err
	}
	ev := stream.Audit{
		Request: rec.Request, ID: rec.ID, WasLandmark: rec.WasLandmark,
		ModelBefore: rec.ModelBefore, ModelAfter: b.ModelAfter,
		Percentile: b.Percentile, PValue: b.PValue, Seq: link.Seq,
		PrevHash: hex.EncodeToString(link.PrevHash[:]), Hash: hex.EncodeToString(link.Hash[:]),
		Body: string(body),
	}
	val, err := ev.Encode()
	if err != nil {
		return ev, err
	}
	if _, err := tx.Enqueue(topic, []byte(rec.Request), val); err != nil {
		return ev, err
	}
	return ev, nil
}

// deletionEffect computes Δ(S) (paper appendix D) for the landmark terms of id in s:
// the drop of the mean 50-NN cosine confidence of the audit test embeddings against the
// labelled reference embeddings when S's terms leave the encoder (both sides), and
// Δ(R_t) for n random sets of |S| unmasked landmarks drawn from the stream
// "daemon/audit/<request>" of seed. Landmarks already masked in s stay removed in every
// term. Removing a set is a rank-|S| update of precomputed embeddings:
//
//	Z_S = Z − K[:, S] A[S, :]
func (s *serving) deletionEffect(id, request string, n int, seed uint64) *effect {
	e := &effect{Model: s.version, Percentile: -1, PValue: 1}
	var set, others []int
	for l, lid := range s.landmarkIDs {
		switch {
		case lid == id:
			set = append(set, l)
		case s.masked[l]:
			others = append(others, l)
		}
	}
	e.Landmarks = len(set)
	switch {
	case len(set) == 0:
		e.Reason = "not a landmark of the serving model: its term was not in the encoder"
		return e
	case s.audit == nil:
		e.Reason = "no labelled audit points: the confidence needs labels"
		return e
	}
	a := s.audit
	// conf removes sub and the landmarks masked before this deletion; the audit
	// embeddings are those of the unmasked model.
	conf := func(sub []int) (float64, error) {
		zr := mat.DenseCopyOf(a.zRef)
		zt := mat.DenseCopyOf(a.zTest)
		for _, l := range slices.Concat(others, sub) {
			arow := s.enc.A.RawRowView(l)
			for i := range zr.RawMatrix().Rows {
				kv := a.kRef.At(i, l)
				row := zr.RawRowView(i)
				for c, v := range arow {
					row[c] -= kv * v
				}
			}
			for i := range zt.RawMatrix().Rows {
				kv := a.kTest.At(i, l)
				row := zt.RawRowView(i)
				for c, v := range arow {
					row[c] -= kv * v
				}
			}
		}
		cl, err := knn.New(zr, a.refLabels)
		if err != nil {
			return 0, err
		}
		p, err := cl.Predict(zt, min(knn.ConfidenceK, len(a.refLabels)))
		if err != nil {
			return 0, err
		}
		return knn.Confidence(p), nil
	}
	base, err := conf(nil)
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	c, err := conf(set)
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	e.Effect = base - c
	var pool []int
	for l := range s.landmarkIDs {
		if !s.masked[l] && !slices.Contains(set, l) && !slices.Contains(others, l) {
			pool = append(pool, l)
		}
	}
	if len(pool) < len(set) {
		e.Reason = "too few landmarks for random sets"
		return e
	}
	r := rng.New(seed, "daemon/audit/"+request)
	for range n {
		sub := make([]int, len(set))
		perm := r.Perm(len(pool))
		for i := range sub {
			sub[i] = pool[perm[i]]
		}
		c, err := conf(sub)
		if err != nil {
			e.Reason = err.Error()
			return e
		}
		e.Random = append(e.Random, base-c)
	}
	if e.Percentile, err = certify.Percentile(e.Effect, e.Random); err != nil {
		e.Reason = err.Error()
		return e
	}
	if e.PValue, err = certify.PermutationPValue(e.Effect, e.Random); err != nil {
		e.Reason = err.Error()
		return e
	}
	if math.IsNaN(e.Effect) {
		e.Reason = "confidence is not finite"
	}
	return e
}
