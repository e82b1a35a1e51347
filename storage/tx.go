package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ReadTx is a read-only view of the store inside View (or the read half of a
// Tx). Every returned value is decoded into fresh memory owned by the caller.
// A ReadTx is not safe for concurrent use and is invalid after its function
// returns (methods then return ErrTxDone).
type ReadTx struct {
	tx    *bolt.Tx
	slots string // the slot directory (slots.go)
	done  bool
}

// point decodes the value v of point key, reading its input from its slot.
func (r *ReadTx) point(k, v []byte) (Point, error) {
	p, ref, why := decodePoint(k, v)
	if why == "" && ref != nil {
		p.X, why = readSlot(r.slots, *ref)
	}
	if why != "" {
		return Point{}, corrupt(bucketPoints, k, why)
	}
	return p, nil
}

func (r *ReadTx) check() error {
	if r.done {
		return ErrTxDone
	}
	return nil
}

func corrupt(bucket []byte, key []byte, why string) error {
	return &CorruptError{Bucket: string(bucket), Key: bytes.Clone(key), Reason: why}
}

func (r *ReadTx) metaU64(key []byte) (uint64, error) {
	v := r.tx.Bucket(bucketMeta).Get(key)
	if v == nil {
		return 0, nil
	}
	x, why := decodeMetaU64(key, v)
	if why != "" {
		return 0, corrupt(bucketMeta, key, why)
	}
	return x, nil
}

// Point returns the point with the given id; ok is false if there is none.
func (r *ReadTx) Point(id string) (p Point, ok bool, err error) {
	if err := r.check(); err != nil {
		return Point{}, false, err
	}
	k := []byte(id)
	v := r.tx.Bucket(bucketPoints).Get(k)
	if v == nil {
		return Point{}, false, nil
	}
	p, err = r.point(k, v)
	if err != nil {
		return Point{}, false, err
	}
	return p, true, nil
}

// ForEachPoint calls fn for every point in id byte order and stops at fn's
// first error, which it returns. fn must not modify the store through another
// transaction.
func (r *ReadTx) ForEachPoint(fn func(Point) error) error {
	if err := r.check(); err != nil {
		return err
	}
	c := r.tx.Bucket(bucketPoints).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		p, err := r.point(k, v)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// PointCount returns the number of stored points.
func (r *ReadTx) PointCount() (int, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	n, err := r.metaU64(metaPointCount)
	return int(n), err
}

// PoolState returns the stored landmark pool state; ok is false if none was put.
func (r *ReadTx) PoolState() (s PoolState, ok bool, err error) {
	if err := r.check(); err != nil {
		return PoolState{}, false, err
	}
	v := r.tx.Bucket(bucketPool).Get(poolStateKey)
	if v == nil {
		return PoolState{}, false, nil
	}
	s, why := decodePoolState(poolStateKey, v)
	if why != "" {
		return PoolState{}, false, corrupt(bucketPool, poolStateKey, why)
	}
	return s, true, nil
}

// PoolPoint returns the pool's record of point id (Tx.PutPoolPoint); ok is
// false if there is none. rec is a fresh copy.
func (r *ReadTx) PoolPoint(id string) (rec []byte, ok bool, err error) {
	if err := r.check(); err != nil {
		return nil, false, err
	}
	if err := validID("pool point id", id); err != nil {
		return nil, false, err
	}
	k := []byte(id)
	v := r.tx.Bucket(bucketPoolPts).Get(k)
	if v == nil {
		return nil, false, nil
	}
	rec, why := decodePoolPoint(k, v)
	if why != "" {
		return nil, false, corrupt(bucketPoolPts, k, why)
	}
	return rec, true, nil
}

// ForEachPoolPoint calls fn for every per-point pool record in id byte order
// (the order of ForEachPoint) and stops at fn's first error, which it returns.
// rec is a fresh copy fn may keep. fn must not modify the store through another
// transaction; inside Apply it must not write pool points (a write to the
// bucket may invalidate bbolt's cursor).
func (r *ReadTx) ForEachPoolPoint(fn func(id string, rec []byte) error) error {
	if err := r.check(); err != nil {
		return err
	}
	c := r.tx.Bucket(bucketPoolPts).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec, why := decodePoolPoint(k, v)
		if why != "" {
			return corrupt(bucketPoolPts, k, why)
		}
		if err := fn(string(k), rec); err != nil {
			return err
		}
	}
	return nil
}

// Model returns model version v; ok is false if it does not exist.
func (r *ReadTx) Model(version uint64) (m Model, ok bool, err error) {
	if err := r.check(); err != nil {
		return Model{}, false, err
	}
	k := u64Key(version)
	v := r.tx.Bucket(bucketModels).Get(k)
	if v == nil {
		return Model{}, false, nil
	}
	m, why := decodeModel(k, v)
	if why != "" {
		return Model{}, false, corrupt(bucketModels, k, why)
	}
	return m, true, nil
}

// LatestModel returns the model with the highest version; ok is false if no
// model was stored.
func (r *ReadTx) LatestModel() (m Model, ok bool, err error) {
	if err := r.check(); err != nil {
		return Model{}, false, err
	}
	k, v := r.tx.Bucket(bucketModels).Cursor().Last()
	if k == nil {
		return Model{}, false, nil
	}
	m, why := decodeModel(k, v)
	if why != "" {
		return Model{}, false, corrupt(bucketModels, k, why)
	}
	return m, true, nil
}

// ModelVersions returns the stored model versions in increasing order.
func (r *ReadTx) ModelVersions() ([]uint64, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	var out []uint64
	c := r.tx.Bucket(bucketModels).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 8 {
			return nil, corrupt(bucketModels, k, "model key is not 8 bytes")
		}
		out = append(out, binary.BigEndian.Uint64(k))
	}
	return out, nil
}

