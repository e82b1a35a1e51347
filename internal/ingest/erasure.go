package ingest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Kinds of the records of a data subject's requests (Deletion.Kind).
const (
	KindErasure = "erasure"
	KindUnblock = "unblock"
)

// MaxErasurePoints bounds the points one erasure record, and so one audit, lists (about
// 400 bytes each at the longest ids, within the pending record's and a Kafka record's
// limits). A subject with more points is erased by the same transaction all the same,
// in records of at most this many points, each audited (part i of parts).
const MaxErasurePoints = 1000

// ErasedPoint is one point an erasure removed: whether it was a landmark of the serving
// model and of the pool, the version of the value erased (the version its tombstone
// carries, doc.go "Versions") and, once the broker acknowledged it, where the tombstone
// landed.
type ErasedPoint struct {
	ID           string     `json:"id"`
	WasLandmark  bool       `json:"was_landmark"`
	PoolLandmark bool       `json:"pool_landmark"`
	Version      int64      `json:"version"`
	Tombstone    *Tombstone `json:"tombstone,omitempty"`
	poolLandmark [2]bool
	partition    int32 // of its record (-1: unknown)
}

// subjectState is what a batch knows of one subject: whether it is blocked (and the
// block's record), updated as the batch goes, and the points the store filed under it
// when the batch began (plan adds the batch's own changes).
type subjectState struct {
	blocked bool
	record  []byte
	ids     []string
}

// blockRecord is the record a blocked subject keeps (storage.Tx.Block).
type blockRecord struct {
	Request string    `json:"request"`
	Time    time.Time `json:"time"`
	Source  string    `json:"source"`
}

// loadSubjectKey reads the subject key beside st's file, creating it at the first
// start.
func loadSubjectKey(st *storage.Store, log zerolog.Logger) (*SubjectKey, error) {
	k, created, err := LoadOrCreateSubjectKey(filepath.Join(filepath.Dir(st.Path()), SubjectKeyFile))
	if err != nil {
		return nil, err
	}
	if created {
		log.Info().Str("file", SubjectKeyFile).Msg("subject key created (copy it to every standby before its first start)")
	}
	return k, nil
}

// Subjects returns the key that names data subjects.
func (in *State) Subjects() *SubjectKey { return in.subjects }

