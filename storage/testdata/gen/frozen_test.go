package daemon

// Throwaway generator of the frozen store files in storage/testdata (see the README
// there). Copied into daemon/ of an old commit's worktree together with the era file
// of that commit's storage format (era1_test.go, era2_test.go or era3_test.go) and run
// with
//
//	FROZEN_OUT=/abs/path/name.db go test -count=1 -run TestGenFrozen ./daemon/
//
// It writes name.db through the daemon's own ingest path (points, pool state, offsets,
// dead letters in the outbox, deletions with their pending audits where the format has
// them) and the storage API of that commit (a model, its fit statistics, an audit
// record with its outbox event), then reads everything back
// through the same commit's storage API and writes it as name.json: what the old
// writer stored.

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/cairnhq/cairn/storage"
)

type frozenGolden struct {
	FormatVersion uint32
	PoolSchema    uint32
	Points        []storage.Point
	Offsets       []storage.Offset
	Models        []storage.Model
	FitStats      []storage.FitStats
	Outbox        []storage.OutboxEntry
	Audit         []storage.AuditRecord
	Pending       []frozenPending `json:",omitempty"`
	Pool          storage.PoolState
	PoolPoints    []frozenRecord `json:",omitempty"`
	// Landmarks are the served landmarks (view A then view B) after the script.
	Landmarks []string
	// PoolStates are both views' coreset.State (with Points, without
	// LandmarkFeatures, which schema 2 and 3 do not store), as the writer held them.
	PoolStates [2]any
}

type frozenPending struct {
	Seq  uint64
	Body []byte
}

type frozenRecord struct {
	ID     string
	Record []byte
}

func TestGenFrozen(t *testing.T) {
	out := os.Getenv("FROZEN_OUT")
	if out == "" {
		t.Skip("FROZEN_OUT not set")
	}
	ctx := context.Background()
	cfg := testConfig()
	st, err := storage.Open(out, storage.Options{InitialMmapSize: 1 << 15}) // a small map keeps the file small (bbolt grows a file by 16 MiB past its map size)
	if err != nil {
		t.Fatal(err)
	}
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 2026, 6)
	topic := cfg.Kafka.Topics.Train
	next := map[int]int64{}
	apply := func(part int, evs ...event) {
		t.Helper()
		ms := msgs(topic, evs)
		for i := range ms {
			ms[i].Partition = part
			ms[i].Offset = next[part]
			next[part]++
		}
		if _, err := in.Apply(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	var first []event
	for i := 0; i < 10; i++ {
		first = append(first, g.upsert(id(i)))
	}
	apply(0, first...)
	// A poison message goes to the dead-letter outbox.
	apply(1, g.upsert(id(10)), g.upsert(id(11)), event{key: "bad-json", value: []byte(`{"v":1,"op":"upsert"`)})
	if err := in.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// After the sync: a landmark deletion (inexact, stale), a replacement, a new point
	// and a deletion of a point that is not a landmark.
	lm := in.Landmarks()
	isLM := map[string]bool{}
	for _, l := range lm {
		isLM[l] = true
	}
	var plain string
	for i := 11; i >= 0; i-- {
		if !isLM[id(i)] && id(i) != lm[0] {
			plain = id(i)
			break
		}
	}
	evs := []event{g.del(lm[0]), g.upsert(id(3)), g.upsert(id(12))}
	if plain != "" {
		evs = append(evs, g.del(plain))
	}
	apply(2, evs...)
	// Records the ingest path of these commits does not write: through the storage API.
	model := storage.Model{
		Version:   1,
		Landmarks: lm[:3],
		A:         storage.Matrix{Rows: 3, Cols: 2, Data: []float64{0.5, -1.25, 2, 0, -0.0625, 3.5}},
		A0:        storage.Matrix{Rows: 3, Cols: 2, Data: []float64{0.25, -1, 1.5, 0.125, 0, 3}},
		B:         storage.Matrix{Rows: 1, Cols: 2, Data: []float64{0.75, -0.5}},
		Meta:      []byte(`{"loss":"barlow","epochs":3}`),
	}
	stats := storage.FitStats{Version: 1, Seeds: []uint64{11, 12, 1 << 63}, Mean: []float64{0.5, 1, 1.5}, Var: []float64{0.01, 0.02, 0.03}, Meta: []byte(`{"runs":3}`)}
	if err := st.Apply(func(tx *storage.Tx) error {
		if err := tx.PutModel(model); err != nil {
			return err
		}
		if err := tx.PutFitStats(stats); err != nil {
			return err
		}
		body := []byte(`{"v":1,"request":"r-frozen","deleted":["` + lm[0] + `"]}`)
		if _, err := tx.AppendAudit(body); err != nil {
			return err
		}
		_, err := tx.Enqueue("t.audits", []byte("r-frozen"), body)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(); err != nil {
		t.Fatal(err)
	}

	gold := frozenGolden{FormatVersion: storage.FormatVersion, PoolSchema: PoolSchema, Landmarks: in.Landmarks()}
	a, b := in.pool.A.State(), in.pool.B.State()
	a.LandmarkFeatures, b.LandmarkFeatures = nil, nil
	gold.PoolStates = [2]any{a, b}
	if gold.Offsets, err = st.Offsets(); err != nil {
		t.Fatal(err)
	}
	if gold.Outbox, err = st.Pending(0); err != nil {
		t.Fatal(err)
	}
	if err := st.View(func(tx *storage.ReadTx) error {
		if err := tx.ForEachPoint(func(p storage.Point) error { gold.Points = append(gold.Points, p); return nil }); err != nil {
			return err
		}
		vs, err := tx.ModelVersions()
		if err != nil {
			return err
		}
		for _, v := range vs {
			m, _, err := tx.Model(v)
			if err != nil {
				return err
			}
			f, ok, err := tx.FitStats(v)
			if err != nil {
				return err
			}
			gold.Models = append(gold.Models, m)
			if ok {
				gold.FitStats = append(gold.FitStats, f)
			}
		}
		if err := tx.ForEachAudit(1, func(r storage.AuditRecord) error { gold.Audit = append(gold.Audit, r); return nil }); err != nil {
			return err
		}
		if gold.Pool, _, err = tx.PoolState(); err != nil {
			return err
		}
		return readEra(tx, &gold)
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(gold.Points, func(i, j int) bool { return gold.Points[i].ID < gold.Points[j].ID })
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(gold, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out[:len(out)-len(".db")]+".json", append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
