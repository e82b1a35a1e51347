package ingest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Deletion is one applied deletion awaiting its audit. It is stored (JSON) in the
// store's pending bucket in the deletion's own transaction, so an audit survives a crash
// between the deletion and its refit. It never holds the point's input.
type Deletion struct {
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

	// Tombstone is where the deletion's tombstone landed, once the broker acknowledged
	// it (RecordTombstones); the audit states it (AuditBody).
	Tombstone *Tombstone `json:"tombstone,omitempty"`

	// Kind is "" for the deletion of one id, KindErasure or KindUnblock for a data
	// subject's request (erasure.go). Subject is then the subject's keyed hash (hex),
	// which ID repeats, and Points, for an erasure, the points it erased (Part of Parts
	// when a subject had more than MaxErasurePoints). Known is false for both kinds:
	// it says whether one stored id was deleted (refit.Effects computes the effect of
	// those only); an erasure's audit is "known" when it erased a point, an unblock's
	// when the subject was blocked (Blocked).
	Kind    string        `json:"kind,omitempty"`
	Subject string        `json:"subject,omitempty"`
	Points  []ErasedPoint `json:"points,omitempty"`
	Part    int           `json:"part,omitempty"`
	Parts   int           `json:"parts,omitempty"`
	Blocked bool          `json:"blocked,omitempty"`
	// before is the serving model the deletion was applied to (nil after a restart:
	// the audit then uses the model serving at audit time and says which), and effect
	// the deletion effect computed on it before the audit is written.
	Before *serving.Model  `json:"-"`
	Effect *serving.Effect `json:"-"`
	// poolLandmark[v]: the id was a landmark of view v's pool (PoolLandmark is their or).
	poolLandmark [2]bool
}

func (r *Deletion) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("ingest: encode deletion record %q: %w", r.ID, err)
	}
	return b, nil
}

func decodeDeletion(b []byte) (*Deletion, error) {
	var r Deletion
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.ID == "" || r.Request == "" {
		return nil, fmt.Errorf("deletion record without id or request")
	}
	if r.Kind != "" && r.Kind != KindErasure && r.Kind != KindUnblock {
		return nil, fmt.Errorf("deletion record of unknown kind %q", r.Kind)
	}
	return &r, nil
}

// AuditBody is the canonical audit record the hash chain covers (stream.Audit.Body):
// json.Marshal of this struct, whose field order is fixed, so equal audits give equal
// bytes. It holds no input data.
type AuditBody struct {
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
	Effect         serving.Effect      `json:"effect"`
	Percentile     float64             `json:"percentile"`
	PValue         float64             `json:"p_value"`
	Requested      time.Time           `json:"requested"`
	Applied        time.Time           `json:"applied"`
	RefitDone      time.Time           `json:"refit_done"`
	Source         string              `json:"source"`
	// Tombstone is where the deletion's tombstone landed on the training topic and
	// that topic's cleanup policy (absent for an id that was not stored).
	Tombstone *Tombstone `json:"tombstone,omitempty"`
}

// Tombstone is the erasure of a deleted point from the training topic: the tombstone
// (its id as key, a null value) the deletion wrote there, at Partition and Offset, and
// the topic's cleanup.policy, which decides whether the broker drops the point's
// upserts ("compact": at its next compaction; with the embedded broker, before this
// audit was published). When the position is not known, Unknown says why, and the
// JSON form has no partition and offset (they are -1 in Go).
type Tombstone struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Policy    string `json:"policy"`
	Unknown   string `json:"unknown,omitempty"`
}

// tombstoneKnown and tombstoneUnknown are Tombstone's two JSON forms; the first is the
// layout of every audit written before Unknown existed.
type (
	tombstoneKnown struct {
		Topic     string `json:"topic"`
		Partition int    `json:"partition"`
		Offset    int64  `json:"offset"`
		Policy    string `json:"policy"`
	}
	tombstoneUnknown struct {
		Topic   string `json:"topic"`
		Policy  string `json:"policy"`
		Unknown string `json:"unknown"`
	}
)

// MarshalJSON writes the position, or, when it is unknown, the reason instead.
func (t Tombstone) MarshalJSON() ([]byte, error) {
	if t.Unknown != "" {
		return json.Marshal(tombstoneUnknown{Topic: t.Topic, Policy: t.Policy, Unknown: t.Unknown})
	}
	return json.Marshal(tombstoneKnown{Topic: t.Topic, Partition: t.Partition, Offset: t.Offset, Policy: t.Policy})
}

