package modelbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// Kind is what a models-topic message carries.
type Kind uint8

// The kinds of the package doc's table; KindTombstone is a null value.
const (
	KindTombstone Kind = 0
	KindChunk     Kind = 1
	KindManifest  Kind = 2
	KindMask      Kind = 3
	// KindContent is a piece of some version's encoding named by its SHA-256
	// (ContentChunks); KindIndex is a version's manifest naming its pieces.
	KindContent Kind = 4
	KindIndex   Kind = 5
)

const (
	magic  = "CRNM"
	format = 1
	// MaxChunk is the largest chunk Chunks cuts by default: a quarter of Kafka's
	// default message.max.bytes, so a chunk and its framing fit any stock broker.
	MaxChunk = 256 << 10
)

// Message is one record of the models topic: its key and value (nil: a tombstone).
type Message struct {
	Key, Value []byte
}

// Decoded is a parsed models-topic message.
type Decoded struct {
	Kind    Kind
	Version uint64
	// Chunks: Index of Count, Sum the SHA-256 of the whole encoding, Data the bytes.
	// Manifests: Count, Length and Sum.
	Index, Count int
	Length       int
	Sum          [32]byte
	Data         []byte
	// Masks: the masked ids.
	IDs []string
	// Indexes: Length and Sum of the whole encoding, Count pieces named by their
	// SHA-256 in Pieces. Content: Sum is the SHA-256 of Data.
	Pieces [][32]byte
	// Point records (and their tombstones, with the id alone): the point; Version is
	// its value version. The class count's record: Version is the count.
	Point *Point
}

// Chunks splits the encoding of v into chunk messages of at most maxChunk data bytes
// (MaxChunk when maxChunk ≤ 0) and appends its manifest: the messages to write, in order.
func Chunks(v *Version, maxChunk int) []Message {
	if maxChunk <= 0 {
		maxChunk = MaxChunk
	}
	p := v.Encode()
	sum := sha256.Sum256(p)
	count := (len(p) + maxChunk - 1) / maxChunk
	out := make([]Message, 0, count+1)
	for i := range count {
		data := p[i*maxChunk : min(len(p), (i+1)*maxChunk)]
		b := header(KindChunk, v.Version)
		b = binenc.AppendU32(b, uint32(i))
		b = binenc.AppendU32(b, uint32(count))
		b = append(b, sum[:]...)
		b = binenc.AppendBytes(b, data)
		out = append(out, Message{Key: ChunkKey(v.Version, i), Value: b})
	}
	b := header(KindManifest, v.Version)
	b = binenc.AppendU32(b, uint32(count))
	b = binenc.AppendU64(b, uint64(len(p)))
	b = append(b, sum[:]...)
	return append(out, Message{Key: ManifestKey(v.Version), Value: b})
}

// Mask is the message stating that the models with version ≤ version have the ids
// masked (every id masked so far in version's serving model).
func Mask(version uint64, ids []string) Message {
	b := header(KindMask, version)
	b = binenc.AppendStrings(b, ids)
	return Message{Key: MaskKey(version), Value: b}
}

// Tombstones are the null-valued messages that let compaction drop version's chunks
// (count of them), its manifest and its mask.
func Tombstones(version uint64, count int) []Message {
	out := make([]Message, 0, count+2)
	for i := range count {
		out = append(out, Message{Key: ChunkKey(version, i)})
	}
	return append(out, Message{Key: ManifestKey(version)}, Message{Key: MaskKey(version)})
}

// ChunkKey, ManifestKey and MaskKey are the keys of the package doc's table.
func ChunkKey(version uint64, i int) []byte { return fmt.Appendf(nil, "v/%d/%d", version, i) }

// ManifestKey is the key of version's manifest.
func ManifestKey(version uint64) []byte { return fmt.Appendf(nil, "v/%d", version) }

// MaskKey is the key of version's mask.
func MaskKey(version uint64) []byte { return fmt.Appendf(nil, "mask/%d", version) }

func header(k Kind, version uint64) []byte {
	b := append(make([]byte, 0, 64), magic...)
	b = append(b, format, byte(k))
	return binenc.AppendU64(b, version)
}