// FitStats returns the repeated-fit statistics of a model version.
func (r *ReadTx) FitStats(version uint64) (f FitStats, ok bool, err error) {
	if err := r.check(); err != nil {
		return FitStats{}, false, err
	}
	k := u64Key(version)
	v := r.tx.Bucket(bucketFitStats).Get(k)
	if v == nil {
		return FitStats{}, false, nil
	}
	f, why := decodeFitStats(k, v)
	if why != "" {
		return FitStats{}, false, corrupt(bucketFitStats, k, why)
	}
	return f, true, nil
}

// Offset returns the last consumed offset of a topic partition; ok is false if
// none was stored (the reader then starts from its configured reset policy).
func (r *ReadTx) Offset(topic string, partition int32) (offset int64, ok bool, err error) {
	if err := r.check(); err != nil {
		return 0, false, err
	}
	if err := validTopic("topic", topic); err != nil {
		return 0, false, err
	}
	if partition < 0 {
		return 0, false, invalidf("partition %d is negative", partition)
	}
	k := offsetKey(topic, partition)
	v := r.tx.Bucket(bucketOffsets).Get(k)
	if v == nil {
		return 0, false, nil
	}
	o, why := decodeOffset(k, v)
	if why != "" {
		return 0, false, corrupt(bucketOffsets, k, why)
	}
	return o.Offset, true, nil
}

// Offsets returns every stored offset ordered by topic, then partition.
func (r *ReadTx) Offsets() ([]Offset, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	var out []Offset
	c := r.tx.Bucket(bucketOffsets).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		o, why := decodeOffset(k, v)
		if why != "" {
			return nil, corrupt(bucketOffsets, k, why)
		}
		out = append(out, o)
	}
	return out, nil
}

// Audit returns the audit record with the given seq.
func (r *ReadTx) Audit(seq uint64) (a AuditRecord, ok bool, err error) {
	if err := r.check(); err != nil {
		return AuditRecord{}, false, err
	}
	k := u64Key(seq)
	v := r.tx.Bucket(bucketAudit).Get(k)
	if v == nil {
		return AuditRecord{}, false, nil
	}
	a, why := decodeAudit(k, v)
	if why != "" {
		return AuditRecord{}, false, corrupt(bucketAudit, k, why)
	}
	return a, true, nil
}

