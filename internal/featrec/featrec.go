package featrec

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math"
	"unicode/utf8"
)

// Version is the format version Encode writes and Decode reads.
const Version = 1

// Topic is the features topic: the featurizers write it, the primary reads it.
const Topic = "cairn.features"

// AppliedGroup is the consumer group, without members, whose committed offsets of the
// training topic are the primary's applied ones (stream.Progress): the primary
// publishes them, and featurizers skip the events below them, which the primary has
// applied already.
const AppliedGroup = "cairn.primary.applied"

// Retention is how long the features topic keeps a record (retention.ms, one hour), set
// when cairnd creates the topic. A record is needed only until the primary applies it,
// or computes the features itself after ingest.featurizer_timeout; and it is data
// derived from a training input (any upsert's, a refused one's too), so an erased
// point's record must not outlive its erasure by long (the topic is not compacted, so
// no tombstone would erase it). Records stay their whole retention, applied or not.
const Retention = "3600000"

// Segment is how long the features topic writes to one log segment (segment.ms, one
// hour). Kafka deletes whole segments only, once their newest record is past the
// retention, and rolls a segment after segment.ms (the broker's default is a week) or
// when it is full; with both an hour, a record is gone about two hours after it was
// written (plus the broker's retention check interval, five minutes by default),
// however little the topic is written to.
const Segment = "3600000"

// TopicConfigs are the settings the features topic is created with.
func TopicConfigs() map[string]map[string]string {
	return map[string]map[string]string{Topic: {"retention.ms": Retention, "segment.ms": Segment}}
}

// Bounds of a record's fields.
const (
	// MaxTopicBytes bounds the source topic's name (Kafka's limit is 249).
	MaxTopicBytes = 255
	// MaxIDBytes bounds the id (storage.MaxIDLen is below it).
	MaxIDBytes = 4096
	// MaxDim bounds the feature dimension of one view (64 MiB of features).
	MaxDim = 1 << 23
)

const (
	magic      = "cfr"
	headerSize = 4 + 32 + 4 + 8 // magic, version, fingerprint, partition, offset
	crcSize    = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is the features of one training upsert.
type Record struct {
	// ID is the point's id.
	ID string
	// Topic, Partition and Offset are the training event's coordinates.
	Topic     string
	Partition int
	Offset    int64
	// Fingerprint is the hex SHA-256 identity of the pipeline that computed Features
	// (pipeline.Features.Fingerprint).
	Fingerprint string
	// Features are ψ of both views, 2·q values: view 0's row, then view 1's, each entry
	// a float32 widened to float64 (pipeline.Features.BothViewsTo's rows 2i and 2i+1).
	Features []float64
}

// Size is the encoded length of r.
func (r *Record) Size() int {
	return headerSize + 2 + len(r.Topic) + 2 + len(r.ID) + 4 + 4*len(r.Features) + crcSize
}

// AppendBinary appends r's encoding to dst (the format in the package doc). Errors wrap
// ErrEncode; dst is then returned unchanged.
func (r *Record) AppendBinary(dst []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return dst, err
	}
	fp, _ := hex.DecodeString(r.Fingerprint) // checked
	start := len(dst)
	b := append(dst, magic...)
	b = append(b, Version)
	b = append(b, fp...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Topic)))
	b = append(b, r.Topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.ID)))
	b = append(b, r.ID...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Features)/2))
	for _, v := range r.Features {
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(float32(v)))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// Encode returns r's encoding (AppendBinary on nil).
func (r *Record) Encode() ([]byte, error) { return r.AppendBinary(make([]byte, 0, r.Size())) }

