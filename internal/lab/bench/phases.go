package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// PhaseNames are a refit's phases in the order the daemon's "model installed" log line
// reports them (sync_seconds, blocks_seconds, init_seconds, fit_seconds,
// reseed_seconds, serving_seconds), then their sum.
var PhaseNames = []string{"sync", "blocks", "init", "fit", "reseed", "serving", "total"}

// PhaseOptions are the settings of Phases.
type PhaseOptions struct {
	// Config is the daemon's configuration; its backbone gets the shipped weights for
	// Data (offline.WeightsForData) as cairnctl bench's does.
	Config config.Config
	Data   string // a dataset.Open spec, "mnist" for the documented table
	N      int    // training rows
	// Procs are the GOMAXPROCS values to time, each once per repetition, back to back in
	// this order; Reps is the number of repetitions.
	Procs []int
	Reps  int
	// Dir holds the store of the ingested points ("" is a temporary directory, removed
	// before Phases returns).
	Dir string
	// Progress, if set, gets each run as soon as it ends (a long sitting that is cut
	// short still leaves the runs it finished).
	Progress func(PhaseRun)
	// Cold times each run on a refit.Fitter of its own, as a daemon's first refit after
	// a start: every point's gradient rows and reseeded features computed. Otherwise one
	// Fitter times every run after an untimed refit of the same points at the largest of
	// Procs, as a daemon's refits after the first: those rows at hand for every point (a
	// deletion's refit has them for all but the deleted point).
	Cold bool
}

// PhaseRun is one timed refit: its GOMAXPROCS, the wall seconds of each of PhaseNames,
// the share φ of its runnable thread time each phase ran (schedstat.go: φ·wall
// estimates the phase on an idle machine), the model id it fitted and the load average
// when it ended.
type PhaseRun struct {
	Procs   int                `json:"gomaxprocs"`
	Seconds map[string]float64 `json:"seconds"`
	Share   map[string]float64 `json:"share"`
	ModelID string             `json:"model_id"`
	Load1   float64            `json:"load1"`
}

// PhaseReport is the outcome of Phases: every run in the order it ran.
type PhaseReport struct {
	Data string     `json:"data"`
	N    int        `json:"n"`
	Cold bool       `json:"cold"` // PhaseOptions.Cold
	Runs []PhaseRun `json:"runs"`
}

// Phases ingests the first o.N rows of o.Data into a fresh ingest state (as the daemon
// does: features cached, the incremental pool kept), then times o.Reps repetitions of
// one refit at each GOMAXPROCS of o.Procs, back to back: a sync (ingest.Select and
// refit.Deff, as the daemon's syncSnapshot without installing the pool) and
// refit.Fitter.Fit on the same snapshot, cold or not (PhaseOptions.Cold). GOMAXPROCS is restored before it returns. It
// fails when two runs fit different models: a refit must not depend on GOMAXPROCS.
func Phases(ctx context.Context, o PhaseOptions) (rep PhaseReport, err error) {
	rep = PhaseReport{Data: o.Data, N: o.N, Cold: o.Cold}
	if o.N < 2 || o.Reps < 1 || len(o.Procs) == 0 {
		return rep, fmt.Errorf("phases: n = %d, reps = %d, %d GOMAXPROCS values", o.N, o.Reps, len(o.Procs))
	}
	cfg := o.Config
	set, err := dataset.Open(o.Data, "train", o.N)
	if err != nil {
		return rep, fmt.Errorf("--data: %w", err)
	}
	cfg.Model = offline.WeightsForData(cfg.Model, set.Name)
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cairn-phases-"); err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
	}
	st, err := storage.Open(filepath.Join(dir, "cairn.db"), storage.Options{NoSync: true})
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	in, err := ingestSet(ctx, cfg, st, set)
	if err != nil {
		return rep, err
	}
	snap, err := in.Snapshot()
	if err != nil {
		return rep, err
	}
	fr := phaseFitter(cfg, in)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	if !o.Cold {
		runtime.GOMAXPROCS(slices.Max(o.Procs))
		if _, err := timeRefit(ctx, fr, snap); err != nil {
			return rep, err
		}
	}
	for range o.Reps {
		for _, p := range o.Procs {
			runtime.GOMAXPROCS(p)
			if o.Cold {
				fr = phaseFitter(cfg, in)
			}
			run, err := timeRefit(ctx, fr, snap)
			if err != nil {
				return rep, err
			}
			run.Procs = p
			rep.Runs = append(rep.Runs, run)
			if o.Progress != nil {
				o.Progress(run)
			}
			if first := rep.Runs[0]; run.ModelID != first.ModelID {
				return rep, fmt.Errorf("phases: GOMAXPROCS %d fitted model %s, GOMAXPROCS %d fitted %s",
					p, run.ModelID, first.Procs, first.ModelID)
			}
		}
	}
	return rep, nil
}