// UnmarshalJSON reads either form (partition and offset -1 when absent).
func (t *Tombstone) UnmarshalJSON(b []byte) error {
	var v struct {
		Topic     string `json:"topic"`
		Partition *int   `json:"partition"`
		Offset    *int64 `json:"offset"`
		Policy    string `json:"policy"`
		Unknown   string `json:"unknown"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Tombstone{Topic: v.Topic, Partition: -1, Offset: -1, Policy: v.Policy, Unknown: v.Unknown}
	if v.Partition != nil {
		t.Partition = *v.Partition
	}
	if v.Offset != nil {
		t.Offset = *v.Offset
	}
	return nil
}

// AppendAudit writes the audit of rec into tx: the hash-chained record and the
// cairn.audits event (keyed by the request id) in the outbox. after is the model the
// audit attests (nil: none yet), done the time the refit that removed the point
// finished (the deletion time for unknown ids), sig the key that signs the record (nil:
// unsigned). It returns the event.
func AppendAudit(tx *storage.Tx, topic string, rec *Deletion, after *serving.Model, done time.Time, sig *auditsig.Signer) (stream.Audit, error) {
	if rec.Kind != "" {
		return appendSubjectAudit(tx, topic, rec, after, done, sig)
	}
	b := AuditBody{
		Request: rec.Request, ID: rec.ID, Known: rec.Known, WasLandmark: rec.WasLandmark,
		PoolLandmark: rec.PoolLandmark, ModelBefore: rec.ModelBefore,
		ResidualBefore: [2]certify.Residual{serving.ResidualOf(rec.ResidualBefore[0]), serving.ResidualOf(rec.ResidualBefore[1])},
		ResidualAfter:  [2]certify.Residual{serving.ResidualOf(rec.ResidualAfter[0]), serving.ResidualOf(rec.ResidualAfter[1])},
		Requested:      rec.Requested, Applied: rec.Applied, RefitDone: done.UTC(), Source: rec.Source, Tombstone: rec.Tombstone,
		Percentile: -1, PValue: 1,
	}
	if after != nil {
		b.ModelAfter, b.ModelAfterID = after.Version, after.ID
	}
	switch {
	case !rec.Known:
		b.Effect = serving.Effect{Reason: "unknown id: nothing was stored under it"}
	case rec.Effect != nil:
		b.Effect = *rec.Effect
	default:
		b.Effect = serving.Effect{Reason: "not computed"}
	}
	if b.Effect.Reason == "" {
		b.Percentile, b.PValue = b.Effect.Percentile, b.Effect.PValue
	}
	body, err := json.Marshal(b)
	if err != nil {
		return stream.Audit{}, fmt.Errorf("ingest: audit body of %q: %w", rec.ID, err)
	}
	link, err := tx.AppendAudit(body)
	if err != nil {
		return stream.Audit{}, err
	}
	ev := stream.Audit{
		Request: rec.Request, ID: rec.ID, Known: rec.Known, WasLandmark: rec.WasLandmark,
		ModelBefore: rec.ModelBefore, ModelAfter: b.ModelAfter,
		Percentile: b.Percentile, PValue: b.PValue, Seq: link.Seq,
		PrevHash: hex.EncodeToString(link.PrevHash[:]), Hash: hex.EncodeToString(link.Hash[:]),
		Body: string(body),
	}
	if sig != nil {
		ev.KeyID, ev.Sig = sig.KeyID(), hex.EncodeToString(sig.SignRecord(link.Seq, link.PrevHash, link.Hash))
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

// RecordTombstones stores in tx where the tombstones of pending deletions landed
// (keyed by id), so that their audits state it even after a restart (Outbox.Ack calls
// it in the transaction that acknowledges them); an erasure's record keeps one per
// point. A record that already has one keeps it (a re-published tombstone lands again,
// later).
func RecordTombstones(tx *storage.Tx, at map[string]Tombstone) error {
	type upd struct {
		seq  uint64
		body []byte
	}
	var upds []upd
	err := tx.ForEachPending(func(seq uint64, body []byte) error {
		rec, err := decodeDeletion(body)
		if err != nil {
			return nil
		}
		if rec.Kind == KindErasure {
			if !recordPointTombstones(rec, at) {
				return nil
			}
		} else {
			t, ok := at[rec.ID]
			if rec.Kind != "" || rec.Tombstone != nil || !ok {
				return nil
			}
			rec.Tombstone = &t
		}
		b, err := rec.encode()
		if err != nil {
			return err
		}
		upds = append(upds, upd{seq, b})
		return nil
	})
	if err != nil {
		return err
	}
	for _, u := range upds {
		if err := tx.PutPending(u.seq, u.body); err != nil {
			return err
		}
	}
	return nil
}

// AdoptAudit is how a standby follows the leader's audit chain: in one transaction it
// appends body, an audit record's body as the leader published it, to the store's
// chain, and removes the pending deletion it reports (same request and id; none for
// an unknown id). It returns the new link, whose hash must equal the
// published one (want): equal hashes mean equal chains, since each hash covers its
// predecessor; a different one aborts the transaction with ErrAuditDiverged. The caller holds the lock it applies batches under.
func (in *State) AdoptAudit(body []byte, request, id string, want [32]byte) (storage.AuditLink, error) {
	var (
		link storage.AuditLink
		done []*Deletion
	)
	err := in.store.Apply(func(tx *storage.Tx) error {
		done = done[:0]
		var err error
		if link, err = tx.AppendAudit(body); err != nil {
			return err
		}
		if link.Hash != want {
			return fmt.Errorf("%w: record %d hashes to %x here, %x as published", ErrAuditDiverged, link.Seq, link.Hash[:8], want[:8])
		}
		for _, r := range in.pending {
			if r.Request == request && r.ID == id {
				if _, err := tx.DeletePending(r.Seq); err != nil {
					return err
				}
				done = append(done, r)
				break
			}
		}
		return nil
	})
	if err != nil {
		return link, fmt.Errorf("ingest: adopt audit of %q: %w", request, err)
	}
	in.DropPending(done)
	return link, nil
}
