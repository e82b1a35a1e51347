package featrec

import (
	"bytes"
	"encoding/hex"
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

// FuzzDecode checks that Decode and Parse never panic, accept the same bytes and agree,
// and that whatever they accept re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, q := range []int{1, 4} {
		r := sample(q)
		b, _ := r.Encode()
		f.Add(b)
	}
	f.Add([]byte("cfr\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, perr := Parse(b)
		r, err := Decode(b)
		if (perr == nil) != (err == nil) {
			t.Fatalf("Parse says %v, Decode %v", perr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if string(v.ID) != r.ID || string(v.Topic) != r.Topic || v.Partition != r.Partition || v.Offset != r.Offset ||
			!v.FingerprintIs(r.Fingerprint) || 2*v.Dim != len(r.Features) {
			t.Fatalf("Parse's view %+v differs from Decode's record", v)
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

// TestParse: Parse's view names what Decode's record holds, its features widen to the
// same bits (2q straddling FeaturesTo's blocks of 4), it aliases the record's bytes,
// and matching and widening a record allocate nothing.
func TestParse(t *testing.T) {
	for _, q := range []int{1, 2, 3, 5, 7, 1024} {
		want := sample(q)
		b, err := want.Encode()
		if err != nil {
			t.Fatal(err)
		}
		v, err := Parse(b)
		if err != nil {
			t.Fatalf("q=%d: %v", q, err)
		}
		if string(v.ID) != want.ID || string(v.Topic) != want.Topic || v.Partition != want.Partition ||
			v.Offset != want.Offset || v.Dim != q || hex.EncodeToString(v.Fingerprint[:]) != want.Fingerprint {
			t.Fatalf("q=%d: view %+v, want %+v", q, v, want)
		}
		if !v.FingerprintIs(want.Fingerprint) || v.FingerprintIs(strings.ToUpper(want.Fingerprint)) ||
			v.FingerprintIs(want.Fingerprint[:62]) || v.FingerprintIs(strings.Repeat("0", 64)) {
			t.Errorf("q=%d: FingerprintIs accepts other fingerprints or refuses its own", q)
		}
		got := make([]float64, 2*q)
		v.FeaturesTo(got)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want.Features[i]) {
				t.Fatalf("q=%d: feature %d: got %v, want %v (bits differ)", q, i, got[i], want.Features[i])
			}
		}
		if &v.ID[0] != &b[headerSize+2+len(want.Topic)+2] {
			t.Errorf("q=%d: the view's id is a copy, not the record's bytes", q)
		}
	}
	big := sample(4096)
	b, _ := big.Encode()
	dst := make([]float64, 2*4096)
	fp := testFP
	if n := testing.AllocsPerRun(20, func() {
		v, err := Parse(b)
		if err != nil || !v.FingerprintIs(fp) || string(v.ID) != "p-é1" {
			t.Fatal("the record does not match")
		}
		v.FeaturesTo(dst)
	}); n != 0 {
		t.Errorf("Parse, FingerprintIs and FeaturesTo: %v allocations per record, want 0", n)
	}
}

// TestFeaturesToPanicsOnWrongLength: a destination of another length than 2·Dim is a
// programmer's error.
func TestFeaturesToPanicsOnWrongLength(t *testing.T) {
	rec := sample(3)
	b, _ := rec.Encode()
	v, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 5, 7} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("FeaturesTo into %d values of a record of 6: no panic", n)
				}
			}()
			v.FeaturesTo(make([]float64, n))
		}()
	}
}

// BenchmarkParse is the primary's per-record work at the convnet's q = 4,096: validate
// (checksum included), match the fingerprint, widen both views into a row buffer.
func BenchmarkParse(b *testing.B) {
	rec := sample(4096)
	buf, err := rec.Encode()
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float64, 2*4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		v, err := Parse(buf)
		if err != nil || !v.FingerprintIs(testFP) {
			b.Fatal("the record does not match")
		}
		v.FeaturesTo(dst)
	}
	sink = dst[0]
}

// BenchmarkDecodeTo is the copying path, for comparison with BenchmarkParse: decode
// into a buffer (the id, topic and hex fingerprint copied into strings), then copy the
// rows, as the primary did before Parse (its widening loop was also the plain one).
func BenchmarkDecodeTo(b *testing.B) {
	rec := sample(4096)
	buf, err := rec.Encode()
	if err != nil {
		b.Fatal(err)
	}
	tmp, dst := make([]float64, 2*4096), make([]float64, 2*4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := DecodeTo(tmp, buf)
		if err != nil || r.Fingerprint != testFP {
			b.Fatal("the record does not match")
		}
		copy(dst, r.Features)
	}
	sink = dst[0]
}

var sink float64
