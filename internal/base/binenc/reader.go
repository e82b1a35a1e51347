package binenc

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Error is the first failure of a Reader: the field it was reading, where that field
// starts, and what is wrong with it.
type Error struct {
	What   string // the field, as the decoder named it ("x", "view a landmark")
	Offset int    // byte offset of the field in the Reader's input
	Reason string // for example "truncated: needs 8 bytes, 3 left"
}

func (e *Error) Error() string {
	return e.What + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Reader decodes fields from the front of a byte slice; see the package documentation
// for its contract. The zero Reader reads an empty input.
type Reader struct {
	b    []byte // bytes left
	pos  int    // offset of b[0] in the input
	last int    // offset of the field read last
	err  *Error
}

// NewReader returns a Reader of b. It does not copy b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Len returns the number of bytes left (0 after a failure).
func (r *Reader) Len() int { return len(r.b) }

// Err returns the first failure as an *Error, or nil.
func (r *Reader) Err() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// End fails with "trailing bytes" unless every byte was read, and returns Err.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("end of input", "", strconv.Itoa(len(r.b))+" trailing bytes")
	}
	return r.Err()
}

// Fail records a failure the caller found in the field it read last (an unknown flag, a
// value out of range), at that field's offset, unless an earlier one is recorded.
func (r *Reader) Fail(what, reason string) { r.failAt(r.last, what, "", reason) }

// fail records a failure of the field that starts at the current offset.
func (r *Reader) fail(what, part, reason string) { r.failAt(r.pos, what, part, reason) }

// failAt records the first failure, naming the field what+part (part is a suffix such as
// " count", joined only here so that reads allocate nothing on success), and stops the
// Reader.
func (r *Reader) failAt(off int, what, part, reason string) {
	if r.err == nil {
		r.err = &Error{What: what + part, Offset: off, Reason: reason}
	}
	r.b = nil
}

// take consumes n bytes, or fails with a truncation naming what+part.
func (r *Reader) take(n int, what, part string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(what, part, "truncated: needs "+strconv.Itoa(n)+" bytes, "+strconv.Itoa(len(r.b))+" left")
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	r.last = r.pos
	r.pos += n
	return out
}

func (r *Reader) u32(what, part string) uint32 {
	if b := r.take(4, what, part); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// U8 reads a u8.
func (r *Reader) U8(what string) uint8 {
	if b := r.take(1, what, ""); b != nil {
		return b[0]
	}
	return 0
}

// U32 reads a u32.
func (r *Reader) U32(what string) uint32 { return r.u32(what, "") }

// U64 reads a u64.
func (r *Reader) U64(what string) uint64 {
	if b := r.take(8, what, ""); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// I64 reads an i64.
func (r *Reader) I64(what string) int64 { return int64(r.U64(what)) }

// Int reads an i64 that must fit an int (always, on 64-bit platforms).
func (r *Reader) Int(what string) int {
	v := r.I64(what)
	if int64(int(v)) != v {
		r.Fail(what, "value "+strconv.FormatInt(v, 10)+" overflows int")
		return 0
	}
	return int(v)
}

// F64 reads an f64.
func (r *Reader) F64(what string) float64 { return math.Float64frombits(r.U64(what)) }

// Bool reads a bool: 0 or 1, any other byte is a failure.
func (r *Reader) Bool(what string) bool {
	b := r.take(1, what, "")
	if b == nil {
		return false
	}
	if b[0] > 1 {
		r.Fail(what, "value "+strconv.Itoa(int(b[0]))+", want 0 or 1")
		return false
	}
	return b[0] == 1
}

// Fixed returns the next n bytes, aliasing the input.
func (r *Reader) Fixed(n int, what string) []byte { return r.take(n, what, "") }

// Rest returns every byte left, aliasing the input, and consumes them.
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	out := r.b
	r.pos += len(r.b)
	r.b = r.b[len(r.b):]
	return out
}

// Count reads a u32 count of items that take at least size bytes each (size ≥ 1), and
// fails unless that many items can fit in the bytes left.
func (r *Reader) Count(size int, what string) int { return r.count(size, what, " count") }

func (r *Reader) count(size int, what, part string) int {
	if size < 1 {
		panic("binenc: Count item size " + strconv.Itoa(size))
	}
	n := uint64(r.u32(what, part))
	if r.err == nil && n > uint64(len(r.b)/size) {
		r.failAt(r.last, what, part, strconv.FormatUint(n, 10)+" items of ≥ "+strconv.Itoa(size)+" bytes, "+strconv.Itoa(len(r.b))+" bytes left")
		return 0
	}
	return int(n)
}

// Bytes reads bytes and returns a copy (nil when the length is 0).
func (r *Reader) Bytes(what string) []byte {
	n := r.count(1, what, " length")
	b := r.take(n, what, "")
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// String reads bytes as a string.
func (r *Reader) String(what string) string {
	n := r.count(1, what, " length")
	return string(r.take(n, what, ""))
}

// Floats reads floats (nil when the count is 0).
func (r *Reader) Floats(what string) []float64 {
	return r.f64s(uint64(r.count(8, what, " count")), what)
}

// f64s reads n f64s; n has been checked against the bytes left.
func (r *Reader) f64s(n uint64, what string) []float64 {
	b := r.take(int(8*n), what, "")
	if len(b) == 0 {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// U64s reads u64s (nil when the count is 0).
func (r *Reader) U64s(what string) []uint64 {
	b := r.take(8*r.count(8, what, " count"), what, "")
	if len(b) == 0 {
		return nil
	}
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

// Strings reads strings (nil when the count is 0); each item is named what.
func (r *Reader) Strings(what string) []string {
	n := r.count(4, what, " count")
	if n == 0 || r.err != nil {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.String(what)
	}
	if r.err != nil {
		return nil
	}
	return out
}

// Matrix reads a matrix: its shape and its row-major values (nil when rows·cols is 0).
func (r *Reader) Matrix(what string) (rows, cols int, data []float64) {
	start := r.pos
	nr := uint64(r.u32(what, " rows"))
	nc := uint64(r.u32(what, " cols"))
	if r.err != nil {
		return 0, 0, nil
	}
	if n := nr * nc; n > uint64(len(r.b)/8) {
		r.failAt(start, what, "", strconv.FormatUint(nr, 10)+"×"+strconv.FormatUint(nc, 10)+" values of 8 bytes, "+strconv.Itoa(len(r.b))+" bytes left")
		return 0, 0, nil
	}
	return int(nr), int(nc), r.f64s(nr*nc, what)
}
