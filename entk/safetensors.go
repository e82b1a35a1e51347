package entk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Safetensors file format (https://github.com/huggingface/safetensors), as read and
// written here:
//
//	bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
//	bytes [8, 8+N)      JSON object, UTF-8, optionally right-padded with spaces:
//	                      {"__metadata__": {string: string}  (optional)
//	                       KEY: {"dtype": "F64"|"F32"|"F16"|"BF16",
//	                             "shape": [d0, d1, …],
//	                             "data_offsets": [begin, end]}, …}
//	bytes [8+N, EOF)    the byte buffer; tensor KEY occupies buffer[begin:end], row-major,
//	                    little-endian, end−begin = Π shape · sizeof(dtype)
//
// The reader is strict, as the reference implementation: the tensors must tile the buffer
// exactly (no overlap, no hole, nothing after the last tensor), keys must be unique, and
// every size is checked against the file length before anything is allocated, so a hostile
// header cannot make it allocate more than a small multiple of the file size.

// Tensor is one named tensor of a safetensors file, decoded to float64.
type Tensor struct {
	Name  string
	Dtype string // storage dtype: "F64", "F32", "F16" or "BF16"
	Shape []int
	Data  []float64 // row-major, len = Π Shape
}

// Safetensors is the decoded content of a safetensors file.
type Safetensors struct {
	Metadata map[string]string // the optional "__metadata__" object; nil if absent
	Tensors  []Tensor          // in the order of their data offsets
}

// dtypeSize is the byte width of each supported dtype.
var dtypeSize = map[string]int{"F64": 8, "F32": 4, "F16": 2, "BF16": 2}

// maxHeader bounds the JSON header, as the reference implementation (100 MB).
const maxHeader = 100 << 20

type tensorHeader struct {
	Dtype       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// ReadSafetensors decodes a safetensors file held in memory. data is not modified or
// retained.
func ReadSafetensors(data []byte) (Safetensors, error) {
	if len(data) < 8 {
		return Safetensors{}, fmt.Errorf("%w: file has %d bytes, shorter than the 8-byte header length", ErrSafetensors, len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > uint64(len(data)-8) || n > maxHeader {
		return Safetensors{}, fmt.Errorf("%w: header length %d exceeds the %d bytes after it (limit %d)", ErrSafetensors, n, len(data)-8, maxHeader)
	}
	hdr := data[8 : 8+n]
	buf := data[8+n:]
	if len(hdr) == 0 || hdr[0] != '{' {
		return Safetensors{}, fmt.Errorf("%w: header does not start with '{'", ErrSafetensors)
	}
	var out Safetensors
	entries, err := readSafetensorsHeader(hdr, uint64(len(buf)), &out.Metadata)
	if err != nil {
		return Safetensors{}, err
	}
	if err := checkTiling(entries, uint64(len(buf))); err != nil {
		return Safetensors{}, err
	}
	out.Tensors = make([]Tensor, len(entries))
	for i, e := range entries {
		t := Tensor{Name: e.name, Dtype: e.h.Dtype, Shape: make([]int, len(e.h.Shape))}
		for j, d := range e.h.Shape {
			t.Shape[j] = int(d)
		}
		t.Data = decodeFloats(buf[e.begin:e.end], e.h.Dtype)
		out.Tensors[i] = t
	}
	return out, nil
}

// tensorEntry is one tensor of a safetensors header, checked against the buffer:
// buffer[begin:end] holds exactly its Π shape values of its dtype.
type tensorEntry struct {
	name       string
	h          tensorHeader
	begin, end uint64
}

// readSafetensorsHeader parses the JSON header hdr (which starts with '{') of a file whose
// byte buffer has bufLen bytes: it stores the "__metadata__" object in *meta and returns
// the tensors in header order, each checked by checkTensor. Keys must be unique, and
// nothing but spaces may follow the object.
func readSafetensorsHeader(hdr []byte, bufLen uint64, meta *map[string]string) ([]tensorEntry, error) {
	var entries []tensorEntry
	seen := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("%w: header JSON: %v", ErrSafetensors, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: header JSON: %v", ErrSafetensors, err)
		}
		key, _ := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, fmt.Errorf("%w: key %q appears twice in the header", ErrSafetensors, key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: header JSON at key %q: %v", ErrSafetensors, key, err)
		}
		if key == "__metadata__" {
			if err := json.Unmarshal(raw, meta); err != nil {
				return nil, fmt.Errorf("%w: __metadata__ must map strings to strings: %v", ErrSafetensors, err)
			}
			continue
		}
		e, err := checkTensor(key, raw, bufLen)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("%w: header JSON: %v", ErrSafetensors, err)
	}
	if rest := bytes.TrimRight(hdr[dec.InputOffset():], " "); len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes of trailing data after the header JSON", ErrSafetensors, len(rest))
	}
	return entries, nil
}

// checkTensor decodes the header entry raw of tensor key (no unknown fields) and checks
// it against a buffer of bufLen bytes: a supported dtype, data_offsets inside the buffer,
// no negative dimension, and end−begin = Π shape · sizeof(dtype), the product bounded by
// the buffer before it can overflow.
func checkTensor(key string, raw json.RawMessage, bufLen uint64) (tensorEntry, error) {
	var th tensorHeader
	td := json.NewDecoder(bytes.NewReader(raw))
	td.DisallowUnknownFields()
	if err := td.Decode(&th); err != nil {
		return tensorEntry{}, fmt.Errorf("%w: tensor %q: %v", ErrSafetensors, key, err)
	}
	size, ok := dtypeSize[th.Dtype]
	if !ok {
		return tensorEntry{}, fmt.Errorf("%w: tensor %q: unsupported dtype %q (want F64, F32, F16 or BF16)", ErrSafetensors, key, th.Dtype)
	}
	if len(th.DataOffsets) != 2 || th.DataOffsets[0] > th.DataOffsets[1] || th.DataOffsets[1] > bufLen {
		return tensorEntry{}, fmt.Errorf("%w: tensor %q: data_offsets %v out of range for a %d-byte buffer", ErrSafetensors, key, th.DataOffsets, bufLen)
	}
	// Π shape, bounded by the buffer before it can overflow: numel·size ≤ len(buf).
	numel := uint64(1)
	limit := bufLen / uint64(size)
	for _, d := range th.Shape {
		if d < 0 {
			return tensorEntry{}, fmt.Errorf("%w: tensor %q: negative dimension in shape %v", ErrSafetensors, key, th.Shape)
		}
		if d == 0 {
			numel = 0
			break
		}
		if uint64(d) > limit/numel {
			return tensorEntry{}, fmt.Errorf("%w: tensor %q: shape %v needs more than the %d-byte buffer", ErrSafetensors, key, th.Shape, bufLen)
		}
		numel *= uint64(d)
	}
	begin, end := th.DataOffsets[0], th.DataOffsets[1]
	if end-begin != numel*uint64(size) {
		return tensorEntry{}, fmt.Errorf("%w: tensor %q: %s shape %v needs %d bytes, data_offsets %v hold %d", ErrSafetensors, key, th.Dtype, th.Shape, numel*uint64(size), th.DataOffsets, end-begin)
	}
	return tensorEntry{name: key, h: th, begin: begin, end: end}, nil
}

// checkTiling sorts entries by their data offsets (stably) and checks that they tile a
// buffer of bufLen bytes exactly: no overlap, no hole, nothing after the last tensor.
func checkTiling(entries []tensorEntry, bufLen uint64) error {
	slices.SortStableFunc(entries, func(a, b tensorEntry) int {
		if a.begin != b.begin {
			return cmpU(a.begin, b.begin)
		}
		return cmpU(a.end, b.end)
	})
	var pos uint64
	prev := "start of buffer"
	for _, e := range entries {
		if e.begin < pos {
			return fmt.Errorf("%w: tensor %q (bytes %d–%d) overlaps %s (ending at %d)", ErrSafetensors, e.name, e.begin, e.end, prev, pos)
		}
		if e.begin > pos {
			return fmt.Errorf("%w: hole of %d bytes before tensor %q (after %s)", ErrSafetensors, e.begin-pos, e.name, prev)
		}
		pos = e.end
		prev = fmt.Sprintf("%q", e.name)
	}
	if pos != bufLen {
		return fmt.Errorf("%w: %d unused bytes after the last tensor (%s)", ErrSafetensors, bufLen-pos, prev)
	}
	return nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decodeFloats converts little-endian values of dtype to float64 (exactly: every F32, F16
// and BF16 value is representable).
func decodeFloats(b []byte, dtype string) []float64 {
	size := dtypeSize[dtype]
	v := make([]float64, len(b)/size)
	for i := range v {
		c := b[i*size : (i+1)*size]
		switch dtype {
		case "F64":
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(c))
		case "F32":
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(c)))
		case "BF16":
			v[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(c)) << 16))
		case "F16":
			v[i] = f16ToFloat64(binary.LittleEndian.Uint16(c))
		}
	}
	return v
}

