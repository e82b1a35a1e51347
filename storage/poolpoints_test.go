package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// poolPoints reads every pool record by id.
func poolPoints(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.View(func(tx *ReadTx) error {
		return tx.ForEachPoolPoint(func(id string, rec []byte) error { out[id] = string(rec); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPoolPointLifecycle: a record needs its point, survives PutPoint (which does not
// touch it), reopen and Compact, is removed with its point by DeletePoint, and the
// argument checks name what is wrong.
func TestPoolPointLifecycle(t *testing.T) {
	s, _ := openTemp(t)
	arg := []byte("rec-a")
	err := s.Apply(func(tx *Tx) error {
		for _, id := range []string{"a", "b", "c"} {
			if err := tx.PutPoint(Point{ID: id, X: []float64{1}}); err != nil {
				return err
			}
		}
		if err := tx.PutPoolPoint("a", arg); err != nil {
			return err
		}
		arg[0] = 'X' // encoded at the call: reusing arg is allowed
		if rec, ok, err := tx.PoolPoint("a"); err != nil || !ok || string(rec) != "rec-a" {
			t.Errorf("PoolPoint(a) inside the tx = %q, %v, %v; want rec-a", rec, ok, err)
		}
		if err := tx.PutPoolPoint("b", []byte("rec-b")); err != nil {
			return err
		}
		return tx.PutPoolPoint("c", bytes.Repeat([]byte{7}, MaxPoolPointLen)) // the limit itself is accepted
	})
	if err != nil {
		t.Fatal(err)
	}
	if hold, err := s.ScrubPending(); err != nil || hold {
		t.Errorf("ScrubPending after PutPoolPoint = %v, %v; want false", hold, err)
	}
	for _, tc := range []struct {
		name string
		fn   func(tx *Tx) error
		want string
	}{
		{"no point", func(tx *Tx) error { return tx.PutPoolPoint("zz", []byte("x")) }, `pool point record of "zz": no such stored point`},
		{"empty id", func(tx *Tx) error { return tx.PutPoolPoint("", []byte("x")) }, "pool point id is empty"},
		{"too long", func(tx *Tx) error { return tx.PutPoolPoint("a", make([]byte, MaxPoolPointLen+1)) }, `pool point record of "a" is 257 bytes, longer than 256`},
		{"read empty id", func(tx *Tx) error { _, _, err := tx.PoolPoint(""); return err }, "pool point id is empty"},
	} {
		err := s.Apply(tc.fn)
		if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: err = %v; want ErrInvalid containing %q", tc.name, err, tc.want)
		}
	}
	want := map[string]string{"a": "rec-a", "b": "rec-b", "c": string(bytes.Repeat([]byte{7}, MaxPoolPointLen))}
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after refused writes = %q, want %q", got, want)
	}
	// Replacing a point leaves its record; deleting a point removes it; a record
	// put after the point's delete in the same tx is refused.
	err = s.Apply(func(tx *Tx) error {
		if err := tx.PutPoint(Point{ID: "a", X: []float64{2}}); err != nil {
			return err
		}
		if existed, err := tx.DeletePoint("b"); err != nil || !existed {
			t.Errorf("DeletePoint(b) = %v, %v", existed, err)
		}
		if _, ok, err := tx.PoolPoint("b"); err != nil || ok {
			t.Errorf("PoolPoint(b) after DeletePoint in the tx = %v, %v; want absent", ok, err)
		}
		if err := tx.PutPoolPoint("b", []byte("again")); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutPoolPoint(b) after its DeletePoint = %v, want ErrInvalid", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "b")
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after delete = %q, want %q", got, want)
	}
	s = reopen(t, s)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after reopen and Compact = %q, want %q", got, want)
	}
}

// buildV2File writes a format version 2 file with bbolt alone: the version 1 file of
// buildV1File plus the pending bucket (one body) and format_version 2, as FORMAT.md
// version 2 describes it (migrate then runs in the same tx as mutate).
func buildV2File(t *testing.T, path string, mutate func(tx *bolt.Tx) error) map[string]map[string][]byte {
	t.Helper()
	pendingVal := v1Value(be64(5), []byte(`{"deletion":5}`))
	formatVal := v1Value([]byte("format_version"), le64(2))
	written := buildV1File(t, path, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketPending)
		if err != nil {
			return err
		}
		if err := b.Put(be64(5), pendingVal); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put([]byte("format_version"), formatVal); err != nil {
			return err
		}
		if mutate != nil {
			return mutate(tx)
		}
		return nil
	})
	written["pending"] = map[string][]byte{string(be64(5)): pendingVal}
	written["meta"]["format_version"] = formatVal
	return written
}

func TestMigrateV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	v2 := buildV2File(t, path, nil)
	if got := dumpFile(t, path); !reflect.DeepEqual(got, v2) {
		t.Fatalf("v2 file as built:\n got  %x\n want %x", got, v2)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(v2 file): %v", err)
	}
	s.Close()
	// Byte level: an empty poolpoints bucket and format_version 3, nothing else.
	want := map[string]map[string][]byte{"poolpoints": {}}
	for name, kvs := range v2 {
		want[name] = map[string][]byte{}
		for k, v := range kvs {
			want[name][k] = v
		}
	}
	want["meta"]["format_version"] = v1Value([]byte("format_version"), le64(3))
	if got := dumpFile(t, path); !reflect.DeepEqual(got, want) {
		t.Fatalf("file after migration:\n got  %x\n want %x", got, want)
	}
	// API level: the old pool blob and pending body read back, and records work.
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx *ReadTx) error {
		if ps, ok, err := tx.PoolState(); err != nil || !ok || ps.Schema != 4 || string(ps.Data) != "blob" {
			t.Errorf("PoolState = %+v, %v, %v; want schema 4 blob", ps, ok, err)
		}
		if body, ok, err := tx.Pending(5); err != nil || !ok || string(body) != `{"deletion":5}` {
			t.Errorf("Pending(5) = %q, %v, %v", body, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(func(tx *Tx) error { return tx.PutPoolPoint("u1", []byte("r")) }); err != nil {
		t.Fatal(err)
	}
	if got := poolPoints(t, s); !reflect.DeepEqual(got, map[string]string{"u1": "r"}) {
		t.Errorf("records = %q, want u1: r", got)
	}
}

// A version 2 file that fails a check is refused and left byte for byte as it was.
func TestMigrateV2Refused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(tx *bolt.Tx) error
	}{
		{"missing pending bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPending) }},
		{"already has poolpoints", func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketPoolPts); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v2.db")
			buildV2File(t, path, tc.mutate)
			before := dumpFile(t, path)
			_, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
			var fe *FormatError
			if !errors.Is(err, ErrUnknownFormat) || !errors.As(err, &fe) || fe.Got != 2 || fe.Want != FormatVersion {
				t.Fatalf("Open = %v; want *FormatError with Got 2, Want %d", err, FormatVersion)
			}
			if after := dumpFile(t, path); !reflect.DeepEqual(after, before) {
				t.Errorf("refused file was modified:\n before %x\n after  %x", before, after)
			}
		})
	}
}
