package entk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawSafetensors assembles a file from a literal header and buffer, so tests can build
// malformed files the writer refuses to produce.
func rawSafetensors(header string, buf []byte) []byte {
	var out bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	out.Write(n[:])
	out.WriteString(header)
	out.Write(buf)
	return out.Bytes()
}

func TestSafetensorsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, dtype := range []string{"F64", "F32"} {
		ts := []Tensor{
			{Name: "a.weight", Dtype: dtype, Shape: []int{3, 2}, Data: bbRandVec(r, 6)},
			{Name: "a.bias", Dtype: dtype, Shape: []int{3}, Data: bbRandVec(r, 3)},
			{Name: "scalar", Dtype: dtype, Shape: []int{}, Data: []float64{math.Pi}},
			{Name: "empty", Dtype: dtype, Shape: []int{0, 4}, Data: []float64{}},
		}
		meta := map[string]string{"format": "pt", "note": "round trip"}
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, ts, meta); err != nil {
			t.Fatalf("%s: write: %v", dtype, err)
		}
		if hl := binary.LittleEndian.Uint64(buf.Bytes()); hl%8 != 0 {
			t.Errorf("%s: header length %d not 8-aligned", dtype, hl)
		}
		got, err := ReadSafetensors(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: read: %v", dtype, err)
		}
		if got.Metadata["format"] != "pt" || got.Metadata["note"] != "round trip" || len(got.Metadata) != 2 {
			t.Errorf("%s: metadata = %v, want %v", dtype, got.Metadata, meta)
		}
		if len(got.Tensors) != len(ts) {
			t.Fatalf("%s: %d tensors, want %d", dtype, len(got.Tensors), len(ts))
		}
		for i, w := range ts {
			g := got.Tensors[i] // written in order, so offsets keep the order
			if g.Name != w.Name || g.Dtype != dtype || len(g.Shape) != len(w.Shape) || len(g.Data) != len(w.Data) {
				t.Fatalf("%s: tensor %d = %q %s %v (%d values), want %q %s %v (%d)", dtype, i, g.Name, g.Dtype, g.Shape, len(g.Data), w.Name, dtype, w.Shape, len(w.Data))
			}
			for j := range w.Data {
				want := w.Data[j]
				if dtype == "F32" {
					want = float64(float32(want))
				}
				if g.Data[j] != want {
					t.Errorf("%s: %s[%d] = %v, want %v", dtype, w.Name, j, g.Data[j], want)
				}
			}
		}
	}
}

// TestLoadBackbone writes each architecture's parameters with the state_dict keys and
// loads them back: F64 reproduces the network exactly, F32 reproduces float32-rounded
// parameters exactly.
func TestLoadBackbone(t *testing.T) {
	dir := t.TempDir()
	for _, spec := range []string{"mlp:5-7-3", "resmlp:4-6x2-3", "convnet:2x9x9-3-5-4"} {
		b, _ := NewBackbone(spec, 13)
		for _, dtype := range []string{"F64", "F32"} {
			ts, err := BackboneTensors(b, dtype)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, strings.NewReplacer(":", "_").Replace(spec)+dtype+".safetensors")
			var buf bytes.Buffer
			if err := WriteSafetensors(&buf, ts, nil); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			lb, err := LoadBackbone(spec, path)
			if err != nil {
				t.Fatalf("LoadBackbone(%q, %s): %v", spec, dtype, err)
			}
			for i, v := range b.Params() {
				want := v
				if dtype == "F32" {
					want = float64(float32(v))
				}
				if got := lb.Params()[i]; got != want {
					t.Fatalf("%s %s: param %d = %v, want %v", spec, dtype, i, got, want)
				}
			}
		}
	}
	if _, err := LoadBackbone("mlp:5-7-3", filepath.Join(dir, "nope")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
}

// TestLoadBackboneRejects checks the errors that name a key and shapes.
func TestLoadBackboneRejects(t *testing.T) {
	spec := "mlp:2-3-1" // 0.weight [3,2], 0.bias [3], 2.weight [1,3], 2.bias [1]
	f64 := func(n int) []float64 { return make([]float64, n) }
	good := []Tensor{
		{Name: "0.weight", Dtype: "F64", Shape: []int{3, 2}, Data: f64(6)},
		{Name: "0.bias", Dtype: "F64", Shape: []int{3}, Data: f64(3)},
		{Name: "2.weight", Dtype: "F64", Shape: []int{1, 3}, Data: f64(3)},
		{Name: "2.bias", Dtype: "F64", Shape: []int{1}, Data: f64(1)},
	}
	with := func(edit func([]Tensor) []Tensor) []Tensor {
		c := append([]Tensor(nil), good...)
		return edit(c)
	}
	cases := []struct {
		name    string
		tensors []Tensor
		is      error
		msg     string
	}{
		{"missing", with(func(c []Tensor) []Tensor { return c[:3] }), ErrMissingTensor, `"2.bias" (want shape [1])`},
		{"unexpected", with(func(c []Tensor) []Tensor {
			return append(c, Tensor{Name: "4.weight", Dtype: "F32", Shape: []int{2}, Data: f64(2)})
		}), ErrUnexpectedTensor, `"4.weight" [2]`},
		{"transposed", with(func(c []Tensor) []Tensor {
			c[0] = Tensor{Name: "0.weight", Dtype: "F64", Shape: []int{2, 3}, Data: f64(6)}
			return c
		}), ErrTensorShape, `"0.weight": got shape [2 3], want [3 2]`},
		{"nan", with(func(c []Tensor) []Tensor {
			c[1] = Tensor{Name: "0.bias", Dtype: "F64", Shape: []int{3}, Data: []float64{0, math.NaN(), 0}}
			return c
		}), ErrNotFinite, `"0.bias" element 1`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, c.tensors, nil); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, c.name)
		os.WriteFile(path, buf.Bytes(), 0o600)
		_, err := LoadBackbone(spec, path)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %v containing %s", c.name, err, c.is, c.msg)
		}
	}
}

