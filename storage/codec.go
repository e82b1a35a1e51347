package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// valueVersion is the version byte that starts every stored value (FORMAT.md,
// "Conventions", bullet "Value envelope"). A record layout change bumps it; decoders
// reject others.
const valueVersion = 1

// envelopeOverhead is the version byte plus the CRC-32C trailer.
const envelopeOverhead = 1 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal appends the CRC-32C of key || buf to buf (which already starts with the
// version byte). Including the key detects a value moved under another key.
func seal(key, buf []byte) []byte {
	c := crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, buf)
	return binary.BigEndian.AppendUint32(buf, c)
}

// open checks the envelope of a stored value and returns its payload, which
// aliases v.
func open(key, v []byte) ([]byte, string) {
	if len(v) < envelopeOverhead {
		return nil, "value shorter than its envelope"
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	c := crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, body)
	if c != sum {
		return nil, "checksum mismatch"
	}
	if body[0] != valueVersion {
		return nil, "unknown value version " + strconv.Itoa(int(body[0]))
	}
	return body[1:], ""
}

// Point payload: flags u8 (bit 0: has label, bit 1: x in a slot, bit 2: has version,
// bit 3: the slot's segment and offset follow, bit 4: has partition), [label i64],
// [version i64], [partition u32], then with
// bit 1 the slot (id u64, length u32, CRC-32C u32, and with bit 3 segment u64, offset
// u64; without bit 3 the slot is its own segment at offset 0), without it (format 3
// and before) x floats; then cert floats.

const (
	pointHasLabel   = 1
	pointInSlot     = 2
	pointHasVersion = 4  // since format 5
	pointInSegment  = 8  // since format 8
	pointHasPart    = 16 // since format 8
)

// encodePoint encodes p with its input in the slot ref (nil: inline, as format 3
// stored it; kept for the migration's tests).
func encodePoint(key []byte, p *Point, ref *slotRef) []byte {
	n := 1 + 1 + 8 + 8 + 16 + 4 + 8*len(p.X) + 4 + 8*len(p.Cert) + 4
	b := make([]byte, 0, n)
	b = append(b, valueVersion)
	flags := byte(0)
	if p.HasLabel {
		flags |= pointHasLabel
	}
	if ref != nil {
		flags |= pointInSlot
	}
	segmented := ref != nil && (ref.seg != ref.id || ref.off != 0)
	if segmented {
		flags |= pointInSegment
	}
	if p.Version >= 0 {
		flags |= pointHasVersion
	}
	if p.Partition >= 0 {
		flags |= pointHasPart
	}
	b = append(b, flags)
	if p.HasLabel {
		b = binenc.AppendI64(b, p.Label)
	}
	if p.Version >= 0 {
		b = binenc.AppendI64(b, p.Version)
	}
	if p.Partition >= 0 {
		b = binenc.AppendU32(b, uint32(p.Partition))
	}
	if ref != nil {
		b = binenc.AppendU64(b, ref.id)
		b = binenc.AppendU32(b, ref.n)
		b = binenc.AppendU32(b, ref.crc)
		if segmented {
			b = binenc.AppendU64(b, ref.seg)
			b = binenc.AppendU64(b, ref.off)
		}
	} else {
		b = binenc.AppendFloats(b, p.X)
	}
	b = binenc.AppendFloats(b, p.Cert)
	return seal(key, b)
}