// subjectOf returns the batch's state of subject h, read from the store the first time
// the batch names it.
func (in *State) subjectOf(h storage.SubjectHash) (*subjectState, error) {
	if st, ok := in.subj[h]; ok {
		return st, nil
	}
	st := &subjectState{}
	err := in.store.View(func(tx *storage.ReadTx) error {
		var err error
		if st.record, st.blocked, err = tx.Blocked(h); err != nil {
			return err
		}
		st.ids, err = tx.SubjectPoints(h)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: read subject %s: %w", SubjectHex(h)[:16], err)
	}
	in.subj[h] = st
	return st, nil
}

// upsertSubject is the subject an upsert names, as its hash; an upsert whose subject is
// blocked (an erasure applied before it, not unblocked) gets a *stream.RejectError
// (reason subject_erased), any other error is the store's.
func (in *State) upsertSubject(ev stream.TrainEvent) (*storage.SubjectHash, error) {
	h := in.subjects.Hash(ev.Subject)
	st, err := in.subjectOf(h)
	if err != nil {
		return nil, err
	}
	if st.blocked {
		return nil, &stream.RejectError{Reason: stream.ReasonSubjectErased, Field: "subject", Msg: fmt.Sprintf(
			"subject %s was erased (%s): its upserts are refused until an unblock request on %s", SubjectHex(h), st.record, in.erasures)}
	}
	return &h, nil
}

// decodeRequest turns o, a message of the erasures topic decoded as d, into an erasure
// or unblock op (or a dead letter), and updates the subject's block for the rest of the
// batch. From here on the subject is named by its hash only. A tombstone (a null value:
// the topic is compacted by subject, and an operator may remove a request that was
// carried out, with the subject's id) is consumed and does nothing.
func (in *State) decodeRequest(o *op, d decoded) error {
	if o.msg.Value == nil {
		o.kind = opClaim // not one of cairnd's claims (isClaim is false): its offset is stored
		return nil
	}
	if d.err != nil {
		return in.deadLetter(o, d.err)
	}
	h := in.subjects.Hash(d.er.Subject)
	st, err := in.subjectOf(h)
	if err != nil {
		return err
	}
	o.er, o.subj = stream.ErasureEvent{Op: d.er.Op, Request: d.er.Request}, &h
	switch d.er.Op {
	case stream.ErasureErase:
		o.kind, st.blocked = opErasure, true
		st.record, _ = json.Marshal(blockRecord{Request: d.er.Request, Source: coordinates(o.msg)})
	default:
		o.kind, o.had, st.blocked = opUnblock, st.blocked, false
	}
	return nil
}

// planErasure decides, in offset order, which points the erasure o removes: every point
// stored about its subject at this point of the batch (those the store filed under it,
// and those the batch upserted with it, less those the batch replaced or removed). Each
// is then no longer stored, its tombstone awaited at the version of the value erased
// (a tombstone of that version erases that value and nothing newer: claim.erases). It
// makes o's records and returns the ids.
func (in *State) planErasure(o *op, keys map[string]*key, touch func(*op, string) *key, now time.Time) []string {
	h := *o.subj
	var cand []string
	if st := in.subj[h]; st != nil {
		cand = append(cand, st.ids...)
	}
	for id, k := range keys {
		if k.subject != nil && *k.subject == h {
			cand = append(cand, id)
		}
	}
	slices.Sort(cand)
	cand = slices.Compact(cand)
	var (
		pts []ErasedPoint
		ids []string
	)
	for _, id := range cand {
		k := touch(o, id)
		if !k.stored || k.subject == nil || *k.subject != h {
			continue
		}
		v := max(k.version, 0)
		pts = append(pts, ErasedPoint{ID: id, Version: v, partition: k.partition})
		ids = append(ids, id)
		k.stored, k.republish, k.subject, k.deleted = false, false, nil, v
	}
	parts := max(1, (len(pts)+MaxErasurePoints-1)/MaxErasurePoints)
	o.recs = o.recs[:0]
	for i := range parts {
		rec := in.subjectRecord(o, KindErasure, now)
		rec.Points = pts[i*MaxErasurePoints : min(len(pts), (i+1)*MaxErasurePoints)]
		if parts > 1 {
			rec.Part, rec.Parts = i+1, parts
		}
		for j := range rec.Points {
			p := &rec.Points[j]
			if in.hooks.Describe != nil {
				t := &Deletion{ID: p.ID}
				in.hooks.Describe(t)
				p.WasLandmark = t.WasLandmark
			}
			rec.WasLandmark = rec.WasLandmark || p.WasLandmark
		}
		o.recs = append(o.recs, rec)
	}
	return ids
}

// subjectRecord is the record of kind of the subject request o, applied at now.
func (in *State) subjectRecord(o *op, kind string, now time.Time) *Deletion {
	h := SubjectHex(*o.subj)
	rec := &Deletion{Kind: kind, Request: o.er.Request, ID: h, Subject: h, Requested: o.msg.Time.UTC(),
		Applied: now, Source: coordinates(o.msg), Blocked: kind == KindUnblock && o.had}
	if in.hooks.Describe != nil {
		in.hooks.Describe(rec) // the serving model: before, and its version
		rec.WasLandmark = false
	}
	return rec
}

// coordinates names a message: topic/partition/offset.
func coordinates(m stream.Message) string {
	return string(stream.DeadLetterKey(m.Topic, m.Partition, m.Offset))
}

// eraseView removes the points of an erasure's records from view v's pool, recording
// the certificate before and after each record, and which points were its landmarks.
func eraseView(pool *coreset.Pool, v int, recs []*Deletion) error {
	for _, rec := range recs {
		rec.ResidualBefore[v] = pool.Residual()
		for j := range rec.Points {
			p := &rec.Points[j]
			p.poolLandmark[v] = slices.Contains(pool.Landmarks(), p.ID)
			if err := pool.Delete(p.ID); err != nil {
				return fmt.Errorf("pool view %d: erase %q: %w", v, p.ID, err)
			}
		}
		rec.ResidualAfter[v] = pool.Residual()
	}
	return nil
}

// commitRequest writes a subject request's effects in tx: for an erasure every point's
// removal (the store erases its input from its slot after the commit), the awaited
// tombstone and the tombstone itself on the training topic, then the subject's block;
// for an unblock the block's removal. Then its records: audited at once when nothing
// was erased (or for an unblock), by the Unknown hook, else pending for the refit.
func (in *State) commitRequest(tx *storage.Tx, o *op, seq *uint64) error {
	h := *o.subj
	if o.kind == opUnblock {
		existed, err := tx.Unblock(h)
		if err != nil {
			return err
		}
		if existed != o.had {
			return fmt.Errorf("ingest: unblock %s: the store says blocked %v, the batch %v", SubjectHex(h)[:16], existed, o.had)
		}
	} else {
		for _, rec := range o.recs {
			for _, p := range rec.Points {
				existed, err := tx.DeletePoint(p.ID)
				if err == nil && !existed {
					err = fmt.Errorf("ingest: erase %q: the pool had it, the store not", p.ID)
				}
				if err != nil {
					return err
				}
				if err := tx.PutDeleted(p.ID, p.Version); err != nil {
					return err
				}
				if _, err := tx.Enqueue(in.train, []byte(p.ID), placed(p.partition, encodeClaim(p.Version, nil, nil))); err != nil {
					return err
				}
			}
		}
		b, err := json.Marshal(blockRecord{Request: o.er.Request, Time: o.recs[0].Applied, Source: coordinates(o.msg)})
		if err != nil {
			return err
		}
		if err := tx.Block(h, b); err != nil {
			return err
		}
	}
	o.audited = false
	if len(o.recs) == 1 && len(o.recs[0].Points) == 0 && in.hooks.Unknown != nil {
		var err error
		if o.audited, err = in.hooks.Unknown(tx, o.recs[0]); err != nil || o.audited {
			return err
		}
	}
	for _, rec := range o.recs {
		*seq++
		rec.Seq = *seq
		body, err := rec.encode()
		if err != nil {
			return err
		}
		if err := tx.PutPending(*seq, body); err != nil {
			return err
		}
	}
	return nil
}

// requestCommitted mirrors a committed subject request in the point cache, the awaited
// tombstones and the pending records.
func (in *State) requestCommitted(o *op) {
	for _, rec := range o.recs {
		for _, p := range rec.Points {
			in.cache.del(p.ID)
			in.deleted[p.ID] = p.Version
		}
	}
	if !o.audited {
		in.pending = append(in.pending, o.recs...)
	}
}

// logRequest logs a committed subject request, naming the subject by its hash.
func (in *State) logRequest(o *op) {
	n := 0
	for _, r := range o.recs {
		n += len(r.Points)
	}
	in.log.Info().Str("op", string(o.er.Op)).Str("request", o.er.Request).Str("subject_hash", SubjectHex(*o.subj)).
		Int("points", n).Int("records", len(o.recs)).Bool("audited", o.audited).
		Str("source", coordinates(o.msg)).Msg("applied a data subject's request")
}

// scrubClaim is the outbox value of the tombstone that follows a refused upsert of an
// erased subject (reason subject_erased) on its topic, under its key, so that log
// compaction erases the refused bytes too: an unversioned tombstone (version -1), which
// erases nothing stored (claim.erases), so that a point stored under the same id is
// republished when it is read back (doc.go, "Versions"), and the refused upsert is not
// the newest record of its id.
func scrubClaim() []byte { return encodeClaim(-1, nil, nil) }

// recordPointTombstones sets, in an erasure's record, where the tombstones of its
// points landed (at, by id) for the points that do not say yet, and reports whether it
// set any.
func recordPointTombstones(rec *Deletion, at map[string]Tombstone) bool {
	changed := false
	for j := range rec.Points {
		p := &rec.Points[j]
		if t, ok := at[p.ID]; ok && p.Tombstone == nil {
			p.Tombstone, changed = &t, true
		}
	}
	return changed
}

// SubjectRequest is a data subject's request still awaiting its audit, as /status
// shows it: never the subject itself.
type SubjectRequest struct {
	Kind        string    `json:"kind"`
	Request     string    `json:"request"`
	SubjectHash string    `json:"subject_hash"`
	Points      int       `json:"points"`
	Requested   time.Time `json:"requested"`
	Applied     time.Time `json:"applied"`
}

// PendingSubjects lists the subjects' requests applied whose audit is not emitted yet,
// one per request (the parts of a large erasure counted together), in order.
func (in *State) PendingSubjects() []SubjectRequest {
	var out []SubjectRequest
	for _, r := range in.pending {
		if r.Kind == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Request == r.Request && out[n-1].SubjectHash == r.Subject && r.Part > 1 {
			out[n-1].Points += len(r.Points)
			continue
		}
		out = append(out, SubjectRequest{Kind: r.Kind, Request: r.Request, SubjectHash: r.Subject, Points: len(r.Points),
			Requested: r.Requested, Applied: r.Applied})
	}
	return out
}

// SubjectAuditBody is the canonical audit record of a data subject's request (the
// body the hash chain covers, json.Marshal of this struct, whose field order is fixed).
// It names the subject by its keyed hash (ID repeats it) and holds no input data. It
// repeats the fields every audit has (known, was_landmark, the models, percentile and
// p_value, which a verifier compares with the event's), so that one verifier reads
// both kinds: known is true when the erasure removed a point (for an unblock: when the
// subject was blocked), was_landmark when one of them was a landmark of the serving
// model, and the deletion effect is not computed for a set (percentile -1, p_value 1).
// An erasure adds every point with its tombstone, the pool's certificates before and
// after and the time its refit finished; Part and Parts number the records of a subject
// with more than MaxErasurePoints points.
type SubjectAuditBody struct {
	Kind           string               `json:"kind"`
	Request        string               `json:"request"`
	ID             string               `json:"id"`
	SubjectHash    string               `json:"subject_hash"`
	Known          bool                 `json:"known"`
	WasLandmark    bool                 `json:"was_landmark"`
	PoolLandmark   bool                 `json:"pool_landmark"`
	ModelBefore    uint64               `json:"model_before"`
	ModelAfter     uint64               `json:"model_after"`
	ModelAfterID   string               `json:"model_after_id"`
	Percentile     float64              `json:"percentile"`
	PValue         float64              `json:"p_value"`
	Points         []ErasureAuditPoint  `json:"points,omitempty"`
	Part           int                  `json:"part,omitempty"`
	Parts          int                  `json:"parts,omitempty"`
	ResidualBefore *[2]certify.Residual `json:"residual_before,omitempty"`
	ResidualAfter  *[2]certify.Residual `json:"residual_after,omitempty"`
	Requested      time.Time            `json:"requested"`
	Applied        time.Time            `json:"applied"`
	RefitDone      time.Time            `json:"refit_done"`
	Source         string               `json:"source"`
}

// ErasureAuditPoint is one erased point in an erasure's audit: whether it was a
// landmark of the serving model and of the pool, and where its tombstone landed on the
// training topic (or why that is unknown, Tombstone.Unknown).
type ErasureAuditPoint struct {
	ID           string     `json:"id"`
	WasLandmark  bool       `json:"was_landmark"`
	PoolLandmark bool       `json:"pool_landmark"`
	Tombstone    *Tombstone `json:"tombstone"`
}

// appendSubjectAudit is AppendAudit of a subject request's record.
func appendSubjectAudit(tx *storage.Tx, topic string, rec *Deletion, after *serving.Model, done time.Time, sig *auditsig.Signer) (stream.Audit, error) {
	b := SubjectAuditBody{Kind: rec.Kind, Request: rec.Request, ID: rec.ID, SubjectHash: rec.Subject,
		Known: rec.Blocked || len(rec.Points) > 0, WasLandmark: rec.WasLandmark, PoolLandmark: rec.PoolLandmark,
		ModelBefore: rec.ModelBefore, Percentile: -1, PValue: 1, Part: rec.Part, Parts: rec.Parts,
		Requested: rec.Requested, Applied: rec.Applied, RefitDone: done.UTC(), Source: rec.Source}
	if after != nil {
		b.ModelAfter, b.ModelAfterID = after.Version, after.ID
	}
	ev := stream.Audit{Request: rec.Request, ID: rec.ID, SubjectHash: rec.Subject}
	if rec.Kind == KindErasure {
		b.ResidualBefore = &[2]certify.Residual{serving.ResidualOf(rec.ResidualBefore[0]), serving.ResidualOf(rec.ResidualBefore[1])}
		b.ResidualAfter = &[2]certify.Residual{serving.ResidualOf(rec.ResidualAfter[0]), serving.ResidualOf(rec.ResidualAfter[1])}
		for _, p := range rec.Points {
			b.Points = append(b.Points, ErasureAuditPoint{ID: p.ID, WasLandmark: p.WasLandmark, PoolLandmark: p.PoolLandmark, Tombstone: p.Tombstone})
			ev.Points = append(ev.Points, stream.AuditPoint{ID: p.ID, WasLandmark: p.WasLandmark})
		}
	}
	body, err := json.Marshal(b)
	if err != nil {
		return stream.Audit{}, fmt.Errorf("ingest: audit body of request %q: %w", rec.Request, err)
	}
	link, err := tx.AppendAudit(body)
	if err != nil {
		return stream.Audit{}, err
	}
	ev.Known, ev.WasLandmark, ev.ModelBefore, ev.ModelAfter = b.Known, b.WasLandmark, b.ModelBefore, b.ModelAfter
	ev.Percentile, ev.PValue, ev.Seq, ev.Body = b.Percentile, b.PValue, link.Seq, string(body)
	ev.PrevHash, ev.Hash = hex.EncodeToString(link.PrevHash[:]), hex.EncodeToString(link.Hash[:])
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
