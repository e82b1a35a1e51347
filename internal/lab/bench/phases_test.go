package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/base/gemm"
)

var (
	phasesN     = flag.Int("phases.n", 10000, "BenchmarkRefitPhases: MNIST training rows")
	phasesReps  = flag.Int("phases.reps", 3, "BenchmarkRefitPhases: repetitions per GOMAXPROCS")
	phasesJSON  = flag.String("phases.json", "", "BenchmarkRefitPhases: also write the report as JSON to this file")
	phasesProcs = flag.String("phases.procs", "1,2", "BenchmarkRefitPhases: GOMAXPROCS values, comma-separated, timed in this order")
	phasesCold  = flag.Bool("phases.cold", false, "BenchmarkRefitPhases: time first refits (PhaseOptions.Cold), not refits after an untimed one")
)

// BenchmarkRefitPhases prints the phase table of a refit on -phases.n MNIST points
// under the default configuration, at GOMAXPROCS 1 and 2 back to back, -phases.reps
// times (docs/performance.md, "Cores"):
//
//	go test ./internal/lab/bench -run '^$' -bench RefitPhases -benchtime 1x -timeout 60m
//
// It installs internal/base/gemm as cairnd does. The reported metrics are the medians of
// the total and the fit phase and the ratio T2/T1 of the totals.
func BenchmarkRefitPhases(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	var procs []int
	for _, f := range strings.Split(*phasesProcs, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			b.Fatalf("-phases.procs %q: %q is not a GOMAXPROCS value", *phasesProcs, f)
		}
		procs = append(procs, p)
	}
	for range b.N {
		rep, err := Phases(context.Background(), PhaseOptions{Config: config.Default(), Data: "mnist", N: *phasesN,
			Procs: procs, Reps: *phasesReps, Cold: *phasesCold, Progress: func(run PhaseRun) {
				fmt.Fprintf(os.Stderr, "phases run: GOMAXPROCS %d, model %s, seconds %v\n", run.Procs, run.ModelID, run.Seconds)
			}})
		if err != nil {
			b.Fatal(err)
		}
		// On stderr: go test cuts a benchmark's log to its first lines.
		fmt.Fprint(os.Stderr, "\n"+rep.Table()+"\n"+rep.ScaleTable())
		if *phasesJSON != "" {
			js, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(*phasesJSON, js, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		t1, t2 := rep.Median("total", 1), rep.Median("total", 2)
		b.ReportMetric(t1, "s_total_gomaxprocs1")
		b.ReportMetric(t2, "s_total_gomaxprocs2")
		b.ReportMetric(t2/t1, "ratio_2_to_1")
	}
}

// TestPhases runs the harness on a small daemon configuration: every phase is timed at
// each GOMAXPROCS, the runs fitted one model id, and the table lists each phase with
// T2/T1 equal to the ratio of the medians.
func TestPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("ingests and refits")
	}
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprintf("cold=%v", cold), func(t *testing.T) { testPhases(t, cold) })
	}
}