// decodePoint decodes a stored point value; key is its id. For a point whose input is
// in a slot, ref is set and p.X is nil (ReadTx reads the slot).
func decodePoint(key, v []byte) (p Point, ref *slotRef, why string) {
	payload, why := open(key, v)
	if why != "" {
		return Point{}, nil, why
	}
	r := binenc.NewReader(payload)
	p = Point{ID: string(key), Version: -1, Partition: -1}
	flags := r.U8("flags")
	if flags&^(pointHasLabel|pointInSlot|pointHasVersion|pointInSegment|pointHasPart) != 0 {
		r.Fail("flags", "unknown bits in "+strconv.Itoa(int(flags))+", only bits 0 (has label), 1 (in a slot), 2 (has version), 3 (in a segment) and 4 (has partition) are defined")
	}
	if flags&pointInSegment != 0 && flags&pointInSlot == 0 {
		r.Fail("flags", "bit 3 (in a segment) without bit 1 (in a slot)")
	}
	if flags&pointHasLabel != 0 {
		p.HasLabel = true
		p.Label = r.I64("label")
	}
	if flags&pointHasVersion != 0 {
		if p.Version = r.I64("version"); p.Version < 0 {
			r.Fail("version", "negative version "+strconv.FormatInt(p.Version, 10))
		}
	}
	if flags&pointHasPart != 0 {
		if v := r.U32("partition"); v > math.MaxInt32 {
			r.Fail("partition", "partition "+strconv.FormatUint(uint64(v), 10)+" over 2^31-1")
		} else {
			p.Partition = int32(v)
		}
	}
	if flags&pointInSlot != 0 {
		ref = &slotRef{id: r.U64("slot"), n: r.U32("slot length"), crc: r.U32("slot crc")}
		ref.seg = ref.id
		if flags&pointInSegment != 0 {
			ref.seg, ref.off = r.U64("slot segment"), r.U64("slot offset")
			if ref.seg > ref.id || ref.off%slotAlign != 0 || (ref.seg == ref.id && ref.off != 0) {
				r.Fail("slot offset", fmt.Sprintf("slot %d at offset %d of segment %d: a segment starts with its own id at 0, offsets are multiples of %d", ref.id, ref.off, ref.seg, slotAlign))
			}
		}
	} else {
		p.X = r.Floats("x")
	}
	p.Cert = r.Floats("cert")
	if err := r.End(); err != nil {
		return Point{}, nil, err.Error()
	}
	return p, ref, ""
}

// Pool state payload: schema u32, data bytes (rest of the payload).

func encodePoolState(key []byte, s *PoolState) []byte {
	b := make([]byte, 0, 1+4+len(s.Data)+4)
	b = append(b, valueVersion)
	b = binenc.AppendU32(b, s.Schema)
	b = append(b, s.Data...)
	return seal(key, b)
}

func decodePoolState(key, v []byte) (PoolState, string) {
	payload, why := open(key, v)
	if why != "" {
		return PoolState{}, why
	}
	r := binenc.NewReader(payload)
	s := PoolState{Schema: r.U32("schema")}
	s.Data = append([]byte(nil), r.Rest()...)
	if err := r.End(); err != nil {
		return PoolState{}, err.Error()
	}
	return s, ""
}

// Pool point payload: the record (rest of the payload, at most MaxPoolPointLen
// bytes). Key: the point id (1 to MaxIDLen bytes).

func encodePoolPoint(key, rec []byte) []byte {
	b := make([]byte, 0, 1+len(rec)+4)
	b = append(b, valueVersion)
	b = append(b, rec...)
	return seal(key, b)
}

// decodePoolPoint returns a copy of the stored record (nil when empty). It
// accepts exactly the values PutPoolPoint can write: an empty or overlong key
// and records over MaxPoolPointLen are rejected.
func decodePoolPoint(key, v []byte) (rec []byte, why string) {
	if len(key) == 0 || len(key) > MaxIDLen {
		return nil, "pool point key is " + strconv.Itoa(len(key)) + " bytes, want 1 to " + strconv.Itoa(MaxIDLen)
	}
	payload, why := open(key, v)
	if why != "" {
		return nil, why
	}
	if len(payload) > MaxPoolPointLen {
		return nil, "pool point record is " + strconv.Itoa(len(payload)) + " bytes, longer than " + strconv.Itoa(MaxPoolPointLen)
	}
	return append([]byte(nil), payload...), ""
}

// Model payload: landmark count u32, each landmark bytes; A, A0, B matrices
// (rows u32, cols u32, rows*cols f64); meta bytes.

