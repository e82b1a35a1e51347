package refit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// fakePool is a Pool with fixed answers.
type fakePool struct {
	n         int
	landmarks []string
	residuals [2]coreset.ResidualCertificate
	inexact   bool
	last      *ingest.Deletion
	pending   int
	syncDue   bool
}

func (p *fakePool) Len() int                                  { return p.n }
func (p *fakePool) Landmarks() []string                       { return p.landmarks }
func (p *fakePool) Residuals() [2]coreset.ResidualCertificate { return p.residuals }
func (p *fakePool) Certificates() (a, b coreset.ResidualCertificate) {
	return coreset.ResidualCertificate{Exact: !p.inexact}, coreset.ResidualCertificate{Exact: true}
}
func (p *fakePool) LastPending() *ingest.Deletion { return p.last }
func (p *fakePool) PendingCount() int             { return p.pending }
func (p *fakePool) SyncDue() bool                 { return p.syncDue }

// TestReason: each trigger fires on its own condition and in the documented order, a
// standby never refits for a deletion, and the broker is asked only when idle needs it.
func TestReason(t *testing.T) {
	now := time.Unix(1000, 0)
	r := config.Default().Refit
	r.MinPoints, r.PointsChanged, r.PoolChangeFraction, r.ResidualIncrease, r.Idle = 10, 100, 0.5, 0.5, time.Minute
	r.OnDelete, r.DeleteDebounce = true, time.Second
	old := &ingest.Deletion{Applied: now.Add(-2 * time.Second)}
	fresh := &ingest.Deletion{Applied: now}
	ratio := func(r float64) [2]coreset.ResidualCertificate {
		return [2]coreset.ResidualCertificate{{Trace: r, TraceK: 1}, {Trace: r, TraceK: 1}}
	}
	base := Baseline{Landmarks: []string{"a", "b"}, Ratio: 0.1}
	for _, c := range []struct {
		name    string
		pool    fakePool
		drift   Drift
		caught  bool
		want    string
		asksFor bool // whether the broker is asked
	}{
		{"deletion", fakePool{n: 1, last: old}, Drift{Leading: true}, false, "deletion", false},
		{"deletion within the debounce", fakePool{n: 1, last: fresh}, Drift{Leading: true}, false, "", false},
		{"standby leaves deletions", fakePool{n: 1, last: old}, Drift{}, false, "", false},
		{"too few points", fakePool{n: 9}, Drift{Changes: 500}, false, "", false},
		{"first fit, many", fakePool{n: 10}, Drift{Changes: 100, LastTrain: now}, false, "first_fit", false},
		{"first fit, idle", fakePool{n: 10}, Drift{Changes: 1, LastTrain: now.Add(-time.Hour)}, true, "first_fit", true},
		{"first fit waits for the backlog", fakePool{n: 10}, Drift{Changes: 1, LastTrain: now.Add(-time.Hour)}, false, "", true},
		{"points changed", fakePool{n: 10}, Drift{Changes: 100, HasModel: true, LastTrain: now}, false, "points_changed", false},
		{"pool changed", fakePool{n: 10, landmarks: []string{"a", "c"}, residuals: ratio(0.1)},
			Drift{Changes: 1, HasModel: true, LastFit: base, LastTrain: now}, false, "pool_changed", false},
		{"residual increase", fakePool{n: 10, landmarks: []string{"a", "b", "c"}, residuals: ratio(0.2)},
			Drift{Changes: 1, HasModel: true, LastFit: base, LastTrain: now}, false, "residual_increase", false},
		{"small residual increase", fakePool{n: 10, landmarks: []string{"a", "b"}, residuals: ratio(0.14)},
			Drift{Changes: 1, HasModel: true, LastFit: base, LastTrain: now}, false, "", false},
		{"idle", fakePool{n: 10, landmarks: []string{"a", "b"}, residuals: ratio(0.1)},
			Drift{Changes: 1, HasModel: true, LastFit: base, LastTrain: now.Add(-time.Hour)}, true, "idle", true},
		{"nothing changed", fakePool{n: 10}, Drift{HasModel: true, LastTrain: now.Add(-time.Hour)}, true, "", false},
	} {
		asked := false
		c.drift.CaughtUp = func() bool { asked = true; return c.caught }
		if got := Reason(r, &c.pool, c.drift, now); got != c.want || asked != c.asksFor {
			t.Errorf("%s: Reason = %q (broker asked: %v), want %q (%v)", c.name, got, asked, c.want, c.asksFor)
		}
	}
}