// ingestSet applies the rows of set as labelled upserts, 256 per batch, to a new ingest
// state on st.
func ingestSet(ctx context.Context, cfg config.Config, st *storage.Store, set *dataset.Set) (*ingest.State, error) {
	in, err := ingest.New(cfg, st, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	lim := in.Limits()
	var batch []stream.Message
	for i := range set.N {
		ev := stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i)}
		if set.Labels != nil {
			l := int64(set.Labels[i])
			ev.Label = &l
		}
		v, err := stream.EncodeTrain(ev, lim)
		if err != nil {
			return nil, err
		}
		batch = append(batch, stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: int64(i), Key: []byte(ev.ID), Value: v})
		if len(batch) == cfg.Limits.BatchEvents || i == set.N-1 {
			if _, err := in.Apply(ctx, batch); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}
	return in, nil
}

// phaseFitter is the daemon's refit.Fitter for cfg over in's features, with the
// daemon's serving settings and a fixed evaluation draw name.
func phaseFitter(cfg config.Config, in *ingest.State) *refit.Fitter {
	feat := in.Features()
	pcfg, _ := ingest.PoolConfig(cfg, feat.Dim()) // ingest.New accepted cfg, so did PoolConfig
	return &refit.Fitter{Config: cfg, Features: feat, Pool: pcfg, Log: zerolog.Nop(),
		Serve: func(si serving.Input) (*serving.Model, error) {
			return serving.New(si, serving.Settings{
				Backbone: feat.Backbone(), H: cfg.Sketch.H, S: cfg.Sketch.S, Seed: cfg.Model.Seed,
				DrawName: "bench/phases/eval", ExactMemoryBytes: cfg.Query.ExactMemoryBytes, Fits: cfg.Fit.Fits,
				ExactRowsCap: cfg.Query.ExactRowsCap, StableJaccard: cfg.Query.StableJaccard,
			})
		}}
}

// timeRefit runs one sync and fit of snap and returns its phase times as the daemon's
// log line reports them (init is the kernel scaling and the initializer) and each
// phase's share φ.
func timeRefit(ctx context.Context, fr *refit.Fitter, snap *ingest.Snapshot) (PhaseRun, error) {
	smp, stop := startSampler(50 * time.Millisecond)
	defer stop()
	t0 := time.Now()
	sel, err := ingest.Select(ctx, fr.Features, fr.Pool, snap.IDs, snap.Entries, nil)
	if err != nil {
		return PhaseRun{}, err
	}
	refit.Deff(sel, len(snap.IDs), fr.Pool.Budget.Lambda)
	tFit := time.Now()
	ft, err := fr.Fit(ctx, snap, sel, 1)
	if err != nil {
		return PhaseRun{}, err
	}
	tEnd := time.Now()
	stop()
	s := ft.Seconds
	run := PhaseRun{ModelID: ft.Meta.ID, Load1: loadAverage(), Seconds: map[string]float64{
		"sync": tFit.Sub(t0).Seconds(), "blocks": s["blocks"], "init": s["kernel"] + s["init"], "fit": s["fit"],
		"reseed": s["reseed"], "serving": s["serving"], "total": tEnd.Sub(t0).Seconds(),
		"reseed_beside": s["reseed_beside"],
	}, Share: map[string]float64{}}
	// The phases run one after the other: Fit's first three from tFit on, its last two
	// up to tEnd (the residual certificates between them take microseconds).
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	at := tFit
	for _, ph := range []string{"blocks", "init", "fit"} {
		run.Share[ph] = smp.share(at, at.Add(sec(run.Seconds[ph])))
		at = at.Add(sec(run.Seconds[ph]))
	}
	sv := tEnd.Add(-sec(run.Seconds["serving"]))
	run.Share["serving"] = smp.share(sv, tEnd)
	run.Share["reseed"] = smp.share(sv.Add(-sec(run.Seconds["reseed"])), sv)
	run.Share["sync"] = smp.share(t0, tFit)
	run.Share["total"] = smp.share(t0, tEnd)
	return run, nil
}

// loadAverage is the one-minute load average of /proc/loadavg, NaN where there is none.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return math.NaN()
	}
	return l
}

// Median is the median wall seconds of phase over the runs at GOMAXPROCS procs (the
// mean of the two middle ones for an even count), NaN without such runs.
func (r PhaseReport) Median(phase string, procs int) float64 {
	return r.median(procs, func(run PhaseRun) float64 { return run.Seconds[phase] })
}

// Corrected is the median of φ·wall, the load-corrected estimate of phase's seconds
// (schedstat.go), over the runs at GOMAXPROCS procs; NaN without such runs or where
// the schedstat files are missing.
func (r PhaseReport) Corrected(phase string, procs int) float64 {
	return r.median(procs, func(run PhaseRun) float64 { return run.Share[phase] * run.Seconds[phase] })
}

