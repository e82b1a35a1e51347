package storage

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestOutboxTime: every entry records the time of its transaction (Options.Now), the
// same across a reopen, so each publication of it can state the same time.
func TestOutboxTime(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := Open(path, Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var txTime time.Time
	err = s.Apply(func(tx *Tx) error {
		txTime = tx.Time()
		_, err := tx.Enqueue("cairn.audits", []byte("r1"), []byte(`{"v":1}`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !txTime.Equal(at) || txTime.Location() != time.UTC {
		t.Errorf("Tx.Time = %v, want %v in UTC", txTime, at)
	}
	s = reopen(t, s)
	es, err := s.Pending(0)
	if err != nil || len(es) != 1 {
		t.Fatalf("Pending = %v, %v", es, err)
	}
	if got := es[0].Time; !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("entry time = %v, want %v in UTC", got, at)
	}
}

// TestMigrate6to7: an entry a format 6 file holds (no time) reads with Time zero after
// the migration, byte for byte as it was; entries enqueued afterwards have a time.
func TestMigrate6to7(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	k := u64Key(1)
	old := encodeOutbox(k, "cairn.attributions", []byte("r1"), []byte(`{"v":1}`), time.Time{})
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 6)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(metaOutboxSeq, encodeMetaU64(metaOutboxSeq, 1)); err != nil {
			return err
		}
		return tx.Bucket(bucketOutbox).Put(k, old)
	})
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open a format 6 file: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Apply(func(tx *Tx) error {
		_, err := tx.Enqueue("cairn.status", []byte("model"), []byte(`{}`))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	es, err := s.Pending(0)
	if err != nil || len(es) != 2 {
		t.Fatalf("Pending = %v, %v", es, err)
	}
	if !es[0].Time.IsZero() || string(es[0].Value) != `{"v":1}` {
		t.Errorf("format 6 entry = %+v, want its value and no time", es[0])
	}
	if es[1].Time.IsZero() {
		t.Errorf("entry enqueued at format 7 has no time")
	}
	rep, err := s.Check()
	if err != nil || !rep.OK || rep.Format != FormatVersion {
		t.Errorf("Check = %+v, %v; want OK at format %d", rep, err, FormatVersion)
	}
}

// TestDecodeOutboxTime: a time that is not after 1970 is refused, as is any byte after
// the time.
func TestDecodeOutboxTime(t *testing.T) {
	k := u64Key(3)
	good := encodeOutbox(k, "t", []byte("k"), []byte("v"), time.Unix(0, 1))
	if e, why := decodeOutbox(k, good); why != "" || e.Time.UnixNano() != 1 {
		t.Errorf("decode(time 1ns) = %+v, %q", e, why)
	}
	zero := encodeOutbox(k, "t", []byte("k"), []byte("v"), time.Unix(0, 0))
	if _, why := decodeOutbox(k, zero); why == "" {
		t.Error("decode accepted an explicit time 0, which re-encodes without a time")
	}
	body := append(append([]byte{}, good[:len(good)-4]...), 0)
	if _, why := decodeOutbox(k, seal(k, body)); why == "" {
		t.Error("decode accepted a byte after the time")
	}
}
