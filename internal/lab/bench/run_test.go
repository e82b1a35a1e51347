package bench

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
)

// smallDaemon is a daemon small enough for a test under -race (the daemon package's
// e2e configuration, as cairnctl's demo test uses): mlp:784-32-10, h = 2, s = 128,
// m = 16 per view, short fits, quick idle refits; broker and HTTP on free ports.
func smallDaemon() config.Config {
	c := config.Default()
	c.HTTP = "127.0.0.1:0"
	c.Kafka.EmbeddedBroker = "127.0.0.1:0"
	c.Kafka.Partitions = 2
	c.Model = config.Backbone{Arch: "mlp:784-32-10", Seed: 3, ViewSeed: 3, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 128}
	c.Pool.M = 16
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 16, 3, 64, 2
	c.Refit.Idle = 300 * time.Millisecond
	c.Refit.DeleteDebounce = 100 * time.Millisecond
	c.Refit.MinPoints = 32
	c.Audit = config.Audit{Random: 10, Reference: 100, Test: 30}
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// TestRun runs the bench on a small daemon and checks that every
// measurement was taken and is consistent: rates and latencies positive and finite,
// p50 ≤ p99, the ratio equal to ingest/reference, deletion-to-audit minus refit equal
// to the difference of the two reported times, targets_met agreeing with the numbers.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Config: smallDaemon(), Data: "mnist", N: 100, Queries: 8, Reference: 20, Log: zerolog.Nop(), Stderr: io.Discard,
		Rate: 20, LoadDuration: time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
	for _, key := range []string{"ingest_events_per_second", "features_per_second_reference", "ingest_vs_features_ratio",
		"query_in_process_p50_ms", "query_in_process_p99_ms", "query_kafka_p50_ms", "query_kafka_p99_ms", "refit_seconds",
		"deletion_to_audit_seconds", "deletion_to_audit_minus_refit_seconds", "targets_met"} {
		if !strings.Contains(string(b), `"`+key+`"`) {
			t.Errorf("report lacks %q: %s", key, b)
		}
	}
	pos := map[string]float64{
		"ingest": rep.IngestEventsPerSecond, "reference": rep.FeaturesPerSecondReference, "ratio": rep.IngestVsFeaturesRatio,
		"ip50": rep.QueryInProcessP50Ms, "ip99": rep.QueryInProcessP99Ms, "k50": rep.QueryKafkaP50Ms, "k99": rep.QueryKafkaP99Ms,
		"refit": rep.RefitSeconds, "d2a": rep.DeletionToAuditSeconds, "drefit": rep.DeletionRefitSeconds,
	}
	for k, v := range pos {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want positive and finite", k, v)
		}
	}
	if rep.QueryInProcessP50Ms > rep.QueryInProcessP99Ms || rep.QueryKafkaP50Ms > rep.QueryKafkaP99Ms {
		t.Errorf("p50 above p99: in process %v/%v, Kafka %v/%v", rep.QueryInProcessP50Ms, rep.QueryInProcessP99Ms, rep.QueryKafkaP50Ms, rep.QueryKafkaP99Ms)
	}
	if got, want := rep.IngestVsFeaturesRatio, rep.IngestEventsPerSecond/rep.FeaturesPerSecondReference; got != want {
		t.Errorf("ratio %v, want ingest/reference %v", got, want)
	}
	// The ingest's phases: batches were applied (their features prepared ahead by the
	// training reader), and the load correction, where Linux gives it, is a share of a core.
	if ph := rep.IngestPhaseSeconds; rep.IngestBatches == 0 || !(ph.Commit > 0) || !(ph.Ahead > 0) {
		t.Errorf("ingest: %d batches, phases %+v; want batches, a commit time and batches prepared ahead", rep.IngestBatches, ph)
	}
	if ls := rep.LoadShare; ls != nil {
		if !(ls.Reference > 0 && ls.Reference <= 1 && ls.Ingest > 0 && ls.Ingest <= 1) {
			t.Errorf("load share %+v, want both in (0, 1]", *ls)
		}
		if got, want := rep.IngestVsFeaturesRatioLoadCorrected, rep.IngestVsFeaturesRatio*ls.Reference/ls.Ingest; got != want {
			t.Errorf("load-corrected ratio %v, want %v", got, want)
		}
	}
	// Both refits' phases are reported (the phase table of #37), each phase within
	// its refit's seconds, and their sum no more than the refit's.
	for name, ph := range map[string]map[string]float64{"refit": rep.RefitPhaseSeconds, "deletion refit": rep.DeletionRefitPhaseSeconds} {
		total := rep.RefitSeconds
		if name != "refit" {
			total = rep.DeletionRefitSeconds
		}
		var sum float64
		for _, k := range []string{"sync", "blocks", "init", "fit", "reseed", "serving"} {
			v, ok := ph[k]
			if !ok || !(v >= 0) || v > total {
				t.Errorf("%s phase %s = %v (reported %v), want within [0, %v]", name, k, v, ok, total)
			}
			sum += v
		}
		if sum > total*1.001 {
			t.Errorf("%s phases add to %v s, more than the refit's %v s", name, sum, total)
		}
	}
	if got, want := rep.DeletionToAuditMinusRefitSeconds, rep.DeletionToAuditSeconds-rep.DeletionRefitSeconds; got != want {
		t.Errorf("deletion_to_audit_minus_refit %v, want %v", got, want)
	}
	// The audit comes after the deletion's refit, so deletion-to-audit exceeds it.
	if rep.DeletionToAuditSeconds < rep.DeletionRefitSeconds {
		t.Errorf("deletion to audit %v s < the deletion's refit %v s", rep.DeletionToAuditSeconds, rep.DeletionRefitSeconds)
	}
	if rep.DeletedID == "" || !strings.HasPrefix(rep.DeletedID, "mnist/train/") {
		t.Errorf("deleted id %q: want a stored MNIST point", rep.DeletedID)
	}
	// Every Kafka answer is checked against the Jacobian reference from GET /model: the
	// small model fits the exact budget, so every answer is exact and none may be wrong.
	c := rep.Certification
	if c.Answers != 8 || c.OtherModel != 0 || c.VarianceModel["exact_kernel"] != 8 || c.Incorrect != 0 ||
		c.CertifiedRate != float64(c.Certified)/8 || !(c.TopKExactRate >= c.CertifiedRate) {
		t.Errorf("certification %+v: want 8 exact answers on the exported model, none incorrect", c)
	}
	// by is unset: both loads run, by x (load) and by stored id (load_by_id).
	if l := rep.Load; l.Sent != 20 || l.Answered != l.Sent || !(l.P50Ms <= l.P99Ms && l.P99Ms <= l.MaxMs) {
		t.Errorf("load %+v: want 20 sent and answered, p50 ≤ p99 ≤ max", l)
	}
	if l := rep.LoadByID; l == nil || l.Sent != 20 || l.Answered != l.Sent || !(l.P50Ms <= l.P99Ms && l.P99Ms <= l.MaxMs) {
		t.Errorf("load_by_id %+v: want 20 sent and answered, p50 ≤ p99 ≤ max", l)
	}
	if !(rep.ResidentMB > 0 && rep.PeakResidentMB >= rep.ResidentMB) {
		t.Errorf("resident %v MB, peak %v MB", rep.ResidentMB, rep.PeakResidentMB)
	}
	wantMet := map[string]bool{
		"ingest_events_per_second_ge_1000":   rep.IngestEventsPerSecond >= 1000,
		"query_kafka_p99_le_20ms":            rep.QueryKafkaP99Ms <= 20,
		"deletion_to_audit_le_refit_plus_1s": rep.DeletionToAuditSeconds <= rep.DeletionRefitSeconds+1,
	}
	if l := rep.LoadByID; l != nil {
		wantMet["load_by_id_p99_le_25ms"] = l.Answered == l.Sent && l.P99Ms <= 25
	}
	for k, v := range wantMet {
		if got, ok := rep.TargetsMet[k]; !ok || got != v {
			t.Errorf("targets_met[%s] = %v (present %v), want %v", k, got, ok, v)
		}
	}
	t.Logf("bench (small config, -race, shared machine): %s", b)
}

// TestRunBacklog: with Backlog the rows are on a broker before the daemon starts, the
// report says so, and the daemon consumed them all and answered on them.
func TestRunBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Config: smallDaemon(), Data: "mnist", N: 100, Queries: 4, Reference: 20, Log: zerolog.Nop(), Stderr: io.Discard,
		Backlog: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.IngestMode != "backlog" {
		t.Errorf("ingest_mode %q, want backlog", rep.IngestMode)
	}
	for k, v := range map[string]float64{"ingest": rep.IngestEventsPerSecond, "produce": rep.ProduceEventsPerSecond, "refit": rep.RefitSeconds} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want positive and finite", k, v)
		}
	}
	if got, want := rep.Certification.Answers, 4; got != want {
		t.Errorf("%d answers checked, want %d", got, want)
	}
}
