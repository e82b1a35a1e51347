// Package binenc is cairn's one binary codec: append functions and a bounds-checked
// Reader for the little-endian fields every stored value is built from.
//
// storage encodes its records with it (storage/FORMAT.md), and coreset the pool state
// and per-point records that storage keeps as opaque bytes, so the file has one
// definition of a u32, a float or a length prefix. The package knows fields, not
// records: which fields a record has, in which order, is the business of the type that
// owns the record.
//
// # Encodings
//
//	u8        1 byte
//	u32       4 bytes, little-endian
//	u64       8 bytes, little-endian
//	i64       8 bytes, little-endian two's complement (an int is written as an i64)
//	f64       the IEEE-754 bit pattern as a u64: NaN payloads and -0 survive bit for bit
//	bool      a u8, 0 (false) or 1 (true); a Reader rejects any other byte
//	bytes     u32 length n, then the n bytes; a string is its UTF-8 bytes, unchecked
//	floats    u32 count n, then n × f64
//	u64s      u32 count n, then n × u64
//	strings   u32 count n, then n × bytes
//	matrix    u32 rows r, u32 cols c, then r·c × f64, row-major
//
// There is no padding, alignment, tag or terminator: a field's bytes follow the
// previous field's. Lengths and counts that do not fit a u32 cannot be encoded; the
// append functions panic on them (a programmer error: stored records are far smaller).
//
// # Reader contract
//
// A Reader decodes one byte slice from the front. Each read names the field it reads
// (what), and the first failure sticks: a field longer than the bytes left, a count
// whose items cannot fit in the bytes left, a bool other than 0 or 1, an i64 that does
// not fit an int, or a failure the caller reports with Fail. After it every read
// returns the zero value and consumes nothing, so a decoder reads all its fields and
// checks Err, or End (which also rejects trailing bytes), once. The error is an *Error
// with the field's name and byte offset.
//
// Every length and count is checked against the bytes left before anything is
// allocated, so hostile input cannot make a Reader allocate much more than its own size
// (Strings: one string header per 4 input bytes at most). Bytes, String, Floats, U64s,
// Strings and Matrix return fresh memory owned by the caller, nil when empty; Fixed and
// Rest return subslices that alias the input. A Reader never modifies its input.
//
// The append functions append to b and return the extended slice, as append does; they
// never modify their other arguments. They are safe for concurrent use; a Reader is not.
package binenc
