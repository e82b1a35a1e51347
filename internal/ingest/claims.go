package ingest

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// VersionHeader is the record header that marks cairnd's own records on the training
// topic, its claims (doc.go, "Versions"): a deletion's tombstone and a republished
// upsert. Its value is the claim's version in decimal: the offset, on the record's own
// partition, of the input whose effect the claim restates.
const VersionHeader = "cairn_version"

// SubjectHeader carries, on a republished upsert of a point about a data subject, the
// subject's keyed hash (64 hex digits): the republished value cannot name the subject,
// which cairnd never keeps in plain text, so a reader that applies the republication
// files the point under the hash itself (erasure.go).
const SubjectHeader = "cairn_subject"

// claim is what a claim record says about its key: a tombstone (the id is deleted) or
// a republished upsert (the id holds the record's value, about subject when set), as of
// version, the offset of the input it restates (-1: unknown, a tombstone written before
// versions existed).
type claim struct {
	tomb    bool
	version int64
	subject *storage.SubjectHash
}

// erases says whether a tombstone of this claim's version erases a point stored at
// version w: when it restates a later input (a deletion, v > w) or the erasure of that
// very input (an erasure's tombstone carries the version of the upsert it erased, v =
// w; an unversioned point, w = -1, is erased by a later version only).
func (c claim) erases(w int64) bool { return c.version > w || (c.version == w && w >= 0) }

// claimOf reports whether m is a claim and what it claims. A record with a null value
// is a tombstone whatever its headers (versioned by a valid header, else -1); a record
// with a value is a republication only with a valid header. A header is valid when it
// is a decimal at least -1 and below the record's own offset (a claim restates an
// earlier input): an invalid one on a record with a value is ignored, and the record is
// an input like any other.
func claimOf(m stream.Message) (claim, bool) {
	v := int64(-1)
	ok := false
	if h, found := m.Header(VersionHeader); found {
		if n, err := strconv.ParseInt(string(h), 10, 64); err == nil && n >= -1 && n < m.Offset {
			v, ok = n, true
		}
	}
	if m.Value == nil {
		return claim{tomb: true, version: v}, true
	}
	c := claim{version: v}
	if h, found := m.Header(SubjectHeader); found && ok {
		if b, err := hex.DecodeString(string(h)); err == nil && len(b) == len(storage.SubjectHash{}) {
			c.subject = (*storage.SubjectHash)(b)
		}
	}
	return c, ok
}

// claimMarker starts the outbox value of a claim (no JSON value starts with a NUL):
// the marker, the version as 8 bytes big-endian, then the record's value (nothing for
// a tombstone). claimSubjectMarker starts a republication about a data subject: the
// marker, the version, the subject's 32-byte hash, then the value. An empty outbox
// value on the training topic is a tombstone written before versions existed,
// published without a header.
const (
	claimMarker        = 0x00
	claimSubjectMarker = 0x01
	claimPlacedMarker  = 0x02
)

// placed is the outbox value of claim (encodeClaim's) to be written on partition p of
// the training topic rather than its key's: the marker, p as 4 bytes big-endian, then
// the claim. A claim goes where the id's record is, which a producer whose partitioner
// is not cairn's (librdkafka hashes keys with CRC32 by default, cairn's writer with
// murmur2 as the Java client) may have chosen; a tombstone on another partition would
// erase nothing. p < 0 (unknown): the claim as it is, by key.
func placed(p int32, claim []byte) []byte {
	if p < 0 {
		return claim
	}
	b := make([]byte, 0, 5+len(claim))
	b = append(b, claimPlacedMarker)
	b = binary.BigEndian.AppendUint32(b, uint32(p))
	return append(b, claim...)
}

// encodeClaim is the outbox value of a claim of version with value (nil: a tombstone),
// about subject when it is set (republications only).
func encodeClaim(version int64, subject *storage.SubjectHash, value []byte) []byte {
	b := make([]byte, 0, 41+len(value))
	if subject != nil && value != nil {
		b = append(b, claimSubjectMarker)
		b = binary.BigEndian.AppendUint64(b, uint64(version))
		b = append(b, subject[:]...)
		return append(b, value...)
	}
	b = append(b, claimMarker)
	b = binary.BigEndian.AppendUint64(b, uint64(version))
	return append(b, value...)
}

