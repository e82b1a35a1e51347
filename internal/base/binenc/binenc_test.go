package binenc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestAppendBytes: every encoding, byte for byte as the package documentation states
// it (written out by hand here, not by another encoder).
func TestAppendBytes(t *testing.T) {
	negZero := math.Copysign(0, -1)
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"u8", AppendU8(nil, 0xab), "ab"},
		{"u32", AppendU32(nil, 0x01020304), "04030201"},
		{"u64", AppendU64(nil, 0x0102030405060708), "0807060504030201"},
		{"i64 -2", AppendI64(nil, -2), "feffffffffffffff"},
		{"f64 1.5", AppendF64(nil, 1.5), "000000000000f83f"},
		{"f64 -0", AppendF64(nil, negZero), "0000000000000080"},
		{"f64 NaN payload", AppendF64(nil, nan), "efbeadde0000f87f"},
		{"bool", AppendBool(AppendBool(nil, true), false), "0100"},
		{"bytes", AppendBytes(nil, []byte("ab")), "020000006162"},
		{"bytes empty", AppendBytes(nil, nil), "00000000"},
		{"string", AppendString(nil, "é"), "02000000c3a9"},
		{"floats", AppendFloats(nil, []float64{1, -2}), "02000000" + "000000000000f03f" + "00000000000000c0"},
		{"u64s", AppendU64s(nil, []uint64{1, 1 << 63}), "02000000" + "0100000000000000" + "0000000000000080"},
		{"strings", AppendStrings(nil, []string{"a", ""}), "02000000" + "0100000061" + "00000000"},
		{"matrix", AppendMatrix(nil, 1, 2, []float64{1, -2}), "01000000" + "02000000" + "000000000000f03f" + "00000000000000c0"},
		{"matrix empty", AppendMatrix(nil, 3, 0, nil), "03000000" + "00000000"},
		{"appends", AppendU8([]byte{9}, 1), "0901"},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// record is a sample of every field kind, in one order, as a record type would write
// and read it.
type record struct {
	U8         uint8
	U32        uint32
	U64        uint64
	I64        int64
	Int        int
	F64        float64
	Bool       bool
	Fixed      []byte
	Bytes      []byte
	Str        string
	Floats     []float64
	U64s       []uint64
	Strings    []string
	Rows, Cols int
	Data       []float64
	Rest       []byte
}

func (x *record) append(b []byte) []byte {
	b = AppendU8(b, x.U8)
	b = AppendU32(b, x.U32)
	b = AppendU64(b, x.U64)
	b = AppendI64(b, x.I64)
	b = AppendI64(b, int64(x.Int))
	b = AppendF64(b, x.F64)
	b = AppendBool(b, x.Bool)
	b = append(b, x.Fixed...)
	b = AppendBytes(b, x.Bytes)
	b = AppendString(b, x.Str)
	b = AppendFloats(b, x.Floats)
	b = AppendU64s(b, x.U64s)
	b = AppendStrings(b, x.Strings)
	b = AppendMatrix(b, x.Rows, x.Cols, x.Data)
	return append(b, x.Rest...)
}

func readRecord(b []byte) (record, error) {
	r := NewReader(b)
	var x record
	x.U8 = r.U8("u8")
	x.U32 = r.U32("u32")
	x.U64 = r.U64("u64")
	x.I64 = r.I64("i64")
	x.Int = r.Int("int")
	x.F64 = r.F64("f64")
	x.Bool = r.Bool("bool")
	if f := r.Fixed(3, "fixed"); f != nil {
		x.Fixed = append([]byte(nil), f...)
	}
	x.Bytes = r.Bytes("bytes")
	x.Str = r.String("str")
	x.Floats = r.Floats("floats")
	x.U64s = r.U64s("u64s")
	x.Strings = r.Strings("strings")
	x.Rows, x.Cols, x.Data = r.Matrix("matrix")
	if rest := r.Rest(); len(rest) > 0 {
		x.Rest = append([]byte(nil), rest...)
	}
	return x, r.End()
}

func sampleRecord() record {
	return record{
		U8: 7, U32: 1 << 31, U64: math.MaxUint64, I64: math.MinInt64, Int: -5,
		F64: math.Copysign(0, -1), Bool: true, Fixed: []byte{1, 2, 3},
		Bytes: []byte("raw"), Str: "id-1", Floats: []float64{math.Inf(-1), 0.1},
		U64s: []uint64{3}, Strings: []string{"a", "bc"},
		Rows: 2, Cols: 1, Data: []float64{1, 2}, Rest: []byte("tail"),
	}
}

// TestRoundTrip: reading what the append functions wrote gives the values back (empty
// slices as nil) and consumes every byte.
func TestRoundTrip(t *testing.T) {
	for _, want := range []record{sampleRecord(), {Fixed: []byte{0, 0, 0}}} {
		b := want.append(nil)
		got, err := readRecord(b)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !reflect.DeepEqual(got, want) || math.Signbit(got.F64) != math.Signbit(want.F64) {
			t.Errorf("round trip\n got %+v\nwant %+v", got, want)
		}
		if again := got.append(nil); !bytes.Equal(again, b) {
			t.Errorf("re-encoding changed the bytes")
		}
	}
}

