package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// frozenFiles are the store files under testdata, each written by the daemon and
// storage code of an earlier commit (testdata/README.md says which and how), with the
// format version they were written in.
var frozenFiles = []struct {
	name    string
	version uint64
}{
	{"v1-schema1", 1},
	{"v2-schema1", 2},
	{"v2-schema2", 2},
	{"v3-schema3", 3},
}

// frozenGolden is what the old writer read back from its file with its own storage
// API (testdata/<name>.json, written by testdata/gen). The pool states are the
// daemon's business; storage only keeps them as raw JSON.
type frozenGolden struct {
	FormatVersion uint32
	PoolSchema    uint32
	Points        []Point
	Offsets       []Offset
	Models        []Model
	FitStats      []FitStats
	Outbox        []OutboxEntry
	Audit         []AuditRecord
	Pending       []struct {
		Seq  uint64
		Body []byte
	}
	Pool       PoolState
	PoolPoints []struct {
		ID     string
		Record []byte
	}
	Landmarks  []string
	PoolStates json.RawMessage
}

func loadGolden(t *testing.T, name string) frozenGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g frozenGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return g
}

// copyFrozen copies testdata/<name>.db into a fresh temporary directory and returns
// the copy's path: tests open copies only, the frozen files are never modified.
func copyFrozen(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkGolden reads everything back through the Store and compares it with what the
// old writer read back from the same file.
func checkGolden(t *testing.T, s *Store, g frozenGolden) {
	t.Helper()
	err := s.View(func(tx *ReadTx) error {
		var pts []Point
		if err := tx.ForEachPoint(func(p Point) error { pts = append(pts, p); return nil }); err != nil {
			return err
		}
		if len(pts) != len(g.Points) {
			t.Errorf("%d points, the old writer stored %d", len(pts), len(g.Points))
		}
		for i := range min(len(pts), len(g.Points)) {
			want := g.Points[i]
			want.Version = -1 // files before format 5 hold no versions
			if !pointsEqual(pts[i], want) {
				t.Errorf("point %d: got %+v, want %+v", i, pts[i], g.Points[i])
			}
		}
		if n, err := tx.PointCount(); err != nil || n != len(g.Points) {
			t.Errorf("PointCount = %d, %v; want %d", n, err, len(g.Points))
		}
		vs, err := tx.ModelVersions()
		if err != nil {
			return err
		}
		var models []Model
		var stats []FitStats
		for _, v := range vs {
			m, _, err := tx.Model(v)
			if err != nil {
				return err
			}
			models = append(models, m)
			if f, ok, err := tx.FitStats(v); err != nil {
				return err
			} else if ok {
				stats = append(stats, f)
			}
		}
		if !reflect.DeepEqual(models, g.Models) || !reflect.DeepEqual(stats, g.FitStats) {
			t.Errorf("models %+v, fit stats %+v;\nwant %+v, %+v", models, stats, g.Models, g.FitStats)
		}
		var audit []AuditRecord
		if err := tx.ForEachAudit(1, func(r AuditRecord) error { audit = append(audit, r); return nil }); err != nil {
			return err
		}
		if !reflect.DeepEqual(audit, g.Audit) {
			t.Errorf("audit records %+v, want %+v", audit, g.Audit)
		}
		var pending []struct {
			Seq  uint64
			Body []byte
		}
		if err := tx.ForEachPending(func(seq uint64, body []byte) error {
			pending = append(pending, struct {
				Seq  uint64
				Body []byte
			}{seq, body})
			return nil
		}); err != nil {
			return err
		}
		if !reflect.DeepEqual(pending, g.Pending) {
			t.Errorf("pending %+v, want %+v", pending, g.Pending)
		}
		ps, ok, err := tx.PoolState()
		if err != nil || !ok || !reflect.DeepEqual(ps, g.Pool) {
			t.Errorf("PoolState = schema %d, %d bytes, %v, %v; want schema %d, %d bytes", ps.Schema, len(ps.Data), ok, err, g.Pool.Schema, len(g.Pool.Data))
		}
		var recs []struct {
			ID     string
			Record []byte
		}
		if err := tx.ForEachPoolPoint(func(id string, rec []byte) error {
			recs = append(recs, struct {
				ID     string
				Record []byte
			}{id, rec})
			return nil
		}); err != nil {
			return err
		}
		if !reflect.DeepEqual(recs, g.PoolPoints) {
			t.Errorf("pool point records %x, want %x", recs, g.PoolPoints)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if offs, err := s.Offsets(); err != nil || !reflect.DeepEqual(offs, g.Offsets) {
		t.Errorf("Offsets = %+v, %v; want %+v", offs, err, g.Offsets)
	}
	if out, err := s.Pending(0); err != nil || !reflect.DeepEqual(out, g.Outbox) {
		t.Errorf("outbox = %+v, %v; want %+v", out, err, g.Outbox)
	}
	if err := s.VerifyAudit(); err != nil {
		t.Errorf("VerifyAudit: %v", err)
	}
}

// TestFrozenFiles: a copy of each frozen file of an earlier format opens, is migrated
// to FormatVersion by adding only the empty buckets of the later versions and the new
// format_version (every other key and value byte for byte as the old writer left it),
// reads back what the old writer stored, opens again without any change, and then
// takes writes where the old sequences left off.
func TestFrozenFiles(t *testing.T) {
	for _, ff := range frozenFiles {
		t.Run(ff.name, func(t *testing.T) {
			g := loadGolden(t, ff.name)
			if uint64(g.FormatVersion) != ff.version {
				t.Fatalf("%s.json says format %d, want %d", ff.name, g.FormatVersion, ff.version)
			}
			path := copyFrozen(t, ff.name)
			before := dumpFile(t, path)
			if v, why := decodeMetaU64(metaFormat, before["meta"]["format_version"]); why != "" || v != ff.version {
				t.Fatalf("frozen format_version = %d (%s), want %d", v, why, ff.version)
			}
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			checkGolden(t, s, g)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			want := map[string]map[string][]byte{}
			for name, kvs := range before {
				want[name] = map[string][]byte{}
				for k, v := range kvs {
					want[name][k] = v
				}
			}
			for _, name := range allBuckets {
				if want[string(name)] == nil {
					want[string(name)] = map[string][]byte{}
				}
			}
			want["meta"]["format_version"] = v1Value([]byte("format_version"), le64(FormatVersion))
			// Format 4 moved every input into a slot, numbered in key order; the
			// slots share one segment (format 8), each at a block boundary.
			var slot, off uint64
			for _, k := range slices.Sorted(maps.Keys(before["points"])) {
				p, ref, why := decodePoint([]byte(k), before["points"][k])
				if why != "" || ref != nil {
					t.Fatalf("frozen point %q: %s (slot %v)", k, why, ref)
				}
				slot++
				b := slotBytes(p.X)
				want["points"][k] = encodePoint([]byte(k), &p, &slotRef{id: slot, n: uint32(len(b)), crc: crc32.Checksum(b, castagnoli), seg: 1, off: off})
				off += alignUp(uint64(len(b)))
			}
			want["meta"]["slot_last"] = v1Value([]byte("slot_last"), le64(slot))
			migrated := dumpFile(t, path)
			if !reflect.DeepEqual(migrated, want) {
				t.Fatalf("file after migration differs from the frozen file plus the new buckets and version:\n got  %x\n want %x", migrated, want)
			}

			s, err = Open(path, Options{})
			if err != nil {
				t.Fatalf("second Open: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if again := dumpFile(t, path); !reflect.DeepEqual(again, migrated) {
				t.Errorf("a second Open changed the file")
			}

			// The migrated file takes writes where the old sequences left off.
			s, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var seq uint64
			var link AuditLink
			err = s.Apply(func(tx *Tx) (err error) {
				if err := tx.PutPending(1000, []byte("next")); err != nil {
					return err
				}
				if err := tx.PutPoolPoint(g.Points[0].ID, []byte("rec")); err != nil {
					return err
				}
				if link, err = tx.AppendAudit([]byte("next")); err != nil {
					return err
				}
				seq, err = tx.Enqueue("t.audits", nil, nil)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			lastOut := g.Outbox[len(g.Outbox)-1].Seq
			if seq != lastOut+1 || link.Seq != uint64(len(g.Audit))+1 || link.PrevHash != g.Audit[len(g.Audit)-1].Hash {
				t.Errorf("after migration: outbox seq %d, audit %+v; want outbox seq %d, audit seq %d chained to the last hash", seq, link, lastOut+1, len(g.Audit)+1)
			}
			if err := s.VerifyAudit(); err != nil {
				t.Errorf("VerifyAudit after a write: %v", err)
			}
		})
	}
}

// TestFrozenFilesRefused: a frozen file of an earlier version that fails a check of
// its migration is refused with *FormatError naming its version and left byte for byte
// as it was: the check and the migration are one transaction.
func TestFrozenFilesRefused(t *testing.T) {
	for _, tc := range []struct {
		file   string
		got    uint32
		name   string
		mutate func(tx *bolt.Tx) error
	}{
		{"v1-schema1", 1, "missing audit bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketAudit) }},
		{"v1-schema1", 1, "missing points bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPoints) }},
		{"v1-schema1", 1, "already has pending", func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketPending); return err }},
		{"v2-schema2", 2, "missing pending bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPending) }},
		{"v2-schema2", 2, "already has poolpoints", func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketPoolPts); return err }},
		{"v3-schema3", 3, "missing poolpoints bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPoolPts) }},
	} {
		t.Run(tc.file+"/"+tc.name, func(t *testing.T) {
			path := copyFrozen(t, tc.file)
			rawUpdate(t, path, tc.mutate)
			before := dumpFile(t, path)
			_, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
			var fe *FormatError
			if !errors.Is(err, ErrUnknownFormat) || !errors.As(err, &fe) || fe.Got != tc.got || fe.Want != FormatVersion {
				t.Fatalf("Open = %v; want *FormatError with Got %d, Want %d", err, tc.got, FormatVersion)
			}
			if after := dumpFile(t, path); !reflect.DeepEqual(after, before) {
				t.Errorf("refused file was modified:\n before %x\n after  %x", before, after)
			}
		})
	}
}

// TestFrozenFilesUntouched: the tests above work on copies; the frozen files still
// carry their old format version.
func TestFrozenFilesUntouched(t *testing.T) {
	for _, ff := range frozenFiles {
		b, err := os.ReadFile(filepath.Join("testdata", ff.name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, v1Value([]byte("format_version"), le64(ff.version))) {
			t.Errorf("testdata/%s.db no longer holds format_version %d", ff.name, ff.version)
		}
	}
}