func encodeModel(key []byte, m *Model) []byte {
	n := 1 + 4 + 3*8 + 8*(len(m.A.Data)+len(m.A0.Data)+len(m.B.Data)) + 4 + len(m.Meta) + 4
	for _, l := range m.Landmarks {
		n += 4 + len(l)
	}
	b := make([]byte, 0, n)
	b = append(b, valueVersion)
	b = binenc.AppendStrings(b, m.Landmarks)
	b = binenc.AppendMatrix(b, m.A.Rows, m.A.Cols, m.A.Data)
	b = binenc.AppendMatrix(b, m.A0.Rows, m.A0.Cols, m.A0.Data)
	b = binenc.AppendMatrix(b, m.B.Rows, m.B.Cols, m.B.Data)
	b = binenc.AppendBytes(b, m.Meta)
	return seal(key, b)
}

func decodeModel(key, v []byte) (Model, string) {
	if len(key) != 8 {
		return Model{}, "model key is not 8 bytes"
	}
	payload, why := open(key, v)
	if why != "" {
		return Model{}, why
	}
	r := binenc.NewReader(payload)
	m := Model{Version: binary.BigEndian.Uint64(key)}
	m.Landmarks = r.Strings("landmark")
	m.A = readMatrix(r, "A")
	m.A0 = readMatrix(r, "A0")
	m.B = readMatrix(r, "B")
	m.Meta = r.Bytes("meta")
	if err := r.End(); err != nil {
		return Model{}, err.Error()
	}
	return m, ""
}

func readMatrix(r *binenc.Reader, what string) Matrix {
	rows, cols, data := r.Matrix(what)
	return Matrix{Rows: rows, Cols: cols, Data: data}
}

// Fit stats payload: seeds (count u32, u64 each), mean floats, var floats, meta bytes.

func encodeFitStats(key []byte, f *FitStats) []byte {
	b := make([]byte, 0, 1+4+8*len(f.Seeds)+8+8*(len(f.Mean)+len(f.Var))+4+len(f.Meta)+4)
	b = append(b, valueVersion)
	b = binenc.AppendU64s(b, f.Seeds)
	b = binenc.AppendFloats(b, f.Mean)
	b = binenc.AppendFloats(b, f.Var)
	b = binenc.AppendBytes(b, f.Meta)
	return seal(key, b)
}

func decodeFitStats(key, v []byte) (FitStats, string) {
	if len(key) != 8 {
		return FitStats{}, "fit stats key is not 8 bytes"
	}
	payload, why := open(key, v)
	if why != "" {
		return FitStats{}, why
	}
	r := binenc.NewReader(payload)
	f := FitStats{Version: binary.BigEndian.Uint64(key)}
	f.Seeds = r.U64s("seeds")
	f.Mean = r.Floats("mean")
	f.Var = r.Floats("var")
	f.Meta = r.Bytes("meta")
	if err := r.End(); err != nil {
		return FitStats{}, err.Error()
	}
	return f, ""
}

// Offset payload: offset i64.

func encodeOffset(key []byte, off int64) []byte {
	b := make([]byte, 0, 1+8+4)
	b = append(b, valueVersion)
	b = binenc.AppendI64(b, off)
	return seal(key, b)
}

func decodeOffset(key, v []byte) (Offset, string) {
	topic, part, ok := splitOffsetKey(key)
	if !ok {
		return Offset{}, "malformed offset key"
	}
	payload, why := open(key, v)
	if why != "" {
		return Offset{}, why
	}
	r := binenc.NewReader(payload)
	o := Offset{Topic: topic, Partition: part, Offset: r.I64("offset")}
	if err := r.End(); err != nil {
		return Offset{}, err.Error()
	}
	return o, ""
}

// Outbox payload: topic bytes, key bytes, value bytes, then (since format 7) the time
// its transaction began as i64 Unix nanoseconds, > 0. An entry written before format 7
// has no time (OutboxEntry.Time zero), and a zero Time is written as none, so that
// every accepted value re-encodes to its own bytes.

