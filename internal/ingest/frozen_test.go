package ingest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/storage"
)

// frozenDir holds store files written by the daemon of earlier commits, one per storage
// format and pool schema (README.md there says which commit and program wrote each).
const frozenDir = "../../storage/testdata"

// frozenGolden is the part of testdata/<name>.json the pool needs: what the old daemon
// stored and held in memory after its script.
type frozenGolden struct {
	PoolSchema uint32
	Pool       storage.PoolState
	PoolPoints []struct {
		ID     string
		Record []byte
	}
	Landmarks  []string
	PoolStates [2]coreset.State // without LandmarkFeatures
}

func loadFrozen(t *testing.T, name string) frozenGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(frozenDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g frozenGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return g
}

// openFrozen opens a copy of a frozen store (never the file itself).
func openFrozen(t testing.TB, name string) *storage.Store {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(frozenDir, name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, path)
	t.Cleanup(func() { st.Close() })
	return st
}

// poolContent is everything of the pool in st: the blob and the records.
func poolContent(t *testing.T, st *storage.Store) (storage.PoolState, []storedRecord) {
	t.Helper()
	return storedPool(t, st), storedRecords(t, st)
}

// TestRestoreFrozenStores: copies of stores written by the daemon of earlier commits
// (storage format 1 and 2 with pool schema 1, format 2 with schema 2, format 3 with
// schema 3; testdata/README.md) restore, or are refused with a named error where that is
// the documented behaviour:
//
//   - schema 1 (held the landmarks' features): NewIngest and StateHash refuse it with
//     ErrPoolState naming the schema, and leave the stored pool as it was;
//   - schema 2 and 3: the stored blob still parses to exactly the states the old daemon
//     held (poolStates against the golden file). Every one of these files was written
//     with the previous feature algorithm (v2: features in float64), so NewIngest
//     re-selects the pool on the stored float32 features: the restored pool is batch
//     greedy over the stored points (checkAgainstReference), the store then holds
//     the current schema (PoolSchema) under the current fingerprint, and a second
//     restore writes nothing.
//
// Then the converted v2 store and the v3 store hash equal and stay equal under more
// batches.
func TestRestoreFrozenStores(t *testing.T) {
	cfg := testConfig()
	v3 := loadFrozen(t, "v3-schema3")
	restored := map[string]*storage.Store{} // open until the end of the test
	top := t
	for _, name := range []string{"v1-schema1", "v2-schema1", "v2-schema2", "v3-schema3"} {
		t.Run(name, func(t *testing.T) {
			g := loadFrozen(t, name)
			st := openFrozen(top, name)
			if g.PoolSchema == 1 {
				_, err := New(cfg, st, testLogger(t))
				if !errors.Is(err, ErrPoolState) || !strings.Contains(err.Error(), "schema 1") {
					t.Errorf("NewIngest: %v, want ErrPoolState naming schema 1", err)
				}
				if _, err := StateHash(cfg, st); !errors.Is(err, ErrPoolState) {
					t.Errorf("StateHash: %v, want ErrPoolState", err)
				}
				if ps, recs := poolContent(t, st); !reflect.DeepEqual(ps, g.Pool) || len(recs) != 0 {
					t.Errorf("the refused pool was changed")
				}
				return
			}
			ps0, recs0 := poolContent(t, st)
			if !reflect.DeepEqual(ps0, g.Pool) {
				t.Fatalf("stored pool differs from the golden file's before the restore")
			}
			fp, a, b, err := poolStates(ps0, recs0)
			if err != nil {
				t.Fatal(err)
			}
			for v, s := range []coreset.State{a, b} {
				if !reflect.DeepEqual(s, g.PoolStates[v]) {
					t.Errorf("view %d parsed\n got %+v\nwant %+v", v, s, g.PoolStates[v])
				}
			}
			in := newTestIngest(t, cfg, st)
			if fp != in.feat.PreviousFingerprint() {
				t.Fatalf("the frozen pool's fingerprint %.12s is not the previous algorithm's", fp)
			}
			pts := map[string]event{}
			for _, id := range in.cache.IDs() {
				pts[id] = event{id: id, x: in.cache.Get(id).X}
			}
			checkAgainstReference(t, cfg, in, st, pts)
			ps, recs := poolContent(t, st)
			if got, err := Fingerprint(ps); ps.Schema != PoolSchema || err != nil || got != in.feat.Fingerprint() {
				t.Errorf("after the restore the store holds schema %d with fingerprint %.12s (%v), want %d with the current one",
					ps.Schema, got, err, PoolSchema)
			}
			checkPersisted(t, in, st, "after the restore")

			again := newTestIngest(t, cfg, st)
			if ps2, recs2 := poolContent(t, st); !reflect.DeepEqual(ps2, ps) || !reflect.DeepEqual(recs2, recs) {
				t.Errorf("a second restore changed the stored pool")
			}
			if !reflect.DeepEqual(again.pool.A.State(), in.pool.A.State()) || !reflect.DeepEqual(again.pool.B.State(), in.pool.B.State()) {
				t.Errorf("a second restore gives another pool")
			}
			restored[name] = st
		})
	}
	conv, ref := restored["v2-schema2"], restored["v3-schema3"]
	if conv == nil || ref == nil {
		return
	}
	h1, err1 := StateHash(cfg, ref)
	h2, err2 := StateHash(cfg, conv)
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Errorf("StateHash: v3 %s, %v; converted v2 %s, %v", h1, err1, h2, err2)
	}
	g := newGen(t, 77, 6)
	more := msgs(cfg.Kafka.Topics.Train, []event{g.upsert("q1"), g.del(v3.Landmarks[0]), g.upsert("q2"), g.upsert("p0000")})
	for i := range more {
		more[i].Offset = int64(100 + i)
	}
	for _, st := range []*storage.Store{conv, ref} {
		applyInBatches(t, newTestIngest(t, cfg, st), more, 2)
	}
	p1, r1 := poolContent(t, conv)
	p2, r2 := poolContent(t, ref)
	if !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(r1, r2) {
		t.Errorf("the converted v2 store and the v3 store diverged under the same batches")
	}
}
