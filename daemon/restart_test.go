package daemon

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// exportedX is the input an export lists for landmark id (nil: not listed).
func exportedX(ex serving.ModelExport, id string) [][]float64 {
	var out [][]float64
	for _, l := range ex.Landmarks {
		if l.ID == id {
			out = append(out, l.X)
		}
	}
	return out
}

// TestRestartKeepsMasks: the live daemon masks a landmark at once when its point is
// re-upserted with another input, and keeps serving a landmark re-upserted with the same
// input (its terms are still exact). A restarted daemon serves exactly that: the changed
// landmark stays masked until the next refit (the model records its landmarks' inputs,
// serving.Meta.Inputs), and neither its export nor the stored export of the stopped
// daemon's file lists the new input.
func TestRestartKeepsMasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	const n = 80
	set, err := dataset.Open("mnist", "train", n+1)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	dir := t.TempDir()
	cfg := e2eConfig(dir)
	// The first fit once all points are in, and no refit afterwards.
	cfg.Refit.PointsChanged, cfg.Refit.Idle = n, 0
	cfg.Refit.PoolChangeFraction, cfg.Refit.ResidualIncrease = 0, 0
	tp := cfg.Kafka.Topics
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	r := startDaemon(t, cfg)
	produceMsgs(t, r.d.Brokers(), upserts(t, tp.Train, set, rows))
	var s *serving.Model
	waitFor(t, "the first model", 90*time.Second, func() bool {
		s = r.d.serve.model.Load()
		return s != nil && s.Points == n
	})
	changed, same := s.LandmarkIDs[0], ""
	for _, id := range s.LandmarkIDs {
		if id != changed {
			same = id
			break
		}
	}
	row := func(id string) int { return slices.Index(set.IDs, id) }
	// changed gets the input of the one point not stored; same its own input again.
	msgs := upserts(t, tp.Train, set, []int{row(same)})
	newX := upserts(t, tp.Train, set, []int{n})[0]
	ev, err := stream.DecodeTrain(newX.Value, stream.Limits{InputDim: set.D})
	if err != nil {
		t.Fatal(err)
	}
	ev.ID = changed
	v, err := stream.EncodeTrain(ev, stream.Limits{InputDim: set.D})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, stream.Message{Topic: tp.Train, Key: []byte(changed), Value: v})
	// A third point keeps its input but gets another label: its gradient row (the default
	// ranking's, which uses the label) is replaced by one under the new label at once,
	// its landmark terms (if any) stay.
	relabeled := set.IDs[n-1]
	lab := int64(set.Labels[n-1]+1) % 10
	v, err = stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: relabeled, X: set.Row(n - 1), Label: &lab}, stream.Limits{InputDim: set.D})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, stream.Message{Topic: tp.Train, Key: []byte(relabeled), Value: v})
	wasLandmark := s.IsLandmark(relabeled)
	produceMsgs(t, r.d.Brokers(), msgs)
	waitFor(t, "the relabel applied", 30*time.Second, func() bool {
		e := r.d.train.cache.Load().Get(relabeled)
		return e != nil && e.Label == lab
	})
	waitFor(t, "the re-upserts applied", 30*time.Second, func() bool {
		e := r.d.train.cache.Load().Get(changed)
		return e != nil && slices.Equal(e.X, set.Row(n))
	})
	live := r.d.serve.model.Load()
	if live.Version != s.Version || live.IsLandmark(changed) || !live.IsLandmark(same) {
		t.Fatalf("live model %d: %s served %v, %s served %v; want model %d, %s masked and %s served",
			live.Version, changed, live.IsLandmark(changed), same, live.IsLandmark(same), s.Version, changed, same)
	}
	// Each re-upserted point's gradient row is its new value's, computed as its batch
	// committed: the relabeled one under its new label, the changed one at its new
	// version.
	for _, id := range []string{relabeled, changed, same} {
		e := r.d.train.cache.Load().Get(id)
		v, l, ok := live.GradRowOf(id)
		if !ok || v != e.Version || int64(l) != e.Label {
			t.Errorf("live gradient row of %s: version %d label %d (present %v), want the stored value's %d and %d", id, v, l, ok, e.Version, e.Label)
		}
	}
	if live.IsLandmark(relabeled) != wasLandmark {
		t.Errorf("%s a landmark %v, was %v: a relabel keeps the landmark terms", relabeled, live.IsLandmark(relabeled), wasLandmark)
	}
	liveMasked := live.MaskedIDs()
	check := func(what string, ex serving.ModelExport, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if xs := exportedX(ex, changed); len(xs) != 0 {
			t.Errorf("%s lists %s (%d rows), which the model was not fitted on", what, changed, len(xs))
		}
		if len(exportedX(ex, same)) == 0 {
			t.Errorf("%s leaves out %s, re-upserted with its own input", what, same)
		}
	}
	ex, err := r.d.Export(0)
	check("the live export", ex, err)
	r.stop(t)

	st := openStore(t, filepath.Join(dir, StateFile))
	ex, err = ExportStored(cfg, st, 0)
	st.Close()
	check("the stored export", ex, err)

	cfg.Refit.PointsChanged = 100 * n // the restart finds changed points: no refit
	r = startDaemon(t, cfg)
	waitFor(t, "the restored model", 30*time.Second, func() bool { return r.d.serve.model.Load() != nil })
	back := r.d.serve.model.Load()
	if back.Version != s.Version || back.IsLandmark(changed) || !back.IsLandmark(same) || !slices.Equal(back.MaskedIDs(), liveMasked) {
		t.Errorf("restarted model %d masks %v, the live one masked %v; want model %d, %s masked and %s served",
			back.Version, back.MaskedIDs(), liveMasked, s.Version, changed, same)
	}
	ex, err = r.d.Export(0)
	check("the restarted export", ex, err)
}