// check reports the first field of r that cannot be encoded.
func (r *Record) check() error {
	switch {
	case len(r.ID) == 0 || len(r.ID) > MaxIDBytes || !utf8.ValidString(r.ID):
		return fmt.Errorf("%w: id %q: need 1 to %d bytes of UTF-8", ErrEncode, r.ID, MaxIDBytes)
	case len(r.Topic) == 0 || len(r.Topic) > MaxTopicBytes || !utf8.ValidString(r.Topic):
		return fmt.Errorf("%w: topic %q: need 1 to %d bytes of UTF-8", ErrEncode, r.Topic, MaxTopicBytes)
	case r.Partition < 0 || r.Partition > math.MaxInt32:
		return fmt.Errorf("%w: partition %d out of [0, 2^31)", ErrEncode, r.Partition)
	case r.Offset < 0:
		return fmt.Errorf("%w: offset %d is negative", ErrEncode, r.Offset)
	case len(r.Features) == 0 || len(r.Features)%2 != 0 || len(r.Features)/2 > MaxDim:
		return fmt.Errorf("%w: %d features: need 2q with 1 ≤ q ≤ %d", ErrEncode, len(r.Features), MaxDim)
	}
	if fp, err := hex.DecodeString(r.Fingerprint); err != nil || len(fp) != 32 {
		return fmt.Errorf("%w: fingerprint %q: need 64 hex digits", ErrEncode, r.Fingerprint)
	}
	for i, v := range r.Features {
		if float64(float32(v)) != v && !math.IsNaN(v) {
			return fmt.Errorf("%w: feature %d = %v is not a float32", ErrEncode, i, v)
		}
	}
	return nil
}

// Decode validates b as one record (the format in the package doc) and returns it.
// Errors wrap ErrCorrupt and name the field; it never panics.
func Decode(b []byte) (Record, error) { return DecodeTo(nil, b) }

// DecodeTo is Decode with the features written into buf when its length is the
// record's 2q (the returned Record's Features is then buf), else into a new slice.
// buf may be written to only when no error is returned.
func DecodeTo(buf []float64, b []byte) (Record, error) {
	v, err := Parse(b)
	if err != nil {
		return Record{}, err
	}
	r := Record{ID: string(v.ID), Topic: string(v.Topic), Partition: v.Partition, Offset: v.Offset,
		Fingerprint: hex.EncodeToString(v.Fingerprint[:]), Features: buf}
	if len(buf) != 2*v.Dim {
		r.Features = make([]float64, 2*v.Dim)
	}
	v.FeaturesTo(r.Features)
	return r, nil
}

// View is a record validated in place: Parse checks everything Decode checks (every
// field, the UTF-8 of the texts, the checksum) but copies nothing, so a consumer can
// match a record against what it expects and widen its features straight into its own
// rows without allocating (the primary does, once per training upsert). Topic, ID and
// the features alias the bytes parsed: a View is valid while they are not modified.
type View struct {
	// Fingerprint is the pipeline fingerprint's 32 bytes (Record.Fingerprint is their
	// hex).
	Fingerprint [32]byte
	// Topic and ID are the source topic and the id, UTF-8, aliasing the record.
	Topic, ID []byte
	// Partition and Offset are the training event's coordinates.
	Partition int
	Offset    int64
	// Dim is q, the feature dimension of one view: the record holds 2·Dim features.
	Dim int

	features []byte // 8·Dim bytes: the float32 bit patterns, big-endian
}

// Parse validates b as one record (the format in the package doc) and returns a View
// of it. Errors wrap ErrCorrupt and name the field; it never panics and allocates only
// for an error.
func Parse(b []byte) (View, error) {
	var v View
	if len(b) < headerSize+2+2+4+crcSize {
		return v, fmt.Errorf("%w: %d bytes, shorter than any record", ErrCorrupt, len(b))
	}
	if string(b[:3]) != magic {
		return v, fmt.Errorf("%w: magic %q", ErrCorrupt, b[:3])
	}
	if b[3] != Version {
		return v, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, b[3], Version)
	}
	body, sum := b[:len(b)-crcSize], binary.BigEndian.Uint32(b[len(b)-crcSize:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return v, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, sum, got)
	}
	part, off := binary.BigEndian.Uint32(b[36:40]), binary.BigEndian.Uint64(b[40:48])
	if part > math.MaxInt32 {
		return v, fmt.Errorf("%w: partition %d", ErrCorrupt, part)
	}
	if off > math.MaxInt64 {
		return v, fmt.Errorf("%w: offset %d", ErrCorrupt, off)
	}
	rest := body[headerSize:]
	var topic, id []byte
	var err error
	if topic, rest, err = text(rest, "topic", MaxTopicBytes); err != nil {
		return v, err
	}
	if id, rest, err = text(rest, "id", MaxIDBytes); err != nil {
		return v, err
	}
	if len(rest) < 4 {
		return v, fmt.Errorf("%w: dimension: truncated", ErrCorrupt)
	}
	q := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if q == 0 || q > MaxDim || uint64(len(rest)) != 8*uint64(q) {
		return v, fmt.Errorf("%w: dimension %d with %d feature bytes", ErrCorrupt, q, len(rest))
	}
	v = View{Topic: topic, ID: id, Partition: int(part), Offset: int64(off), Dim: int(q), features: rest}
	copy(v.Fingerprint[:], b[4:36])
	return v, nil
}

