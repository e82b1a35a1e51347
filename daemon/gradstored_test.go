package daemon

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/stream"
)

// TestGradientRowsBetweenRefits: with every drift trigger but the first fit's off, points
// stored after the first model get gradient rows without a refit, so the default
// (gradient) answer to a query by the id of one of them ranks every labelled stored
// point, as the slow reference over all of them does (checkGradientAnswer), and /status
// counts their rows.
func TestGradientRowsBetweenRefits(t *testing.T) {
	if testing.Short() {
		t.Skip("daemon test")
	}
	const first, n = 64, 96
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	cfg := e2eConfig(t.TempDir())
	// The first fit at 64 changed points; the 32 that follow fire no trigger.
	cfg.Refit.Idle, cfg.Refit.PointsChanged, cfg.Refit.PoolChangeFraction, cfg.Refit.ResidualIncrease = 0, first, 0, 0
	tp := cfg.Kafka.Topics
	r := startDaemon(t, cfg)
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	msgs := upserts(t, tp.Train, set, rows)
	produceMsgs(t, r.d.Brokers(), msgs[:first])
	waitFor(t, "the first model", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && !s.RefitRunning && s.GradientRows == first
	})
	model := r.d.Status().Model
	produceMsgs(t, r.d.Brokers(), msgs[first:])
	waitFor(t, "rows for the points stored since", 60*time.Second, func() bool {
		return r.d.Status().GradientRows == n
	})
	if st := r.d.Status(); st.Model != model || st.Points != n || st.Refits != 1 {
		t.Fatalf("status: model %d (first %d), %d points, %d refits: want no refit since the first model", st.Model, model, st.Points, st.Refits)
	}
	q := queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-new", ID: set.IDs[n-1], K: 5}, set.D)
	produceMsgs(t, r.d.Brokers(), []stream.Message{q})
	waitFor(t, "the answer", 30*time.Second, func() bool { return len(r.messages(tp.Attributions)) == 1 })
	a := keyed[stream.Attribution](t, r, tp.Attributions)["q-new"]
	checkGradientAnswer(t, r.d.serve.model.Load(), a, set, set.Row(n-1))
}