func testPhases(t *testing.T, cold bool) {
	cfg := smallDaemon()
	cfg.Query.ReseedQueries = 8
	rep, err := Phases(context.Background(), PhaseOptions{Config: cfg, Data: "mnist", N: 120, Procs: []int{1, 2}, Reps: 2, Dir: t.TempDir(),
		Cold: cold})
	if err != nil {
		t.Fatal(err)
	}
	if kind := map[bool]string{false: "(refits after one)", true: "(first refits)"}[cold]; rep.Cold != cold ||
		!strings.Contains(rep.Table(), kind) || !strings.Contains(rep.ScaleTable(), kind) {
		t.Errorf("the report of cold=%v is not headed %s", cold, kind)
	}
	if got, want := len(rep.Runs), 4; got != want {
		t.Fatalf("%d runs, want %d", got, want)
	}
	for _, run := range rep.Runs {
		for _, ph := range PhaseNames {
			if s := run.Seconds[ph]; !(s >= 0) || math.IsInf(s, 0) {
				t.Errorf("GOMAXPROCS %d: %s took %v s", run.Procs, ph, s)
			}
			// φ is a share of run time (NaN without schedstat, or for a phase shorter
			// than the sampling can resolve).
			if f := run.Share[ph]; !math.IsNaN(f) && !(f > 0 && f <= 1) {
				t.Errorf("GOMAXPROCS %d: %s ran a share %v of its runnable time", run.Procs, ph, f)
			}
		}
		if run.ModelID == "" || run.ModelID != rep.Runs[0].ModelID {
			t.Errorf("GOMAXPROCS %d fitted %q, the first run %q", run.Procs, run.ModelID, rep.Runs[0].ModelID)
		}
	}
	if s := rep.Runs[0].Seconds["reseed"]; !(s > 0) {
		t.Errorf("reseed took %v s with 8 reseed queries", s)
	}
	if f := rep.Runs[0].Share["total"]; !(f > 0 && f <= 1) {
		t.Errorf("the whole refit ran a share %v of its runnable time", f)
	}
	tab := rep.Table()
	t.Log("\n" + tab)
	scale := rep.ScaleTable()
	t.Log("\n" + scale)
	for _, ph := range PhaseNames {
		// The P = 2 column's speed-up is T_1/T_2 of the medians, as the two-core table's.
		want := fmt.Sprintf("%6.2fx", rep.Median(ph, 1)/rep.Median(ph, 2))
		if line := tableLine(scale, ph); !strings.Contains(line, want) {
			t.Errorf("scale table's %s line %q lacks the speed-up %s", ph, line, want)
		}
	}
	for _, ph := range PhaseNames {
		if !strings.Contains(tab, "\n"+ph+" ") {
			t.Errorf("table lacks phase %s:\n%s", ph, tab)
		}
	}
	// The phases cover the refit: what runs between them (two residual certificates
	// of 2·24 landmarks, a few map writes) takes milliseconds, here at most a tenth
	// of a second, even on a loaded machine.
	for _, procs := range []int{1, 2} {
		if u := rep.Untimed(procs); !(u >= -1e-6 && u < 0.1) {
			t.Errorf("GOMAXPROCS %d: a run's total exceeds its phases' sum by %v s", procs, u)
		}
	}
	if m := rep.Median("fit", 1); !(m > 0) {
		t.Errorf("median fit at GOMAXPROCS 1 is %v", m)
	}
	if m := rep.Median("fit", 3); !math.IsNaN(m) {
		t.Errorf("median without runs is %v, want NaN", m)
	}
}

// TestSchedShare: the share between two instants is the run-weighted mean of the
// threads' shares, interpolated between the samples around the instants; a thread that
// only waited counts for nothing, and an interval outside the samples is NaN.
func TestSchedShare(t *testing.T) {
	t0 := time.Unix(100, 0)
	s := &schedSampler{ok: true, samples: []schedSample{
		{at: t0, threads: map[string]schedTimes{"1": {0, 0}}},
		// thread 1 ran alone; thread 2 started, waited and never ran
		{at: t0.Add(time.Second), threads: map[string]schedTimes{"1": {1, 0}, "2": {0, 0.5}}},
		// thread 1 ran a quarter of the next second, thread 2 three quarters
		{at: t0.Add(2 * time.Second), threads: map[string]schedTimes{"1": {1.25, 0.75}, "2": {0.75, 0.75}}},
	}}
	for _, c := range []struct {
		a, b time.Duration
		want float64
	}{
		{0, time.Second, 1},
		{time.Second, 2 * time.Second, (0.25*0.25 + 0.75*0.75) / 1.0},
		// half of each second: thread 1 ran 0.5 + 0.125 and waited 0.375, thread 2 ran
		// 0.375 and waited 0.25 + 0.125
		{500 * time.Millisecond, 1500 * time.Millisecond, (0.625*0.625/1 + 0.375*0.375/0.75) / 1.0},
	} {
		if got := s.share(t0.Add(c.a), t0.Add(c.b)); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("share(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if got := s.share(t0.Add(-time.Second), t0.Add(time.Second)); !math.IsNaN(got) {
		t.Errorf("share before the first sample = %v, want NaN", got)
	}
}

// tableLine is the line of tab that starts with the phase name ph, "" if none.
func tableLine(tab, ph string) string {
	for _, line := range strings.Split(tab, "\n") {
		if strings.HasPrefix(line, ph+" ") {
			return line
		}
	}
	return ""
}