// TestHold: only the drift refits wait, only while a reader batch or more is behind,
// and no longer than refit.backlog_wait from when the first wait began.
func TestHold(t *testing.T) {
	now := time.Unix(1000, 0)
	r := config.Default().Refit
	r.BacklogWait = time.Minute
	behind := func(n int64) func() int64 { return func() int64 { return n } }
	for _, c := range []struct {
		name    string
		reason  string
		backlog func() int64
		held    time.Time
		wait    time.Duration
		want    bool
	}{
		{"points changed, behind", "points_changed", behind(BacklogBatch), time.Time{}, time.Minute, true},
		{"pool changed, behind", "pool_changed", behind(10 * BacklogBatch), time.Time{}, time.Minute, true},
		{"residual increase, behind", "residual_increase", behind(BacklogBatch), now.Add(-59 * time.Second), time.Minute, true},
		{"less than a batch behind", "points_changed", behind(BacklogBatch - 1), time.Time{}, time.Minute, false},
		{"no lag known", "points_changed", nil, time.Time{}, time.Minute, false},
		{"held for the whole wait", "points_changed", behind(BacklogBatch), now.Add(-time.Minute), time.Minute, false},
		{"waiting disabled", "points_changed", behind(BacklogBatch), time.Time{}, 0, false},
		{"first fit", "first_fit", behind(BacklogBatch), time.Time{}, time.Minute, false},
		{"deletion", "deletion", behind(BacklogBatch), time.Time{}, time.Minute, false},
		{"idle", "idle", behind(BacklogBatch), time.Time{}, time.Minute, false},
		{"nothing fires", "", behind(BacklogBatch), time.Time{}, time.Minute, false},
	} {
		r.BacklogWait = c.wait
		if got := Hold(r, c.reason, Drift{Backlog: c.backlog, HeldSince: c.held}, now); got != c.want {
			t.Errorf("%s: Hold = %v, want %v", c.name, got, c.want)
		}
		own := func() bool { return true }
		if got := Hold(r, c.reason, Drift{Backlog: c.backlog, HeldSince: c.held, OwnFit: own}, now); got != c.want {
			t.Errorf("%s, serving its own fit: Hold = %v, want %v", c.name, got, c.want)
		}
		// A daemon serving a model adopted from the models topic has no fit of its own
		// points yet: its first one never waits.
		adopted := func() bool { return false }
		if Hold(r, c.reason, Drift{Backlog: c.backlog, HeldSince: c.held, OwnFit: adopted}, now) {
			t.Errorf("%s, serving an adopted model: Hold = true, want false", c.name)
		}
	}
}