// AuditHead returns the link of the last audit record; ok is false (and the
// zero link, whose Hash is the PrevHash of seq 1) when the log is empty.
func (r *ReadTx) AuditHead() (l AuditLink, ok bool, err error) {
	if err := r.check(); err != nil {
		return AuditLink{}, false, err
	}
	k, v := r.tx.Bucket(bucketAudit).Cursor().Last()
	if k == nil {
		return AuditLink{}, false, nil
	}
	a, why := decodeAudit(k, v)
	if why != "" {
		return AuditLink{}, false, corrupt(bucketAudit, k, why)
	}
	return a.AuditLink, true, nil
}

// ForEachAudit calls fn for each audit record with seq >= from, in seq order.
func (r *ReadTx) ForEachAudit(from uint64, fn func(AuditRecord) error) error {
	if err := r.check(); err != nil {
		return err
	}
	c := r.tx.Bucket(bucketAudit).Cursor()
	for k, v := c.Seek(u64Key(from)); k != nil; k, v = c.Next() {
		a, why := decodeAudit(k, v)
		if why != "" {
			return corrupt(bucketAudit, k, why)
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// Pending returns the pending deletion audit body stored under seq; ok is false
// if there is none. seq 0 is never stored and is an ErrInvalid error. Not to be
// confused with Store.Pending, which lists outbox entries.
func (r *ReadTx) Pending(seq uint64) (body []byte, ok bool, err error) {
	if err := r.check(); err != nil {
		return nil, false, err
	}
	if seq == 0 {
		return nil, false, invalidf("pending seq is 0")
	}
	k := u64Key(seq)
	v := r.tx.Bucket(bucketPending).Get(k)
	if v == nil {
		return nil, false, nil
	}
	_, body, why := decodePending(k, v)
	if why != "" {
		return nil, false, corrupt(bucketPending, k, why)
	}
	return body, true, nil
}

// ForEachPending calls fn for every pending deletion audit in increasing seq
// order and stops at fn's first error, which it returns. body is a fresh copy
// (nil when empty) that fn may keep. fn must not modify the store through
// another transaction; inside Apply, it must not call PutPending or
// DeletePending (a write to the bucket may invalidate bbolt's cursor): collect
// the seqs and delete them after the walk.
func (r *ReadTx) ForEachPending(fn func(seq uint64, body []byte) error) error {
	if err := r.check(); err != nil {
		return err
	}
	c := r.tx.Bucket(bucketPending).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		seq, body, why := decodePending(k, v)
		if why != "" {
			return corrupt(bucketPending, k, why)
		}
		if err := fn(seq, body); err != nil {
			return err
		}
	}
	return nil
}

// ForEachDeleted calls fn for every entry of the deleted bucket (Tx.PutDeleted), in id
// order, and stops at fn's first error, which it returns. fn must not write the bucket
// during the walk.
func (r *ReadTx) ForEachDeleted(fn func(id string, version int64) error) error {
	if err := r.check(); err != nil {
		return err
	}
	c := r.tx.Bucket(bucketDeleted).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		version, why := decodeDeleted(k, v)
		if why != "" {
			return corrupt(bucketDeleted, k, why)
		}
		if err := fn(string(k), version); err != nil {
			return err
		}
	}
	return nil
}

// Tx is the read-write transaction given to Apply. It reads like a ReadTx and
// sees its own writes. Arguments are encoded when a method is called, so the
// caller may reuse its slices afterwards. Not safe for concurrent use.
type Tx struct {
	ReadTx

	// now is when the transaction began (Time).
	now time.Time

	outboxLoaded bool
	outboxStart  uint64 // last assigned outbox seq before this transaction
	outboxSeq    uint64 // last assigned outbox seq so far

	auditLoaded bool
	auditHead   AuditLink

	pointsLoaded bool
	points       uint64
	pointsDirty  bool

	// Slots (slots.go): the last allocated id, the slots this transaction wrote
	// (removed if it does not commit) and those it dropped (erased once it commits;
	// the outbox is held from this transaction on until they are).
	slotLast    uint64
	slotsLoaded bool
	seg         segmentWriter
	created     []uint64 // segment ids
	dropped     []slotHole
}

// dropOld schedules the erasure of the slot of the stored value v of point k (every
// value of a format 4 file has one: migrate3to4 moved the inline ones).
func (t *Tx) dropOld(k, v []byte) {
	if _, ref, why := decodePoint(k, v); why == "" && ref != nil {
		t.dropped = append(t.dropped, ref.hole())
	}
}

// newSlot writes x to a fresh slot of this transaction.
func (t *Tx) newSlot(x []float64) (slotRef, error) {
	if !t.slotsLoaded {
		last, err := t.metaU64(metaSlotLast)
		if err != nil {
			return slotRef{}, err
		}
		t.slotLast, t.slotsLoaded = last, true
	}
	t.slotLast++
	fresh := t.seg.f == nil
	ref, err := t.seg.write(t.slots, t.slotLast, x)
	if err != nil {
		return slotRef{}, err
	}
	if fresh {
		t.created = append(t.created, ref.seg)
	}
	return ref, nil
}

func validTopic(field, topic string) error {
	if topic == "" {
		return invalidf("%s is empty", field)
	}
	if len(topic) > MaxTopicLen {
		return invalidf("%s %.32q… is %d bytes, longer than %d", field, topic, len(topic), MaxTopicLen)
	}
	if strings.IndexByte(topic, 0) >= 0 {
		return invalidf("%s %q contains a NUL byte", field, topic)
	}
	return nil
}

func validID(field, id string) error {
	if id == "" {
		return invalidf("%s is empty", field)
	}
	if len(id) > MaxIDLen {
		return invalidf("%s %.32q… is %d bytes, longer than %d", field, id, len(id), MaxIDLen)
	}
	return nil
}

func validMatrix(name string, m Matrix) error {
	if m.Rows < 0 || m.Cols < 0 || m.Rows > math.MaxUint32 || m.Cols > math.MaxUint32 {
		return invalidf("model matrix %s has shape %d×%d", name, m.Rows, m.Cols)
	}
	if uint64(len(m.Data)) != uint64(m.Rows)*uint64(m.Cols) {
		return invalidf("model matrix %s has %d elements, shape %d×%d needs %d", name, len(m.Data), m.Rows, m.Cols, m.Rows*m.Cols)
	}
	return nil
}

func (t *Tx) loadPoints() error {
	if t.pointsLoaded {
		return nil
	}
	n, err := t.metaU64(metaPointCount)
	if err != nil {
		return err
	}
	t.points, t.pointsLoaded = n, true
	return nil
}

// PutPoint inserts or replaces a point.
func (t *Tx) PutPoint(p Point) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := validID("point id", p.ID); err != nil {
		return err
	}
	if err := t.loadPoints(); err != nil {
		return err
	}
	k := []byte(p.ID)
	b := t.tx.Bucket(bucketPoints)
	if old := b.Get(k); old == nil {
		t.points++
		t.pointsDirty = true
	} else {
		t.dropOld(k, old)
	}
	ref, err := t.newSlot(p.X)
	if err != nil {
		return err
	}
	if err := b.Put(k, encodePoint(k, &p, &ref)); err != nil {
		return fmt.Errorf("storage: put point %q: %w", p.ID, err)
	}
	return nil
}

