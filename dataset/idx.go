package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
)

// IDX format (LeCun & Cortes, the MNIST database): a 4-byte magic 0x00 0x00 <type>
// <ndims>, ndims big-endian uint32 dimension sizes, then the elements in row-major order.
// Only type 0x08 (unsigned byte), the type of every MNIST and Fashion-MNIST file, is
// accepted; other types are rejected rather than misread.
const (
	idxTypeUbyte = 0x08
	idxMaxDims   = 8
	// idxMaxBytes bounds the payload a header may announce (1 GiB; MNIST train images are
	// 47 MB), so a corrupt or hostile header cannot make the reader allocate without end.
	idxMaxBytes = 1 << 30
)

// idx is a decoded IDX array of unsigned bytes.
type idx struct {
	// dims are the dimension sizes; dims[0] is the number of items actually read.
	dims []int
	// data holds prod(dims) bytes, row-major.
	data []byte
	// total is the number of items the header announced along dims[0].
	total int
}

// readIDX decodes an IDX stream, transparently gunzipping it when it starts with the gzip
// magic 0x1f 0x8b. limit > 0 reads only the first limit items along the first dimension
// (the rest of the stream is not read, so trailing garbage then goes unnoticed); limit = 0
// reads all items and requires the stream to end exactly after them.
func readIDX(r io.Reader, limit int) (*idx, error) {
	br := bufio.NewReader(r)
	if head, err := br.Peek(2); err == nil && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip header: %v", ErrIDX, err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, fmt.Errorf("%w: magic: %v", ErrIDX, err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("%w: magic % x: first two bytes must be zero", ErrIDX, magic)
	}
	if magic[2] != idxTypeUbyte {
		return nil, fmt.Errorf("%w: element type 0x%02x, want 0x08 (unsigned byte)", ErrIDX, magic[2])
	}
	nd := int(magic[3])
	if nd < 1 || nd > idxMaxDims {
		return nil, fmt.Errorf("%w: ndims = %d, want 1..%d", ErrIDX, nd, idxMaxDims)
	}
	dims := make([]int, nd)
	var raw [4]byte
	for i := range dims {
		if _, err := io.ReadFull(br, raw[:]); err != nil {
			return nil, fmt.Errorf("%w: dimension %d: %v", ErrIDX, i, err)
		}
		d := binary.BigEndian.Uint32(raw[:])
		if d == 0 {
			return nil, fmt.Errorf("%w: dimension %d is 0", ErrIDX, i)
		}
		dims[i] = int(d)
	}
	item := 1 // bytes per item (product of dims[1:])
	for _, d := range dims[1:] {
		if item > idxMaxBytes/d {
			return nil, fmt.Errorf("%w: item size of dims %v exceeds %d bytes", ErrIDX, dims, idxMaxBytes)
		}
		item *= d
	}
	total := dims[0]
	want := total
	if limit > 0 && limit < total {
		want = limit
	}
	if want > idxMaxBytes/item {
		return nil, fmt.Errorf("%w: payload of dims %v exceeds %d bytes", ErrIDX, dims, idxMaxBytes)
	}
	// Copy through a bytes.Buffer rather than allocating want*item up front: memory then
	// grows only with bytes that actually arrive, whatever the header claims.
	var buf bytes.Buffer
	nbytes := int64(want * item)
	got, err := io.CopyN(&buf, br, nbytes)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: dims %v: payload has %d bytes, want %d", ErrIDX, dims, got, nbytes)
		}
		return nil, fmt.Errorf("%w: payload: %v", ErrIDX, err)
	}
	if want == total {
		var one [1]byte
		n, err := io.ReadFull(br, one[:])
		if n != 0 {
			return nil, fmt.Errorf("%w: dims %v: trailing bytes after %d-byte payload", ErrIDX, dims, nbytes)
		}
		if err != io.EOF { // e.g. a gzip checksum mismatch, reported only at the end
			return nil, fmt.Errorf("%w: after payload: %v", ErrIDX, err)
		}
	}
	dims[0] = want
	return &idx{dims: dims, data: buf.Bytes(), total: total}, nil
}