func encodeOutbox(key []byte, topic string, k, v []byte, at time.Time) []byte {
	b := make([]byte, 0, 1+12+len(topic)+len(k)+len(v)+8+4)
	b = append(b, valueVersion)
	b = binenc.AppendString(b, topic)
	b = binenc.AppendBytes(b, k)
	b = binenc.AppendBytes(b, v)
	if !at.IsZero() {
		b = binenc.AppendI64(b, at.UnixNano())
	}
	return seal(key, b)
}

func decodeOutbox(key, v []byte) (OutboxEntry, string) {
	if len(key) != 8 {
		return OutboxEntry{}, "outbox key is not 8 bytes"
	}
	payload, why := open(key, v)
	if why != "" {
		return OutboxEntry{}, why
	}
	r := binenc.NewReader(payload)
	e := OutboxEntry{Seq: binary.BigEndian.Uint64(key)}
	e.Topic = r.String("topic")
	e.Key = r.Bytes("key")
	e.Value = r.Bytes("value")
	if r.Err() == nil && r.Len() > 0 {
		if ns := r.I64("time"); ns > 0 {
			e.Time = time.Unix(0, ns).UTC()
		} else if r.Err() == nil {
			r.Fail("time", "not after 1970")
		}
	}
	if err := r.End(); err != nil {
		return OutboxEntry{}, err.Error()
	}
	return e, ""
}

// Audit payload: prev_hash [32], hash [32], body (rest of the payload).

func encodeAudit(key []byte, prev, hash *[32]byte, body []byte) []byte {
	b := make([]byte, 0, 1+64+len(body)+4)
	b = append(b, valueVersion)
	b = append(b, prev[:]...)
	b = append(b, hash[:]...)
	b = append(b, body...)
	return seal(key, b)
}

func decodeAudit(key, v []byte) (AuditRecord, string) {
	if len(key) != 8 {
		return AuditRecord{}, "audit key is not 8 bytes"
	}
	payload, why := open(key, v)
	if why != "" {
		return AuditRecord{}, why
	}
	if len(payload) < 64 {
		return AuditRecord{}, "truncated audit hashes"
	}
	var a AuditRecord
	a.Seq = binary.BigEndian.Uint64(key)
	copy(a.PrevHash[:], payload[:32])
	copy(a.Hash[:], payload[32:64])
	a.Body = append([]byte(nil), payload[64:]...)
	return a, ""
}

// Pending payload: body (rest of the payload, at most MaxPendingLen bytes).
// Key: seq u64 big-endian, > 0.

func encodePending(key, body []byte) []byte {
	b := make([]byte, 0, 1+len(body)+4)
	b = append(b, valueVersion)
	b = append(b, body...)
	return seal(key, b)
}

// decodePending returns a copy of the stored body (nil when empty) and its seq.
// It accepts exactly the values PutPending can write: seq 0 and bodies over
// MaxPendingLen are rejected.
func decodePending(key, v []byte) (seq uint64, body []byte, why string) {
	if len(key) != 8 {
		return 0, nil, "pending key is not 8 bytes"
	}
	seq = binary.BigEndian.Uint64(key)
	if seq == 0 {
		return 0, nil, "pending seq is 0"
	}
	payload, why := open(key, v)
	if why != "" {
		return 0, nil, why
	}
	if len(payload) > MaxPendingLen {
		return 0, nil, "pending body is " + strconv.Itoa(len(payload)) + " bytes, longer than " + strconv.Itoa(MaxPendingLen)
	}
	return seq, append([]byte(nil), payload...), ""
}

// Deleted payload: version i64, >= 0. Key: the id (1–MaxIDLen bytes).

func encodeDeleted(key []byte, version int64) []byte {
	b := make([]byte, 0, 1+8+4)
	b = append(b, valueVersion)
	b = binenc.AppendI64(b, version)
	return seal(key, b)
}

