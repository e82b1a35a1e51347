package modelbus

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// TestContentChunks: a version cut by content assembles from its pieces in any order
// after its index; a second version with the same landmarks and inputs but a new fit
// reuses most pieces (the writer sends only the new ones, and the reader completes it
// from pieces written for the first); tombstones of pieces the second no longer names
// free them; a piece whose bytes are not its key's hash is refused.
func TestContentChunks(t *testing.T) {
	v1 := sample(1, 400, 784, 16)
	c1, i1 := ContentChunks(&v1)
	if len(c1) < 10 {
		t.Fatalf("%d pieces for %d bytes; want many", len(c1), len(v1.Encode()))
	}
	for _, m := range c1 {
		d, err := Decode(m.Key, m.Value)
		if err != nil || d.Kind != KindContent || len(d.Data) > MaxChunk {
			t.Fatalf("piece %q: kind %d, %d bytes, err %v", m.Key, d.Kind, len(d.Data), err)
		}
	}
	a := &Assembler{Features: "feat"}
	got := feed(t, a, append([]Message{i1}, c1...)) // index first: it waits for its pieces
	if len(got) != 1 || !reflect.DeepEqual(*got[0], v1) {
		t.Fatalf("got %d versions; want v1 once, equal", len(got))
	}

	v2 := v1
	v2.Version, v2.ID, v2.Points = 2, "model-2", 999
	v2.A = append([]float64(nil), v1.A...)
	for i := range v2.A {
		v2.A[i] += 1
	}
	c2, i2 := ContentChunks(&v2)
	live := map[string]bool{}
	for _, m := range c1 {
		live[string(m.Key)] = true
	}
	var fresh []Message
	freshBytes, total := 0, 0
	for _, m := range c2 {
		total += len(m.Value)
		if !live[string(m.Key)] {
			fresh = append(fresh, m)
			freshBytes += len(m.Value)
		}
	}
	if freshBytes*4 > total {
		t.Fatalf("the refit's version writes %d of its %d bytes anew; want under a quarter (inputs reused)", freshBytes, total)
	}
	got = feed(t, a, append(fresh, i2))
	if len(got) != 1 || !reflect.DeepEqual(*got[0], v2) {
		t.Fatalf("got %d versions from the new pieces and the reused ones; want v2, equal", len(got))
	}
	named := map[string]bool{}
	for _, m := range c2 {
		named[string(m.Key)] = true
	}
	held := a.held
	for _, m := range c1 {
		if !named[string(m.Key)] {
			feed(t, a, []Message{{Key: m.Key}})
		}
	}
	if a.held >= held || len(a.content) != len(c2) {
		t.Fatalf("after the tombstones %d pieces (%d bytes, %d before); want v2's %d", len(a.content), a.held, held, len(c2))
	}

	bad := c1[0]
	bad.Key = ContentKey([32]byte{1})
	if _, err := Decode(bad.Key, bad.Value); !errors.Is(err, ErrMessage) {
		t.Fatalf("a piece under another hash's key: %v; want ErrMessage", err)
	}
	if _, err := Decode([]byte("c/XYZ"), c1[0].Value); !errors.Is(err, ErrMessage) {
		t.Fatalf("a malformed content key: %v; want ErrMessage", err)
	}
}

// TestCutsDeterministic: cuts depend on content only: a shared run cut inside two
// buffers with different prefixes gives the same pieces once past the prefix.
func TestCutsDeterministic(t *testing.T) {
	v := sample(5, 300, 784, 4)
	body := v.Encode()
	a := cuts(append([]byte("short prefix"), body...))
	b := cuts(append(make([]byte, 70000), body...))
	common := map[string]bool{}
	for _, p := range a {
		common[string(p)] = true
	}
	shared := 0
	for _, p := range b {
		if common[string(p)] {
			shared += len(p)
		}
	}
	if shared*10 < len(body)*8 {
		t.Fatalf("%d of %d bytes in identical pieces; want ≥ 80%%", shared, len(body))
	}
	for _, p := range a[:len(a)-1] {
		if len(p) < minContent || len(p) > MaxChunk {
			t.Fatalf("piece of %d bytes outside [%d, %d]", len(p), minContent, MaxChunk)
		}
	}
}

// TestContentDeflate: a compressible piece travels deflated and decodes to its bytes; a
// piece that inflates beyond MaxChunk or names an unknown encoding is refused.
func TestContentDeflate(t *testing.T) {
	piece := make([]byte, 100000)
	for i := range piece {
		if i%97 == 0 {
			piece[i] = byte(i)
		}
	}
	h := sha256.Sum256(piece)
	v := contentValue(piece)
	if len(v) > len(piece)/4 {
		t.Fatalf("a mostly zero piece of %d bytes travels in %d", len(piece), len(v))
	}
	d, err := Decode(ContentKey(h), v)
	if err != nil || !bytes.Equal(d.Data, piece) {
		t.Fatalf("decode: %v (equal %v)", err, bytes.Equal(d.Data, piece))
	}
	big := make([]byte, MaxChunk+1)
	if _, err := Decode(ContentKey(sha256.Sum256(big)), contentValue(big)); !errors.Is(err, ErrMessage) {
		t.Fatalf("a piece inflating beyond MaxChunk: %v; want ErrMessage", err)
	}
	bad := append([]byte(nil), v...)
	bad[len(header(KindContent, 0))] = 7
	if _, err := Decode(ContentKey(h), bad); !errors.Is(err, ErrMessage) {
		t.Fatalf("encoding 7: %v; want ErrMessage", err)
	}
}

// TestAppendPieceReused: a piece's encoding from a pooled, reset deflate writer is the
// encoding of a new writer, byte for byte, whatever the writer wrote before (pieces that
// deflate, one that does not, an empty one), and it reads back.
func TestAppendPieceReused(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	noise := make([]byte, 5000)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	pieces := [][]byte{bytes.Repeat([]byte("cairn "), 2000), noise, nil, binenc.AppendFloats(nil, make([]float64, 784)), noise[:100]}
	for round := range 3 {
		for i, p := range pieces {
			var z bytes.Buffer
			w, err := flate.NewWriter(&z, flate.BestSpeed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := binenc.AppendU8(nil, pieceRaw)
			if z.Len() <= len(p)-len(p)/8 {
				want = binenc.AppendBytes(binenc.AppendU8(nil, pieceFlate), z.Bytes())
			} else {
				want = binenc.AppendBytes(want, p)
			}
			got := appendPiece(nil, p)
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, piece %d: %d bytes, a new writer's %d", round, i, len(got), len(want))
			}
			br := binenc.NewReader(got)
			if back := readPiece(br); !bytes.Equal(back, p) || br.End() != nil {
				t.Fatalf("round %d, piece %d: reads back %d bytes (%v), want %d", round, i, len(back), br.End(), len(p))
			}
		}
	}
}

// BenchmarkPointMessage is the primary's cost of one MNIST point's record (784 values,
// mostly zeros, deflated).
func BenchmarkPointMessage(b *testing.B) {
	x := make([]float64, 784)
	for i := 200; i < 400; i++ {
		x[i] = float64(i%7) / 7
	}
	for b.Loop() {
		if _, ok := PointMessage(Point{ID: "mnist/train/000001", Version: 3, Label: 4, X: x}); !ok {
			b.Fatal("too large")
		}
	}
}
