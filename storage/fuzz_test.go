package storage

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// Each fuzz target checks two things on arbitrary (key, value) bytes: the
// decoder returns an error instead of panicking or over-allocating, and any
// value it accepts is canonical, i.e. encoding the decoded record gives back the
// same bytes. The second property makes an accepted-but-misread value fail.
// A random value almost never passes the CRC, so each target also decodes the
// input as a payload sealed in a valid envelope, which exercises the parsers.

// sealed wraps payload in a valid envelope for key.
func sealed(key, payload []byte) []byte {
	return seal(key, append([]byte{valueVersion}, payload...))
}

// both runs check on v and on v sealed as a payload.
func both(key, v []byte, check func(v []byte)) {
	check(v)
	check(sealed(key, v))
}

func addSeeds(f *testing.F, key []byte, valid []byte) {
	f.Add(key, valid)
	f.Add(key, valid[:len(valid)/2])
	f.Add(key, []byte{})
	f.Add(key, []byte{valueVersion, 0, 0, 0, 0})
	f.Add([]byte("other"), valid)
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0xff
	f.Add(key, flipped)
	// A huge length prefix behind a valid checksum.
	huge := seal(key, []byte{valueVersion, 0, 0xff, 0xff, 0xff, 0x7f})
	f.Add(key, huge)
}

func FuzzDecodePoint(f *testing.F) {
	p := samplePoint("p1", 3)
	addSeeds(f, []byte(p.ID), encodePoint([]byte(p.ID), &p, nil))
	addSeeds(f, []byte(p.ID), encodePoint([]byte(p.ID), &p, &slotRef{id: 7, n: 24, crc: 0xdeadbeef}))
	q := Point{ID: "q", X: []float64{math.NaN(), math.Copysign(0, -1)}, Version: -1}
	addSeeds(f, []byte("q"), encodePoint([]byte("q"), &q, nil))
	// A version that is negative behind a valid checksum.
	neg := []byte{valueVersion, pointHasVersion}
	neg = binenc.AppendI64(neg, -2)
	neg = binenc.AppendFloats(neg, nil)
	neg = binenc.AppendFloats(neg, nil)
	f.Add([]byte("q"), seal([]byte("q"), neg))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			p, ref, why := decodePoint(key, v)
			if why != "" {
				return
			}
			if got := encodePoint(key, &p, ref); !bytes.Equal(got, v) {
				t.Fatalf("accepted point is not canonical:\n in  %x\n out %x", v, got)
			}
			if 8*(len(p.X)+len(p.Cert)) > len(v) {
				t.Fatalf("decoded %d floats from %d bytes", len(p.X)+len(p.Cert), len(v))
			}
		})
	})
}

func FuzzDecodeModel(f *testing.F) {
	m := sampleModel(5)
	k := u64Key(5)
	addSeeds(f, k, encodeModel(k, &m))
	empty := Model{Version: 1}
	addSeeds(f, u64Key(1), encodeModel(u64Key(1), &empty))
	// Matrix with rows*cols overflowing 32 bits behind a valid checksum.
	b := []byte{valueVersion, 0, 0, 0, 0}
	b = binenc.AppendU32(b, 1<<31)
	b = binenc.AppendU32(b, 1<<31)
	f.Add(k, seal(k, b))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			m, why := decodeModel(key, v)
			if why != "" {
				return
			}
			if got := encodeModel(key, &m); !bytes.Equal(got, v) {
				t.Fatalf("accepted model is not canonical:\n in  %x\n out %x", v, got)
			}
			for _, x := range []Matrix{m.A, m.A0, m.B} {
				if err := validMatrix("x", x); err != nil {
					t.Fatalf("decoded malformed matrix: %v", err)
				}
			}
		})
	})
}

