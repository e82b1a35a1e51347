package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := Open(path, Options{InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := Open(s.Path(), Options{InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// rawUpdate modifies the file behind the Store's back, for corruption tests.
func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatalf("raw update: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("raw close: %v", err)
	}
}

func samplePoint(id string, n int) Point {
	p := Point{ID: id, X: make([]float64, n), HasLabel: true, Label: -7, Cert: []float64{0.25, math.Inf(1)}}
	for i := range p.X {
		p.X[i] = float64(i)*1.5 - 3
	}
	return p
}

func sampleModel(version uint64) Model {
	m := Model{
		Version:   version,
		Landmarks: []string{"a", "bb", "ccc"},
		A:         Matrix{Rows: 3, Cols: 2, Data: []float64{1, 2, 3, 4, 5, 6}},
		A0:        Matrix{Rows: 3, Cols: 2, Data: []float64{-1, -2, -3, -4, -5, math.SmallestNonzeroFloat64}},
		B:         Matrix{Rows: 1, Cols: 2, Data: []float64{0.5, -0.5}},
		Meta:      []byte(`{"loss":"barlow","seed":7}`),
	}
	return m
}

// writeAll stores one record of every kind and returns what was stored.
type allRecords struct {
	points   []Point
	pool     PoolState
	model    Model
	stats    FitStats
	offsets  []Offset
	outbox   []OutboxEntry
	audits   []AuditRecord
	outSeqs  []uint64
	auditRet []AuditLink
	pending  []pendingRec   // in seq order, as ForEachPending returns them
	poolPts  []poolPointRec // in id order, as ForEachPoolPoint returns them
}

type poolPointRec struct {
	id  string
	rec []byte
}

type pendingRec struct {
	seq  uint64
	body []byte
}

func writeAll(t *testing.T, s *Store) allRecords {
	t.Helper()
	r := allRecords{
		points: []Point{samplePoint("p1", 5), {ID: "p2", X: []float64{math.NaN()}, Version: -1}, {ID: "p3", Version: math.MaxInt64}},
		pool:   PoolState{Schema: 3, Data: []byte{0, 1, 2, 255}},
		model:  sampleModel(1),
		stats:  FitStats{Version: 1, Seeds: []uint64{11, 12, math.MaxUint64}, Mean: []float64{1, 2, 3}, Var: []float64{0.1, 0.2, 0.3}, Meta: []byte("m")},
		offsets: []Offset{
			{Topic: "cairn.queries", Partition: 0, Offset: 9},
			{Topic: "cairn.train", Partition: 1, Offset: 41},
			{Topic: "cairn.train", Partition: 256, Offset: -1},
		},
		outbox: []OutboxEntry{
			{Seq: 1, Topic: "cairn.attributions", Key: []byte("r1"), Value: []byte(`{"v":1}`)},
			{Seq: 2, Topic: "cairn.status", Key: nil, Value: nil},
		},
		pending: []pendingRec{
			{3, []byte(`{"deletion":3}`)},
			{7, nil}, // empty body
			{math.MaxUint64, []byte{0, 0xff, 1}},
		},
		// p2 has no record; p3's is empty.
		poolPts: []poolPointRec{{"p1", bytes.Repeat([]byte{0xa5, 0, 1, 0xff}, 8)}, {"p3", nil}},
	}
	err := s.Apply(func(tx *Tx) error {
		for _, p := range r.points {
			if err := tx.PutPoint(p); err != nil {
				return err
			}
		}
		if err := tx.PutPoolState(r.pool); err != nil {
			return err
		}
		if err := tx.PutModel(r.model); err != nil {
			return err
		}
		if err := tx.PutFitStats(r.stats); err != nil {
			return err
		}
		// Written out of order: storage must return them sorted.
		for _, i := range []int{2, 0, 1} {
			o := r.offsets[i]
			if err := tx.SetOffset(o.Topic, o.Partition, o.Offset); err != nil {
				return err
			}
		}
		for i, e := range r.outbox {
			seq, err := tx.Enqueue(e.Topic, e.Key, e.Value)
			if err != nil {
				return err
			}
			r.outSeqs = append(r.outSeqs, seq)
			r.outbox[i].Time = tx.Time() // every entry records its transaction's time
		}
		for _, body := range []string{`{"deleted":"x"}`, `{"deleted":"y"}`} {
			l, err := tx.AppendAudit([]byte(body))
			if err != nil {
				return err
			}
			r.auditRet = append(r.auditRet, l)
			r.audits = append(r.audits, AuditRecord{AuditLink: l, Body: []byte(body)})
		}
		// Out of seq order, and seq 3 overwritten: the last body wins.
		if err := tx.PutPending(3, []byte("overwritten")); err != nil {
			return err
		}
		for _, i := range []int{2, 0, 1} {
			if err := tx.PutPending(r.pending[i].seq, r.pending[i].body); err != nil {
				return err
			}
		}
		// Out of id order, and p1 overwritten: the last record wins.
		if err := tx.PutPoolPoint("p1", []byte("overwritten")); err != nil {
			return err
		}
		for _, i := range []int{1, 0} {
			if err := tx.PutPoolPoint(r.poolPts[i].id, r.poolPts[i].rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return r
}

func checkAll(t *testing.T, s *Store, want allRecords) {
	t.Helper()
	err := s.View(func(tx *ReadTx) error {
		for _, wp := range want.points {
			got, ok, err := tx.Point(wp.ID)
			if err != nil || !ok {
				return fmt.Errorf("Point(%q) = ok %v, err %v", wp.ID, ok, err)
			}
			if !pointsEqual(got, wp) {
				t.Errorf("Point(%q) = %+v, want %+v", wp.ID, got, wp)
			}
		}
		var ids []string
		if err := tx.ForEachPoint(func(p Point) error { ids = append(ids, p.ID); return nil }); err != nil {
			return err
		}
		if want := []string{"p1", "p2", "p3"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("ForEachPoint ids = %q, want %q", ids, want)
		}
		if n, err := tx.PointCount(); err != nil || n != len(want.points) {
			t.Errorf("PointCount = %d, %v; want %d", n, err, len(want.points))
		}
		ps, ok, err := tx.PoolState()
		if err != nil || !ok || !reflect.DeepEqual(ps, want.pool) {
			t.Errorf("PoolState = %+v, %v, %v; want %+v", ps, ok, err, want.pool)
		}
		m, ok, err := tx.Model(1)
		if err != nil || !ok || !reflect.DeepEqual(m, want.model) {
			t.Errorf("Model(1) = %+v, %v, %v; want %+v", m, ok, err, want.model)
		}
		lm, ok, err := tx.LatestModel()
		if err != nil || !ok || lm.Version != 1 {
			t.Errorf("LatestModel = version %d, %v, %v; want 1", lm.Version, ok, err)
		}
		fs, ok, err := tx.FitStats(1)
		if err != nil || !ok || !reflect.DeepEqual(fs, want.stats) {
			t.Errorf("FitStats(1) = %+v, %v, %v; want %+v", fs, ok, err, want.stats)
		}
		offs, err := tx.Offsets()
		if err != nil || !reflect.DeepEqual(offs, want.offsets) {
			t.Errorf("Offsets = %+v, %v; want %+v", offs, err, want.offsets)
		}
		off, ok, err := tx.Offset("cairn.train", 1)
		if err != nil || !ok || off != 41 {
			t.Errorf("Offset(cairn.train, 1) = %d, %v, %v; want 41", off, ok, err)
		}
		if _, ok, err := tx.Offset("cairn.train", 2); err != nil || ok {
			t.Errorf("Offset(cairn.train, 2) ok = %v, err %v; want absent", ok, err)
		}
		var audits []AuditRecord
		if err := tx.ForEachAudit(1, func(a AuditRecord) error { audits = append(audits, a); return nil }); err != nil {
			return err
		}
		if !reflect.DeepEqual(audits, want.audits) {
			t.Errorf("audits = %+v, want %+v", audits, want.audits)
		}
		head, ok, err := tx.AuditHead()
		if err != nil || !ok || head != want.audits[len(want.audits)-1].AuditLink {
			t.Errorf("AuditHead = %+v, %v, %v", head, ok, err)
		}
		var pend []pendingRec
		if err := tx.ForEachPending(func(seq uint64, body []byte) error {
			pend = append(pend, pendingRec{seq, body})
			return nil
		}); err != nil {
			return err
		}
		if !reflect.DeepEqual(pend, want.pending) {
			t.Errorf("ForEachPending = %+v, want %+v", pend, want.pending)
		}
		for _, wp := range want.pending {
			body, ok, err := tx.Pending(wp.seq)
			if err != nil || !ok || !bytes.Equal(body, wp.body) {
				t.Errorf("Pending(%d) = %q, %v, %v; want %q", wp.seq, body, ok, err, wp.body)
			}
		}
		if body, ok, err := tx.Pending(4); err != nil || ok || body != nil {
			t.Errorf("Pending(4) = %q, %v, %v; want absent", body, ok, err)
		}
		var pts []poolPointRec
		if err := tx.ForEachPoolPoint(func(id string, rec []byte) error {
			pts = append(pts, poolPointRec{id, rec})
			return nil
		}); err != nil {
			return err
		}
		if !reflect.DeepEqual(pts, want.poolPts) {
			t.Errorf("ForEachPoolPoint = %+v, want %+v", pts, want.poolPts)
		}
		for _, wp := range want.poolPts {
			rec, ok, err := tx.PoolPoint(wp.id)
			if err != nil || !ok || !bytes.Equal(rec, wp.rec) {
				t.Errorf("PoolPoint(%q) = %x, %v, %v; want %x", wp.id, rec, ok, err, wp.rec)
			}
		}
		if rec, ok, err := tx.PoolPoint("p2"); err != nil || ok || rec != nil {
			t.Errorf("PoolPoint(p2) = %x, %v, %v; want absent", rec, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	got, err := s.Pending(0)
	if err != nil || !reflect.DeepEqual(got, want.outbox) {
		t.Errorf("Pending = %+v, %v; want %+v", got, err, want.outbox)
	}
}

// pointsEqual compares bit patterns, so NaN payloads and -0 count.
func pointsEqual(a, b Point) bool {
	bits := func(x []float64) []uint64 {
		out := make([]uint64, len(x))
		for i, v := range x {
			out[i] = math.Float64bits(v)
		}
		return out
	}
	return a.ID == b.ID && a.HasLabel == b.HasLabel && a.Label == b.Label && a.Version == b.Version &&
		reflect.DeepEqual(bits(a.X), bits(b.X)) && reflect.DeepEqual(bits(a.Cert), bits(b.Cert))
}

func TestRoundTripEveryRecord(t *testing.T) {
	s, _ := openTemp(t)
	want := writeAll(t, s)
	if !reflect.DeepEqual(want.outSeqs, []uint64{1, 2}) {
		t.Errorf("Enqueue seqs = %v, want [1 2]", want.outSeqs)
	}
	checkAll(t, s, want)
	// The same after close and reopen: nothing lives only in memory.
	s = reopen(t, s)
	checkAll(t, s, want)
}

func TestAuditLinkValues(t *testing.T) {
	s, _ := openTemp(t)
	want := writeAll(t, s)
	// Independent recomputation of the chain definition.
	var prev [32]byte
	for i, l := range want.auditRet {
		if l.Seq != uint64(i+1) {
			t.Errorf("audit %d: seq = %d, want %d", i, l.Seq, i+1)
		}
		if l.PrevHash != prev {
			t.Errorf("audit %d: prev = %x, want %x", i, l.PrevHash, prev)
		}
		h := sha256.Sum256(append(append([]byte{}, prev[:]...), want.audits[i].Body...))
		if l.Hash != h {
			t.Errorf("audit %d: hash = %x, want %x", i, l.Hash, h)
		}
		prev = h
	}
	// The chain continues across transactions and reopen.
	s = reopen(t, s)
	var l AuditLink
	if err := s.Apply(func(tx *Tx) (err error) { l, err = tx.AppendAudit([]byte("third")); return err }); err != nil {
		t.Fatal(err)
	}
	if l.Seq != 3 || l.PrevHash != prev {
		t.Errorf("third link = seq %d prev %x; want seq 3 prev %x", l.Seq, l.PrevHash, prev)
	}
	if err := s.VerifyAudit(); err != nil {
		t.Errorf("VerifyAudit: %v", err)
	}
}

func TestModelImmutable(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Apply(func(tx *Tx) error { return tx.PutModel(sampleModel(4)) }); err != nil {
		t.Fatal(err)
	}
	m := sampleModel(4)
	m.A.Data[0] = 99
	err := s.Apply(func(tx *Tx) error { return tx.PutModel(m) })
	if !errors.Is(err, ErrModelExists) {
		t.Fatalf("second PutModel(4) err = %v, want ErrModelExists", err)
	}
	s.View(func(tx *ReadTx) error {
		got, _, _ := tx.Model(4)
		if got.A.Data[0] != 1 {
			t.Errorf("model 4 A[0] = %v after rejected overwrite, want 1", got.A.Data[0])
		}
		return nil
	})
}

func TestInvalidArguments(t *testing.T) {
	s, _ := openTemp(t)
	long := string(bytes.Repeat([]byte("x"), MaxIDLen+1))
	tests := []struct {
		name string
		fn   func(tx *Tx) error
	}{
		{"empty id", func(tx *Tx) error { return tx.PutPoint(Point{}) }},
		{"long id", func(tx *Tx) error { return tx.PutPoint(Point{ID: long}) }},
		{"delete empty id", func(tx *Tx) error { _, err := tx.DeletePoint(""); return err }},
		{"empty topic", func(tx *Tx) error { return tx.SetOffset("", 0, 1) }},
		{"NUL topic", func(tx *Tx) error { return tx.SetOffset("a\x00b", 0, 1) }},
		{"negative partition", func(tx *Tx) error { return tx.SetOffset("t", -1, 1) }},
		{"enqueue empty topic", func(tx *Tx) error { _, err := tx.Enqueue("", nil, nil); return err }},
		{"model version 0", func(tx *Tx) error { return tx.PutModel(sampleModel(0)) }},
		{"model bad shape", func(tx *Tx) error {
			m := sampleModel(2)
			m.A.Rows = 4
			return tx.PutModel(m)
		}},
		{"model empty landmark", func(tx *Tx) error {
			m := sampleModel(2)
			m.Landmarks[1] = ""
			return tx.PutModel(m)
		}},
		{"fit stats version 0", func(tx *Tx) error { return tx.PutFitStats(FitStats{}) }},
		{"pending seq 0", func(tx *Tx) error { return tx.PutPending(0, []byte("x")) }},
		{"pending body too long", func(tx *Tx) error { return tx.PutPending(1, make([]byte, MaxPendingLen+1)) }},
		{"delete pending seq 0", func(tx *Tx) error { _, err := tx.DeletePending(0); return err }},
		{"read pending seq 0", func(tx *Tx) error { _, _, err := tx.Pending(0); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Apply(tc.fn)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestOpenUnknownVersion(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(tx *bolt.Tx) error
		wantGot uint32
	}{
		{"version 9", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 9))
		}, 9},
		{"version max", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, math.MaxUint64))
		}, math.MaxUint32},
		{"version 0", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 0))
		}, 0},
		{"no version key", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaFormat) }, 0},
		{"no meta bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketMeta) }, 0},
		{"garbled version", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaFormat, []byte{1, 2, 3}) }, 0},
		{"missing bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketOutbox) }, 8},
		{"version 8 without pending", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPending) }, 8},
		{"version 8 without poolpoints", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPoolPts) }, 8},
		{"version 8 without deleted", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketDeleted) }, 8},
		{"version 8 without subjects", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketSubjects) }, 8},
		{"version 6 without subjects", func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 6)); err != nil {
				return err
			}
			return tx.DeleteBucket(bucketSubjects)
		}, 6},
		{"version 5 with subjects", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 5))
		}, 5},
		{"version 4 with deleted", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 4))
		}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTemp(t)
			s.Close()
			rawUpdate(t, path, tc.corrupt)
			_, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
			if !errors.Is(err, ErrUnknownFormat) {
				t.Fatalf("Open err = %v, want ErrUnknownFormat", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Got != tc.wantGot || fe.Want != FormatVersion {
				t.Errorf("FormatError = %+v, want Got %d Want %d", fe, tc.wantGot, FormatVersion)
			}
			// The failed Open must have released the file (and its lock).
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("file still locked after failed Open: %v", err)
			}
			db.Close()
		})
	}
}

