package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
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