// DeletePoint removes a point, and its pool record if it has one
// (PutPoolPoint), and reports whether it existed. Its input is erased from its slot
// once the transaction commits (Apply); outbox entries enqueued from this transaction
// on are held back from Pending until it is.
func (t *Tx) DeletePoint(id string) (existed bool, err error) {
	if err := t.check(); err != nil {
		return false, err
	}
	if err := validID("point id", id); err != nil {
		return false, err
	}
	if err := t.loadPoints(); err != nil {
		return false, err
	}
	k := []byte(id)
	b := t.tx.Bucket(bucketPoints)
	old := b.Get(k)
	if old == nil {
		return false, nil
	}
	t.dropOld(k, old)
	if err := b.Delete(k); err != nil {
		return false, fmt.Errorf("storage: delete point %q: %w", id, err)
	}
	if err := t.tx.Bucket(bucketPoolPts).Delete(k); err != nil {
		return false, fmt.Errorf("storage: delete pool point %q: %w", id, err)
	}
	if err := t.clearSubject(k); err != nil {
		return false, err
	}
	t.points--
	t.pointsDirty = true
	return true, nil
}

// SetOffset records the last consumed offset of a topic partition.
func (t *Tx) SetOffset(topic string, partition int32, offset int64) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := validTopic("offset topic", topic); err != nil {
		return err
	}
	if partition < 0 {
		return invalidf("offset partition %d is negative", partition)
	}
	k := offsetKey(topic, partition)
	if err := t.tx.Bucket(bucketOffsets).Put(k, encodeOffset(k, offset)); err != nil {
		return fmt.Errorf("storage: set offset %s/%d: %w", topic, partition, err)
	}
	return nil
}