// Decode parses one message (a nil value is a tombstone of the key's version) and
// checks that its key names what its value holds. It never panics.
func Decode(key, value []byte) (Decoded, error) {
	if IsPointKey(string(key)) {
		return decodePoint(key, value)
	}
	kv, ki, kk, err := parseKey(key)
	if err != nil {
		return Decoded{}, err
	}
	if value == nil {
		return Decoded{Kind: KindTombstone, Version: kv, Index: ki}, nil
	}
	r := binenc.NewReader(value)
	d, err := readHeader(r, key)
	if err != nil {
		return Decoded{}, err
	}
	switch d.Kind {
	case KindChunk:
		d.Index, d.Count = int(r.U32("index")), int(r.U32("count"))
		copy(d.Sum[:], r.Fixed(32, "sum"))
		d.Data = r.Bytes("data")
	case KindManifest:
		d.Count = int(r.U32("count"))
		d.Length = r.Int("length")
		copy(d.Sum[:], r.Fixed(32, "sum"))
	case KindMask:
		d.IDs = r.Strings("ids")
	case KindIndex:
		decodeIndex(r, &d)
	case KindContent:
		decodeContent(r, &d, key)
	default:
		return Decoded{}, fmt.Errorf("%w: key %q: kind %d", ErrMessage, key, d.Kind)
	}
	if err := r.End(); err != nil {
		return Decoded{}, fmt.Errorf("%w: key %q: %w", ErrMessage, key, err)
	}
	if d.Kind == KindIndex && kk == KindManifest {
		kk = KindIndex // an index is the manifest of a version cut by content
	}
	switch {
	case d.Kind != kk || d.Version != kv || (d.Kind == KindChunk && d.Index != ki):
		return Decoded{}, fmt.Errorf("%w: key %q does not name its value (kind %d, version %d, index %d)",
			ErrMessage, key, d.Kind, d.Version, d.Index)
	case d.Kind == KindChunk && (d.Index >= d.Count || len(d.Data) == 0):
		return Decoded{}, fmt.Errorf("%w: key %q: chunk %d of %d with %d bytes", ErrMessage, key, d.Index, d.Count, len(d.Data))
	case (d.Kind == KindManifest || d.Kind == KindIndex) && (d.Count < 1 || d.Length < d.Count):
		return Decoded{}, fmt.Errorf("%w: key %q: manifest of %d chunks, %d bytes", ErrMessage, key, d.Count, d.Length)
	}
	return d, nil
}

// readHeader reads a value's magic, format, kind and version.
func readHeader(r *binenc.Reader, key []byte) (Decoded, error) {
	if m := r.Fixed(len(magic), "magic"); !bytes.Equal(m, []byte(magic)) {
		return Decoded{}, fmt.Errorf("%w: key %q: not a models-topic value", ErrMessage, key)
	}
	if f := r.U8("format"); f != format {
		return Decoded{}, fmt.Errorf("%w: key %q: format %d, want %d", ErrMessage, key, f, format)
	}
	d := Decoded{Kind: Kind(r.U8("kind")), Version: r.U64("version")}
	if err := r.Err(); err != nil {
		return Decoded{}, fmt.Errorf("%w: key %q: %w", ErrMessage, key, err)
	}
	return d, nil
}

// parseKey returns the version, the chunk index and the kind a key names.
func parseKey(key []byte) (version uint64, index int, k Kind, err error) {
	bad := func() (uint64, int, Kind, error) {
		return 0, 0, 0, fmt.Errorf("%w: key %q", ErrMessage, key)
	}
	s := string(key)
	if h, ok := strings.CutPrefix(s, "c/"); ok {
		if len(h) != 64 || strings.ToLower(h) != h {
			return bad()
		}
		if _, err := hex.DecodeString(h); err != nil {
			return bad()
		}
		return 0, 0, KindContent, nil
	}
	num := func(p string) (uint64, bool) {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return 0, false
		}
		n, err := strconv.ParseUint(p, 10, 64)
		return n, err == nil
	}
	if rest, ok := strings.CutPrefix(s, "mask/"); ok {
		v, ok := num(rest)
		if !ok || v == 0 {
			return bad()
		}
		return v, 0, KindMask, nil
	}
	rest, ok := strings.CutPrefix(s, "v/")
	if !ok {
		return bad()
	}
	vs, is, chunk := strings.Cut(rest, "/")
	v, ok := num(vs)
	if !ok || v == 0 {
		return bad()
	}
	if !chunk {
		return v, 0, KindManifest, nil
	}
	i, ok := num(is)
	if !ok || i >= 1<<31 {
		return bad()
	}
	return v, int(i), KindChunk, nil
}
