package ingest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/base/binenc"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
)

// testPair builds a pool pair over n random points with the test model, synced, then
// with one landmark deleted (so the state is inexact and stale, and every State field
// carries a non-default value).
func testPair(t testing.TB, n int) (*pipeline.Features, coreset.Config, *coreset.Pair, [2]coreset.FeatureSource) {
	t.Helper()
	return testPairConfig(t, testConfig(), n, true)
}

// testPairConfig is testPair under cfg, with the landmark deletion only when deleteOne.
func testPairConfig(t testing.TB, cfg config.Config, n int, deleteOne bool) (*pipeline.Features, coreset.Config, *coreset.Pair, [2]coreset.FeatureSource) {
	t.Helper()
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := PoolConfig(cfg, feat.Dim())
	if err != nil {
		t.Fatal(err)
	}
	pr, err := coreset.NewPair(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	d, q := feat.InputDim(), feat.Dim()
	ids, xs := randPoints(rand.New(rand.NewPCG(5, 5)), n, d)
	fs := make([]float64, 2*n*q)
	feat.BothViewsTo(fs, make([]float64, 2*n*d), xs, ids)
	src := [2]coreset.MapSource{{}, {}}
	for i, id := range ids {
		fa, fb := fs[2*i*q:(2*i+1)*q], fs[(2*i+1)*q:(2*i+2)*q]
		src[0][id], src[1][id] = fa, fb
		if err := pr.Insert(id, fa, fb); err != nil {
			t.Fatal(err)
		}
	}
	if n > 0 {
		if err := pr.Sync(src[0], src[1]); err != nil {
			t.Fatal(err)
		}
		if deleteOne {
			if err := pr.Delete(pr.A.Landmarks()[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return feat, pcfg, pr, [2]coreset.FeatureSource{src[0], src[1]}
}

// configLen is the length of Version and Config at the start of a view's state in
// schemas 2 and 3, which have no Config.Normalize (its byte is the next one in schemas
// 4 and 5, then schema 5's f64 Config.Tolerance); schema 2 held the points after it
// (storage/FORMAT.md "Pool state").
const configLen = 81

// coreV4 is the schema 4 core of s: schema 5's without Config.Tolerance (the 8 bytes
// after Config.Normalize's) and without StepMax and StepMaxIDs (after PivotValues).
// Tolerance and the step maxima are lost (schema 4 has none; they decode as 0 and nil).
func coreV4(s coreset.State) []byte {
	core, _ := s.AppendBinary(nil)
	pv := configLen + 1 + 8 + 4 + 8 + 4 + 8*len(s.PivotValues) // PivotValues' end
	for _, id := range s.Landmarks {
		pv += 4 + len(id)
	}
	sm := 4 + 8*len(s.StepMax) + 4
	for _, id := range s.StepMaxIDs {
		sm += 4 + len(id)
	}
	out := append([]byte(nil), core[:configLen+1]...)
	out = append(out, core[configLen+1+8:pv]...)
	return append(out, core[pv+sm:]...)
}

// encodePoolV4 is the schema 4 encoder the daemon used before schema 5, kept for the
// codec tests: per view, coreV4.
func encodePoolV4(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	w, err := hex.DecodeString(fp)
	if err != nil || len(w) != fingerprintLen {
		return storage.PoolState{}, fmt.Errorf("fingerprint %q is not 32 hex bytes", fp)
	}
	for _, p := range []*coreset.Pool{pr.A, pr.B} {
		w = append(w, coreV4(p.CoreState())...)
	}
	return storage.PoolState{Schema: poolSchema4, Data: w}, nil
}

// encodePoolV3 is the schema 3 encoder the daemon used before schema 4, kept for the
// codec tests: per view, the schema 4 core without Config.Normalize's byte. The state's
// Normalize is lost (schema 3 has none; it decodes as false).
func encodePoolV3(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	w, err := hex.DecodeString(fp)
	if err != nil || len(w) != fingerprintLen {
		return storage.PoolState{}, fmt.Errorf("fingerprint %q is not 32 hex bytes", fp)
	}
	for _, p := range []*coreset.Pool{pr.A, pr.B} {
		core := coreV4(p.CoreState())
		w = append(append(w, core[:configLen]...), core[configLen+1:]...)
	}
	return storage.PoolState{Schema: poolSchema3, Data: w}, nil
}

// encodePoolV2 is the schema 2 encoder the daemon used before schema 3, kept for the
// codec tests and as the "before" of BenchmarkPoolPersist: per view, the schema 3 core
// with every point's record (u32 n, n × (bytes id, f64 Diag, f64 Residual), sorted by
// id) after Version and Config. TestRestoreFrozenStores checks that it writes what the
// schema 2 daemon wrote.
func encodePoolV2(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	w, err := hex.DecodeString(fp)
	if err != nil || len(w) != fingerprintLen {
		return storage.PoolState{}, fmt.Errorf("fingerprint %q is not 32 hex bytes", fp)
	}
	for _, p := range []*coreset.Pool{pr.A, pr.B} {
		s := p.State()
		core := coreV4(s)
		w = append(w, core[:configLen]...)
		w = binenc.AppendU32(w, uint32(len(s.Points)))
		for _, pt := range s.Points {
			w = binenc.AppendString(w, pt.ID)
			w = binenc.AppendF64(w, pt.Diag)
			w = binenc.AppendF64(w, pt.Residual)
		}
		w = append(w, core[configLen+1:]...)
	}
	return storage.PoolState{Schema: poolSchema2, Data: w}, nil
}

// pairRecords builds the per-point records of pr the slow way (State, sorted by id), as
// the store holds them after the daemon wrote them.
func pairRecords(pr *coreset.Pair) []storedRecord {
	a, b := pr.A.State(), pr.B.State()
	out := make([]storedRecord, len(a.Points))
	for i := range a.Points {
		out[i] = storedRecord{a.Points[i].ID, coreset.AppendPairRecord(nil, a.Points[i], b.Points[i])}
	}
	return out
}

// withoutStepMax is what an older schema keeps of the state of p (stale from 0, as the
// test pair is): the pool coreset.Restore makes of it without StepMax and StepMaxIDs,
// which it takes from the pivots' keys.
func withoutStepMax(t testing.TB, p *coreset.Pool) *coreset.Pool {
	t.Helper()
	s := p.State()
	s.StepMax, s.StepMaxIDs = nil, nil
	q, err := coreset.Restore(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestPoolCodecRoundTrip: decoding an encoded pool (schema 5, 4 or 3 core plus records,
// and a schema 2 blob) gives pools whose states are deeply equal to the originals (for
// the older schemas, which lack the step maxima, to the pool Restore makes without
// them), and re-encoding gives the same bytes. (coreset's TestStateFields guards the
// fields.) The test pair is stale from position 0 (its first landmark was deleted), so
// the older schemas' Normalize = false and Tolerance = 0 taking the configured rule
// changes nothing else here; TestPoolSchema3Normalize and TestPoolSchema4Tolerance test
// that step.
func TestPoolCodecRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 40} {
		feat, pcfg, pr, src := testPair(t, n)
		ps, err := encodePool(feat.Fingerprint(), pr)
		if err != nil {
			t.Fatal(err)
		}
		if ps.Schema != PoolSchema {
			t.Errorf("schema %d, want %d", ps.Schema, PoolSchema)
		}
		v2, err := encodePoolV2(feat.Fingerprint(), pr)
		if err != nil {
			t.Fatal(err)
		}
		v3, err := encodePoolV3(feat.Fingerprint(), pr)
		if err != nil {
			t.Fatal(err)
		}
		v4, err := encodePoolV4(feat.Fingerprint(), pr)
		if err != nil {
			t.Fatal(err)
		}
		old := &coreset.Pair{A: withoutStepMax(t, pr.A), B: withoutStepMax(t, pr.B)}
		psOld, _ := encodePool(feat.Fingerprint(), old)
		recs := pairRecords(pr)
		for _, tc := range []struct {
			name string
			ps   storage.PoolState
			recs []storedRecord
			want *coreset.Pair
			data []byte
		}{{"schema 5", ps, recs, pr, ps.Data}, {"schema 4", v4, recs, old, psOld.Data}, {"schema 3", v3, recs, old, psOld.Data}, {"schema 2", v2, nil, old, psOld.Data}} {
			got, err := decodePool(tc.ps, tc.recs, feat.Fingerprint(), pcfg, src)
			if err != nil {
				t.Fatalf("n=%d %s: %v", n, tc.name, err)
			}
			for v, pair := range [][2]*coreset.Pool{{tc.want.A, got.A}, {tc.want.B, got.B}} {
				if a, b := pair[0].State(), pair[1].State(); !reflect.DeepEqual(a, b) {
					t.Errorf("n=%d %s view %d: state after round trip\n got %+v\nwant %+v", n, tc.name, v, b, a)
				}
			}
			again, _ := encodePool(feat.Fingerprint(), got)
			if !bytes.Equal(again.Data, tc.data) {
				t.Errorf("n=%d %s: re-encoding changed the bytes", n, tc.name)
			}
			if !reflect.DeepEqual(pairRecords(got), recs) {
				t.Errorf("n=%d %s: records changed in the round trip", n, tc.name)
			}
		}
		// The core does not grow with the points: the schema 2 blob minus its records
		// (4 + len(id) + 16 bytes per point and view, plus the two counts) is schema 3,
		// which is schema 4 less one byte per view, which is schema 5 less Tolerance and
		// the step maxima per view.
		per := 0
		for _, r := range recs {
			per += 2 * (4 + len(r.id) + 16)
		}
		if got, want := len(v2.Data)-per-8, len(v3.Data); got != want {
			t.Errorf("n=%d: schema 2 blob without records is %d bytes, schema 3 blob %d", n, got, want)
		}
		if got, want := len(v3.Data), len(v4.Data)-2; got != want {
			t.Errorf("n=%d: schema 3 blob is %d bytes, want schema 4's less 2", n, got)
		}
		steps := 0
		for _, p := range []*coreset.Pool{pr.A, pr.B} {
			s := p.CoreState()
			steps += 8 + 4 + 8*len(s.StepMax) + 4
			for _, id := range s.StepMaxIDs {
				steps += 4 + len(id)
			}
		}
		if got, want := len(v4.Data), len(ps.Data)-steps; got != want {
			t.Errorf("n=%d: schema 4 blob is %d bytes, want schema 5's less %d", n, got, steps)
		}
	}
}

// TestPoolCodecRejects: damaged blobs and records are refused with ErrPoolState.
func TestPoolCodecRejects(t *testing.T) {
	feat, pcfg, pr, src := testPair(t, 20)
	ps, _ := encodePool(feat.Fingerprint(), pr)
	v2, _ := encodePoolV2(feat.Fingerprint(), pr)
	v3, _ := encodePoolV3(feat.Fingerprint(), pr)
	v4, _ := encodePoolV4(feat.Fingerprint(), pr)
	recs := pairRecords(pr)
	mut := func(f func(b []byte) []byte) storage.PoolState {
		return storage.PoolState{Schema: PoolSchema, Data: f(append([]byte(nil), ps.Data...))}
	}
	mutRec := func(i int, f func(r []byte) []byte) []storedRecord {
		out := append([]storedRecord(nil), recs...)
		out[i].rec = f(append([]byte(nil), out[i].rec...))
		return out
	}
	f64 := func(off int, v float64) func([]byte) []byte {
		return func(r []byte) []byte { copy(r[off:], binenc.AppendF64(nil, v)); return r }
	}
	landmark := recordIndex(recs, pr.B.Landmarks()[0])
	other := pcfg
	other.Budget.M++
	for _, tc := range []struct {
		name string
		ps   storage.PoolState
		recs []storedRecord
		cfg  coreset.Config
	}{
		{"schema 1 (held landmark features)", storage.PoolState{Schema: 1, Data: ps.Data}, recs, pcfg},
		{"schema 6", storage.PoolState{Schema: 6, Data: ps.Data}, recs, pcfg},
		{"schema 3 with schema 4's bytes", storage.PoolState{Schema: 3, Data: v4.Data}, recs, pcfg},
		{"schema 4 with schema 3's bytes", storage.PoolState{Schema: 4, Data: v3.Data}, recs, pcfg},
		{"schema 4 with schema 5's bytes", storage.PoolState{Schema: 4, Data: ps.Data}, recs, pcfg},
		{"schema 5 with schema 4's bytes", storage.PoolState{Schema: 5, Data: v4.Data}, recs, pcfg},
		{"empty", storage.PoolState{Schema: PoolSchema}, recs, pcfg},
		{"truncated", mut(func(b []byte) []byte { return b[:len(b)-1] }), recs, pcfg},
		{"trailing", mut(func(b []byte) []byte { return append(b, 0) }), recs, pcfg},
		{"fingerprint", mut(func(b []byte) []byte { b[0] ^= 1; return b }), recs, pcfg},
		{"bool", mut(func(b []byte) []byte { b[len(b)-1] = 2; return b }), recs, pcfg},
		// View a's landmark count sits after the fingerprint (32), version, dim, budget
		// m, λ, tol (5×8), top-up (1), seed and the four SLQ ints (5×8), normalize (1),
		// tolerance (8): byte 122; its top byte 125 makes it ~4e9 landmarks.
		{"huge count", mut(func(b []byte) []byte { b[125] = 0xff; return b }), recs, pcfg},
		{"normalize byte 2", mut(func(b []byte) []byte { b[113] = 2; return b }), recs, pcfg},
		{"tolerance 1", mut(func(b []byte) []byte { copy(b[114:], binenc.AppendF64(nil, 1)); return b }), recs, pcfg},
		{"tolerance NaN", mut(func(b []byte) []byte { copy(b[114:], binenc.AppendF64(nil, math.NaN())); return b }), recs, pcfg},
		{"config", ps, recs, other},
		{"schema 2 blob with records in the store", v2, recs, pcfg},
		{"schema 5 blob without records", ps, nil, pcfg},
		{"schema 4 blob without records", v4, nil, pcfg},
		{"schema 3 blob without records", v3, nil, pcfg},
		{"a landmark's record missing", ps, append(append([]storedRecord(nil), recs[:landmark]...), recs[landmark+1:]...), pcfg},
		{"record short", ps, mutRec(3, func(r []byte) []byte { return r[:coreset.PairRecordLen-1] }), pcfg},
		{"record long", ps, mutRec(3, func(r []byte) []byte { return append(r, 0) }), pcfg},
		{"record NaN diag", ps, mutRec(3, f64(0, math.NaN())), pcfg},
		{"record negative residual b", ps, mutRec(3, f64(24, -1)), pcfg},
		{"record infinite residual a", ps, mutRec(3, f64(8, math.Inf(1))), pcfg},
	} {
		if _, err := decodePool(tc.ps, tc.recs, feat.Fingerprint(), tc.cfg, src); !errors.Is(err, ErrPoolState) {
			t.Errorf("%s: error %v, want ErrPoolState", tc.name, err)
		}
	}
	// The landmarks' features come from the stored points; a landmark the source does
	// not know (its point is gone) makes the pool unusable.
	none := [2]coreset.FeatureSource{coreset.MapSource{}, coreset.MapSource{}}
	if _, err := decodePool(ps, recs, feat.Fingerprint(), pcfg, none); !errors.Is(err, ErrPoolState) {
		t.Errorf("unknown landmark: error %v, want ErrPoolState", err)
	}
}

func recordIndex(recs []storedRecord, id string) int {
	for i, r := range recs {
		if r.id == id {
			return i
		}
	}
	panic("no record of " + id)
}

// FuzzDecodePool: the stored pool blob is outside bytes (a file on disk); decoding must
// never panic, every refusal must match ErrPoolState, an accepted schema 5 blob of the
// configured Normalize and Tolerance and its records must re-encode to the same bytes,
// and any
// accepted blob must re-encode to a
// blob that decodes to a pool with the same encoding (idempotence: a schema 2 blob's
// points need not be sorted, and re-encoding sorts them). The records are the test
// pair's (withRecs) or none.
func FuzzDecodePool(f *testing.F) {
	feat, pcfg, pr, src := testPair(f, 12)
	full, _ := encodePool(feat.Fingerprint(), pr)
	v2, _ := encodePoolV2(feat.Fingerprint(), pr)
	v3, _ := encodePoolV3(feat.Fingerprint(), pr)
	v4, _ := encodePoolV4(feat.Fingerprint(), pr)
	recs := pairRecords(pr)
	_, _, empty, _ := testPair(f, 0)
	e, _ := encodePool(feat.Fingerprint(), empty)
	e2, _ := encodePoolV2(feat.Fingerprint(), empty)
	f.Add(uint32(PoolSchema), e.Data, false)
	f.Add(uint32(poolSchema2), e2.Data, false)
	f.Add(uint32(PoolSchema), full.Data, true)
	f.Add(uint32(poolSchema4), v4.Data, true)
	f.Add(uint32(poolSchema3), v3.Data, true)
	f.Add(uint32(poolSchema2), v2.Data, false)
	f.Add(uint32(poolSchema2), v2.Data, true)
	f.Add(uint32(1), full.Data, true)
	f.Add(uint32(PoolSchema), full.Data[:len(full.Data)/2], true)
	f.Add(uint32(PoolSchema), []byte{}, false)
	f.Fuzz(func(t *testing.T, schema uint32, data []byte, withRecs bool) {
		var rs []storedRecord
		if withRecs {
			rs = recs
		}
		p, err := decodePool(storage.PoolState{Schema: schema, Data: data}, rs, feat.Fingerprint(), pcfg, src)
		if err != nil {
			if !errors.Is(err, ErrPoolState) {
				t.Fatalf("error %v does not match ErrPoolState", err)
			}
			return
		}
		again, err := encodePool(feat.Fingerprint(), p)
		if err != nil {
			t.Fatal(err)
		}
		// A blob of another rule takes pcfg's and is marked stale (decodePool), so it
		// re-encodes to other bytes.
		_, a, b, _ := parsePool(storage.PoolState{Schema: schema, Data: data})
		sameRule := a.Config.Normalize == pcfg.Normalize && b.Config.Normalize == pcfg.Normalize &&
			a.Config.Tolerance == pcfg.Tolerance && b.Config.Tolerance == pcfg.Tolerance
		if got := pairRecords(p); schema == PoolSchema && sameRule && (!bytes.Equal(again.Data, data) || len(got)+len(rs) > 0 && !reflect.DeepEqual(got, rs)) {
			t.Fatalf("accepted schema 5 pool is not canonical:\n in  %x\n out %x", data, again.Data)
		}
		p2, err := decodePool(again, pairRecords(p), feat.Fingerprint(), pcfg, src)
		if err != nil {
			t.Fatalf("re-encoded pool refused: %v", err)
		}
		third, _ := encodePool(feat.Fingerprint(), p2)
		if !bytes.Equal(third.Data, again.Data) || !reflect.DeepEqual(pairRecords(p2), pairRecords(p)) {
			t.Fatalf("encoding is not idempotent after a round trip")
		}
	})
}

// storedRecords reads every per-point record of st, in id order.
func storedRecords(t testing.TB, st *storage.Store) []storedRecord {
	t.Helper()
	var recs []storedRecord
	if err := st.View(func(tx *storage.ReadTx) error {
		_, _, r, err := readPool(tx)
		recs = r
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkPersisted: the store holds exactly the in-memory pool: the core blob of
// encodePool and one record per stored point with the pool's PointState bits (the slow
// reference: every record rebuilt from State).
func checkPersisted(t *testing.T, in *State, st *storage.Store, when string) {
	t.Helper()
	ps := storedPool(t, st)
	mem, err := encodePool(in.feat.Fingerprint(), in.pool)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Schema != PoolSchema || !bytes.Equal(ps.Data, mem.Data) {
		t.Errorf("%s: stored pool blob (schema %d) differs from the in-memory pool's", when, ps.Schema)
	}
	got, want := storedRecords(t, st), pairRecords(in.pool)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: stored per-point records differ from the in-memory pool's (%d stored, %d in memory)", when, len(got), len(want))
		for i := 0; i < min(len(got), len(want)); i++ {
			if got[i].id != want[i].id || !bytes.Equal(got[i].rec, want[i].rec) {
				t.Errorf("first difference at %d: stored %s %x, pool %s %x", i, got[i].id, got[i].rec, want[i].id, want[i].rec)
				break
			}
		}
	}
}

// TestPoolRecordsIncremental: the records written per batch (one per upsert, removed
// with deletes, all after a Sync) keep the store equal to the in-memory pool after every
// batch, whatever the batch size, and the stored records (not only the blob) are
// byte-identical across batch sizes before and after a Sync (docs/architecture.md,
// "Determinism and views"). The script has replacements, deletions of landmarks and of other
// points, deletes of unknown ids and poison messages; a mid-run Sync exercises the
// rewrite of every record followed by more incremental batches.
func TestPoolRecordsIncremental(t *testing.T) {
	cfg := testConfig()
	evs := script(t, 160, "rec")
	ms := numbered(msgs(cfg.Kafka.Topics.Train, evs))
	g := newGen(t, 21, 6)
	var firstBlob []byte
	var firstRecs, firstSynced []storedRecord
	for _, size := range []int{1, 7, 64, len(ms)} {
		t.Run(fmt.Sprint("batch", size), func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			for i := 0; i < len(ms); i += size {
				if _, err := in.Apply(t.Context(), ms[i:min(i+size, len(ms))]); err != nil {
					t.Fatal(err)
				}
				if size < 64 && i%(7*size) == 0 || size >= 64 {
					checkPersisted(t, in, st, fmt.Sprintf("after the batch at %d", i))
				}
			}
			recs := storedRecords(t, st)
			if firstRecs == nil {
				firstRecs, firstBlob = recs, storedPool(t, st).Data
			} else if !reflect.DeepEqual(recs, firstRecs) || !bytes.Equal(storedPool(t, st).Data, firstBlob) {
				t.Errorf("stored pool (blob or records) with batch size %d differs from batch size 1", size)
			}
			if err := in.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkPersisted(t, in, st, "after Sync")
			if recs := storedRecords(t, st); firstSynced == nil {
				firstSynced = recs
			} else if !reflect.DeepEqual(recs, firstSynced) {
				t.Errorf("synced records with batch size %d differ from batch size 1", size)
			}
			// More batches after the sync: a landmark deletion, a replacement, inserts.
			lm := in.Landmarks()[0]
			more := []event{g.del(lm), g.upsert(id(5)), g.upsert("after-1"), g.upsert("after-2"), g.del("after-1")}
			next := msgs(cfg.Kafka.Topics.Train, more)
			for i := range next {
				next[i].Offset = int64(len(ms) + i)
			}
			if _, err := in.Apply(t.Context(), next); err != nil {
				t.Fatal(err)
			}
			checkPersisted(t, in, st, "after the post-sync batch")
			// A restart restores the same pool from the blob and the records.
			again := newTestIngest(t, cfg, st)
			if !reflect.DeepEqual(pairRecords(again.pool), pairRecords(in.pool)) {
				t.Errorf("restored records differ")
			}
			for v, pair := range [][2]*coreset.Pool{{in.pool.A, again.pool.A}, {in.pool.B, again.pool.B}} {
				if !reflect.DeepEqual(pair[0].State(), pair[1].State()) {
					t.Errorf("view %d: restored pool state differs", v)
				}
			}
		})
	}
}

// TestRestoreRejectsRecordMismatch: NewIngest and StateHash refuse a store whose
// records do not match its points one to one, or whose record is damaged, naming it.
func TestRestoreRejectsRecordMismatch(t *testing.T) {
	cfg := testConfig()
	ms := numbered(msgs(cfg.Kafka.Topics.Train, script(t, 30, "mm")))
	for _, tc := range []struct {
		name string
		edit func(tx *storage.Tx, in *State) error
		want string
	}{
		{"point without record", func(tx *storage.Tx, _ *State) error {
			return tx.PutPoint(storage.Point{ID: "extra", X: make([]float64, 6)})
		}, "per-point pool records"},
		{"short record", func(tx *storage.Tx, in *State) error {
			return tx.PutPoolPoint(in.cache.IDs()[2], make([]byte, coreset.PairRecordLen-1))
		}, "bytes, want 32"},
		{"schema 2 blob beside records", func(tx *storage.Tx, in *State) error {
			v2, err := encodePoolV2(in.feat.Fingerprint(), in.pool)
			if err != nil {
				return err
			}
			return tx.PutPoolState(v2)
		}, "per-point records in the store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			applyInBatches(t, in, ms, 8)
			if err := st.Apply(func(tx *storage.Tx) error { return tc.edit(tx, in) }); err != nil {
				t.Fatal(err)
			}
			if _, err := New(cfg, st, testLogger(t)); !errors.Is(err, ErrPoolState) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewIngest: %v, want ErrPoolState containing %q", err, tc.want)
			}
			if _, err := StateHash(cfg, st); !errors.Is(err, ErrPoolState) {
				t.Errorf("StateHash: %v, want ErrPoolState", err)
			}
		})
	}
}

// TestStateHashCoversRecords: two stores fed the same messages in different batch sizes
// hash equal after a Sync; changing one record's K_jj bits (and nothing else) changes
// the hash, changing only a residual does not (residuals are timing-dependent and left
// out, see StateHash).
func TestStateHashCoversRecords(t *testing.T) {
	cfg := testConfig()
	ms := numbered(msgs(cfg.Kafka.Topics.Train, script(t, 50, "hash")))
	var stores []*storage.Store
	var ins []*State
	for _, size := range []int{1, len(ms)} {
		st := tempStore(t)
		in := newTestIngest(t, cfg, st)
		applyInBatches(t, in, ms, size)
		if err := in.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		stores, ins = append(stores, st), append(ins, in)
	}
	h0, err0 := StateHash(cfg, stores[0])
	h1, err1 := StateHash(cfg, stores[1])
	if err0 != nil || err1 != nil || h0 != h1 {
		t.Fatalf("StateHash by batch size: %s, %v vs %s, %v", h0, err0, h1, err1)
	}
	pid := ins[1].cache.IDs()[4]
	a, _ := ins[1].pool.A.PointState(pid)
	b, _ := ins[1].pool.B.PointState(pid)
	for _, tc := range []struct {
		name   string
		a, b   coreset.PointState
		differ bool
	}{
		{"diag b", a, coreset.PointState{Diag: math.Nextafter(b.Diag, 0), Residual: b.Residual}, true},
		{"diag a", coreset.PointState{Diag: math.Nextafter(a.Diag, math.Inf(1)), Residual: a.Residual}, b, true},
		{"residual a", coreset.PointState{Diag: a.Diag, Residual: a.Residual / 2}, b, false},
		{"unchanged", a, b, false},
	} {
		if err := stores[1].Apply(func(tx *storage.Tx) error { return tx.PutPoolPoint(pid, coreset.AppendPairRecord(nil, tc.a, tc.b)) }); err != nil {
			t.Fatal(err)
		}
		h, err := StateHash(cfg, stores[1])
		if err != nil || (h != h0) != tc.differ {
			t.Errorf("%s: hash %s (err %v), unedited %s; want different: %v", tc.name, h, err, h0, tc.differ)
		}
	}
}

// TestRestoreReselectsPreviousPool: a pool stored under the previous feature algorithm
// (the v2 fingerprint: features in float64) is re-selected at restore on the stored
// float32 features: the restored pool is batch greedy over the stored points
// (checkAgainstReference) and the stored blob carries the current fingerprint. A pool
// of another model is still refused.
func TestRestoreReselectsPreviousPool(t *testing.T) {
	cfg := testConfig()
	evs := script(t, 40, "prev")
	ms := numbered(msgs(cfg.Kafka.Topics.Train, evs))
	setFP := func(st *storage.Store, fp string) {
		t.Helper()
		raw, err := hex.DecodeString(fp)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Apply(func(tx *storage.Tx) error {
			ps, _, err := tx.PoolState()
			if err != nil {
				return err
			}
			copy(ps.Data, raw)
			return tx.PutPoolState(ps)
		}); err != nil {
			t.Fatal(err)
		}
	}
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	applyInBatches(t, in, ms, 8)
	setFP(st, in.feat.PreviousFingerprint())
	re := newTestIngest(t, cfg, st)
	if fp, err := Fingerprint(storedPool(t, st)); err != nil || fp != re.feat.Fingerprint() {
		t.Fatalf("stored fingerprint after restore %.12s (%v), want the current %.12s", fp, err, re.feat.Fingerprint())
	}
	checkAgainstReference(t, cfg, re, st, expect(evs).points)

	other := cfg
	other.Model.Seed++
	f2, err := pipeline.NewFeatures(other.Model, other.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	setFP(st, f2.PreviousFingerprint())
	if _, err := New(cfg, st, testLogger(t)); !errors.Is(err, ErrPoolState) {
		t.Fatalf("another model's v2 pool: %v, want ErrPoolState", err)
	}
}

// TestPoolSchema3Normalize: a pool stored without Config.Normalize (schema 3, or schema
// 4 under the other rule) was selected on raw residuals. Under pool.normalize = false it
// restores as it was; under true it takes the configured rule and keeps its landmarks,
// exact certificate and records, stale from position 0, and its next Sync gives the
// pool a normalized selection would have made from the start. (Both by the exact
// argmax, as schema 3 and 4 pools were; TestPoolSchema4Tolerance has the other step.)
func TestPoolSchema3Normalize(t *testing.T) {
	rawCfg, normCfg := testConfig(), testConfig()
	rawCfg.Pool.Normalize, normCfg.Pool.Normalize = false, true
	rawCfg.Pool.Tolerance, normCfg.Pool.Tolerance = 0, 0
	feat, rawP, pr, src := testPairConfig(t, rawCfg, 40, false)
	_, normP, want, _ := testPairConfig(t, normCfg, 40, false)
	if slices.Equal(pr.A.Landmarks(), want.A.Landmarks()) {
		t.Fatalf("raw and normalized pivoting select the same landmarks %v", want.A.Landmarks())
	}
	v3, _ := encodePoolV3(feat.Fingerprint(), pr)
	v4, _ := encodePoolV4(feat.Fingerprint(), pr)
	recs := pairRecords(pr)
	got, err := decodePool(v3, recs, feat.Fingerprint(), rawP, src)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.A.State(), pr.A.State()) || !reflect.DeepEqual(got.B.State(), pr.B.State()) {
		t.Errorf("schema 3 under normalize = false: the restored pool differs")
	}
	for _, ps := range []storage.PoolState{v3, v4} {
		got, err := decodePool(ps, recs, feat.Fingerprint(), normP, src)
		if err != nil {
			t.Fatalf("schema %d: %v", ps.Schema, err)
		}
		for v, pair := range [][2]*coreset.Pool{{pr.A, got.A}, {pr.B, got.B}} {
			c, c0 := pair[1].Residual(), pair[0].Residual()
			if !pair[1].Config().Normalize || !c.Stale || c.StaleFrom != 0 || !c.Exact || c.Trace != c0.Trace ||
				!slices.Equal(pair[1].Landmarks(), pair[0].Landmarks()) || !pair[1].NeedsSync() {
				t.Errorf("schema %d view %d: normalize %v, certificate %+v, landmarks %v; want the raw pool's (%+v, %v) stale from 0 under normalize",
					ps.Schema, v, pair[1].Config().Normalize, c, pair[1].Landmarks(), c0, pair[0].Landmarks())
			}
		}
		if err := got.Sync(src[0], src[1]); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.A.State(), want.A.State()) || !reflect.DeepEqual(got.B.State(), want.B.State()) {
			t.Errorf("schema %d: after Sync the pool is not the normalized selection", ps.Schema)
		}
	}
}

// TestPoolSchema4Tolerance: a pool stored without Config.Tolerance (schema 4, or any
// older one) was selected by the exact argmax. Under pool.tolerance = 0 it restores as
// it was; under a tolerance of 0.6 it takes the configured rule and keeps its landmarks,
// exact certificate and records, stale from position 0 (its step maxima, which schema 4
// lacks, are the exact rule's until then and never read), and its next Sync gives the
// pool a tolerant selection would have made from the start.
func TestPoolSchema4Tolerance(t *testing.T) {
	exactCfg, cfg := testConfig(), testConfig()
	exactCfg.Pool.Tolerance, cfg.Pool.Tolerance = 0, 0.6 // 0.6: a rule that differs from the argmax on 40 points
	feat, exactP, pr, src := testPairConfig(t, exactCfg, 40, false)
	_, tolP, want, _ := testPairConfig(t, cfg, 40, false)
	if tolP.Tolerance != 0.6 || slices.Equal(pr.A.Landmarks(), want.A.Landmarks()) {
		t.Fatalf("tolerance %v: exact and tolerant pivoting select the same landmarks %v", tolP.Tolerance, want.A.Landmarks())
	}
	v4, _ := encodePoolV4(feat.Fingerprint(), pr)
	recs := pairRecords(pr)
	got, err := decodePool(v4, recs, feat.Fingerprint(), exactP, src)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.A.State(), pr.A.State()) || !reflect.DeepEqual(got.B.State(), pr.B.State()) {
		t.Errorf("schema 4 under tolerance = 0: the restored pool differs")
	}
	got, err = decodePool(v4, recs, feat.Fingerprint(), tolP, src)
	if err != nil {
		t.Fatal(err)
	}
	for v, pair := range [][2]*coreset.Pool{{pr.A, got.A}, {pr.B, got.B}} {
		c, c0 := pair[1].Residual(), pair[0].Residual()
		if pair[1].Config().Tolerance != 0.6 || !c.Stale || c.StaleFrom != 0 || !c.Exact || c.Trace != c0.Trace ||
			!slices.Equal(pair[1].Landmarks(), pair[0].Landmarks()) || !pair[1].NeedsSync() {
			t.Errorf("view %d: tolerance %v, certificate %+v, landmarks %v; want the exact pool's (%+v, %v) stale from 0 under tolerance 0.6",
				v, pair[1].Config().Tolerance, c, pair[1].Landmarks(), c0, pair[0].Landmarks())
		}
	}
	if err := got.Sync(src[0], src[1]); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.A.State(), want.A.State()) || !reflect.DeepEqual(got.B.State(), want.B.State()) {
		t.Errorf("after Sync the pool is not the tolerant selection")
	}
}

// TestRestoreOlderSchemaStore: a store whose pool blob is schema 3 (written before
// pool.normalize, raw) or 4 (before pool.tolerance, normalized), both by the exact
// argmax, opens under the default rule (normalize, tolerance 0.6): New rewrites the
// blob as the current schema and leaves the records, the restored pool asks for a sync
// at once (SyncDue), the sync gives the reference selection, and a second restore
// writes nothing.
func TestRestoreOlderSchemaStore(t *testing.T) {
	for _, tc := range []struct {
		schema    uint32
		normalize bool
		encode    func(string, *coreset.Pair) (storage.PoolState, error)
	}{{poolSchema3, false, encodePoolV3}, {poolSchema4, true, encodePoolV4}} {
		t.Run(fmt.Sprintf("schema%d", tc.schema), func(t *testing.T) {
			restoreOlderSchemaStore(t, tc.normalize, tc.encode)
		})
	}
}

func restoreOlderSchemaStore(t *testing.T, normalize bool, encode func(string, *coreset.Pair) (storage.PoolState, error)) {
	rawCfg, cfg := testConfig(), testConfig()
	rawCfg.Pool.Normalize, rawCfg.Pool.Tolerance = normalize, 0
	st := tempStore(t)
	in := newTestIngest(t, rawCfg, st)
	g := newGen(t, 31, 6)
	var evs []event
	for i := range 40 {
		evs = append(evs, g.upsert(id(i)))
	}
	if _, err := in.Apply(t.Context(), numbered(msgs(rawCfg.Kafka.Topics.Train, evs))); err != nil {
		t.Fatal(err)
	}
	if err := in.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	old, err := encode(in.feat.Fingerprint(), in.pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(func(tx *storage.Tx) error { return tx.PutPoolState(old) }); err != nil {
		t.Fatal(err)
	}
	recs := storedRecords(t, st)

	again := newTestIngest(t, cfg, st)
	ps := storedPool(t, st)
	if ps.Schema != PoolSchema || !reflect.DeepEqual(storedRecords(t, st), recs) {
		t.Errorf("after the restore: schema %d, records changed %v; want schema %d and the records as they were",
			ps.Schema, !reflect.DeepEqual(storedRecords(t, st), recs), PoolSchema)
	}
	checkPersisted(t, again, st, "after the restore")
	if !slices.Equal(again.Landmarks(), in.Landmarks()) || !again.SyncDue() {
		t.Errorf("restored landmarks %v (sync due %v), want the stored %v with a sync due", again.Landmarks(), again.SyncDue(), in.Landmarks())
	}
	pts := map[string]event{}
	for _, id := range again.cache.IDs() {
		pts[id] = event{id: id, x: again.cache.Get(id).X}
	}
	checkAgainstReference(t, cfg, again, st, pts)
	before, beforeRecs := storedPool(t, st), storedRecords(t, st)
	newTestIngest(t, cfg, st)
	if !reflect.DeepEqual(storedPool(t, st), before) || !reflect.DeepEqual(storedRecords(t, st), beforeRecs) {
		t.Errorf("a second restore changed the stored pool")
	}
}