func decodeDeleted(key, v []byte) (version int64, why string) {
	if len(key) == 0 || len(key) > MaxIDLen {
		return 0, "deleted key length " + strconv.Itoa(len(key)) + " not in [1, " + strconv.Itoa(MaxIDLen) + "]"
	}
	payload, why := open(key, v)
	if why != "" {
		return 0, why
	}
	r := binenc.NewReader(payload)
	if version = r.I64("version"); version < 0 {
		r.Fail("version", "negative version "+strconv.FormatInt(version, 10))
	}
	if err := r.End(); err != nil {
		return 0, err.Error()
	}
	return version, ""
}

// Meta values: a u64 (format version, counters).

func encodeMetaU64(key []byte, v uint64) []byte {
	b := make([]byte, 0, 1+8+4)
	b = append(b, valueVersion)
	b = binenc.AppendU64(b, v)
	return seal(key, b)
}

// encodeMetaU64s encodes a meta value that is a list of u64 (slots_dropped).
func encodeMetaU64s(key []byte, x []uint64) []byte {
	b := append(make([]byte, 0, 1+4+8*len(x)+4), valueVersion)
	return seal(key, binenc.AppendU64s(b, x))
}

func decodeMetaU64s(key, v []byte) ([]uint64, string) {
	payload, why := open(key, v)
	if why != "" {
		return nil, why
	}
	r := binenc.NewReader(payload)
	x := r.U64s("values")
	if err := r.End(); err != nil {
		return nil, err.Error()
	}
	return x, ""
}

func decodeMetaU64(key, v []byte) (uint64, string) {
	payload, why := open(key, v)
	if why != "" {
		return 0, why
	}
	r := binenc.NewReader(payload)
	x := r.U64("value")
	if err := r.End(); err != nil {
		return 0, err.Error()
	}
	return x, ""
}

// Keys (FORMAT.md, "Conventions", bullet "Keys"): integers big-endian so byte order is
// numeric order.

func u64Key(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

// offsetKey is topic || 0x00 || partition (u32 big-endian). Kafka topic names
// cannot contain NUL, so the separator keeps topics apart and sorts a topic's
// partitions numerically.
func offsetKey(topic string, partition int32) []byte {
	b := make([]byte, 0, len(topic)+5)
	b = append(b, topic...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func splitOffsetKey(k []byte) (string, int32, bool) {
	if len(k) < 6 || k[len(k)-5] != 0 {
		return "", 0, false
	}
	topic := k[:len(k)-5]
	for _, c := range topic {
		if c == 0 {
			return "", 0, false
		}
	}
	p := binary.BigEndian.Uint32(k[len(k)-4:])
	if p > math.MaxInt32 {
		return "", 0, false
	}
	return string(topic), int32(p), true
}

// encodeHoles encodes slots_dropped (format 8): a u64 list of (segment, offset,
// length) triples.
func encodeHoles(key []byte, hs []slotHole) []byte {
	x := make([]uint64, 0, 3*len(hs))
	for _, h := range hs {
		x = append(x, h.seg, h.off, h.n)
	}
	return encodeMetaU64s(key, x)
}

// decodeHoles decodes slots_dropped (format 8).
func decodeHoles(key, v []byte) ([]slotHole, string) {
	x, why := decodeMetaU64s(key, v)
	if why != "" {
		return nil, why
	}
	if len(x)%3 != 0 {
		return nil, "slots_dropped holds " + strconv.Itoa(len(x)) + " values, not (segment, offset, length) triples"
	}
	hs := make([]slotHole, 0, len(x)/3)
	for i := 0; i < len(x); i += 3 {
		if x[i+1]%slotAlign != 0 || x[i+2]%slotAlign != 0 {
			return nil, fmt.Sprintf("slots_dropped: hole at %d+%d of segment %d is not block-aligned", x[i+1], x[i+2], x[i])
		}
		hs = append(hs, slotHole{seg: x[i], off: x[i+1], n: x[i+2]})
	}
	return hs, ""
}