// Time is when the transaction began (Apply's clock, UTC), which Enqueue stores with
// every entry (OutboxEntry.Time). A caller that states a time in what it enqueues and
// wants it equal to the entry's uses this one.
func (t *Tx) Time() time.Time { return t.now }

// Enqueue appends an output event to the outbox and returns its seq. Seqs are
// assigned in call order across transactions, so replaying the same inputs
// assigns the same seqs. The entry records the transaction's Time.
func (t *Tx) Enqueue(topic string, key, value []byte) (seq uint64, err error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if err := validTopic("outbox topic", topic); err != nil {
		return 0, err
	}
	if !t.outboxLoaded {
		last, err := t.metaU64(metaOutboxSeq)
		if err != nil {
			return 0, err
		}
		t.outboxStart, t.outboxSeq, t.outboxLoaded = last, last, true
	}
	seq = t.outboxSeq + 1
	k := u64Key(seq)
	if err := t.tx.Bucket(bucketOutbox).Put(k, encodeOutbox(k, topic, key, value, t.now)); err != nil {
		return 0, fmt.Errorf("storage: enqueue seq %d on %s: %w", seq, topic, err)
	}
	t.outboxSeq = seq
	return seq, nil
}

// AppendAudit appends body to the audit log and returns its link: Seq (from 1),
// PrevHash (the previous record's Hash, 32 zero bytes for Seq 1) and
// Hash = SHA-256(PrevHash || body). body is stored verbatim: the caller makes it
// canonical (the same logical audit must always give the same bytes) and puts
// the returned link next to it in the emitted event, so a reader recomputes the
// hash from the event's body bytes. body must not contain raw input data.
func (t *Tx) AppendAudit(body []byte) (AuditLink, error) {
	if err := t.check(); err != nil {
		return AuditLink{}, err
	}
	if !t.auditLoaded {
		head, _, err := t.AuditHead()
		if err != nil {
			return AuditLink{}, err
		}
		t.auditHead, t.auditLoaded = head, true
	}
	l := AuditLink{Seq: t.auditHead.Seq + 1, PrevHash: t.auditHead.Hash}
	l.Hash = chainHash(&l.PrevHash, body)
	k := u64Key(l.Seq)
	if err := t.tx.Bucket(bucketAudit).Put(k, encodeAudit(k, &l.PrevHash, &l.Hash, body)); err != nil {
		return AuditLink{}, fmt.Errorf("storage: append audit seq %d: %w", l.Seq, err)
	}
	t.auditHead = l
	return l, nil
}

// PutPending stores body as the pending deletion audit with the given seq,
// replacing any body already stored under it. The caller chooses seq (> 0; the
// daemon uses its deletion sequence) and the encoding of body, which storage
// never interprets; len(body) must be at most MaxPendingLen. body must not
// contain raw input data: unlike a deleted point it is not covered by the
// Compact hold, and DeletePending does not start one, so its bytes may stay on
// freed pages until the next Compact.
func (t *Tx) PutPending(seq uint64, body []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if seq == 0 {
		return invalidf("pending seq is 0")
	}
	if len(body) > MaxPendingLen {
		return invalidf("pending body for seq %d is %d bytes, longer than %d", seq, len(body), MaxPendingLen)
	}
	k := u64Key(seq)
	if err := t.tx.Bucket(bucketPending).Put(k, encodePending(k, body)); err != nil {
		return fmt.Errorf("storage: put pending seq %d (%d bytes): %w", seq, len(body), err)
	}
	return nil
}

