package ingest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// testConfig is a small daemon: mlp:6-8-4 (P = 92, padded 128), h = 2 heads, s = 16,
// so q = 32 features per view, m = 8 landmarks per view.
func testConfig() config.Config {
	c := config.Default()
	c.Model = config.Backbone{Arch: "mlp:6-8-4", Seed: 7, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 16}
	c.Pool.M = 8
	c.Kafka.Topics.Train = "t.train"
	c.Kafka.Topics.DLQ = "t.dlq"
	c.Kafka.Partitions = 3
	c.Limits.MaxMessageBytes = 2048
	c.Limits.MaxIDBytes = 32
	return c
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
}

func openStore(t testing.TB, path string) *storage.Store {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newTestIngest(t testing.TB, cfg config.Config, st *storage.Store) *State {
	t.Helper()
	in, err := New(cfg, st, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func tempStore(t testing.TB) *storage.Store {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "cairn.db"))
	t.Cleanup(func() { st.Close() })
	return st
}

// event is one generated training event with the expected effect.
type event struct {
	key    string
	value  []byte
	poison stream.Reason // "" for a valid event
	del    bool
	id     string
	x      []float64
	label  int64
}

// gen makes valid upserts, re-upserts, deletes and poison messages from a seeded stream.
type gen struct {
	t   testing.TB
	r   *rand.Rand
	lim stream.Limits
}

func newGen(t testing.TB, seed uint64, dim int) *gen {
	return &gen{t: t, r: rand.New(rand.NewPCG(seed, 1)), lim: stream.Limits{InputDim: dim, MaxBytes: 2048, MaxIDBytes: 32}}
}

func (g *gen) upsert(id string) event {
	x := make([]float64, g.lim.InputDim)
	for j := range x {
		x[j] = g.r.NormFloat64()
	}
	label := int64(g.r.IntN(3))
	v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x, Label: &label}, g.lim)
	if err != nil {
		g.t.Fatal(err)
	}
	return event{key: id, value: v, id: id, x: x, label: label}
}

func (g *gen) del(id string) event {
	v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: "r-" + id}, g.lim)
	if err != nil {
		g.t.Fatal(err)
	}
	return event{key: id, value: v, id: id, del: true}
}

// poisons are invalid training messages, one per reason, with the reason the daemon
// must report. Keys are distinct so each lands somewhere on the topic.
func poisons(tag string) []event {
	long := make([]byte, 2100)
	for i := range long {
		long[i] = ' '
	}
	over := append([]byte(`{"v":1,"op":"upsert","id":"big","x":[1,2,3,4,5,6]}`), long...)
	huge := `{"v":1,"op":"upsert","id":"huge-` + tag + `","x":[1.7e308,1.7e308,1.7e308,1.7e308,1.7e308,1.7e308]}`
	return []event{
		{key: "bad-json-" + tag, value: []byte(`{"v":1,"op":"upsert"`), poison: stream.ReasonBadJSON},
		{key: "bad-dim-" + tag, value: []byte(`{"v":1,"op":"upsert","id":"d","x":[1,2,3]}`), poison: stream.ReasonWrongDim},
		{key: "bad-op-" + tag, value: []byte(`{"v":1,"op":"frobnicate","id":"o"}`), poison: stream.ReasonUnknownOp},
		{key: "bad-v-" + tag, value: []byte(`{"v":2,"op":"delete","id":"o","request":"r"}`), poison: stream.ReasonBadVersion},
		{key: "bad-field-" + tag, value: []byte(`{"v":1,"op":"upsert","id":"f","x":[1,2,3,4,5,6],"lable":1}`), poison: stream.ReasonUnknownField},
		{key: "bad-id-" + tag, value: []byte(`{"v":1,"op":"delete","id":"","request":"r"}`), poison: stream.ReasonBadID},
		{key: "bad-size-" + tag, value: over, poison: stream.ReasonOversize},
		{key: "bad-inf-" + tag, value: []byte(`{"v":1,"op":"upsert","id":"i","x":[1e400,0,0,0,0,0]}`), poison: stream.ReasonNonFinite},
		// Keyed by another id: a delete could overtake the upsert it removes.
		{key: "mismatch-" + tag, value: []byte(`{"v":1,"op":"upsert","id":"ord-1","x":[1,2,3,4,5,6]}`), poison: stream.ReasonKeyMismatch},
		{key: "mismatch-del-" + tag, value: []byte(`{"v":1,"op":"delete","id":"ord-1","request":"d"}`), poison: stream.ReasonKeyMismatch},
		// Finite input whose features overflow: rejected after featurization.
		{key: "huge-" + tag, value: []byte(huge), poison: stream.ReasonNonFinite},
	}
}

// expectation replays events in order per id (Kafka keeps order per key).
type expectation struct {
	points map[string]event
	poison map[string]stream.Reason // by dead-letter key source: message key
}

func expect(evs []event) expectation {
	e := expectation{points: map[string]event{}, poison: map[string]stream.Reason{}}
	for _, ev := range evs {
		switch {
		case ev.poison != "":
			e.poison[ev.key] = ev.poison
		case ev.del:
			delete(e.points, ev.id)
		default:
			e.points[ev.id] = ev
		}
	}
	return e
}

