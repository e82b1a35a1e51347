package modelbus

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// The gradient rankings' points (package doc, "Points"): one record per labelled stored
// point whose gradient row the primary serves, and the class count of those rows.
const (
	// KindPoint is a point record (key PointKey(id)): the value's version is the
	// point's value version, then its label and its raw input (a piece, deflated when
	// that saves an eighth).
	KindPoint Kind = 6
	// KindClasses is the class count of the primary's gradient rows (key ClassesKey),
	// carried in the value's version field.
	KindClasses Kind = 7
)

// ClassesKey is the key of the class-count record.
const ClassesKey = "p-classes"

// maxPointID bounds a point record's id, in bytes.
const maxPointID = 4096

// Point is one labelled stored point as the models topic carries it: its id, value
// version, label and raw input.
type Point struct {
	ID      string
	Version int64
	Label   int
	X       []float64
}

// PointKey is the key of id's point record: "p/" and the id.
func PointKey(id string) []byte { return append([]byte("p/"), id...) }

// IsPointKey says whether key is a point record's or the class count's: keys outside the
// versions' life cycle (the publisher diffs them against the served rows instead).
func IsPointKey(key string) bool { return strings.HasPrefix(key, "p/") || key == ClassesKey }

// PointMessage is p's record; false when its input is over MaxChunk bytes encoded (it
// cannot go on the topic in one record).
func PointMessage(p Point) (Message, bool) {
	if 8*len(p.X)+8 > MaxChunk {
		return Message{}, false
	}
	b := header(KindPoint, uint64(p.Version))
	b = binenc.AppendU32(b, uint32(p.Label))
	b = appendPiece(b, binenc.AppendFloats(nil, p.X))
	return Message{Key: PointKey(p.ID), Value: b}, true
}

// ClassesMessage is the record of the class count c.
func ClassesMessage(c int) Message {
	return Message{Key: []byte(ClassesKey), Value: header(KindClasses, uint64(c))}
}

// decodePoint decodes a point record or the class count (key checked by the caller's
// prefix); a nil value is the tombstone of the key's id. It never panics.
func decodePoint(key, value []byte) (Decoded, error) {
	k := string(key)
	if k == ClassesKey {
		if value == nil {
			return Decoded{Kind: KindTombstone}, nil
		}
		r := binenc.NewReader(value)
		d, err := readHeader(r, key)
		if err == nil && d.Kind != KindClasses {
			err = fmt.Errorf("%w: key %q holds kind %d", ErrMessage, key, d.Kind)
		}
		if err == nil && (d.Version < 1 || d.Version > 1<<16) {
			err = fmt.Errorf("%w: key %q: %d classes", ErrMessage, key, d.Version)
		}
		if err == nil && r.End() != nil {
			err = fmt.Errorf("%w: key %q: %w", ErrMessage, key, r.End())
		}
		if err != nil {
			return Decoded{}, err
		}
		return d, nil
	}
	id := k[len("p/"):]
	if id == "" || len(id) > maxPointID || !utf8.ValidString(id) {
		return Decoded{}, fmt.Errorf("%w: key %q: a point id of 1 to %d bytes of UTF-8", ErrMessage, key, maxPointID)
	}
	if value == nil {
		return Decoded{Kind: KindTombstone, Point: &Point{ID: id}}, nil
	}
	r := binenc.NewReader(value)
	d, err := readHeader(r, key)
	if err != nil {
		return Decoded{}, err
	}
	if d.Kind != KindPoint || d.Version > math.MaxInt64 {
		return Decoded{}, fmt.Errorf("%w: key %q holds kind %d, version %d", ErrMessage, key, d.Kind, d.Version)
	}
	p := &Point{ID: id, Version: int64(d.Version), Label: int(r.U32("label"))}
	raw := readPiece(r)
	if err := r.End(); err != nil {
		return Decoded{}, fmt.Errorf("%w: key %q: %w", ErrMessage, key, err)
	}
	xr := binenc.NewReader(raw)
	p.X = xr.Floats("x")
	if err := xr.End(); err != nil || len(p.X) == 0 || p.Label >= 1<<16 {
		return Decoded{}, fmt.Errorf("%w: key %q: the input does not decode (%v), is empty, or label %d is over 65535", ErrMessage, key, err, p.Label)
	}
	for _, v := range p.X {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Decoded{}, fmt.Errorf("%w: key %q: a non-finite input value", ErrMessage, key)
		}
	}
	d.Point = p
	return d, nil
}
