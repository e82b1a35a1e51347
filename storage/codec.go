package storage

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// valueVersion is the version byte that starts every stored value (FORMAT.md,
// "Value envelope"). A record layout change bumps it; decoders reject others.
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
		return nil, "unknown value version " + itoa(uint64(body[0]))
	}
	return body[1:], ""
}

func itoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}

// Appenders write little-endian fixed-width values (FORMAT.md, "Value payloads").

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendBytes(b, p []byte) []byte {
	b = appendU32(b, uint32(len(p)))
	return append(b, p...)
}

func appendString(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendFloats(b []byte, x []float64) []byte {
	b = appendU32(b, uint32(len(x)))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func appendMatrix(b []byte, m Matrix) []byte {
	b = appendU32(b, uint32(m.Rows))
	b = appendU32(b, uint32(m.Cols))
	for _, v := range m.Data {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// reader decodes a payload; the first failure sticks in err and later reads
// return zero values, so decoders check once at the end. Lengths are checked
// against the remaining bytes before any allocation, so hostile lengths cannot
// make a decoder allocate more than the input size.
type reader struct {
	b   []byte
	err string
}

func (r *reader) fail(what string) {
	if r.err == "" {
		r.err = what
	}
	r.b = nil
}

func (r *reader) u8(what string) byte {
	if len(r.b) < 1 {
		r.fail("truncated " + what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32(what string) uint32 {
	if len(r.b) < 4 {
		r.fail("truncated " + what)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64(what string) uint64 {
	if len(r.b) < 8 {
		r.fail("truncated " + what)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes returns a copy of a length-prefixed byte string.
func (r *reader) bytes(what string) []byte {
	n := r.u32(what + " length")
	if r.err != "" {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail(what + " length " + itoa(uint64(n)) + " exceeds remaining " + itoa(uint64(len(r.b))) + " bytes")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]byte, n)
	copy(out, r.b[:n])
	r.b = r.b[n:]
	return out
}

func (r *reader) floatsN(n uint64, what string) []float64 {
	if r.err != "" {
		return nil
	}
	if n > uint64(len(r.b))/8 {
		r.fail(what + " count " + itoa(n) + " exceeds remaining " + itoa(uint64(len(r.b))) + " bytes")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.b[8*i:]))
	}
	r.b = r.b[8*n:]
	return out
}

func (r *reader) floats(what string) []float64 {
	return r.floatsN(uint64(r.u32(what+" count")), what)
}

func (r *reader) matrix(what string) Matrix {
	rows := r.u32(what + " rows")
	cols := r.u32(what + " cols")
	data := r.floatsN(uint64(rows)*uint64(cols), what)
	if r.err != "" {
		return Matrix{}
	}
	return Matrix{Rows: int(rows), Cols: int(cols), Data: data}
}

func (r *reader) end() {
	if r.err == "" && len(r.b) != 0 {
		r.err = itoa(uint64(len(r.b))) + " trailing bytes"
	}
}

// Point payload: flags u8 (bit 0: has label), [label i64], x floats, cert floats.

const pointHasLabel = 1

func encodePoint(key []byte, p *Point) []byte {
	n := 1 + 1 + 8 + 4 + 8*len(p.X) + 4 + 8*len(p.Cert) + 4
	b := make([]byte, 0, n)
	b = append(b, valueVersion)
	if p.HasLabel {
		b = append(b, pointHasLabel)
		b = appendU64(b, uint64(p.Label))
	} else {
		b = append(b, 0)
	}
	b = appendFloats(b, p.X)
	b = appendFloats(b, p.Cert)
	return seal(key, b)
}

// decodePoint decodes a stored point value; key is its id.
func decodePoint(key, v []byte) (Point, string) {
	payload, why := open(key, v)
	if why != "" {
		return Point{}, why
	}
	r := reader{b: payload}
	p := Point{ID: string(key)}
	flags := r.u8("flags")
	if flags&^pointHasLabel != 0 {
		r.fail("unknown point flags " + itoa(uint64(flags)))
	}
	if flags&pointHasLabel != 0 {
		p.HasLabel = true
		p.Label = int64(r.u64("label"))
	}
	p.X = r.floats("x")
	p.Cert = r.floats("cert")
	r.end()
	if r.err != "" {
		return Point{}, r.err
	}
	return p, ""
}

// Pool state payload: schema u32, data bytes (rest of the payload).

func encodePoolState(key []byte, s *PoolState) []byte {
	b := make([]byte, 0, 1+4+len(s.Data)+4)
	b = append(b, valueVersion)
	b = appendU32(b, s.Schema)
	b = append(b, s.Data...)
	return seal(key, b)
}

func decodePoolState(key, v []byte) (PoolState, string) {
	payload, why := open(key, v)
	if why != "" {
		return PoolState{}, why
	}
	r := reader{b: payload}
	s := PoolState{Schema: r.u32("schema")}
	if r.err != "" {
		return PoolState{}, r.err
	}
	s.Data = append([]byte(nil), r.b...)
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
		return nil, "pool point key is " + itoa(uint64(len(key))) + " bytes, want 1 to " + itoa(MaxIDLen)
	}
	payload, why := open(key, v)
	if why != "" {
		return nil, why
	}
	if len(payload) > MaxPoolPointLen {
		return nil, "pool point record is " + itoa(uint64(len(payload))) + " bytes, longer than " + itoa(MaxPoolPointLen)
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
	b = appendU32(b, uint32(len(m.Landmarks)))
	for _, l := range m.Landmarks {
		b = appendString(b, l)
	}
	b = appendMatrix(b, m.A)
	b = appendMatrix(b, m.A0)
	b = appendMatrix(b, m.B)
	b = appendBytes(b, m.Meta)
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
	r := reader{b: payload}
	m := Model{Version: binary.BigEndian.Uint64(key)}
	nl := r.u32("landmark count")
	// Each landmark takes at least its 4-byte length; bound before allocating.
	if uint64(nl) > uint64(len(r.b))/4 {
		r.fail("landmark count " + itoa(uint64(nl)) + " exceeds remaining bytes")
	}
	if r.err == "" && nl > 0 {
		m.Landmarks = make([]string, nl)
		for i := range m.Landmarks {
			m.Landmarks[i] = string(r.bytes("landmark"))
		}
	}
	m.A = r.matrix("A")
	m.A0 = r.matrix("A0")
	m.B = r.matrix("B")
	m.Meta = r.bytes("meta")
	r.end()
	if r.err != "" {
		return Model{}, r.err
	}
	return m, ""
}

// Fit stats payload: seeds (count u32, u64 each), mean floats, var floats, meta bytes.

func encodeFitStats(key []byte, f *FitStats) []byte {
	b := make([]byte, 0, 1+4+8*len(f.Seeds)+8+8*(len(f.Mean)+len(f.Var))+4+len(f.Meta)+4)
	b = append(b, valueVersion)
	b = appendU32(b, uint32(len(f.Seeds)))
	for _, s := range f.Seeds {
		b = appendU64(b, s)
	}
	b = appendFloats(b, f.Mean)
	b = appendFloats(b, f.Var)
	b = appendBytes(b, f.Meta)
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
	r := reader{b: payload}
	f := FitStats{Version: binary.BigEndian.Uint64(key)}
	ns := r.u32("seed count")
	if uint64(ns) > uint64(len(r.b))/8 {
		r.fail("seed count " + itoa(uint64(ns)) + " exceeds remaining bytes")
	}
	if r.err == "" && ns > 0 {
		f.Seeds = make([]uint64, ns)
		for i := range f.Seeds {
			f.Seeds[i] = r.u64("seed")
		}
	}
	f.Mean = r.floats("mean")
	f.Var = r.floats("var")
	f.Meta = r.bytes("meta")
	r.end()
	if r.err != "" {
		return FitStats{}, r.err
	}
	return f, ""
}

// Offset payload: offset i64.

func encodeOffset(key []byte, off int64) []byte {
	b := make([]byte, 0, 1+8+4)
	b = append(b, valueVersion)
	b = appendU64(b, uint64(off))
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
	r := reader{b: payload}
	o := Offset{Topic: topic, Partition: part, Offset: int64(r.u64("offset"))}
	r.end()
	if r.err != "" {
		return Offset{}, r.err
	}
	return o, ""
}

// Outbox payload: topic bytes, key bytes, value bytes.

func encodeOutbox(key []byte, topic string, k, v []byte) []byte {
	b := make([]byte, 0, 1+12+len(topic)+len(k)+len(v)+4)
	b = append(b, valueVersion)
	b = appendString(b, topic)
	b = appendBytes(b, k)
	b = appendBytes(b, v)
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
	r := reader{b: payload}
	e := OutboxEntry{Seq: binary.BigEndian.Uint64(key)}
	e.Topic = string(r.bytes("topic"))
	e.Key = r.bytes("key")
	e.Value = r.bytes("value")
	r.end()
	if r.err != "" {
		return OutboxEntry{}, r.err
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
		return 0, nil, "pending body is " + itoa(uint64(len(payload))) + " bytes, longer than " + itoa(MaxPendingLen)
	}
	return seq, append([]byte(nil), payload...), ""
}

// Meta values: a u64 (format version, counters).

func encodeMetaU64(key []byte, v uint64) []byte {
	b := make([]byte, 0, 1+8+4)
	b = append(b, valueVersion)
	b = appendU64(b, v)
	return seal(key, b)
}

func decodeMetaU64(key, v []byte) (uint64, string) {
	payload, why := open(key, v)
	if why != "" {
		return 0, why
	}
	r := reader{b: payload}
	x := r.u64("value")
	r.end()
	return x, r.err
}

// Keys (FORMAT.md, "Keys"): integers big-endian so byte order is numeric order.

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