// DeletePending removes the pending deletion audit with the given seq and
// reports whether it existed; seq 0 is an ErrInvalid error.
func (t *Tx) DeletePending(seq uint64) (existed bool, err error) {
	if err := t.check(); err != nil {
		return false, err
	}
	if seq == 0 {
		return false, invalidf("pending seq is 0")
	}
	k := u64Key(seq)
	b := t.tx.Bucket(bucketPending)
	if b.Get(k) == nil {
		return false, nil
	}
	if err := b.Delete(k); err != nil {
		return false, fmt.Errorf("storage: delete pending seq %d: %w", seq, err)
	}
	return true, nil
}

// PutDeleted records version (>= 0) under id in the deleted bucket, replacing what was
// there. Storage does not interpret it; the daemon keeps there the ids it deleted
// whose tombstone it has not read back yet (FORMAT.md, "Buckets"). Neither PutPoint
// nor DeletePoint touches the bucket.
func (t *Tx) PutDeleted(id string, version int64) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := validID("deleted id", id); err != nil {
		return err
	}
	if version < 0 {
		return invalidf("deleted %q: negative version %d", id, version)
	}
	k := []byte(id)
	if err := t.tx.Bucket(bucketDeleted).Put(k, encodeDeleted(k, version)); err != nil {
		return fmt.Errorf("storage: put deleted %q: %w", id, err)
	}
	return nil
}

// DropDeleted removes id from the deleted bucket and reports whether it was there.
func (t *Tx) DropDeleted(id string) (existed bool, err error) {
	if err := t.check(); err != nil {
		return false, err
	}
	if err := validID("deleted id", id); err != nil {
		return false, err
	}
	k := []byte(id)
	b := t.tx.Bucket(bucketDeleted)
	if b.Get(k) == nil {
		return false, nil
	}
	if err := b.Delete(k); err != nil {
		return false, fmt.Errorf("storage: drop deleted %q: %w", id, err)
	}
	return true, nil
}

// Ack removes outbox entries, as Store.Ack does, in this transaction: the owner can
// store what the publication of the entries taught it (where the broker put them) in
// the transaction that retires them, so that either both happen or neither.
func (t *Tx) Ack(seqs ...uint64) error {
	if err := t.check(); err != nil {
		return err
	}
	b := t.tx.Bucket(bucketOutbox)
	for _, seq := range seqs {
		if err := b.Delete(u64Key(seq)); err != nil {
			return fmt.Errorf("storage: ack seq %d: %w", seq, err)
		}
	}
	return nil
}

// PutPoolState replaces the landmark pool state.
func (t *Tx) PutPoolState(s PoolState) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketPool).Put(poolStateKey, encodePoolState(poolStateKey, &s)); err != nil {
		return fmt.Errorf("storage: put pool state (%d bytes): %w", len(s.Data), err)
	}
	return nil
}

// PutPoolPoint stores rec as the landmark pool's record of the stored point
// id, replacing any record it had. The record belongs to the point: the point
// must be stored (PutPoint earlier, in this or an earlier transaction; otherwise
// ErrInvalid), and DeletePoint removes it with the point, so every record names
// a stored point. rec is opaque to storage (the pool's writer versions it with
// the pool state's schema), at most MaxPoolPointLen bytes, and must not contain
// raw input data. PutPoint does not touch the record: a writer that replaces a
// point's input rewrites its record in the same transaction.
//
// Kept apart from the point's value so that a pool writer can rewrite every
// record (a resync changes every residual) without rewriting every raw input,
// and update one point's record per event without rewriting the pool state.
func (t *Tx) PutPoolPoint(id string, rec []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := validID("pool point id", id); err != nil {
		return err
	}
	if len(rec) > MaxPoolPointLen {
		return invalidf("pool point record of %q is %d bytes, longer than %d", id, len(rec), MaxPoolPointLen)
	}
	k := []byte(id)
	if t.tx.Bucket(bucketPoints).Get(k) == nil {
		return invalidf("pool point record of %q: no such stored point", id)
	}
	pb := t.tx.Bucket(bucketPoolPts)
	// Records are small and of one size, and written in key order in bulk (a pool
	// resync rewrites all of them): full pages halve the pages a later random
	// update dirties. bbolt's default (0.5) suits random inserts.
	pb.FillPercent = poolPointFill
	if err := pb.Put(k, encodePoolPoint(k, rec)); err != nil {
		return fmt.Errorf("storage: put pool point %q: %w", id, err)
	}
	return nil
}

