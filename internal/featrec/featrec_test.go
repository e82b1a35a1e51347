package featrec

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const testFP = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// sample is a record of q features per view, each a float32 (seeded).
func sample(q int) Record {
	r := rand.New(rand.NewPCG(1, 1))
	f := make([]float64, 2*q)
	for i := range f {
		f[i] = float64(float32(r.NormFloat64()))
	}
	f[0], f[1] = math.Inf(1), math.SmallestNonzeroFloat32 // extremes keep their bits too
	return Record{ID: "p-é1", Topic: "cairn.train", Partition: 3, Offset: 1 << 40, Fingerprint: testFP, Features: f}
}

func TestRoundTrip(t *testing.T) {
	for _, q := range []int{1, 2, 7, 1024} {
		want := sample(q)
		b, err := want.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != want.Size() {
			t.Fatalf("q=%d: %d bytes, Size says %d", q, len(b), want.Size())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("q=%d: %v", q, err)
		}
		if got.ID != want.ID || got.Topic != want.Topic || got.Partition != want.Partition ||
			got.Offset != want.Offset || got.Fingerprint != want.Fingerprint {
			t.Fatalf("q=%d: got %+v, want %+v", q, got, want)
		}
		for i := range want.Features {
			if math.Float64bits(got.Features[i]) != math.Float64bits(want.Features[i]) {
				t.Fatalf("q=%d: feature %d: got %v, want %v (bits differ)", q, i, got.Features[i], want.Features[i])
			}
		}
	}
}

// TestEveryByteChecked flips each bit of a record: every flip must be refused.
func TestEveryByteChecked(t *testing.T) {
	rec := sample(3)
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: err %v, want ErrCorrupt", i, bit, err)
			}
		}
	}
	for n := range len(b) {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err %v, want ErrCorrupt", n, err)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	cases := map[string]func(*Record){
		"empty id":        func(r *Record) { r.ID = "" },
		"long id":         func(r *Record) { r.ID = strings.Repeat("x", MaxIDBytes+1) },
		"bad utf8":        func(r *Record) { r.ID = "\xff" },
		"empty topic":     func(r *Record) { r.Topic = "" },
		"neg partition":   func(r *Record) { r.Partition = -1 },
		"neg offset":      func(r *Record) { r.Offset = -1 },
		"odd features":    func(r *Record) { r.Features = r.Features[:3] },
		"no features":     func(r *Record) { r.Features = nil },
		"short fp":        func(r *Record) { r.Fingerprint = "00" },
		"not hex fp":      func(r *Record) { r.Fingerprint = strings.Repeat("g", 64) },
		"not a float32":   func(r *Record) { r.Features[2] = 0.1 },
		"float64 subnorm": func(r *Record) { r.Features[2] = math.SmallestNonzeroFloat64 },
	}
	for name, mod := range cases {
		r := sample(2)
		mod(&r)
		if b, err := r.AppendBinary([]byte("keep")); !errors.Is(err, ErrEncode) || string(b) != "keep" {
			t.Errorf("%s: got %q, %v; want dst unchanged and ErrEncode", name, b, err)
		}
	}
}

// FuzzDecode checks that Decode never panics and that whatever it accepts re-encodes to
// the same bytes.
func FuzzDecode(f *testing.F) {
	for _, q := range []int{1, 4} {
		r := sample(q)
		b, _ := r.Encode()
		f.Add(b)
	}
	f.Add([]byte("cfr\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		nan := false
		for _, v := range r.Features {
			nan = nan || math.IsNaN(v)
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		if !nan && !bytes.Equal(again, b) { // a NaN's payload may change through float64
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
		}
	})
}

// TestPeekAndDecodeTo: Peek names the record's source coordinates and refuses what has
// no header; DecodeTo decodes into a buffer of the right length (same bits as Decode)
// and allocates otherwise.
func TestPeekAndDecodeTo(t *testing.T) {
	rec := sample(5)
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	topic, part, off, err := Peek(b)
	if err != nil || topic != rec.Topic || part != rec.Partition || off != rec.Offset {
		t.Fatalf("Peek: got %q %d %d %v, want %q %d %d", topic, part, off, err, rec.Topic, rec.Partition, rec.Offset)
	}
	for _, bad := range [][]byte{nil, []byte("not a record"), b[:headerSize+1], append([]byte("cfr\x02"), b[4:]...)} {
		if _, _, _, err := Peek(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Peek(%.12q): err %v, want ErrCorrupt", bad, err)
		}
	}
	buf := make([]float64, 10)
	got, err := DecodeTo(buf, b)
	if err != nil {
		t.Fatal(err)
	}
	if &got.Features[0] != &buf[0] {
		t.Errorf("DecodeTo with a buffer of 2q: features not in the buffer")
	}
	for i, v := range rec.Features {
		if math.Float64bits(got.Features[i]) != math.Float64bits(v) {
			t.Fatalf("feature %d: got %v, want %v", i, got.Features[i], v)
		}
	}
	short := make([]float64, 3)
	if got, err := DecodeTo(short, b); err != nil || len(got.Features) != 10 || &got.Features[0] == &short[0] {
		t.Errorf("DecodeTo with a short buffer: %d features, err %v; want a new slice of 10", len(got.Features), err)
	}
}