// f16ToFloat64 decodes an IEEE 754 binary16 value.
func f16ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * frac * 0x1p-24 // subnormal (and zero)
	case 0x1f:
		if frac == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + frac/1024) * math.Ldexp(1, exp-15)
}

// WriteSafetensors writes tensors to w in the safetensors format, each stored with its
// Dtype ("F64" or "F32"; F32 rounds to nearest), in the order given, with the header padded
// by spaces to a multiple of 8 bytes so the buffer is 8-aligned. metadata may be nil.
// Tensor names must be unique and not "__metadata__", and len(Data) must equal Π Shape.
func WriteSafetensors(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr := make(map[string]any, len(tensors)+1)
	if metadata != nil {
		hdr["__metadata__"] = metadata
	}
	var off uint64
	for _, t := range tensors {
		if t.Name == "__metadata__" {
			return fmt.Errorf("%w: tensor name %q is reserved", ErrSafetensors, t.Name)
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("%w: tensor name %q given twice", ErrSafetensors, t.Name)
		}
		if t.Dtype != "F64" && t.Dtype != "F32" {
			return fmt.Errorf("%w: tensor %q: cannot write dtype %q (want F64 or F32)", ErrSafetensors, t.Name, t.Dtype)
		}
		numel := 1
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("%w: tensor %q: negative dimension in shape %v", ErrSafetensors, t.Name, t.Shape)
			}
			numel *= d
		}
		if numel != len(t.Data) {
			return fmt.Errorf("%w: tensor %q: shape %v has %d elements, data has %d", ErrSafetensors, t.Name, t.Shape, numel, len(t.Data))
		}
		n := uint64(numel * dtypeSize[t.Dtype])
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.Dtype, "shape": shape, "data_offsets": []uint64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("entk: encoding safetensors header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	var chunk []byte
	for _, t := range tensors {
		size := dtypeSize[t.Dtype]
		chunk = slices.Grow(chunk[:0], len(t.Data)*size)[:len(t.Data)*size]
		for i, v := range t.Data {
			if size == 8 {
				binary.LittleEndian.PutUint64(chunk[8*i:], math.Float64bits(v))
			} else {
				binary.LittleEndian.PutUint32(chunk[4*i:], math.Float32bits(float32(v)))
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// BackboneTensors returns b's parameters as state_dict tensors (keys and shapes of
// Arch.Tensors) with the given storage dtype, ready for WriteSafetensors. Data aliases
// b.Params() and must not be modified.
func BackboneTensors(b Backbone, dtype string) ([]Tensor, error) {
	a, err := ParseArch(b.Arch())
	if err != nil {
		return nil, err
	}
	p := b.Params()
	var ts []Tensor
	for _, pt := range a.Tensors() {
		ts = append(ts, Tensor{Name: pt.Name, Dtype: dtype, Shape: pt.Shape, Data: p[pt.Offset : pt.Offset+pt.Size]})
	}
	return ts, nil
}

// LoadBackbone builds the architecture spec and takes every parameter from the safetensors
// file at path, whose keys and shapes must be exactly those of the PyTorch state_dict of
// the module documented in arch.go (see Arch.Tensors). Any dtype the reader supports is
// widened to float64. A missing key, an extra key, a shape mismatch or a non-finite value is
// an error naming the key (and the shapes got vs want).
func LoadBackbone(spec, path string) (Backbone, error) {
	a, err := ParseArch(spec)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("entk: loading backbone: %w", err)
	}
	b, err := loadBytes(a, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// LoadBackboneBytes is LoadBackbone for a safetensors file already in memory (such as
// the shipped weights embedded in the binary); data is not retained.
func LoadBackboneBytes(spec string, data []byte) (Backbone, error) {
	a, err := ParseArch(spec)
	if err != nil {
		return nil, err
	}
	return loadBytes(a, data)
}

func loadBytes(a Arch, data []byte) (Backbone, error) {
	st, err := ReadSafetensors(data)
	if err != nil {
		return nil, err
	}
	params, err := paramsFromTensors(a, st.Tensors)
	if err != nil {
		return nil, err
	}
	return newBackbone(a, params), nil
}

// paramsFromTensors assembles the flat parameter vector of a from named tensors.
func paramsFromTensors(a Arch, tensors []Tensor) ([]float64, error) {
	byName := make(map[string]*Tensor, len(tensors))
	for i := range tensors {
		byName[tensors[i].Name] = &tensors[i]
	}
	params := make([]float64, a.NumParams())
	var errs []error
	want := map[string]bool{}
	for _, pt := range a.Tensors() {
		want[pt.Name] = true
		t, ok := byName[pt.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: key %q (want shape %v) for %q", ErrMissingTensor, pt.Name, pt.Shape, a.Spec))
			continue
		}
		if !slices.Equal(t.Shape, pt.Shape) {
			errs = append(errs, fmt.Errorf("%w: key %q: got shape %v, want %v for %q", ErrTensorShape, pt.Name, t.Shape, pt.Shape, a.Spec))
			continue
		}
		for i, v := range t.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("%w: key %q element %d is %v", ErrNotFinite, pt.Name, i, v))
				break
			}
		}
		copy(params[pt.Offset:pt.Offset+pt.Size], t.Data)
	}
	var extra []string
	for _, t := range tensors {
		if !want[t.Name] {
			extra = append(extra, fmt.Sprintf("%q %v", t.Name, t.Shape))
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		errs = append(errs, fmt.Errorf("%w for %q: %s", ErrUnexpectedTensor, a.Spec, strings.Join(extra, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return params, nil
}
