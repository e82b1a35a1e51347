package bench

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
)

// TestBenchScale runs bench-scale on cairnd processes with a small model: every round
// answers every query, each replica answers some, a killed replica loses no query, and
// the standby's takeover keeps one audit chain with nothing lost or applied twice.
func TestBenchScale(t *testing.T) {
	bin, cfgFile, cfg := scaleSetup(t, `model: {arch: "mlp:784-32-10", seed: 3, untrained: true}
sketch: {h: 2, s: 128}
pool: {m: 16}
fit: {k: 16, epochs: 3, batch: 64, fits: 2}
refit: {idle: 300ms, delete_debounce: 100ms, min_points: 32}
audit: {random: 10, reference: 100, test: 30}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &scaleRun{bin: bin, cfg: cfg, cfgFile: cfgFile, data: "mnist", n: 120, queries: 90, procs: 1, stderr: io.Discard}
	rep, err := s.run(ctx, []int{1, 2}, true, true)
	if err != nil {
		t.Fatalf("bench-scale: %v", err)
	}
	if len(rep.Rounds) != 2 || len(rep.Speedup) != 2 || rep.Speedup[0] != 1 {
		t.Fatalf("rounds %+v, speedup %v", rep.Rounds, rep.Speedup)
	}
	for _, r := range rep.Rounds {
		var sum uint64
		for _, n := range r.PerReplica {
			if n == 0 {
				t.Errorf("%d replicas: one answered nothing (%v)", r.Replicas, r.PerReplica)
			}
			sum += n
		}
		if len(r.PerReplica) != r.Replicas || r.Answered != 90 || sum < 90 || !(r.QueriesPerSecond > 0) {
			t.Errorf("round %+v: want every query answered, split over %d replicas", r, r.Replicas)
		}
	}
	if k := rep.Kill; k == nil || k.Lost != 0 || k.KilledAt < 30 {
		t.Errorf("kill: %+v; want no query lost, killed after a third", k)
	}
	tk := rep.Takeover
	if tk == nil || !tk.ChainOK || tk.Lost || tk.Twice || tk.Points != 118 || tk.Upserts != 120 || !(tk.Seconds > 0) {
		t.Errorf("takeover: %+v; want one chain, 120 upserts once, 118 points", tk)
	}
	if len(tk.AuditSeqs) < 2 || tk.AuditSeqs[len(tk.AuditSeqs)-1] != 2 {
		t.Errorf("takeover audit seqs %v; want the chain 1, 2", tk.AuditSeqs)
	}
}

// TestBenchScaleFeaturize runs bench-scale's ingestion rounds on cairnd processes with a
// small model: the primary alone, one featurizer, and two of which one is killed. Every
// round applies every measured upsert once after its warm-up; with a featurizer the
// warm-up waits until the primary takes features from records, so the measured rows
// come from records, all of them with a live featurizer.
func TestBenchScaleFeaturize(t *testing.T) {
	bin, cfgFile, cfg := scaleSetup(t, `model: {arch: "mlp:784-32-10", seed: 3, untrained: true}
sketch: {h: 2, s: 128}
pool: {m: 16}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &scaleRun{bin: bin, cfg: cfg, cfgFile: cfgFile, data: "mnist", n: 200, procs: 1, stderr: testLog{t},
		featurizers: []int{1}, featWait: 10 * time.Second}
	rep, err := s.run(ctx, nil, true, false)
	if err != nil {
		t.Fatalf("bench-scale: %v", err)
	}
	f := rep.Featurize
	if f == nil || len(f.Rounds) != 3 {
		t.Fatalf("featurize report %+v: want rounds of 0, 1 and 2 (killed) featurizers", f)
	}
	for i, r := range f.Rounds {
		if r.Applied != 200 || r.Points != r.Warm+200 || r.Warm < 128 || r.Warm%128 != 0 || !(r.EventsPerSecond > 0) {
			t.Errorf("round %d: %+v; want 200 upserts applied once after whole warm-up batches", i, r)
		}
	}
	if r := f.Rounds[0]; r.FeaturesTaken != 0 || r.Warm != 128 {
		t.Errorf("primary alone: %+v; want no feature from a record and one warm-up batch", r)
	}
	if r := f.Rounds[0]; r.RecordsFiled != 0 {
		t.Errorf("primary alone: %d records filed, want none (no feature reader)", r.RecordsFiled)
	}
	if r := f.Rounds[1]; r.FeaturesTaken != 200 || r.RecordsFiled < 200 {
		t.Errorf("one featurizer: %d of 200 features from records, %d records filed (/status features); want all, and at least 200 filed (a 10 s timeout)",
			r.FeaturesTaken, r.RecordsFiled)
	}
	if !rep.TargetsMet["featurizer_kill_nothing_lost_or_twice"] {
		t.Errorf("kill round %+v: something lost or applied twice", f.Rounds[2])
	}
}

// scaleSetup skips in -short mode, builds cairnd into a temporary directory and writes
// and loads the configuration yaml there, for the bench-scale tests.
func scaleSetup(t *testing.T, yaml string) (bin, cfgFile string, cfg config.Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs cairnd processes")
	}
	dir := t.TempDir()
	bin = filepath.Join(dir, "cairnd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/cairnd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgFile = filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if cfg, err = config.Load(cfgFile, nil); err != nil {
		t.Fatal(err)
	}
	return bin, cfgFile, cfg
}

// testLog writes to t.Log: the bench's progress lines, shown when the test fails.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