// median is the median of f over the runs at GOMAXPROCS procs.
func (r PhaseReport) median(procs int, f func(PhaseRun) float64) float64 {
	var xs []float64
	for _, run := range r.Runs {
		if run.Procs == procs {
			xs = append(xs, f(run))
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	h := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[h]
	}
	return (xs[h-1] + xs[h]) / 2
}

// kind names the refits timed: first refits, or refits after one (PhaseOptions.Cold).
func (r PhaseReport) kind() string {
	if r.Cold {
		return "first refits"
	}
	return "refits after one"
}

// Table is the phase table: for each phase the median wall seconds at GOMAXPROCS 1
// and 2, their ratio T2/T1 and the parallel fraction p = (1 − T2/T1)·2 (Amdahl's law
// for two cores), then the same for the load-corrected medians (Corrected, marked *),
// then Untimed at GOMAXPROCS 1 and 2 and every run's load average.
func (r PhaseReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refit phases (%s), %s n = %d, medians of %d runs per GOMAXPROCS\n", r.kind(), r.Data, r.N, len(r.Runs)/max(1, r.procCount()))
	fmt.Fprintf(&b, "%-8s %9s %9s %7s %6s | %9s %9s %7s %6s\n", "phase", "T1 (s)", "T2 (s)", "T2/T1", "p",
		"T1* (s)", "T2* (s)", "T2*/T1*", "p*")
	for _, ph := range PhaseNames {
		t1, t2 := r.Median(ph, 1), r.Median(ph, 2)
		c1, c2 := r.Corrected(ph, 1), r.Corrected(ph, 2)
		fmt.Fprintf(&b, "%-8s %9.3f %9.3f %7.3f %6.2f | %9.3f %9.3f %7.3f %6.2f\n", ph, t1, t2, t2/t1, (1-t2/t1)*2,
			c1, c2, c2/c1, (1-c2/c1)*2)
	}
	fmt.Fprintf(&b, "untimed (a run's total minus its phases, at most): %.3f s at GOMAXPROCS 1, %.3f s at 2\n",
		r.Untimed(1), r.Untimed(2))
	b.WriteString("load1 per run (GOMAXPROCS:load):")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, " %d:%.1f", run.Procs, run.Load1)
	}
	b.WriteString("\n")
	return b.String()
}

// Untimed is, over the runs at GOMAXPROCS procs, the largest difference between a run's
// total and the sum of its phases: the time no phase's clock covers (the residual
// certificates between the fit and the reseed, the hand-offs between phases). NaN
// without such runs. The medians of the phases need not add up to the median total
// (each median may come from another run), so compare a run's phases with its own total.
func (r PhaseReport) Untimed(procs int) float64 {
	worst := math.NaN()
	for _, run := range r.Runs {
		if run.Procs != procs {
			continue
		}
		gap := run.Seconds["total"]
		for _, ph := range PhaseNames[:len(PhaseNames)-1] {
			gap -= run.Seconds[ph]
		}
		if !(gap <= worst) {
			worst = gap
		}
	}
	return worst
}

// ScaleTable is the phase table over every GOMAXPROCS value of the runs, for machines
// with more than two cores: for each phase and each P the median wall seconds T_P, the
// speed-up T_1/T_P, the parallel efficiency T_1/(P·T_P) and the parallel fraction by
// Amdahl's law, p = (1 − T_P/T_1)/(1 − 1/P), and last the same for reseed_beside, the
// reseed measurement's own wall time beside blocks, init and fit (refit.Fitted.Seconds).
// It needs runs at GOMAXPROCS 1.
func (r PhaseReport) ScaleTable() string {
	var procs []int
	for _, run := range r.Runs {
		if !slices.Contains(procs, run.Procs) {
			procs = append(procs, run.Procs)
		}
	}
	slices.Sort(procs)
	var b strings.Builder
	fmt.Fprintf(&b, "refit phases (%s), %s n = %d, medians per GOMAXPROCS P: T_P (s) / speed-up T_1/T_P / efficiency / Amdahl p\n",
		r.kind(), r.Data, r.N)
	fmt.Fprintf(&b, "%-8s", "phase")
	for _, p := range procs {
		fmt.Fprintf(&b, " | %28s", fmt.Sprintf("P = %d", p))
	}
	b.WriteString("\n")
	for _, ph := range append(slices.Clip(PhaseNames), "reseed_beside") {
		t1 := r.Median(ph, 1)
		fmt.Fprintf(&b, "%-8s", ph)
		for _, p := range procs {
			tp := r.Median(ph, p)
			amdahl := math.NaN()
			if p > 1 {
				amdahl = (1 - tp/t1) / (1 - 1/float64(p))
			}
			fmt.Fprintf(&b, " | %8.3f %6.2fx %5.2f %5.2f", tp, t1/tp, t1/(float64(p)*tp), amdahl)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// procCount is the number of distinct GOMAXPROCS values among the runs.
func (r PhaseReport) procCount() int {
	seen := map[int]bool{}
	for _, run := range r.Runs {
		seen[run.Procs] = true
	}
	return len(seen)
}