// TestMigrate4to5: a format 4 file (no deleted bucket) opens as format 5 with the
// bucket added, empty, and its points, which carry no version, read back with -1.
func TestMigrate4to5(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Apply(func(tx *Tx) error { return tx.PutPoint(samplePoint("p", 3)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketDeleted, bucketSubjects, bucketPointSubj, bucketBlocked} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		// The point as format 4 wrote it: flags without bit 2, no version.
		b := tx.Bucket(bucketPoints)
		p, ref, why := decodePoint([]byte("p"), b.Get([]byte("p")))
		if why != "" {
			return errors.New(why)
		}
		p.Version = -1
		if err := b.Put([]byte("p"), encodePoint([]byte("p"), &p, ref)); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, 4))
	})
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx *ReadTx) error {
		p, ok, err := tx.Point("p")
		if err != nil || !ok || p.Version != -1 {
			t.Errorf("migrated point: %+v, %v, %v; want version -1", p, ok, err)
		}
		n := 0
		err = tx.ForEachDeleted(func(string, int64) error { n++; return nil })
		if err != nil || n != 0 {
			t.Errorf("deleted bucket after the migration: %d entries, %v; want 0", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Check(); err != nil || !rep.OK || rep.Format != FormatVersion {
		t.Errorf("Check after the migration: %+v, %v", rep, err)
	}
}

// TestDeletedAndTxAck: the deleted bucket keeps one version per id (PutDeleted
// replaces, DropDeleted reports whether there was one, ForEachDeleted walks in id
// order), refuses a negative version, and Tx.Ack retires outbox entries in the
// transaction that writes beside it, or not at all when it rolls back.
func TestDeletedAndTxAck(t *testing.T) {
	s, _ := openTemp(t)
	var seqs []uint64
	err := s.Apply(func(tx *Tx) error {
		for _, id := range []string{"b", "a", "b"} {
			if err := tx.PutDeleted(id, int64(len(seqs))); err != nil {
				return err
			}
			seq, err := tx.Enqueue("t", []byte(id), nil)
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(func(tx *Tx) error { return tx.PutDeleted("c", -1) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutDeleted(-1) = %v, want ErrInvalid", err)
	}
	boom := errors.New("boom")
	if err := s.Apply(func(tx *Tx) error {
		if err := tx.Ack(seqs[0]); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	err = s.Apply(func(tx *Tx) error {
		if ok, err := tx.DropDeleted("a"); err != nil || !ok {
			t.Errorf("DropDeleted(a) = %v, %v; want true", ok, err)
		}
		if ok, err := tx.DropDeleted("a"); err != nil || ok {
			t.Errorf("second DropDeleted(a) = %v, %v; want false", ok, err)
		}
		return tx.Ack(seqs[0], seqs[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	got := map[string]int64{}
	if err := s.View(func(tx *ReadTx) error {
		return tx.ForEachDeleted(func(id string, v int64) error { got[id] = v; return nil })
	}); err != nil || !reflect.DeepEqual(got, map[string]int64{"b": 2}) {
		t.Errorf("deleted = %v, %v; want b: 2", got, err)
	}
	left, err := s.Pending(0)
	if err != nil || len(left) != 1 || left[0].Seq != seqs[2] {
		t.Errorf("outbox after Tx.Ack = %+v, %v; want only seq %d", left, err, seqs[2])
	}
}

func TestOpenForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err })
	db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Open of foreign bbolt file err = %v, want ErrUnknownFormat", err)
	}
}

func TestOpenNotBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk.db")
	junk := bytes.Repeat([]byte("not a database "), 1000)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{LockTimeout: 200 * time.Millisecond}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Open of a non-bbolt file err = %v, want ErrUnknownFormat", err)
	}
}

func TestChecksumCorruption(t *testing.T) {
	tests := []struct {
		bucket []byte
		key    []byte
		read   func(s *Store) error
	}{
		{bucketPoints, []byte("p1"), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.Point("p1"); return err })
		}},
		{bucketPoints, []byte("p2"), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { return tx.ForEachPoint(func(Point) error { return nil }) })
		}},
		{bucketPool, poolStateKey, func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.PoolState(); return err })
		}},
		{bucketModels, u64Key(1), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.Model(1); return err })
		}},
		{bucketFitStats, u64Key(1), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.FitStats(1); return err })
		}},
		{bucketOffsets, offsetKey("cairn.train", 1), func(s *Store) error { _, err := s.Offsets(); return err }},
		{bucketOutbox, u64Key(2), func(s *Store) error { _, err := s.Pending(0); return err }},
		{bucketAudit, u64Key(1), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.Audit(1); return err })
		}},
		{bucketPending, u64Key(7), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.Pending(7); return err })
		}},
		{bucketPending, u64Key(3), func(s *Store) error {
			return s.View(func(tx *ReadTx) error {
				return tx.ForEachPending(func(uint64, []byte) error { return nil })
			})
		}},
		{bucketPoolPts, []byte("p1"), func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, _, err := tx.PoolPoint("p1"); return err })
		}},
		{bucketPoolPts, []byte("p3"), func(s *Store) error {
			return s.View(func(tx *ReadTx) error {
				return tx.ForEachPoolPoint(func(string, []byte) error { return nil })
			})
		}},
		{bucketMeta, metaPointCount, func(s *Store) error {
			return s.View(func(tx *ReadTx) error { _, err := tx.PointCount(); return err })
		}},
	}
	for _, tc := range tests {
		for _, pos := range []string{"first", "middle", "last"} {
			t.Run(fmt.Sprintf("%s/%x/%s", tc.bucket, tc.key, pos), func(t *testing.T) {
				s, path := openTemp(t)
				writeAll(t, s)
				if err := tc.read(s); err != nil {
					t.Fatalf("read before corruption: %v", err)
				}
				s.Close()
				rawUpdate(t, path, func(tx *bolt.Tx) error {
					b := tx.Bucket(tc.bucket)
					v := bytes.Clone(b.Get(tc.key))
					if v == nil {
						return fmt.Errorf("no value at %x", tc.key)
					}
					i := map[string]int{"first": 0, "middle": len(v) / 2, "last": len(v) - 1}[pos]
					v[i] ^= 0x10
					return b.Put(tc.key, v)
				})
				s, err := Open(path, Options{})
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer s.Close()
				err = tc.read(s)
				var ce *CorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("read after flip: err = %v, want ErrCorrupt", err)
				}
				if ce.Bucket != string(tc.bucket) || !bytes.Equal(ce.Key, tc.key) {
					t.Errorf("CorruptError at %s/%x, want %s/%x", ce.Bucket, ce.Key, tc.bucket, tc.key)
				}
			})
		}
	}
}

