package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestPendingPutDelete(t *testing.T) {
	s, _ := openTemp(t)
	maxBody := bytes.Repeat([]byte{0xab}, MaxPendingLen)
	arg := []byte("first")
	err := s.Apply(func(tx *Tx) error {
		if err := tx.PutPending(2, arg); err != nil {
			return err
		}
		arg[0] = 'X' // the body was encoded at the call; reusing arg is allowed
		// Own writes are visible inside the transaction.
		if body, ok, err := tx.Pending(2); err != nil || !ok || string(body) != "first" {
			return fmt.Errorf("Pending(2) inside tx = %q, %v, %v; want first", body, ok, err)
		}
		if err := tx.PutPending(1, []byte("one")); err != nil {
			return err
		}
		return tx.PutPending(9, maxBody) // exactly MaxPendingLen is accepted
	})
	if err != nil {
		t.Fatal(err)
	}
	// Pending writes do not start a scrub hold: they are not point data.
	if hold, err := s.ScrubPending(); err != nil || hold {
		t.Errorf("ScrubPending after PutPending = %v, %v; want false", hold, err)
	}

	tests := []struct {
		seq         uint64
		wantExisted bool
	}{
		{2, true},
		{2, false}, // second delete of the same seq
		{5, false}, // never stored
	}
	for _, tc := range tests {
		var existed bool
		err := s.Apply(func(tx *Tx) (err error) { existed, err = tx.DeletePending(tc.seq); return err })
		if err != nil || existed != tc.wantExisted {
			t.Errorf("DeletePending(%d) = %v, %v; want %v", tc.seq, existed, err, tc.wantExisted)
		}
	}

	s = reopen(t, s)
	var got []pendingRec
	err = s.View(func(tx *ReadTx) error {
		return tx.ForEachPending(func(seq uint64, body []byte) error {
			got = append(got, pendingRec{seq, body})
			if len(body) > 0 {
				body[0] ^= 0xff // a copy: must not change what the next read sees
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].seq != 1 || got[1].seq != 9 || len(got[1].body) != MaxPendingLen {
		t.Fatalf("ForEachPending after deletes = %d records, want seqs [1 9] with a %d-byte body", len(got), MaxPendingLen)
	}
	err = s.View(func(tx *ReadTx) error {
		if body, _, err := tx.Pending(1); err != nil || string(body) != "one" {
			t.Errorf("Pending(1) after caller modified its copy = %q, %v; want one", body, err)
		}
		if body, _, err := tx.Pending(9); err != nil || !bytes.Equal(body, maxBody) {
			t.Errorf("Pending(9) = %d bytes, %v; want the %d-byte body", len(body), err, MaxPendingLen)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// ForEachPending stops at fn's first error and returns it.
	stop := errors.New("stop")
	calls := 0
	err = s.View(func(tx *ReadTx) error {
		return tx.ForEachPending(func(uint64, []byte) error { calls++; return stop })
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ForEachPending with failing fn = %v after %d calls; want stop after 1", err, calls)
	}

	// A rejected oversized body names seq and size and stores nothing.
	err = s.Apply(func(tx *Tx) error { return tx.PutPending(4, make([]byte, MaxPendingLen+1)) })
	want := fmt.Sprintf("pending body for seq 4 is %d bytes, longer than %d", MaxPendingLen+1, MaxPendingLen)
	if !errors.Is(err, ErrInvalid) || err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("PutPending(4, MaxPendingLen+1 bytes) = %v; want ErrInvalid containing %q", err, want)
	}
}

// v1Value builds a value envelope as FORMAT.md describes it, independently of
// seal: version byte 1, payload, CRC-32C (Castagnoli) over key || 0x01 ||
// payload, big-endian.
func v1Value(key, payload []byte) []byte {
	v := append([]byte{1}, payload...)
	c := crc32.Checksum(append(bytes.Clone(key), v...), crc32.MakeTable(crc32.Castagnoli))
	return binary.BigEndian.AppendUint32(v, c)
}

func le64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }
func le32(x uint32) []byte { return binary.LittleEndian.AppendUint32(nil, x) }
func be64(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// buildV1File writes a format version 1 file with bbolt alone, following
// FORMAT.md version 1: the 8 buckets, meta with format_version 1 and its
// counters, one point, one offset, one outbox entry and one audit record.
// It returns every key/value written, by bucket.
func buildV1File(t *testing.T, path string, mutate func(tx *bolt.Tx) error) map[string]map[string][]byte {
	t.Helper()
	auditBody := []byte(`{"deleted":"old"}`)
	var zero [32]byte
	auditHash := sha256.Sum256(cat(zero[:], auditBody))
	offKey := cat([]byte("cairn.train"), []byte{0}, binary.BigEndian.AppendUint32(nil, 2))
	content := map[string][][2][]byte{
		"meta": {
			{[]byte("format_version"), le64(1)},
			{[]byte("point_count"), le64(1)},
			{[]byte("outbox_last_seq"), le64(1)},
		},
		// flags 1 (labelled), label -5, x = [1.5, -2], cert = [].
		"points": {{[]byte("u1"), cat([]byte{1}, le64(uint64(math.MaxUint64-4)), le32(2),
			le64(math.Float64bits(1.5)), le64(math.Float64bits(-2)), le32(0))}},
		"pool":     {{[]byte("state"), cat(le32(4), []byte("blob"))}},
		"models":   nil,
		"fitstats": nil,
		"offsets":  {{offKey, le64(41)}},
		"outbox":   {{be64(1), cat(le32(12), []byte("cairn.status"), le32(1), []byte("k"), le32(2), []byte("{}"))}},
		"audit":    {{be64(1), cat(zero[:], auditHash[:], auditBody)}},
	}
	written := map[string]map[string][]byte{}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for name, kvs := range content {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			written[name] = map[string][]byte{}
			for _, kv := range kvs {
				v := v1Value(kv[0], kv[1])
				if err := b.Put(kv[0], v); err != nil {
					return err
				}
				written[name][string(kv[0])] = v
			}
		}
		if mutate != nil {
			return mutate(tx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return written
}

// dumpFile returns every key/value of every top-level bucket, read with bbolt.
func dumpFile(t *testing.T, path string) map[string]map[string][]byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string][]byte{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error { m[string(k)] = bytes.Clone(v); return nil })
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	v1 := buildV1File(t, path, nil)
	if got := len(v1); got != 8 {
		t.Fatalf("v1 file has %d buckets, want 8", got)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(v1 file): %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Byte level: the migrations (1 → 2 → 3) added the empty buckets pending
	// and poolpoints and rewrote format_version to 3, and changed nothing else.
	want := map[string]map[string][]byte{"pending": {}, "poolpoints": {}}
	for name, kvs := range v1 {
		want[name] = kvs
	}
	want["meta"] = map[string][]byte{}
	for k, v := range v1["meta"] {
		want["meta"][k] = v
	}
	want["meta"]["format_version"] = v1Value([]byte("format_version"), le64(3))
	if got := dumpFile(t, path); !reflect.DeepEqual(got, want) {
		t.Fatalf("file after migration:\n got  %x\n want %x", got, want)
	}

	// API level: the v1 data reads back, and the new bucket works.
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen migrated file: %v", err)
	}
	defer s.Close()
	err = s.View(func(tx *ReadTx) error {
		p, ok, err := tx.Point("u1")
		wantP := Point{ID: "u1", X: []float64{1.5, -2}, HasLabel: true, Label: -5}
		if err != nil || !ok || !pointsEqual(p, wantP) {
			t.Errorf("Point(u1) = %+v, %v, %v; want %+v", p, ok, err, wantP)
		}
		if n, err := tx.PointCount(); err != nil || n != 1 {
			t.Errorf("PointCount = %d, %v; want 1", n, err)
		}
		if ps, ok, err := tx.PoolState(); err != nil || !ok || ps.Schema != 4 || string(ps.Data) != "blob" {
			t.Errorf("PoolState = %+v, %v, %v; want schema 4 blob", ps, ok, err)
		}
		if off, ok, err := tx.Offset("cairn.train", 2); err != nil || !ok || off != 41 {
			t.Errorf("Offset = %d, %v, %v; want 41", off, ok, err)
		}
		n := 0
		if err := tx.ForEachPending(func(uint64, []byte) error { n++; return nil }); err != nil || n != 0 {
			t.Errorf("ForEachPending on migrated file = %d records, %v; want 0", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Pending(0)
	wantOut := []OutboxEntry{{Seq: 1, Topic: "cairn.status", Key: []byte("k"), Value: []byte("{}")}}
	if err != nil || !reflect.DeepEqual(out, wantOut) {
		t.Errorf("outbox Pending = %+v, %v; want %+v", out, err, wantOut)
	}
	if err := s.VerifyAudit(); err != nil {
		t.Errorf("VerifyAudit: %v", err)
	}
	var seq uint64
	var link AuditLink
	err = s.Apply(func(tx *Tx) (err error) {
		if err := tx.PutPending(1, []byte("audit-to-emit")); err != nil {
			return err
		}
		if link, err = tx.AppendAudit([]byte("next")); err != nil {
			return err
		}
		seq, err = tx.Enqueue("cairn.audits", nil, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if seq != 2 || link.Seq != 2 {
		t.Errorf("after migration next outbox seq %d, audit seq %d; want 2, 2", seq, link.Seq)
	}
	s = reopen(t, s)
	err = s.View(func(tx *ReadTx) error {
		body, ok, err := tx.Pending(1)
		if err != nil || !ok || string(body) != "audit-to-emit" {
			t.Errorf("Pending(1) after reopen = %q, %v, %v", body, ok, err)
		}
		v, err := tx.metaU64(metaFormat)
		if err != nil || v != 3 {
			t.Errorf("format_version = %d, %v; want 3", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A version 1 file that fails a check is refused and left byte for byte as it
// was: the check and the migration are one transaction.
func TestMigrateV1Refused(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
	}{
		{"missing audit bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketAudit) }},
		{"missing points bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPoints) }},
		{"already has pending", func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketPending); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v1.db")
			buildV1File(t, path, tc.mutate)
			before := dumpFile(t, path)
			_, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
			var fe *FormatError
			if !errors.Is(err, ErrUnknownFormat) || !errors.As(err, &fe) || fe.Got != 1 || fe.Want != FormatVersion {
				t.Fatalf("Open = %v; want *FormatError with Got 1, Want %d", err, FormatVersion)
			}
			if after := dumpFile(t, path); !reflect.DeepEqual(after, before) {
				t.Errorf("refused file was modified:\n before %x\n after  %x", before, after)
			}
		})
	}
}

// Compact keeps pending bodies and erases the bytes of deleted ones.
func TestCompactPending(t *testing.T) {
	s, path := openTemp(t)
	gone := markerVector(16) // used only for its unusual bytes
	var goneBody []byte
	for _, v := range gone {
		goneBody = binary.LittleEndian.AppendUint64(goneBody, math.Float64bits(v))
	}
	err := s.Apply(func(tx *Tx) error {
		if err := tx.PutPending(1, []byte("kept")); err != nil {
			return err
		}
		return tx.PutPending(2, goneBody)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countMarkers(t, path, gone); n != len(gone) {
		t.Fatalf("before deletion %d of %d marker values in the file, want all (scan is broken)", n, len(gone))
	}
	if err := s.Apply(func(tx *Tx) error { _, err := tx.DeletePending(2); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if n := countMarkers(t, path, gone); n != 0 {
		t.Errorf("after Compact %d of %d marker values of a deleted pending body remain", n, len(gone))
	}
	var got []pendingRec
	err = s.View(func(tx *ReadTx) error {
		return tx.ForEachPending(func(seq uint64, body []byte) error {
			got = append(got, pendingRec{seq, body})
			return nil
		})
	})
	if want := []pendingRec{{1, []byte("kept")}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("pending after Compact = %+v, %v; want %+v", got, err, want)
	}
}