func FuzzDecodeFitStats(f *testing.F) {
	fs := FitStats{Version: 2, Seeds: []uint64{1, 2}, Mean: []float64{1}, Var: []float64{2}, Meta: []byte("x")}
	k := u64Key(2)
	addSeeds(f, k, encodeFitStats(k, &fs))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			fs, why := decodeFitStats(key, v)
			if why != "" {
				return
			}
			if got := encodeFitStats(key, &fs); !bytes.Equal(got, v) {
				t.Fatalf("accepted fit stats not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodePoolState(f *testing.F) {
	s := PoolState{Schema: 1, Data: []byte("blob")}
	addSeeds(f, poolStateKey, encodePoolState(poolStateKey, &s))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			s, why := decodePoolState(key, v)
			if why != "" {
				return
			}
			if got := encodePoolState(key, &s); !bytes.Equal(got, v) {
				t.Fatalf("accepted pool state not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodeOffset(f *testing.F) {
	k := offsetKey("cairn.train", 3)
	addSeeds(f, k, encodeOffset(k, 77))
	f.Add([]byte("\x00\x00\x00\x00\x00"), encodeOffset([]byte("\x00\x00\x00\x00\x00"), 1))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			o, why := decodeOffset(key, v)
			if why != "" {
				return
			}
			if !bytes.Equal(offsetKey(o.Topic, o.Partition), key) {
				t.Fatalf("offset key %x decoded to %q/%d", key, o.Topic, o.Partition)
			}
			if o.Partition < 0 || o.Topic == "" {
				t.Fatalf("decoded invalid offset key %q/%d", o.Topic, o.Partition)
			}
			if got := encodeOffset(key, o.Offset); !bytes.Equal(got, v) {
				t.Fatalf("accepted offset not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodeOutbox(f *testing.F) {
	k := u64Key(9)
	addSeeds(f, k, encodeOutbox(k, "cairn.audits", []byte("key"), []byte(`{"v":1}`), time.Time{}))
	addSeeds(f, k, encodeOutbox(k, "cairn.audits", []byte("key"), []byte(`{"v":1}`), time.Unix(1_700_000_000, 123).UTC()))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			e, why := decodeOutbox(key, v)
			if why != "" {
				return
			}
			if got := encodeOutbox(key, e.Topic, e.Key, e.Value, e.Time); !bytes.Equal(got, v) {
				t.Fatalf("accepted outbox entry not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodeAudit(f *testing.F) {
	k := u64Key(1)
	var prev [32]byte
	h := chainHash(&prev, []byte("body"))
	addSeeds(f, k, encodeAudit(k, &prev, &h, []byte("body")))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			a, why := decodeAudit(key, v)
			if why != "" {
				return
			}
			if got := encodeAudit(key, &a.PrevHash, &a.Hash, a.Body); !bytes.Equal(got, v) {
				t.Fatalf("accepted audit not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodeMetaU64(f *testing.F) {
	addSeeds(f, metaFormat, encodeMetaU64(metaFormat, FormatVersion))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			x, why := decodeMetaU64(key, v)
			if why != "" {
				return
			}
			if got := encodeMetaU64(key, x); !bytes.Equal(got, v) {
				t.Fatalf("accepted meta value not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodePending(f *testing.F) {
	k := u64Key(42)
	addSeeds(f, k, encodePending(k, []byte(`{"deletion":42,"id":"u1"}`)))
	addSeeds(f, u64Key(1), encodePending(u64Key(1), []byte{0}))
	f.Add(u64Key(1), encodePending(u64Key(1), nil))
	// seq 0 with a valid checksum, a 7-byte key, and a body one byte too long.
	f.Add(u64Key(0), encodePending(u64Key(0), []byte("x")))
	f.Add(k[:7], encodePending(k[:7], []byte("x")))
	f.Add(k, encodePending(k, make([]byte, MaxPendingLen+1)))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			seq, body, why := decodePending(key, v)
			if why != "" {
				return
			}
			if seq == 0 || !bytes.Equal(u64Key(seq), key) {
				t.Fatalf("pending key %x decoded to seq %d", key, seq)
			}
			if len(body) > MaxPendingLen {
				t.Fatalf("accepted a %d-byte pending body, limit %d", len(body), MaxPendingLen)
			}
			if got := encodePending(key, body); !bytes.Equal(got, v) {
				t.Fatalf("accepted pending value not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodeDeleted(f *testing.F) {
	k := []byte("p1")
	addSeeds(f, k, encodeDeleted(k, 41))
	f.Add(k, seal(k, binenc.AppendI64([]byte{valueVersion}, -1)))
	f.Add([]byte{}, encodeDeleted(nil, 1))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			version, why := decodeDeleted(key, v)
			if why != "" {
				return
			}
			if len(key) == 0 || len(key) > MaxIDLen || version < 0 {
				t.Fatalf("accepted deleted %q (%d bytes) with version %d", key, len(key), version)
			}
			if got := encodeDeleted(key, version); !bytes.Equal(got, v) {
				t.Fatalf("accepted deleted value not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}

func FuzzDecodePoolPoint(f *testing.F) {
	k := []byte("p1")
	addSeeds(f, k, encodePoolPoint(k, bytes.Repeat([]byte{1, 2, 3, 4}, 8)))
	f.Add(k, encodePoolPoint(k, nil))
	// An empty key, an overlong key and a record one byte too long, each with a
	// valid checksum.
	f.Add([]byte{}, encodePoolPoint(nil, []byte("x")))
	long := bytes.Repeat([]byte("k"), MaxIDLen+1)
	f.Add(long, encodePoolPoint(long, []byte("x")))
	f.Add(k, encodePoolPoint(k, make([]byte, MaxPoolPointLen+1)))
	f.Fuzz(func(t *testing.T, key, v []byte) {
		both(key, v, func(v []byte) {
			rec, why := decodePoolPoint(key, v)
			if why != "" {
				return
			}
			if len(key) == 0 || len(key) > MaxIDLen {
				t.Fatalf("accepted a pool point under a %d-byte key", len(key))
			}
			if len(rec) > MaxPoolPointLen {
				t.Fatalf("accepted a %d-byte pool point record, limit %d", len(rec), MaxPoolPointLen)
			}
			if got := encodePoolPoint(key, rec); !bytes.Equal(got, v) {
				t.Fatalf("accepted pool point value not canonical:\n in  %x\n out %x", v, got)
			}
		})
	})
}