// referenceLandmarks is the slow, independent oracle of a synced pool: it builds the
// backbone, the "fit" sketch and the augmenter straight from entk and dataset (not
// through Features), computes ψ of view v of every expected point one at a time with
// FeaturesTo, and runs coreset.Greedy over the points in increasing id order with the
// top-up and pivot keys of the ids under the configured pivoting rule, as docs/architecture.md
// ("The landmark pool") defines the pool at quiescence. It returns the landmark ids and the exact residual trace tr R.
func referenceLandmarks(t testing.TB, cfg config.Config, pts map[string]event, view int) ([]string, float64) {
	t.Helper()
	b, err := entk.NewBackbone(cfg.Model.Arch, cfg.Model.Seed)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := entk.NewSketch(b, cfg.Sketch.H, cfg.Sketch.S, cfg.Model.Seed, "fit")
	if err != nil {
		t.Fatal(err)
	}
	aug := dataset.NewAugmenter(b.InDim(), [3]int{}, cfg.Model.Seed)
	ids := make([]string, 0, len(pts))
	for id := range pts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	q := sk.Dim()
	g := make([]float64, len(ids)*q)
	keys, pkeys := make([]uint64, len(ids)), make([]uint64, len(ids))
	ws := sk.NewWorkspace()
	v := make([]float64, b.InDim())
	for i, id := range ids {
		aug.ViewTo(v, pts[id].x, id, view)
		sk.FeaturesTo(g[i*q:(i+1)*q], v, ws)
		pipeline.RoundTo32(g[i*q : (i+1)*q]) // the stored precision
		keys[i], pkeys[i] = coreset.TopUpKey(cfg.Model.Seed, id), coreset.PivotKey(id)
	}
	res, err := coreset.Greedy(g, len(ids), q, cfg.Pool.M, coreset.GreedyOptions{TopUpKeys: keys, Normalize: cfg.Pool.Normalize,
		Tolerance: cfg.Pool.Tolerance, Keys: pkeys})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(res.Pivots))
	for i, p := range res.Pivots {
		out[i] = ids[p]
	}
	tr := 0.0
	if n := len(res.ResidualTrace); n > 0 {
		tr = res.ResidualTrace[n-1]
	}
	return out, tr
}

// checkAgainstReference syncs in and compares both views with referenceLandmarks.
// Tolerance of the certificate: coreset documents Certificate().Trace after Sync as the
// exact tr R to relative 1e-9 (rounding of n·m Gram–Schmidt updates on q = 32 features);
// the reference runs the same Greedy, so 1e-9 relative is the contract, not a fudge.
func checkAgainstReference(t *testing.T, cfg config.Config, in *State, st *storage.Store, pts map[string]event) {
	t.Helper()
	if err := in.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	ca, cb := in.Certificates()
	for view, p := range []*coreset.Pool{in.pool.A, in.pool.B} {
		want, wantTr := referenceLandmarks(t, cfg, pts, view)
		if got := p.Landmarks(); !slices.Equal(got, want) {
			t.Errorf("view %d landmarks after Sync:\n got %v\nwant %v", view, got, want)
		}
		c := []coreset.ResidualCertificate{ca, cb}[view]
		if !c.Exact || c.Stale {
			t.Errorf("view %d certificate after Sync: exact %v stale %v, want exact and not stale", view, c.Exact, c.Stale)
		}
		// Absolute floor 1e-12·tr K: residuals are diagonals minus sums of squares of
		// the size of the diagonals, so rounding is relative to tr K when tr R is small.
		if d := math.Abs(c.Trace - wantTr); d > 1e-9*math.Abs(wantTr)+1e-12*c.TraceK {
			t.Errorf("view %d tr R = %.17g, reference %.17g", view, c.Trace, wantTr)
		}
	}
	// The synced state is what the store holds.
	var ps storage.PoolState
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		ps, _, err = tx.PoolState()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mem, err := encodePool(in.feat.Fingerprint(), in.pool)
	if err != nil {
		t.Fatal(err)
	}
	if string(ps.Data) != string(mem.Data) {
		t.Errorf("stored pool state differs from the in-memory pool after Sync")
	}
}

// checkStore compares the stored points with the expectation.
func checkStore(t *testing.T, st *storage.Store, pts map[string]event) {
	t.Helper()
	got := map[string]storage.Point{}
	if err := st.View(func(tx *storage.ReadTx) error {
		return tx.ForEachPoint(func(p storage.Point) error { got[p.ID] = p; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pts) {
		t.Errorf("stored %d points, want %d", len(got), len(pts))
	}
	for id, ev := range pts {
		p, ok := got[id]
		if !ok {
			t.Errorf("point %q missing", id)
			continue
		}
		if !slices.Equal(p.X, ev.x) || !p.HasLabel || p.Label != ev.label {
			t.Errorf("point %q = %v label %v/%d, want %v label %d", id, p.X, p.HasLabel, p.Label, ev.x, ev.label)
		}
	}
}

func msgs(topic string, evs []event) []stream.Message {
	out := make([]stream.Message, len(evs))
	for i, ev := range evs {
		out[i] = stream.Message{Topic: topic, Key: []byte(ev.key), Value: ev.value}
	}
	return out
}

func id(i int) string { return fmt.Sprintf("p%04d", i) }

// counts returns res's counters (upserts, deletes, missing, dead letters, skipped), for
// comparisons.
func counts(res BatchResult) [5]int {
	return [5]int{res.Upserts, res.Deletes, res.Missing, res.DeadLetters, res.Skipped}
}

// testFeatures is the feature pipeline and pool settings of cfg.
func testFeatures(t testing.TB, cfg config.Config) (*pipeline.Features, coreset.Config) {
	t.Helper()
	f, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := PoolConfig(cfg, f.Dim())
	if err != nil {
		t.Fatal(err)
	}
	return f, pcfg
}
