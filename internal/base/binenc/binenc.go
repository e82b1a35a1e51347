package binenc

import (
	"encoding/binary"
	"math"
	"strconv"
)

// AppendU8 appends v.
func AppendU8(b []byte, v uint8) []byte { return append(b, v) }

// AppendU32 appends v, little-endian.
func AppendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// AppendU64 appends v, little-endian.
func AppendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// AppendI64 appends v, little-endian two's complement.
func AppendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// AppendF64 appends the IEEE-754 bits of v, little-endian.
func AppendF64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendBool appends 1 for true, 0 for false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendBytes appends the u32 length of p, then p.
func AppendBytes(b, p []byte) []byte {
	return append(AppendU32(b, u32len(len(p))), p...)
}

// AppendString appends the u32 length of s, then its bytes.
func AppendString(b []byte, s string) []byte {
	return append(AppendU32(b, u32len(len(s))), s...)
}

// AppendFloats appends the u32 count of x, then each value's bits.
func AppendFloats(b []byte, x []float64) []byte {
	return appendF64s(AppendU32(b, u32len(len(x))), x)
}

// AppendU64s appends the u32 count of x, then each value.
func AppendU64s(b []byte, x []uint64) []byte {
	b = AppendU32(b, u32len(len(x)))
	for _, v := range x {
		b = AppendU64(b, v)
	}
	return b
}

// AppendStrings appends the u32 count of s, then each string as bytes.
func AppendStrings(b []byte, s []string) []byte {
	b = AppendU32(b, u32len(len(s)))
	for _, v := range s {
		b = AppendString(b, v)
	}
	return b
}

// AppendMatrix appends the rows×cols row-major matrix data: u32 rows, u32 cols, then
// the values. It panics unless len(data) == rows·cols.
func AppendMatrix(b []byte, rows, cols int, data []float64) []byte {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic("binenc: AppendMatrix: " + strconv.Itoa(len(data)) + " values for " + strconv.Itoa(rows) + "×" + strconv.Itoa(cols))
	}
	return appendF64s(AppendU32(AppendU32(b, u32len(rows)), u32len(cols)), data)
}

func appendF64s(b []byte, x []float64) []byte {
	for _, v := range x {
		b = AppendF64(b, v)
	}
	return b
}

// u32len converts a length or count for its u32 prefix, panicking when it does not fit.
func u32len(n int) uint32 {
	if n < 0 || uint64(n) > math.MaxUint32 {
		panic("binenc: length " + strconv.Itoa(n) + " does not fit a u32")
	}
	return uint32(n)
}