// A value copied under another key must fail: the checksum covers the key.
func TestChecksumCoversKey(t *testing.T) {
	s, path := openTemp(t)
	writeAll(t, s)
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPoints)
		return b.Put([]byte("p9"), bytes.Clone(b.Get([]byte("p1"))))
	})
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx *ReadTx) error { _, _, err := tx.Point("p9"); return err })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("moved value err = %v, want ErrCorrupt", err)
	}
}

func TestApplyAtomic(t *testing.T) {
	boom := errors.New("boom")
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			s, _ := openTemp(t)
			before := writeAll(t, s)
			var seenSeq uint64
			run := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return s.Apply(func(tx *Tx) error {
					if err := tx.PutPoint(samplePoint("new", 3)); err != nil {
						return err
					}
					if _, err := tx.DeletePoint("p1"); err != nil {
						return err
					}
					if err := tx.SetOffset("cairn.train", 1, 1000); err != nil {
						return err
					}
					seq, err := tx.Enqueue("cairn.audits", []byte("k"), []byte("v"))
					if err != nil {
						return err
					}
					seenSeq = seq
					if _, err := tx.AppendAudit([]byte("nope")); err != nil {
						return err
					}
					if err := tx.PutPoolState(PoolState{Schema: 9}); err != nil {
						return err
					}
					if err := tx.PutModel(sampleModel(2)); err != nil {
						return err
					}
					if err := tx.PutFitStats(FitStats{Version: 1}); err != nil {
						return err
					}
					if err := tx.PutPending(5, []byte("new")); err != nil {
						return err
					}
					if err := tx.PutPending(7, []byte("replaced")); err != nil {
						return err
					}
					if existed, err := tx.DeletePending(3); err != nil || !existed {
						return fmt.Errorf("DeletePending(3) = %v, %v; want existed", existed, err)
					}
					// Inside the transaction its own writes are visible.
					if _, ok, _ := tx.Point("new"); !ok {
						t.Error("own PutPoint not visible inside the transaction")
					}
					if mode == "panic" {
						panic(boom)
					}
					return boom
				})
			}
			err := run()
			if mode == "error" && !errors.Is(err, boom) {
				t.Fatalf("Apply err = %v, want boom", err)
			}
			if mode == "panic" && err == nil {
				t.Fatal("panic did not propagate")
			}
			if seenSeq != 3 {
				t.Errorf("seq inside failed tx = %d, want 3", seenSeq)
			}
			checkAll(t, s, before)
			if _, ok, _ := viewPoint(s, "new"); ok {
				t.Error("point from failed batch is stored")
			}
			if hold, _ := s.ScrubPending(); hold {
				t.Error("failed batch left a scrub hold")
			}
			// The seq of the failed batch is not consumed.
			var seq uint64
			if err := s.Apply(func(tx *Tx) (err error) { seq, err = tx.Enqueue("t", nil, nil); return err }); err != nil {
				t.Fatal(err)
			}
			if seq != 3 {
				t.Errorf("next seq after failed batch = %d, want 3", seq)
			}
		})
	}
}