// TestReaderFailures: each failure names the field, its offset and the reason, sticks,
// and leaves later reads at zero values.
func TestReaderFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(r *Reader)
		want string // the whole error message
	}{
		{"truncated u32", []byte{1, 2}, func(r *Reader) { r.U32("count") }, "count at byte 0: truncated: needs 4 bytes, 2 left"},
		{"truncated later field", []byte{1, 2, 3, 4, 5}, func(r *Reader) { r.U32("a"); r.U64("b") }, "b at byte 4: truncated: needs 8 bytes, 1 left"},
		{"bool 2", []byte{0, 2}, func(r *Reader) { r.Bool("exact"); r.Bool("stale") }, "stale at byte 1: value 2, want 0 or 1"},
		{"bytes length", []byte{5, 0, 0, 0, 'a'}, func(r *Reader) { r.Bytes("key") }, "key length at byte 0: 5 items of ≥ 1 bytes, 1 bytes left"},
		{"floats count", []byte{2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, func(r *Reader) { r.Floats("x") }, "x count at byte 0: 2 items of ≥ 8 bytes, 8 bytes left"},
		{"huge count", []byte{0xff, 0xff, 0xff, 0xff}, func(r *Reader) { r.U64s("keys") }, "keys count at byte 0: 4294967295 items of ≥ 8 bytes, 0 bytes left"},
		{"strings count", []byte{3, 0, 0, 0, 0, 0, 0, 0}, func(r *Reader) { r.Strings("landmark") }, "landmark count at byte 0: 3 items of ≥ 4 bytes, 4 bytes left"},
		{"string item", []byte{1, 0, 0, 0, 9, 0, 0, 0}, func(r *Reader) { r.Strings("landmark") }, "landmark length at byte 4: 9 items of ≥ 1 bytes, 0 bytes left"},
		{"matrix cols", []byte{1, 0, 0, 0, 2}, func(r *Reader) { r.Matrix("A") }, "A cols at byte 4: truncated: needs 4 bytes, 1 left"},
		{"matrix values", []byte{2, 0, 0, 0, 2, 0, 0, 0, 0}, func(r *Reader) { r.Matrix("A") }, "A at byte 0: 2×2 values of 8 bytes, 1 bytes left"},
		{"fixed", []byte{1}, func(r *Reader) { r.Fixed(32, "fingerprint") }, "fingerprint at byte 0: truncated: needs 32 bytes, 1 left"},
		{"trailing", []byte{1, 2, 3}, func(r *Reader) { r.U8("flags") }, "end of input at byte 1: 2 trailing bytes"},
		{"caller's failure", []byte{4, 0}, func(r *Reader) { r.U8("flags"); r.Fail("flags", "unknown bits 0x4"); r.U8("next") }, "flags at byte 0: unknown bits 0x4"},
		{"first failure sticks", []byte{}, func(r *Reader) { r.U8("first"); r.Fail("second", "x") }, "first at byte 0: truncated: needs 1 bytes, 0 left"},
	} {
		r := NewReader(tc.in)
		tc.read(r)
		err := r.End()
		var e *Error
		if !errors.As(err, &e) || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
			continue
		}
		if r.Len() != 0 || r.U64("after") != 0 || r.Floats("after") != nil || r.Rest() != nil || r.Err() != err {
			t.Errorf("%s: a failed Reader still reads", tc.name)
		}
	}
}

// TestReaderAliasing: Fixed and Rest alias the input but cannot grow into it; Bytes
// copies.
func TestReaderAliasing(t *testing.T) {
	in := []byte{1, 0, 0, 0, 'a', 'b', 'c'}
	r := NewReader(in)
	b := r.Bytes("b")
	f := r.Fixed(1, "f")
	rest := r.Rest()
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	in[4], in[5] = 'x', 'y'
	if string(b) != "a" || string(f) != "y" || string(rest) != "c" {
		t.Errorf("Bytes %q (want a copy), Fixed %q and Rest %q (want aliases)", b, f, rest)
	}
	_ = append(f, 'z')
	if in[6] != 'c' {
		t.Errorf("appending to Fixed's result wrote into the input")
	}
}

// TestAppendPanics: shapes that cannot be encoded are programmer errors.
func TestAppendPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"matrix shape":    func() { AppendMatrix(nil, 2, 2, []float64{1}) },
		"negative matrix": func() { AppendMatrix(nil, -1, 0, nil) },
		"count size 0":    func() { NewReader([]byte{0, 0, 0, 0}).Count(0, "x") },
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.HasPrefix(p.(string), "binenc: ") {
					t.Errorf("%s: panic %v, want a binenc panic", name, p)
				}
			}()
			f()
		}()
	}
}

// FuzzReader: on any input the Reader never panics, allocates no more floats than the
// input holds, and a record it accepts re-encodes to the same bytes.
func FuzzReader(f *testing.F) {
	s := sampleRecord()
	f.Add(s.append(nil))
	f.Add((&record{Fixed: []byte{0, 0, 0}}).append(nil))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := readRecord(in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(in) {
				t.Fatalf("error %v (%T) is not an *Error inside the input", err, err)
			}
			return
		}
		if 8*(len(x.Floats)+len(x.U64s)+len(x.Data))+len(x.Bytes)+len(x.Str) > len(in) {
			t.Fatalf("decoded more than the %d input bytes", len(in))
		}
		if got := x.append(nil); !bytes.Equal(got, in) {
			t.Fatalf("accepted input is not canonical:\n in  %x\n out %x", in, got)
		}
	})
}

// BenchmarkReadFloats: decoding a 784-value vector (an MNIST point) allocates only the
// result.
func BenchmarkReadFloats(b *testing.B) {
	in := AppendFloats(nil, make([]float64, 784))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(in)
		if x := r.Floats("x"); len(x) != 784 || r.End() != nil {
			b.Fatal("bad decode")
		}
	}
}