func TestReadSafetensorsRejects(t *testing.T) {
	f8 := make([]byte, 8)
	cases := []struct {
		name string
		file []byte
		msg  string
	}{
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte"},
		{"header too long", append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "{}"...), "exceeds"},
		{"header past eof", rawSafetensors("{}", nil)[:9], "exceeds"},
		{"not object", rawSafetensors(`[1]`, nil), "does not start with '{'"},
		{"bad json", rawSafetensors(`{"a":`, nil), "header JSON"},
		{"trailing", rawSafetensors(`{} x`, nil), "trailing"},
		{"dup key", rawSafetensors(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, f8), `"a" appears twice`},
		{"bad dtype", rawSafetensors(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, f8), `"a": unsupported dtype "I64"`},
		{"unknown field", rawSafetensors(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8],"x":1}}`, f8), `tensor "a"`},
		{"offsets past end", rawSafetensors(`{"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}`, f8), `"a": data_offsets [0 16] out of range for a 8-byte buffer`},
		{"offsets reversed", rawSafetensors(`{"a":{"dtype":"F64","shape":[0],"data_offsets":[8,0]}}`, f8), "out of range"},
		{"byte count", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}`, f8), `"a": F32 shape [1] needs 4 bytes, data_offsets [0 8] hold 8`},
		{"negative dim", rawSafetensors(`{"a":{"dtype":"F64","shape":[-1],"data_offsets":[0,8]}}`, f8), "negative dimension"},
		{"huge shape", rawSafetensors(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, f8), "needs more than the 8-byte buffer"},
		{"overlap", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f8), `"b" (bytes 4–8) overlaps "a"`},
		{"hole", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f8), `hole of 4 bytes before tensor "a"`},
		{"unused tail", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f8), "4 unused bytes"},
		{"bad metadata", rawSafetensors(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
	}
	for _, c := range cases {
		_, err := ReadSafetensors(c.file)
		if !errors.Is(err, ErrSafetensors) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want ErrSafetensors containing %q", c.name, err, c.msg)
		}
	}
}

// TestReadSafetensorsHalf checks the F16 and BF16 decoders on values with known bit
// patterns (IEEE 754 binary16 and bfloat16 tables).
func TestReadSafetensorsHalf(t *testing.T) {
	f16 := []struct {
		bits uint16
		want float64
	}{{0x3c00, 1}, {0xc000, -2}, {0x0001, 0x1p-24}, {0x7bff, 65504}, {0x3555, 0.333251953125}, {0x0000, 0}}
	var buf []byte
	for _, c := range f16 {
		buf = binary.LittleEndian.AppendUint16(buf, c.bits)
	}
	bf := []struct {
		bits uint16
		want float64
	}{{0x3f80, 1}, {0xc049, -3.140625}}
	for _, c := range bf {
		buf = binary.LittleEndian.AppendUint16(buf, c.bits)
	}
	hdr := `{"h":{"dtype":"F16","shape":[6],"data_offsets":[0,12]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}}`
	st, err := ReadSafetensors(rawSafetensors(hdr, buf))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range f16 {
		if got := st.Tensors[0].Data[i]; got != c.want {
			t.Errorf("F16 %#04x = %v, want %v", c.bits, got, c.want)
		}
	}
	for i, c := range bf {
		if got := st.Tensors[1].Data[i]; got != c.want {
			t.Errorf("BF16 %#04x = %v, want %v", c.bits, got, c.want)
		}
	}
	if got := f16ToFloat64(0x7c00); !math.IsInf(got, 1) {
		t.Errorf("F16 0x7c00 = %v, want +Inf", got)
	}
	if got := f16ToFloat64(0x7e00); !math.IsNaN(got) {
		t.Errorf("F16 0x7e00 = %v, want NaN", got)
	}
}

// FuzzReadSafetensors: the reader must never panic, and whatever it accepts must be
// self-consistent (data length = Π shape, decoded values no more than the file could
// hold) and survive a write/read round trip for F32/F64 content.
func FuzzReadSafetensors(f *testing.F) {
	var good bytes.Buffer
	WriteSafetensors(&good, []Tensor{
		{Name: "w", Dtype: "F32", Shape: []int{2, 2}, Data: []float64{1, 2, 3, 4}},
		{Name: "b", Dtype: "F64", Shape: []int{1}, Data: []float64{5}},
	}, map[string]string{"k": "v"})
	f.Add(good.Bytes())
	f.Add(rawSafetensors(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 0x3c}))
	f.Add(rawSafetensors(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{}`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ReadSafetensors(data)
		if err != nil {
			if !errors.Is(err, ErrSafetensors) {
				t.Fatalf("error %v does not wrap ErrSafetensors", err)
			}
			return
		}
		total := 0
		for _, ts := range st.Tensors {
			n := 1
			for _, d := range ts.Shape {
				n *= d
			}
			if n != len(ts.Data) {
				t.Fatalf("tensor %q: shape %v but %d values", ts.Name, ts.Shape, len(ts.Data))
			}
			total += len(ts.Data) * dtypeSize[ts.Dtype]
		}
		if total > len(data) {
			t.Fatalf("decoded %d bytes of tensors from a %d-byte file", total, len(data))
		}
	})
}