// TestSyncDue: a pool that is not due never syncs; an inexact one syncs unless a
// deletion refit will; an exact stale one once the points doubled and the topic is
// caught up.
func TestSyncDue(t *testing.T) {
	r := config.Default().Refit
	r.OnDelete = true
	for _, c := range []struct {
		name   string
		pool   fakePool
		lastN  int
		caught bool
		want   bool
	}{
		{"not due", fakePool{n: 100}, 10, true, false},
		{"inexact", fakePool{n: 100, syncDue: true, inexact: true}, 90, false, true},
		{"inexact, a deletion refit pending", fakePool{n: 100, syncDue: true, inexact: true, pending: 1}, 90, true, false},
		{"doubled", fakePool{n: 100, syncDue: true}, 50, true, true},
		{"doubled, behind", fakePool{n: 100, syncDue: true}, 50, false, false},
		{"not doubled", fakePool{n: 100, syncDue: true}, 51, true, false},
	} {
		d := Drift{LastSyncN: c.lastN, CaughtUp: func() bool { return c.caught }}
		if got := SyncDue(r, &c.pool, d); got != c.want {
			t.Errorf("%s: SyncDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSplitVal: a point's role depends on its id alone (adding points changes no other
// point's role), fewer than two held-out points join the training rows, and fewer than
// two training rows is an error.
func TestSplitVal(t *testing.T) {
	var ids []string
	for i := range 200 {
		ids = append(ids, fmt.Sprintf("p%04d", i))
	}
	role := func(ids []string) map[string]bool {
		tr, va, err := splitVal(7, ids, 0.2)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, i := range tr {
			m[ids[i]] = false
		}
		for _, i := range va {
			m[ids[i]] = true
		}
		if len(m) != len(ids) {
			t.Fatalf("%d roles for %d ids", len(m), len(ids))
		}
		return m
	}
	small, all := role(ids[:100]), role(ids)
	held := 0
	for id, v := range small {
		if all[id] != v {
			t.Errorf("%s changed its role when points were added", id)
		}
		if v {
			held++
		}
	}
	if held < 10 || held > 30 { // 100 points at 0.2: 20 ± 3σ (σ = 4)
		t.Errorf("%d of 100 held out at fraction 0.2", held)
	}
	if tr, va, err := splitVal(7, ids[:3], 0.0); err != nil || len(tr) != 3 || va != nil {
		t.Errorf("no held-out points: tr %v va %v err %v", tr, va, err)
	}
	if _, _, err := splitVal(7, ids[:1], 0.0); err == nil {
		t.Error("one training point: no error")
	}
}

// fixture is a small configuration (mlp:6-8-4, h = 2, s = 16, m = 8 per view) and an
// ingest holding n labelled random points.
type fixture struct {
	cfg  config.Config
	feat *pipeline.Features
	pcfg coreset.Config
	st   *storage.Store
	in   *ingest.State
}

func newFixture(t *testing.T, n int) *fixture { return newFixtureWith(t, n, nil) }

// newFixtureWith is newFixture with the configuration changed by edit (when not nil)
// before anything is built.
func newFixtureWith(t *testing.T, n int, edit func(*config.Config)) *fixture {
	t.Helper()
	cfg := config.Default()
	cfg.Model = config.Backbone{Arch: "mlp:6-8-4", Seed: 7, Untrained: true}
	cfg.Sketch = config.Sketch{H: 2, S: 16}
	cfg.Pool.M = 8
	cfg.Fit.Epochs = 5
	cfg.Query.ReseedQueries = 0
	cfg.Kafka.Topics.Train = "t.train"
	if edit != nil {
		edit(&cfg)
	}
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := ingest.PoolConfig(cfg, feat.Dim())
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(filepath.Join(t.TempDir(), "cairn.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in, err := ingest.New(cfg, st, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	lim := stream.Limits{InputDim: feat.InputDim(), MaxBytes: 4096, MaxIDBytes: 32}
	var batch []stream.Message
	for i := range n {
		x := make([]float64, feat.InputDim())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		label := int64(i % 3)
		id := fmt.Sprintf("p%04d", i)
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x, Label: &label}, lim)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: int64(i), Key: []byte(id), Value: v})
	}
	if _, err := in.Apply(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	return &fixture{cfg: cfg, feat: feat, pcfg: pcfg, st: st, in: in}
}

func (f *fixture) fitter() *Fitter {
	return &Fitter{Config: f.cfg, Features: f.feat, Pool: f.pcfg, Log: zerolog.Nop(),
		Serve: func(in serving.Input) (*serving.Model, error) {
			return serving.New(in, serving.Settings{Backbone: f.feat.Backbone(), H: f.cfg.Sketch.H, S: f.cfg.Sketch.S,
				Seed: f.cfg.Model.Seed, DrawName: "test/eval", ExactMemoryBytes: f.cfg.Query.ExactMemoryBytes,
				Fits: f.cfg.Fit.Fits, ExactRowsCap: f.cfg.Query.ExactRowsCap, StableJaccard: f.cfg.Query.StableJaccard})
		}}
}

// selected is the fixture's snapshot and its batch greedy selection (ingest.Select).
func (f *fixture) selected(t *testing.T) (*ingest.Snapshot, *ingest.Selection) {
	t.Helper()
	snap, err := f.in.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ingest.Select(context.Background(), f.feat, f.pcfg, snap.IDs, snap.Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	return snap, sel
}

// TestFitRestore: Fit is a function of the snapshot (two fits give the same model id
// and weights), its landmarks are the selection's pivots (view A's, then view B's), and
// a restart's Restore from the stored model serves the same answers.
func TestFitRestore(t *testing.T) {
	f := newFixture(t, 60)
	snap, sel := f.selected(t)
	ctx := context.Background()
	fr := f.fitter()
	a, err := fr.Fit(ctx, snap, sel, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fr.Fit(ctx, snap, sel, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Meta.ID != b.Meta.ID || !slices.Equal(a.Model.A.Data, b.Model.A.Data) || a.Model.Version != 3 {
		t.Errorf("two fits of one snapshot differ: ids %s, %s (version %d)", a.Meta.ID, b.Meta.ID, a.Model.Version)
	}
	var want []string
	for v := range 2 {
		for _, r := range sel.Res[v].Pivots {
			want = append(want, snap.IDs[r])
		}
	}
	if !slices.Equal(a.Model.Landmarks, want) || a.Meta.Points != 60 || a.Meta.Train+a.Meta.Val != 60 {
		t.Errorf("landmarks %v (points %d = %d + %d), want the pivots %v of 60 points",
			a.Model.Landmarks, a.Meta.Points, a.Meta.Train, a.Meta.Val, want)
	}
	if got := a.Baseline(); got.Points != 60 || !(got.Ratio >= 0) || len(got.Landmarks) != len(want) {
		t.Errorf("baseline %+v", got)
	}
	if err := f.st.Apply(func(tx *storage.Tx) error { return tx.PutModel(a.Model) }); err != nil {
		t.Fatal(err)
	}
	rs, hash, err := fr.Restore(f.st, f.in.Points())
	if err != nil {
		t.Fatal(err)
	}
	if rs.ID != a.Meta.ID || hash != a.Meta.PointsHash || rs.MaskedCount() != 0 {
		t.Fatalf("restored model %s (hash %s, %d masked), want %s (%s)", rs.ID, hash, rs.MaskedCount(), a.Meta.ID, a.Meta.PointsHash)
	}
	x := snap.Entries[0].X
	var w serving.Workspace
	ca, err := a.Serving.Answer(&w, x, 3, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := rs.Answer(&w, x, 3, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ca.TopK {
		if ca.TopK[i].Index != cr.TopK[i].Index || ca.TopK[i].Score != cr.TopK[i].Score {
			t.Errorf("top %d: fitted %+v, restored %+v", i, ca.TopK[i], cr.TopK[i])
		}
	}
}