// FingerprintIs reports whether the record's fingerprint is the one whose hex is fp
// (pipeline.Features.Fingerprint), without allocating.
func (v *View) FingerprintIs(fp string) bool {
	var h [64]byte
	hex.Encode(h[:], v.Fingerprint[:])
	return string(h[:]) == fp
}

// FeaturesTo widens the record's 2·Dim features into dst: view 0's row, then view 1's
// (Record.Features), for i in [0, 2·Dim):
//
//	dst[i] = float64(math.Float32frombits(binary.BigEndian.Uint32(features[4i:])))
//
// It panics when len(dst) is not 2·Dim (a programmer's error: Dim is known first).
func (v *View) FeaturesTo(dst []float64) {
	if len(dst) != 2*v.Dim || len(v.features) != 8*v.Dim {
		panic(fmt.Sprintf("featrec: FeaturesTo into %d values, the record has %d", len(dst), 2*v.Dim))
	}
	src := v.features
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		s := (*[16]byte)(src[4*i:])
		d := (*[4]float64)(dst[i:])
		d[0] = float64(math.Float32frombits(binary.BigEndian.Uint32(s[0:])))
		d[1] = float64(math.Float32frombits(binary.BigEndian.Uint32(s[4:])))
		d[2] = float64(math.Float32frombits(binary.BigEndian.Uint32(s[8:])))
		d[3] = float64(math.Float32frombits(binary.BigEndian.Uint32(s[12:])))
	}
	for ; i < len(dst); i++ {
		dst[i] = float64(math.Float32frombits(binary.BigEndian.Uint32(src[4*i:])))
	}
}

// text reads one length-prefixed UTF-8 field of 1 to max bytes from the front of b
// and returns it (aliasing b) and what follows.
func text(b []byte, field string, max int) ([]byte, []byte, error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: %s: truncated", ErrCorrupt, field)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > max || n > len(b) {
		return nil, nil, fmt.Errorf("%w: %s length %d with %d bytes left", ErrCorrupt, field, n, len(b))
	}
	if !utf8.Valid(b[:n]) {
		return nil, nil, fmt.Errorf("%w: %s is not UTF-8", ErrCorrupt, field)
	}
	return b[:n:n], b[n:], nil
}

// Peek returns the source topic, partition and offset of the record b, checking only
// the magic, the version and the lengths up to the topic: it lets a consumer file
// records by their training event before it decodes them (Decode checks the rest,
// checksum and UTF-8 included).
func Peek(b []byte) (topic string, partition int, offset int64, err error) {
	if len(b) < headerSize+2 || string(b[:3]) != magic || b[3] != Version {
		return "", 0, 0, fmt.Errorf("%w: %d bytes without a version %d header", ErrCorrupt, len(b), Version)
	}
	part, off := binary.BigEndian.Uint32(b[36:40]), binary.BigEndian.Uint64(b[40:48])
	t := int(binary.BigEndian.Uint16(b[headerSize:]))
	if part > math.MaxInt32 || off > math.MaxInt64 || t == 0 || t > MaxTopicBytes || len(b) < headerSize+2+t {
		return "", 0, 0, fmt.Errorf("%w: partition %d offset %d topic length %d of %d bytes", ErrCorrupt, part, off, t, len(b))
	}
	return string(b[headerSize+2 : headerSize+2+t]), int(part), int64(off), nil
}
