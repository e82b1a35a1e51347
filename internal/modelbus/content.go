package modelbus

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// Content-defined chunking of a version's encoding (ContentChunks). A cut falls after
// byte i when the gear hash of the bytes before it has its low chunkBits bits zero, no
// sooner than minContent bytes after the previous cut and no later than MaxChunk: where
// two encodings share a run of bytes (the landmarks' inputs of two versions fitted on one
// pool), the cuts inside it fall at the same places relative to its content, so its
// chunks have the same hashes and keys and the leader writes them once.
const (
	minContent = 16 << 10
	chunkBits  = 16 // mean chunk ≈ minContent + 64 KiB
)

// gear is the rolling hash's table: 256 words of splitmix64 from the fixed seed 0xCA1E
// (part of the format: another table cuts elsewhere, which costs reuse, never
// correctness, since a chunk is named by its bytes).
var gear = func() (g [256]uint64) {
	x := uint64(0xCA1E)
	for i := range g {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		g[i] = z ^ (z >> 31)
	}
	return g
}()

// cuts splits p into content-defined pieces (the package doc's rule), in order.
func cuts(p []byte) [][]byte {
	var out [][]byte
	const mask = 1<<chunkBits - 1
	for len(p) > 0 {
		n := len(p)
		if n > minContent {
			var h uint64
			n = min(len(p), MaxChunk)
			for i := minContent; i < min(len(p), MaxChunk); i++ {
				h = h<<1 + gear[p[i]]
				if h&mask == 0 {
					n = i + 1
					break
				}
			}
		}
		out = append(out, p[:n])
		p = p[n:]
	}
	return out
}

// ContentKey is the key of a content chunk: "c/" and the SHA-256 of its bytes in hex.
func ContentKey(sum [32]byte) []byte { return append([]byte("c/"), hex.EncodeToString(sum[:])...) }

// ContentChunks cuts the encoding of v at content-defined places and returns one content
// message per distinct piece (kind 4, key ContentKey of its bytes) in order of first use,
// and the version's index (kind 5, key ManifestKey(version)): the encoding's length and
// SHA-256 and the hashes of its pieces in order. A reader joins the pieces the index
// names, whichever version's publication wrote them; a writer leaves out the content
// messages whose keys are live on the topic already.
func ContentChunks(v *Version) (content []Message, index Message) {
	p := v.Encode()
	sum := sha256.Sum256(p)
	pieces := cuts(p)
	seen := map[[32]byte]bool{}
	b := header(KindIndex, v.Version)
	b = binenc.AppendU64(b, uint64(len(p)))
	b = append(b, sum[:]...)
	b = binenc.AppendU32(b, uint32(len(pieces)))
	for _, piece := range pieces {
		h := sha256.Sum256(piece)
		b = append(b, h[:]...)
		if seen[h] {
			continue
		}
		seen[h] = true
		content = append(content, Message{Key: ContentKey(h), Value: contentValue(piece)})
	}
	return content, Message{Key: ManifestKey(v.Version), Value: b}
}

// decodeIndex reads an index's body after its header into d.
func decodeIndex(r *binenc.Reader, d *Decoded) {
	d.Length = r.Int("length")
	copy(d.Sum[:], r.Fixed(32, "sum"))
	d.Count = int(r.U32("count"))
	if r.Err() != nil || d.Count < 1 || d.Count > r.Len()/32 {
		r.Fail("count", fmt.Sprintf("%d pieces in %d bytes", d.Count, r.Len()))
		return
	}
	d.Pieces = make([][32]byte, d.Count)
	for i := range d.Pieces {
		copy(d.Pieces[i][:], r.Fixed(32, "piece"))
	}
}

// Piece encodings: the bytes as they are, or DEFLATE (RFC 1951), which ContentChunks
// uses when it saves at least an eighth (the landmarks' inputs: MNIST's background is
// zero).
const (
	pieceRaw   = 0
	pieceFlate = 1
)

// contentValue is a content message's value: the header, the piece's encoding byte and
// its bytes.
func contentValue(piece []byte) []byte { return appendPiece(header(KindContent, 0), piece) }

// flaters are reused BestSpeed deflate writers: a new one allocates and clears about
// 1.2 MB, which was nine tenths of a point record's cost (PointMessage: 496 µs, 33 µs
// with the pool) on the primary's ingest path; a Reset writer writes a new one's bytes.
var flaters = sync.Pool{New: func() any {
	w, err := flate.NewWriter(nil, flate.BestSpeed)
	if err != nil {
		panic(err) // BestSpeed is a valid level
	}
	return w
}}

// appendPiece appends to c a piece's encoding byte and its bytes, deflated when that
// saves at least an eighth.
func appendPiece(c, piece []byte) []byte {
	var z bytes.Buffer
	w := flaters.Get().(*flate.Writer)
	w.Reset(&z)
	_, err := w.Write(piece)
	if err == nil {
		err = w.Close()
	}
	w.Reset(nil) // hold no caller's buffer in the pool
	flaters.Put(w)
	if err == nil && z.Len() <= len(piece)-len(piece)/8 {
		c = binenc.AppendU8(c, pieceFlate)
		return binenc.AppendBytes(c, z.Bytes())
	}
	c = binenc.AppendU8(c, pieceRaw)
	return binenc.AppendBytes(c, piece)
}

// decodeContent reads a content chunk's body into d, inflating it (to at most MaxChunk
// bytes), and checks that its bytes hash to the key's sum.
func decodeContent(r *binenc.Reader, d *Decoded, key []byte) {
	if d.Data = readPiece(r); r.Err() != nil {
		return
	}
	d.Sum = sha256.Sum256(d.Data)
	if string(ContentKey(d.Sum)) != string(key) {
		r.Fail("data", "its SHA-256 is not the key's")
	}
}

// readPiece reads appendPiece's bytes, inflating them (to at most MaxChunk bytes); nil
// with r failed when they do not decode.
func readPiece(r *binenc.Reader) []byte {
	enc := r.U8("encoding")
	data := r.Bytes("data")
	if r.Err() != nil {
		return nil
	}
	switch enc {
	case pieceRaw:
		if len(data) > MaxChunk {
			r.Fail("data", fmt.Sprintf("%d bytes, over %d", len(data), MaxChunk))
			return nil
		}
		return data
	case pieceFlate:
		b, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(data)), MaxChunk+1))
		if err != nil || len(b) > MaxChunk {
			r.Fail("data", fmt.Sprintf("does not inflate to at most %d bytes", MaxChunk))
			return nil
		}
		return b
	}
	r.Fail("encoding", fmt.Sprintf("%d is not 0 (raw) or 1 (deflate)", enc))
	return nil
}