// poolPointFill is the bbolt fill percent of the poolpoints bucket's pages.
const poolPointFill = 0.95

// PutModel stores a new model version. Versions are immutable: storing an
// existing version returns an error matching ErrModelExists.
func (t *Tx) PutModel(m Model) error {
	if err := t.check(); err != nil {
		return err
	}
	if m.Version == 0 {
		return invalidf("model version is 0")
	}
	for i, l := range m.Landmarks {
		if err := validID(fmt.Sprintf("model landmark %d", i), l); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		name string
		m    Matrix
	}{{"A", m.A}, {"A0", m.A0}, {"B", m.B}} {
		if err := validMatrix(x.name, x.m); err != nil {
			return err
		}
	}
	k := u64Key(m.Version)
	b := t.tx.Bucket(bucketModels)
	if b.Get(k) != nil {
		return fmt.Errorf("%w: version %d", ErrModelExists, m.Version)
	}
	if err := b.Put(k, encodeModel(k, &m)); err != nil {
		return fmt.Errorf("storage: put model version %d: %w", m.Version, err)
	}
	return nil
}

// PutFitStats stores (or replaces) the repeated-fit statistics of a version.
func (t *Tx) PutFitStats(f FitStats) error {
	if err := t.check(); err != nil {
		return err
	}
	if f.Version == 0 {
		return invalidf("fit stats version is 0")
	}
	k := u64Key(f.Version)
	if err := t.tx.Bucket(bucketFitStats).Put(k, encodeFitStats(k, &f)); err != nil {
		return fmt.Errorf("storage: put fit stats version %d: %w", f.Version, err)
	}
	return nil
}

// finish writes the counters the transaction changed, before commit.
func (t *Tx) finish() error {
	meta := t.tx.Bucket(bucketMeta)
	if t.outboxLoaded && t.outboxSeq != t.outboxStart {
		if err := meta.Put(metaOutboxSeq, encodeMetaU64(metaOutboxSeq, t.outboxSeq)); err != nil {
			return err
		}
	}
	if t.pointsDirty {
		if err := meta.Put(metaPointCount, encodeMetaU64(metaPointCount, t.points)); err != nil {
			return err
		}
	}
	if t.slotsLoaded {
		if err := meta.Put(metaSlotLast, encodeMetaU64(metaSlotLast, t.slotLast)); err != nil {
			return err
		}
	}
	if len(t.created) > 0 {
		if err := errors.Join(t.seg.close(), syncSlots(t.slots)); err != nil {
			return err
		}
	}
	if len(t.dropped) > 0 {
		var dropped []slotHole
		if v := meta.Get(metaSlotDropped); v != nil {
			var why string
			if dropped, why = decodeHoles(metaSlotDropped, v); why != "" {
				return corrupt(bucketMeta, metaSlotDropped, why)
			}
		}
		if err := meta.Put(metaSlotDropped, encodeHoles(metaSlotDropped, append(dropped, t.dropped...))); err != nil {
			return err
		}
		hold, err := t.metaU64(metaScrubHold)
		if err != nil {
			return err
		}
		if hold == 0 {
			first := t.outboxStart + 1
			if !t.outboxLoaded {
				last, err := t.metaU64(metaOutboxSeq)
				if err != nil {
					return err
				}
				first = last + 1
			}
			if err := meta.Put(metaScrubHold, encodeMetaU64(metaScrubHold, first)); err != nil {
				return err
			}
		}
	}
	return nil
}