func viewPoint(s *Store, id string) (p Point, ok bool, err error) {
	err = s.View(func(tx *ReadTx) error {
		p, ok, err = tx.Point(id)
		return err
	})
	return p, ok, err
}

func TestOffsetsAndStatePersist(t *testing.T) {
	s, _ := openTemp(t)
	for i := range 5 {
		err := s.Apply(func(tx *Tx) error {
			if err := tx.PutPoint(samplePoint(fmt.Sprintf("id%d", i), 4)); err != nil {
				return err
			}
			return tx.SetOffset("cairn.train", int32(i%2), int64(100+i))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s)
	offs, err := s.Offsets()
	want := []Offset{{"cairn.train", 0, 104}, {"cairn.train", 1, 103}}
	if err != nil || !reflect.DeepEqual(offs, want) {
		t.Errorf("Offsets after reopen = %+v, %v; want %+v", offs, err, want)
	}
	s.View(func(tx *ReadTx) error {
		if n, _ := tx.PointCount(); n != 5 {
			t.Errorf("PointCount after reopen = %d, want 5", n)
		}
		p, ok, err := tx.Point("id3")
		if err != nil || !ok || !pointsEqual(p, samplePoint("id3", 4)) {
			t.Errorf("Point(id3) after reopen = %+v, %v, %v", p, ok, err)
		}
		return nil
	})
}

func TestPointCount(t *testing.T) {
	s, _ := openTemp(t)
	steps := []struct {
		put, del []string
		want     int
	}{
		{put: []string{"a", "b", "c"}, want: 3},
		{put: []string{"a"}, want: 3}, // replace
		{del: []string{"b", "zz"}, want: 2},
		{put: []string{"d"}, del: []string{"d"}, want: 2},
	}
	for i, st := range steps {
		err := s.Apply(func(tx *Tx) error {
			for _, id := range st.put {
				if err := tx.PutPoint(Point{ID: id}); err != nil {
					return err
				}
			}
			for _, id := range st.del {
				if _, err := tx.DeletePoint(id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		s.View(func(tx *ReadTx) (err error) { n, err = tx.PointCount(); return err })
		if n != st.want {
			t.Errorf("step %d: PointCount = %d, want %d", i, n, st.want)
		}
	}
}

func TestOutboxOrderAndAck(t *testing.T) {
	s, _ := openTemp(t)
	var want []OutboxEntry
	for batch := range 3 {
		err := s.Apply(func(tx *Tx) error {
			for j := range 4 {
				e := OutboxEntry{Topic: "cairn.attributions", Key: []byte(fmt.Sprintf("k%d-%d", batch, j)), Value: []byte{byte(batch), byte(j)}}
				seq, err := tx.Enqueue(e.Topic, e.Key, e.Value)
				if err != nil {
					return err
				}
				e.Seq, e.Time = seq, tx.Time()
				want = append(want, e)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range want {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d, want %d", i, e.Seq, i+1)
		}
	}
	got, err := s.Pending(5)
	if err != nil || !reflect.DeepEqual(got, want[:5]) {
		t.Fatalf("Pending(5) = %+v, %v; want %+v", got, err, want[:5])
	}
	// Ack out of order, including an unknown seq and a repeat.
	if err := s.Ack(3, 1, 2, 99, 1); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Pending(0)
	if !reflect.DeepEqual(got, want[3:]) {
		t.Errorf("Pending after Ack(1,2,3) = %+v, want %+v", got, want[3:])
	}
	// Seqs are never reused, even once the outbox is empty and after reopen.
	var seqs []uint64
	for _, e := range got {
		seqs = append(seqs, e.Seq)
	}
	if err := s.Ack(seqs...); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Pending(0); len(got) != 0 {
		t.Errorf("Pending after acking all = %d entries, want 0", len(got))
	}
	s = reopen(t, s)
	var seq uint64
	if err := s.Apply(func(tx *Tx) (err error) { seq, err = tx.Enqueue("t", nil, nil); return err }); err != nil {
		t.Fatal(err)
	}
	if seq != 13 {
		t.Errorf("seq after ack-all and reopen = %d, want 13", seq)
	}
}

func TestOutboxReady(t *testing.T) {
	s, _ := openTemp(t)
	select {
	case <-s.OutboxReady():
	default:
		t.Fatal("no signal after Open")
	}
	s.Apply(func(tx *Tx) error { return tx.SetOffset("t", 0, 1) })
	select {
	case <-s.OutboxReady():
		t.Fatal("signal after an Apply that enqueued nothing")
	default:
	}
	s.Apply(func(tx *Tx) error { _, err := tx.Enqueue("t", nil, nil); return err })
	select {
	case <-s.OutboxReady():
	default:
		t.Fatal("no signal after Enqueue")
	}
}

func TestOutboxHeldUntilErased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	var failErase atomic.Bool
	opts := Options{NoSync: true, Faults: func(site string) error {
		if site == "erase" && failErase.Load() {
			return syscall.EIO
		}
		return nil
	}}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		es, err := s.Pending(0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, string(e.Key))
		}
		return out
	}
	deleteWithOutputs := func(id string) error {
		return s.Apply(func(tx *Tx) error {
			if _, err := tx.Enqueue("cairn.status", []byte("same-tx-before-delete"), nil); err != nil {
				return err
			}
			if ok, err := tx.DeletePoint(id); err != nil || !ok {
				return fmt.Errorf("DeletePoint = %v, %v", ok, err)
			}
			_, err := tx.Enqueue("cairn.audits", []byte("audit"), nil)
			return err
		})
	}
	slotCount := func() int {
		ids, _, err := slotFiles(slotsDir(path))
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	for _, id := range []string{"x", "y"} {
		if err := s.Apply(func(tx *Tx) error { return tx.PutPoint(samplePoint(id, 4)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(func(tx *Tx) error { _, err := tx.Enqueue("cairn.attributions", []byte("before"), nil); return err }); err != nil {
		t.Fatal(err)
	}
	// A deletion erases the slot before Apply returns, and holds nothing after it.
	if err := deleteWithOutputs("x"); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(), []string{"before", "same-tx-before-delete", "audit"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pending after a deletion = %q, want %q", got, want)
	}
	if n := slotCount(); n != 1 {
		t.Errorf("%d slots after deleting one of two points, want 1", n)
	}
	if err := s.Ack(1, 2, 3); err != nil {
		t.Fatal(err)
	}
	// An erasure that fails keeps everything from the deletion on held, and the slot.
	failErase.Store(true)
	if err := deleteWithOutputs("y"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("deletion with a failing erasure: %v, want the EIO", err)
	}
	s.Apply(func(tx *Tx) error { _, err := tx.Enqueue("cairn.attributions", []byte("after"), nil); return err })
	if got := keys(); len(got) != 0 {
		t.Errorf("Pending with the erasure undone = %q, want nothing", got)
	}
	if n := slotCount(); n != 1 {
		t.Errorf("%d slots, want the deleted point's still there", n)
	}
	// A Compact meanwhile rewrites the file but releases nothing: only the erasure does.
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := keys(); len(got) != 0 {
		t.Errorf("Pending after a Compact with the erasure undone = %q, want nothing", got)
	}
	// The next Open erases it and releases the hold.
	failErase.Store(false)
	s.Close()
	if s, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := slotCount(); n != 0 {
		t.Errorf("%d slots after reopening, want 0", n)
	}
	if got, want := keys(), []string{"same-tx-before-delete", "audit", "after"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pending after reopening = %q, want %q", got, want)
	}
	if held, _ := s.ScrubPending(); held {
		t.Error("still held after reopening")
	}
}

func TestVerifyAuditTampering(t *testing.T) {
	const n = 6
	tests := []struct {
		name    string
		tamper  func(tx *bolt.Tx) error
		wantSeq uint64
	}{
		{"body changed, checksum resealed", func(tx *bolt.Tx) error {
			return rewriteAudit(tx, 3, func(a *AuditRecord) { a.Body[0] ^= 1 })
		}, 3},
		{"body changed, raw byte flip", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			v := bytes.Clone(b.Get(u64Key(4)))
			v[len(v)-6] ^= 1
			return b.Put(u64Key(4), v)
		}, 4},
		{"hash and body rewritten consistently", func(tx *bolt.Tx) error {
			// An attacker who recomputes this record's hash breaks the next link.
			return rewriteAudit(tx, 2, func(a *AuditRecord) {
				a.Body = []byte("forged")
				a.Hash = chainHash(&a.PrevHash, a.Body)
			})
		}, 3},
		{"record removed", func(tx *bolt.Tx) error { return tx.Bucket(bucketAudit).Delete(u64Key(5)) }, 5},
		{"first prev_hash nonzero", func(tx *bolt.Tx) error {
			return rewriteAudit(tx, 1, func(a *AuditRecord) { a.PrevHash[31] = 1; a.Hash = chainHash(&a.PrevHash, a.Body) })
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTemp(t)
			for i := range n {
				if err := s.Apply(func(tx *Tx) error {
					_, err := tx.AppendAudit([]byte(fmt.Sprintf(`{"n":%d}`, i)))
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.VerifyAudit(); err != nil {
				t.Fatalf("VerifyAudit before tampering: %v", err)
			}
			s.Close()
			rawUpdate(t, path, tc.tamper)
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.VerifyAudit()
			var be *AuditBreakError
			if !errors.Is(err, ErrAuditBroken) || !errors.As(err, &be) {
				t.Fatalf("VerifyAudit = %v, want AuditBreakError", err)
			}
			if be.Seq != tc.wantSeq {
				t.Errorf("break at seq %d, want %d (%v)", be.Seq, tc.wantSeq, err)
			}
		})
	}
}

func rewriteAudit(tx *bolt.Tx, seq uint64, edit func(*AuditRecord)) error {
	b := tx.Bucket(bucketAudit)
	k := u64Key(seq)
	a, why := decodeAudit(k, b.Get(k))
	if why != "" {
		return errors.New(why)
	}
	edit(&a)
	return b.Put(k, encodeAudit(k, &a.PrevHash, &a.Hash, a.Body))
}

// markerVector returns n floats whose bytes are unlikely anywhere else in the
// file: high 32 bits 0x3FF0DEAD, low 32 bits 0xBEEF0000+i.
func markerVector(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = math.Float64frombits(0x3FF0DEAD_BEEF0000 + uint64(i))
	}
	return x
}

// countMarkers returns how many of x's elements have their 8 little-endian
// bytes somewhere in the file.
func countMarkers(t *testing.T, path string, x []float64) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// And every slot file: the state is the file and its slots.
	ids, _, err := slotFiles(slotsDir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(slotsDir(path), slotName(id)))
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	n := 0
	for _, v := range x {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		if bytes.Contains(raw, b[:]) {
			n++
		}
	}
	return n
}

func TestErasureScan(t *testing.T) {
	s, path := openTemp(t)
	secret := markerVector(64)
	other := samplePoint("keep", 64)
	err := s.Apply(func(tx *Tx) error {
		if err := tx.PutPoint(other); err != nil {
			return err
		}
		return tx.PutPoint(Point{ID: "victim", X: secret, HasLabel: true, Label: 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Several later transactions, so old page copies exist as in a real file.
	for i := range 5 {
		s.Apply(func(tx *Tx) error { return tx.SetOffset("cairn.train", 0, int64(i)) })
	}
	if got := countMarkers(t, path, secret); got != len(secret) {
		t.Fatalf("before deletion: %d of %d marker values in file, want all (scan is broken)", got, len(secret))
	}
	err = s.Apply(func(tx *Tx) error {
		if _, err := tx.DeletePoint("victim"); err != nil {
			return err
		}
		// As the daemon does: the audit to emit after Compact, crash-safe.
		return tx.PutPending(1, []byte(`{"deleted":"victim"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The input lived in a slot, which the deletion zeroed and unlinked before Apply
	// returned: no Compact, no rewrite of the file.
	if got := countMarkers(t, path, secret); got != 0 {
		t.Errorf("after DeletePoint: %d of %d marker values still in the file or its slots, want 0", got, len(secret))
	}
	// A descriptor opened before Compact still reaches the old inode after the
	// rename; Compact overwrites it with zeros.
	oldFile, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer oldFile.Close()
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := s.waitScrub(); err != nil { // the overwrite runs after Compact returns
		t.Fatal(err)
	}
	oldBytes, err := io.ReadAll(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(oldBytes) == 0 || bytes.ContainsFunc(oldBytes, func(r rune) bool { return r != 0 }) {
		t.Errorf("old inode after Compact: %d bytes, not all zero", len(oldBytes))
	}
	if got := countMarkers(t, path, secret); got != 0 {
		t.Errorf("after Compact: %d of %d marker values still in the file, want 0", got, len(secret))
	}
	if _, err := os.Stat(compactTempPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("compaction temp file left behind: %v", err)
	}
	// Live data survives the compaction; the deleted point does not.
	p, ok, err := viewPoint(s, "keep")
	if err != nil || !ok || !pointsEqual(p, other) {
		t.Errorf("Point(keep) after Compact = %+v, %v, %v", p, ok, err)
	}
	if _, ok, _ := viewPoint(s, "victim"); ok {
		t.Error("deleted point readable after Compact")
	}
	// Compact copies the pending bucket: the audit to emit is still there.
	var body []byte
	err = s.View(func(tx *ReadTx) (err error) { body, _, err = tx.Pending(1); return err })
	if want := `{"deleted":"victim"}`; err != nil || string(body) != want {
		t.Errorf("Pending(1) after Compact = %q, %v; want %q", body, err, want)
	}
	err = s.Apply(func(tx *Tx) error {
		if _, err := tx.AppendAudit(body); err != nil {
			return err
		}
		_, err := tx.DeletePending(1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyAudit(); err != nil {
		t.Errorf("VerifyAudit after Compact: %v", err)
	}
	// And the store keeps working after the swap.
	if err := s.Apply(func(tx *Tx) error { return tx.PutPoint(samplePoint("later", 2)) }); err != nil {
		t.Errorf("Apply after Compact: %v", err)
	}
	s = reopen(t, s)
	if _, ok, _ := viewPoint(s, "later"); !ok {
		t.Error("point written after Compact lost on reopen")
	}
}

func TestOpenRemovesStaleCompactTemp(t *testing.T) {
	s, path := openTemp(t)
	writeAll(t, s)
	s.Close()
	if err := os.WriteFile(compactTempPath(path), []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(compactTempPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file not removed: %v", err)
	}
}

func TestClosedAndFinished(t *testing.T) {
	s, _ := openTemp(t)
	var leakedTx *Tx
	var leakedRead *ReadTx
	s.Apply(func(tx *Tx) error { leakedTx = tx; return nil })
	s.View(func(tx *ReadTx) error { leakedRead = tx; return nil })
	if err := leakedTx.PutPoint(Point{ID: "x"}); !errors.Is(err, ErrTxDone) {
		t.Errorf("PutPoint on finished Tx = %v, want ErrTxDone", err)
	}
	if _, _, err := leakedRead.Point("x"); !errors.Is(err, ErrTxDone) {
		t.Errorf("Point on finished ReadTx = %v, want ErrTxDone", err)
	}
	if err := leakedTx.PutPending(1, nil); !errors.Is(err, ErrTxDone) {
		t.Errorf("PutPending on finished Tx = %v, want ErrTxDone", err)
	}
	if _, err := leakedTx.DeletePending(1); !errors.Is(err, ErrTxDone) {
		t.Errorf("DeletePending on finished Tx = %v, want ErrTxDone", err)
	}
	if _, _, err := leakedRead.Pending(1); !errors.Is(err, ErrTxDone) {
		t.Errorf("Pending on finished ReadTx = %v, want ErrTxDone", err)
	}
	if err := leakedRead.ForEachPending(func(uint64, []byte) error { return nil }); !errors.Is(err, ErrTxDone) {
		t.Errorf("ForEachPending on finished ReadTx = %v, want ErrTxDone", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	checks := map[string]error{
		"Apply":   s.Apply(func(*Tx) error { return nil }),
		"View":    s.View(func(*ReadTx) error { return nil }),
		"Ack":     s.Ack(1),
		"Compact": s.Compact(),
		"Verify":  s.VerifyAudit(),
	}
	_, checks["Pending"] = s.Pending(1)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// Concurrent readers, a writer and compactions; run with -race.
func TestConcurrentUse(t *testing.T) {
	s, _ := openTemp(t)
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 50 {
			err := s.Apply(func(tx *Tx) error {
				if err := tx.PutPoint(samplePoint(fmt.Sprintf("p%03d", i), 8)); err != nil {
					return err
				}
				if i%7 == 0 {
					if _, err := tx.DeletePoint(fmt.Sprintf("p%03d", i-1)); err != nil {
						return err
					}
				}
				_, err := tx.Enqueue("t", nil, []byte{byte(i)})
				return err
			})
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			if err := s.View(func(tx *ReadTx) error { return tx.ForEachPoint(func(Point) error { return nil }) }); err != nil {
				errc <- err
				return
			}
			es, err := s.Pending(10)
			if err == nil && len(es) > 0 {
				err = s.Ack(es[0].Seq)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 3 {
			if err := s.Compact(); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestOutboxSpan: the span counts the entries from the oldest to the newest as they
// are enqueued and acknowledged oldest first, and is 0 for an empty outbox.
func TestOutboxSpan(t *testing.T) {
	s, _ := openTemp(t)
	span := func() int {
		t.Helper()
		n, err := s.OutboxSpan()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := span(); n != 0 {
		t.Errorf("empty outbox: span %d", n)
	}
	var seqs []uint64
	for i := range 5 {
		if err := s.Apply(func(tx *Tx) error {
			seq, err := tx.Enqueue("t", []byte("k"), []byte{byte(i)})
			seqs = append(seqs, seq)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n := span(); n != i+1 {
			t.Errorf("after %d enqueues: span %d", i+1, n)
		}
	}
	if err := s.Ack(seqs[:2]...); err != nil {
		t.Fatal(err)
	}
	if n := span(); n != 3 {
		t.Errorf("after acking 2 of 5: span %d, want 3", n)
	}
	if err := s.Ack(seqs[2:]...); err != nil {
		t.Fatal(err)
	}
	if n := span(); n != 0 {
		t.Errorf("after acking all: span %d, want 0", n)
	}
}

// TestInjectedFaults: a fault at commit rolls the whole transaction back (state,
// offsets, outbox), a fault at ack keeps the entries, a fault at compact leaves the
// file as it was and its held outbox entries held; each error names the site and wraps
// the injected cause.
func TestInjectedFaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	var failAt atomic.Pointer[string]
	s, err := Open(path, Options{NoSync: true, Faults: func(site string) error {
		if p := failAt.Load(); p != nil && *p == site {
			return syscall.ENOSPC
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fail := func(site string) { failAt.Store(&site) }
	put := func(id string) error {
		return s.Apply(func(tx *Tx) error {
			if err := tx.PutPoint(Point{ID: id, X: []float64{1}}); err != nil {
				return err
			}
			if err := tx.SetOffset("t", 0, 7); err != nil {
				return err
			}
			_, err := tx.Enqueue("out", []byte(id), []byte("v"))
			return err
		})
	}
	fail("commit")
	if err := put("a"); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("Apply under a commit fault: %v, want ENOSPC naming the site", err)
	}
	if n, _ := s.OutboxSpan(); n != 0 {
		t.Errorf("a failed commit left %d outbox entries", n)
	}
	if err := s.View(func(tx *ReadTx) error {
		if _, ok, _ := tx.Point("a"); ok {
			return errors.New("the point of a failed commit is stored")
		}
		if _, ok, _ := tx.Offset("t", 0); ok {
			return errors.New("the offset of a failed commit is stored")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	fail("none")
	if err := put("a"); err != nil {
		t.Fatal(err)
	}
	es, err := s.Pending(0)
	if err != nil || len(es) != 1 {
		t.Fatalf("Pending: %v, %v", es, err)
	}
	fail("ack")
	if err := s.Ack(es[0].Seq); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Ack under a fault: %v", err)
	}
	if n, _ := s.OutboxSpan(); n != 1 {
		t.Errorf("a failed ack removed the entry (span %d)", n)
	}
	// A deletion whose erasure fails holds later outputs (TestOutboxHeldUntilErased);
	// a failed Compact leaves the store as it was and usable.
	fail("compact")
	if err := s.Compact(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Compact under a fault: %v", err)
	}
	fail("none")
	if err := s.Apply(func(tx *Tx) error {
		if _, err := tx.DeletePoint("a"); err != nil {
			return err
		}
		_, err := tx.Enqueue("out", []byte("audit"), []byte("v"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if es, _ := s.Pending(0); len(es) != 2 {
		t.Errorf("after the deletion %d entries are publishable, want 2", len(es))
	}
}