// decodePlaced turns the outbox value of a training-topic entry into the record to
// publish: its value (nil for a tombstone), its headers and the partition it goes to
// (placed; -1: its key's). ok is false for a value that is no claim (the outbox holds
// none on the training topic).
func decodePlaced(v []byte) (value []byte, headers []stream.Header, partition int, ok bool) {
	partition = -1
	if len(v) >= 5 && v[0] == claimPlacedMarker {
		partition, v = int(binary.BigEndian.Uint32(v[1:5])), v[5:]
	}
	value, headers, ok = decodeBareClaim(v)
	return value, headers, partition, ok
}

// decodeBareClaim decodes a claim that is not placed.
func decodeBareClaim(v []byte) (value []byte, headers []stream.Header, ok bool) {
	if len(v) == 0 {
		return nil, nil, true // a tombstone without a version
	}
	if len(v) >= 41 && v[0] == claimSubjectMarker {
		version := int64(binary.BigEndian.Uint64(v[1:9]))
		return v[41:], []stream.Header{{Key: VersionHeader, Value: strconv.AppendInt(nil, version, 10)},
			{Key: SubjectHeader, Value: []byte(hex.EncodeToString(v[9:41]))}}, true
	}
	if len(v) < 9 || v[0] != claimMarker {
		return v, nil, false
	}
	version := int64(binary.BigEndian.Uint64(v[1:9]))
	headers = []stream.Header{{Key: VersionHeader, Value: strconv.AppendInt(nil, version, 10)}}
	if len(v) == 9 {
		return nil, headers, true
	}
	return v[9:], headers, true
}

// key is what a batch knows of one id while plan walks it in offset order: whether it
// is stored, and then its value and version; the version of the deletion whose
// tombstone is awaited (-1: none); whether its newest record so far is a claim that
// does not restate it (republish: the id must be republished after the batch).
type key struct {
	stored    bool
	version   int64
	x         []float64
	label     int64
	hasLabel  bool
	subject   *storage.SubjectHash
	deleted   int64
	republish bool
	partition int32 // of the stored value's record (-1: unknown)
}

// relabeledBy reports whether an upsert with label (nil: none) changes k's label.
func (k *key) relabeledBy(label *int64) bool {
	return (label != nil) != k.hasLabel || label != nil && *label != k.label
}

// keyOf returns the batch's state of id, starting from the committed one.
func (in *State) keyOf(keys map[string]*key, id string) *key {
	if k, ok := keys[id]; ok {
		return k
	}
	k := &key{deleted: -1, version: -1, partition: -1}
	if e := in.cache.Get(id); e != nil && in.pool.A.Has(id) {
		k.stored, k.version, k.x, k.label, k.hasLabel, k.subject = true, e.Version, e.X, e.Label, e.HasLabel, e.Subject
		k.partition = e.Partition
	}
	if d, ok := in.deleted[id]; ok {
		k.deleted = d
	}
	keys[id] = k
	return k
}

// sameValue says whether an upsert about subject (nil: none) restates k's stored value:
// the same label, the same subject and the same input bit for bit.
func (k *key) sameValue(ev stream.TrainEvent, subject *storage.SubjectHash) bool {
	hasLabel := ev.Label != nil
	if hasLabel != k.hasLabel || (hasLabel && *ev.Label != k.label) || !sameSubject(subject, k.subject) {
		return false
	}
	return vec.SameBits(ev.X, k.x)
}

// sameSubject says whether a and b name the same subject (or both none).
func sameSubject(a, b *storage.SubjectHash) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// republication is an upsert the batch republishes after its end: id's stored value
// at version, on topic.
type republication struct {
	topic   string
	id      string
	version int64
	subject *storage.SubjectHash
	ev      stream.TrainEvent
	// partition is where the stored value's record is (-1: unknown, by key).
	partition int32
}
