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

// Retention is how long the features topic keeps a record (retention.ms, one hour), set
// when cairnd creates the topic. A record is needed only until the primary applies it,
// or computes the features itself after ingest.featurizer_timeout; and it is data
// derived from a training input, so an erased point's record must not outlive its
// erasure by long (the topic is not compacted, so no tombstone would erase it).
const Retention = "3600000"

// TopicConfigs are the settings the features topic is created with.
func TopicConfigs() map[string]map[string]string {
	return map[string]map[string]string{Topic: {"retention.ms": Retention}}
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
// record's 2q (the returned Record's Features is then buf), else into a new slice: a
// consumer that knows q decodes without allocating. buf may be written to even when
// an error is returned.
func DecodeTo(buf []float64, b []byte) (Record, error) {
	var r Record
	if len(b) < headerSize+2+2+4+crcSize {
		return r, fmt.Errorf("%w: %d bytes, shorter than any record", ErrCorrupt, len(b))
	}
	if string(b[:3]) != magic {
		return r, fmt.Errorf("%w: magic %q", ErrCorrupt, b[:3])
	}
	if b[3] != Version {
		return r, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, b[3], Version)
	}
	body, sum := b[:len(b)-crcSize], binary.BigEndian.Uint32(b[len(b)-crcSize:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return r, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, sum, got)
	}
	r.Fingerprint = hex.EncodeToString(b[4:36])
	part, off := binary.BigEndian.Uint32(b[36:40]), binary.BigEndian.Uint64(b[40:48])
	if part > math.MaxInt32 {
		return Record{}, fmt.Errorf("%w: partition %d", ErrCorrupt, part)
	}
	if off > math.MaxInt64 {
		return Record{}, fmt.Errorf("%w: offset %d", ErrCorrupt, off)
	}
	r.Partition, r.Offset = int(part), int64(off)
	rest := body[headerSize:]
	var err error
	if r.Topic, rest, err = text(rest, "topic", MaxTopicBytes); err != nil {
		return Record{}, err
	}
	if r.ID, rest, err = text(rest, "id", MaxIDBytes); err != nil {
		return Record{}, err
	}
	if len(rest) < 4 {
		return Record{}, fmt.Errorf("%w: dimension: truncated", ErrCorrupt)
	}
	q := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if q == 0 || q > MaxDim || uint64(len(rest)) != 8*uint64(q) {
		return Record{}, fmt.Errorf("%w: dimension %d with %d feature bytes", ErrCorrupt, q, len(rest))
	}
	if r.Features = buf; len(buf) != int(2*q) {
		r.Features = make([]float64, 2*q)
	}
	for i := range r.Features {
		r.Features[i] = float64(math.Float32frombits(binary.BigEndian.Uint32(rest[4*i:])))
	}
	return r, nil
}

// text reads one length-prefixed UTF-8 field of 1 to max bytes from the front of b.
func text(b []byte, field string, max int) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("%w: %s: truncated", ErrCorrupt, field)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > max || n > len(b) {
		return "", nil, fmt.Errorf("%w: %s length %d with %d bytes left", ErrCorrupt, field, n, len(b))
	}
	if !utf8.Valid(b[:n]) {
		return "", nil, fmt.Errorf("%w: %s is not UTF-8", ErrCorrupt, field)
	}
	return string(b[:n]), b[n:], nil
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
