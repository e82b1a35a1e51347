package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// mkIDX builds an IDX file by hand: magic 0 0 typ len(dims), big-endian dims, payload.
func mkIDX(typ byte, dims []uint32, payload []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, payload...)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func TestReadIDXValid(t *testing.T) {
	img := mkIDX(0x08, []uint32{3, 2, 4}, seq(24))
	lab := mkIDX(0x08, []uint32{5}, seq(5))
	cases := []struct {
		name     string
		file     []byte
		limit    int
		wantDims []int
		wantData []byte
		total    int
	}{
		{"images", img, 0, []int{3, 2, 4}, seq(24), 3},
		{"images-gzip", gz(img), 0, []int{3, 2, 4}, seq(24), 3},
		{"images-limit", img, 2, []int{2, 2, 4}, seq(16), 3},
		{"images-gzip-limit", gz(img), 1, []int{1, 2, 4}, seq(8), 3},
		{"limit-above-total", img, 9, []int{3, 2, 4}, seq(24), 3},
		{"labels", lab, 0, []int{5}, seq(5), 5},
		{"limit-ignores-trailing", append(slices.Clone(lab), 1, 2), 3, []int{3}, seq(3), 5},
	}
	for _, tc := range cases {
		got, err := readIDX(bytes.NewReader(tc.file), tc.limit)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got.dims, tc.wantDims) || !bytes.Equal(got.data, tc.wantData) || got.total != tc.total {
			t.Errorf("%s: got dims %v total %d data %v, want %v %d %v", tc.name, got.dims, got.total, got.data, tc.wantDims, tc.total, tc.wantData)
		}
	}
}

func TestReadIDXCorrupt(t *testing.T) {
	good := mkIDX(0x08, []uint32{2, 3}, seq(6))
	badCRC := gz(good)
	badCRC[len(badCRC)-8] ^= 0xff // gzip trailer: CRC-32 then size
	cases := []struct {
		name string
		file []byte
	}{
		{"empty", nil},
		{"short-magic", []byte{0, 0, 8}},
		{"nonzero-magic", append([]byte{1, 0}, good[2:]...)},
		{"type-double", mkIDX(0x0E, []uint32{2, 3}, seq(48))},
		{"type-int", mkIDX(0x0C, []uint32{2, 3}, seq(24))},
		{"ndims-0", mkIDX(0x08, nil, seq(6))},
		{"ndims-9", mkIDX(0x08, []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1}, seq(1))},
		{"truncated-dims", good[:9]},
		{"zero-dim", mkIDX(0x08, []uint32{2, 0}, nil)},
		{"truncated-payload", good[:len(good)-1]},
		{"trailing-byte", append(slices.Clone(good), 0)},
		{"huge-dims", mkIDX(0x08, []uint32{0xffffffff, 0xffffffff, 0xffffffff}, seq(6))},
		{"huge-count", mkIDX(0x08, []uint32{0xffffffff, 784}, seq(6))},
		{"gzip-bad-header", []byte{0x1f, 0x8b, 0, 0, 0}},
		{"gzip-truncated", gz(good)[:20]},
		{"gzip-bad-crc", badCRC},
	}
	for _, tc := range cases {
		got, err := readIDX(bytes.NewReader(tc.file), 0)
		if !errors.Is(err, ErrIDX) {
			t.Errorf("%s: got %v, err %v; want ErrIDX", tc.name, got, err)
		}
	}
}

// FuzzReadIDX: any input either decodes consistently (payload length = product of the
// dims, dims[0] ≤ announced total) or fails with ErrIDX; it never panics.
func FuzzReadIDX(f *testing.F) {
	good := mkIDX(0x08, []uint32{2, 3}, seq(6))
	f.Add(good, 0)
	f.Add(gz(good), 0)
	f.Add(gz(good), 1)
	f.Add(mkIDX(0x08, []uint32{4}, seq(4)), 2)
	f.Add(good[:7], 0)
	f.Add(mkIDX(0x08, []uint32{0xffffffff, 784}, nil), 0)
	f.Add([]byte{0x1f, 0x8b}, 0)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if limit < 0 {
			limit = -limit
		}
		x, err := readIDX(bytes.NewReader(b), limit%8)
		if err != nil {
			if !errors.Is(err, ErrIDX) {
				t.Fatalf("error %v does not wrap ErrIDX", err)
			}
			return
		}
		p := 1
		for _, d := range x.dims {
			if d <= 0 {
				t.Fatalf("dims %v", x.dims)
			}
			p *= d
		}
		if p != len(x.data) || x.dims[0] > x.total {
			t.Fatalf("dims %v total %d, %d bytes", x.dims, x.total, len(x.data))
		}
	})
}
