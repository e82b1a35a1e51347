package onnx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// dtype is what the compiler tracks of an element type: every value is held as float64
// (floats widened, integers and booleans as exact integers), and integers only differ in
// that they carry no gradient and divide with truncation.
type dtype uint8

const (
	dtFloat dtype = iota
	dtInt         // any integer type, and bool (0 or 1)
)

func (d dtype) String() string {
	if d == dtFloat {
		return "float"
	}
	return "int"
}

// dtypeOf maps an ONNX element type to a dtype, and reports false for types this package
// does not compute with (strings, complex numbers, 8-bit floats).
func dtypeOf(t int32) (dtype, bool) {
	switch onnxpb.TensorProto_DataType(t) {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return dtFloat, true
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16,
		onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32, onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64,
		onnxpb.TensorProto_BOOL:
		return dtInt, true
	}
	return 0, false
}

// elemSize is the byte size of one element in raw_data (0 for unsupported types).
func elemSize(t int32) int {
	switch onnxpb.TensorProto_DataType(t) {
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL:
		return 1
	case onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return 2
	case onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32, onnxpb.TensorProto_FLOAT:
		return 4
	case onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64, onnxpb.TensorProto_DOUBLE:
		return 8
	}
	return 0
}

// tensor is a constant: a shape and its row-major elements as float64.
type tensor struct {
	dt    dtype
	shape []int
	data  []float64
}

// numel is the product of shape (1 for a scalar).
func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// checkedNumel is numel for untrusted dims: an error unless every dim is ≥ 0 and the
// product stays within limit.
func checkedNumel(dims []int64, limit int) (int, error) {
	n := 1
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in %v", d, dims)
		}
		if d > 0 && n > limit/int(min(d, int64(limit)+1)) {
			return 0, fmt.Errorf("shape %v has more than %d elements", dims, limit)
		}
		n *= int(d)
	}
	if n > limit {
		return 0, fmt.Errorf("shape %v has more than %d elements", dims, limit)
	}
	return n, nil
}

// decodeTensor reads a TensorProto (raw, typed or external data) into a tensor. dir is
// where external data files lie ("" when there is none to read from); limit bounds the
// element count.
func decodeTensor(t *onnxpb.TensorProto, dir string, limit int) (*tensor, error) {
	name := t.GetName()
	if t.Segment != nil {
		return nil, fmt.Errorf("%w: tensor %q: segmented tensors are not supported", ErrUnsupported, name)
	}
	dt, ok := dtypeOf(t.GetDataType())
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q: data type %v", ErrUnsupported, name, onnxpb.TensorProto_DataType(t.GetDataType()))
	}
	n, err := checkedNumel(t.GetDims(), limit)
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrModel, name, err)
	}
	shape := make([]int, len(t.GetDims()))
	for i, d := range t.GetDims() {
		shape[i] = int(d)
	}
	raw := t.GetRawData()
	if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		if raw, err = readExternal(t, dir, n*elemSize(t.GetDataType())); err != nil {
			return nil, err
		}
	}
	data := make([]float64, n)
	if raw != nil || t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		err = decodeRaw(data, raw, t.GetDataType())
	} else {
		err = decodeTyped(data, t)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q (%v, shape %v): %v", ErrModel, name,
			onnxpb.TensorProto_DataType(t.GetDataType()), shape, err)
	}
	return &tensor{dt: dt, shape: shape, data: data}, nil
}

// decodeRaw decodes little-endian raw_data of ONNX element type typ into dst.
func decodeRaw(dst []float64, raw []byte, typ int32) error {
	es := elemSize(typ)
	if len(raw) != len(dst)*es {
		return fmt.Errorf("raw data holds %d bytes, want %d elements × %d bytes", len(raw), len(dst), es)
	}
	le := binary.LittleEndian
	for i := range dst {
		b := raw[i*es : (i+1)*es]
		var v float64
		switch onnxpb.TensorProto_DataType(typ) {
		case onnxpb.TensorProto_FLOAT:
			v = float64(math.Float32frombits(le.Uint32(b)))
		case onnxpb.TensorProto_DOUBLE:
			v = math.Float64frombits(le.Uint64(b))
		case onnxpb.TensorProto_FLOAT16:
			v = f16(le.Uint16(b))
		case onnxpb.TensorProto_BFLOAT16:
			v = float64(math.Float32frombits(uint32(le.Uint16(b)) << 16))
		case onnxpb.TensorProto_INT8:
			v = float64(int8(b[0]))
		case onnxpb.TensorProto_UINT8:
			v = float64(b[0])
		case onnxpb.TensorProto_BOOL:
			v = float64(min(b[0], 1))
		case onnxpb.TensorProto_INT16:
			v = float64(int16(le.Uint16(b)))
		case onnxpb.TensorProto_UINT16:
			v = float64(le.Uint16(b))
		case onnxpb.TensorProto_INT32:
			v = float64(int32(le.Uint32(b)))
		case onnxpb.TensorProto_UINT32:
			v = float64(le.Uint32(b))
		case onnxpb.TensorProto_INT64:
			v = float64(int64(le.Uint64(b)))
		case onnxpb.TensorProto_UINT64:
			v = float64(le.Uint64(b))
		}
		dst[i] = v
	}
	return nil
}

// decodeTyped decodes the typed repeated fields of t (float_data, int32_data, …) into dst.
func decodeTyped(dst []float64, t *onnxpb.TensorProto) error {
	typ := onnxpb.TensorProto_DataType(t.GetDataType())
	var got int
	switch typ {
	case onnxpb.TensorProto_FLOAT:
		got = len(t.GetFloatData())
		if got == len(dst) {
			for i, v := range t.GetFloatData() {
				dst[i] = float64(v)
			}
		}
	case onnxpb.TensorProto_DOUBLE:
		got = len(t.GetDoubleData())
		if got == len(dst) {
			copy(dst, t.GetDoubleData())
		}
	case onnxpb.TensorProto_INT64:
		got = len(t.GetInt64Data())
		if got == len(dst) {
			for i, v := range t.GetInt64Data() {
				dst[i] = float64(v)
			}
		}
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		got = len(t.GetUint64Data())
		if got == len(dst) {
			for i, v := range t.GetUint64Data() {
				dst[i] = float64(v)
			}
		}
	default: // int32_data carries int8…int32, uint8, uint16, bool, float16 and bfloat16
		got = len(t.GetInt32Data())
		if got == len(dst) {
			for i, v := range t.GetInt32Data() {
				switch typ {
				case onnxpb.TensorProto_FLOAT16:
					dst[i] = f16(uint16(v))
				case onnxpb.TensorProto_BFLOAT16:
					dst[i] = float64(math.Float32frombits(uint32(uint16(v)) << 16))
				case onnxpb.TensorProto_BOOL:
					dst[i] = float64(min(uint32(v), 1))
				default:
					dst[i] = float64(v)
				}
			}
		}
	}
	if got != len(dst) {
		return fmt.Errorf("%d typed values, want %d", got, len(dst))
	}
	return nil
}

// f16 widens an IEEE 754 half-precision value.
func f16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// readExternal reads the want bytes of an external tensor from the file its location
// names, relative to dir. The location must stay inside dir (no absolute path, no "..").
func readExternal(t *onnxpb.TensorProto, dir string, want int) ([]byte, error) {
	name := t.GetName()
	var loc string
	offset, length := int64(0), int64(-1)
	for _, kv := range t.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || offset < 0 {
			return nil, fmt.Errorf("%w: tensor %q: external_data %s = %q", ErrExternalData, name, kv.GetKey(), kv.GetValue())
		}
	}
	if loc == "" {
		return nil, fmt.Errorf("%w: tensor %q: external data without a location", ErrExternalData, name)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: tensor %q is stored in %q, but no directory was given to read it from (Options.Dir)", ErrExternalData, name, loc)
	}
	clean := filepath.Clean(filepath.FromSlash(loc))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || strings.ContainsRune(loc, 0) {
		return nil, fmt.Errorf("%w: tensor %q: location %q leaves the model's directory", ErrExternalData, name, loc)
	}
	if length >= 0 && length != int64(want) {
		return nil, fmt.Errorf("%w: tensor %q: external length %d, want %d bytes", ErrExternalData, name, length, want)
	}
	f, err := os.Open(filepath.Join(dir, clean))
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrExternalData, name, err)
	}
	defer f.Close()
	buf := make([]byte, want)
	if _, err := f.ReadAt(buf, offset); err != nil && !(err == io.EOF && want == 0) {
		return nil, fmt.Errorf("%w: tensor %q: reading %d bytes at offset %d of %q: %v", ErrExternalData, name, want, offset, loc, err)
	}
	return buf, nil
}
