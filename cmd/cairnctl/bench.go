package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/bench"
	"github.com/cairnhq/cairn/stream"
)

// benchCmd is `cairnctl bench [--n 5000] [--queries 200] [--data mnist] [--m 256]`: it
// runs the daemon in process on a temporary directory with m landmarks per view and
// measures ingest, query latency (in process and through Kafka), refit and
// deletion-to-audit times; see bench.Report.
func benchCmd(fs *flag.FlagSet) cli.Func {
	n := fs.Int("n", 5000, "training rows to ingest")
	queries := fs.Int("queries", 200, "queries per latency measurement (test-split rows)")
	data := fs.String("data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE (with {split})")
	m := fs.Int("m", 256, "landmarks per view (pool.m)")
	reference := fs.Int("reference", 200, "points in the direct feature-rate reference")
	broker := fs.String("embedded-broker", "127.0.0.1:0", "embedded broker address (port 0: a free port)")
	httpAddr := fs.String("http", "127.0.0.1:0", "daemon HTTP address (port 0: a free port)")
	cfgFile := fs.String("config", "", "cairnd YAML configuration (optional; the flags above override it)")
	timeout := fs.Duration("timeout", 2*time.Hour, "bound on the whole run")
	logLevel := fs.String("log-level", "warn", "daemon log level on stderr")
	untrained := fs.Bool("untrained", false, "the seeded untrained network (model.untrained) instead of the trained weights shipped for --data")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	rate := fs.Float64("rate", 30, "open-loop query load: queries per second (0: no load phase)")
	loadDur := fs.Duration("load-duration", 20*time.Second, "open-loop query load: how long")
	by := fs.String("by", "both", "open-loop query load: queries by input (x), by stored id (id), or both, one load after the other")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *rate < 0 || *loadDur <= 0 {
			return fmt.Errorf("--rate %v, --load-duration %v: the rate must be ≥ 0 and the duration positive", *rate, *loadDur)
		}
		if *by != "x" && *by != "id" && *by != "both" {
			return fmt.Errorf("--by %q: want x, id or both", *by)
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		if *n < 1 || *queries < 1 || *m < 1 || *reference < 1 {
			return fmt.Errorf("--n %d, --queries %d, --m %d, --reference %d: each must be at least 1", *n, *queries, *m, *reference)
		}
		cfg, err := config.Load(*cfgFile, os.Environ())
		if err != nil {
			return err
		}
		cfg.Pool.M, cfg.Pool.Budget = *m, ""
		cfg.Kafka.Brokers = nil
		cfg.Kafka.EmbeddedBroker, cfg.HTTP = *broker, *httpAddr
		if *untrained {
			cfg.Model.Untrained = true
		}
		log, err := daemonLogger(stdio.Err, *logLevel)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		rep, err := runBench(ctx, benchOptions{cfg: cfg, data: *data, n: *n, queries: *queries, reference: *reference, log: log, stderr: stdio.Err,
			rate: *rate, loadDuration: *loadDur, by: *by})
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, rep)
	}
}

type benchOptions struct {
	cfg       config.Config
	data      string
	n         int
	queries   int
	reference int
	log       zerolog.Logger
	stderr    io.Writer

	rate         float64
	loadDuration time.Duration
	by           string // x, id, or both ("" is both)
}

// runBench runs the bench of o against a daemon started in process (startHarness) and
// returns its report (bench.Report), filled up to an error.
func runBench(ctx context.Context, o benchOptions) (rep bench.Report, err error) {
	rep = bench.Report{Data: o.data, N: o.n, Queries: o.queries, M: o.cfg.Pool.M, GOMAXPROCS: runtime.GOMAXPROCS(0),
		Note: "absolute numbers depend on the (shared) machine; ingest_vs_features_ratio is measured in the same run"}
	r := &benchRun{o: o, rep: &rep}
	if r.train, err = dataset.Open(o.data, "train", o.n); err != nil {
		return rep, fmt.Errorf("--data: %w", err)
	}
	if r.test, err = dataset.Open(o.data, "test", o.queries); err != nil {
		return rep, fmt.Errorf("--data (test split for the queries): %w", err)
	}
	o.cfg.Model = weightsForData(o.cfg.Model, r.train.Name)

	// The reference runs before the daemon starts, so nothing else in this process
	// competes with it.
	if rep.FeaturesPerSecondReference, err = bench.FeatureRate(o.cfg, r.train, o.reference); err != nil {
		return rep, err
	}
	if r.h, err = startHarness(ctx, o.cfg, "", o.log); err != nil {
		return rep, err
	}
	defer func() {
		if cerr := r.h.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if r.w, err = openWriter(r.h.kc); err != nil {
		return rep, err
	}
	defer r.w.Close()
	r.c = client{kc: r.h.kc, topics: r.h.cfg.Kafka.Topics, stderr: o.stderr}
	r.lim = inputLimits(r.h.cfg, r.test.D)
	if r.base, err = newRequestID("bench"); err != nil {
		return rep, err
	}
	for _, phase := range []func(context.Context) error{r.ingest, r.queryInProcess, r.queryKafka, r.load, r.check, r.deleteLandmark} {
		if err := phase(ctx); err != nil {
			return rep, err
		}
	}
	rep.SetTargets(o.rate, o.by)
	return rep, nil
}

// benchRun is one bench against its in-process daemon: the data, the harness, a writer
// and client, and the report the phases fill in order.
type benchRun struct {
	o           benchOptions
	rep         *bench.Report
	train, test *dataset.Set
	h           *harness
	w           *stream.Writer
	c           client
	lim         stream.Limits // for the test rows (queries) and deletions
	base        string        // request id prefix
	firstAnswer stream.Attribution
	xs          [][]float64 // the query inputs
	ids         []string    // the stored points' ids, for the load by id
	answers     []stream.Attribution
}

// ingest times producing the training rows until the daemon has applied every upsert,
// then waits for the model on them.
func (r *benchRun) ingest(ctx context.Context) error {
	train, rep := r.train, r.rep
	fmt.Fprintf(r.o.stderr, "cairnctl bench: ingesting %d rows\n", train.N)
	p := producer{w: r.w, topic: r.h.cfg.Kafka.Topics.Train, lim: inputLimits(r.h.cfg, train.D), batch: 500}
	t0 := time.Now()
	prog := newProgress(r.o.stderr, "produce", train.N)
	sent, err := p.produce(ctx, train, 0, train.N, prog)
	prog.finish(sent)
	if err != nil {
		return err
	}
	rep.ProduceEventsPerSecond = float64(sent) / time.Since(t0).Seconds()
	// The client's copy of the rows is not needed once they are on the broker: drop it,
	// so that the process's resident memory is the daemon's and the broker's.
	n := train.N
	r.ids = train.IDs
	r.train, train = nil, nil
	if err := poll(ctx, r.h, func(st daemon.StatusReport) bool { return st.Ingest.Upserts >= uint64(n) }); err != nil {
		return fmt.Errorf("waiting for %d upserts: %w", n, err)
	}
	rep.IngestEventsPerSecond = float64(n) / time.Since(t0).Seconds()
	rep.IngestVsFeaturesRatio = rep.IngestEventsPerSecond / rep.FeaturesPerSecondReference

	fmt.Fprintf(r.o.stderr, "cairnctl bench: waiting for the model on %d points\n", n)
	st, err := r.h.waitModel(ctx, n, r.o.stderr)
	if err != nil {
		return err
	}
	rep.RefitSeconds = st.RefitSeconds
	return nil
}

// queryInProcess times Daemon.Answer on the test rows: no Kafka, nothing stored.
func (r *benchRun) queryInProcess(context.Context) error {
	lat := make([]float64, 0, r.test.N)
	for i := range r.test.N {
		t := time.Now()
		a, err := r.h.d.Answer(stream.QueryEvent{Request: fmt.Sprintf("bench-ip-%d", i), X: r.test.Row(i)})
		if err != nil {
			return fmt.Errorf("in-process query %d: %w", i, err)
		}
		lat = append(lat, time.Since(t).Seconds()*1e3)
		if i == 0 {
			r.firstAnswer = a
		}
	}
	r.rep.QueryInProcessP50Ms, r.rep.QueryInProcessP99Ms = percentile(lat, 0.5), percentile(lat, 0.99)
	return nil
}

// queryKafka times the test rows through Kafka one at a time: write one, wait for its
// attribution, then the next. It keeps the answers for check.
func (r *benchRun) queryKafka(ctx context.Context) error {
	c, test := r.c, r.test
	fmt.Fprintf(r.o.stderr, "cairnctl bench: %d queries through Kafka\n", test.N)
	t, err := newTail(ctx, r.h.kc, r.o.stderr, c.topics.Attributions, c.topics.DLQ)
	if err != nil {
		return err
	}
	defer t.Close()
	lat := make([]float64, 0, test.N)
	r.answers = make([]stream.Attribution, 0, test.N)
	r.xs = make([][]float64, test.N)
	for i := range test.N {
		r.xs[i] = test.Row(i)
		q := stream.QueryEvent{Request: fmt.Sprintf("%s-q%d", r.base, i), X: r.xs[i]}
		t1 := time.Now()
		sentQ, err := c.sendQuery(ctx, r.w, q, r.lim)
		if err != nil {
			return err
		}
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		m, err := c.await(actx, t, answer{topic: c.topics.Attributions, request: q.Request, src: c.topics.Queries, key: []byte(q.Request), sent: sentQ})
		acancel()
		if err != nil {
			return fmt.Errorf("query %d through Kafka: %w", i, err)
		}
		lat = append(lat, time.Since(t1).Seconds()*1e3)
		var a stream.Attribution
		if err := json.Unmarshal(m.Value, &a); err != nil {
			return fmt.Errorf("attribution of query %d: %w", i, err)
		}
		r.answers = append(r.answers, a)
	}
	r.rep.QueryKafkaP50Ms, r.rep.QueryKafkaP99Ms = percentile(lat, 0.5), percentile(lat, 0.99)
	return t.Close()
}

// load runs the open-loop query loads (when --rate > 0), by x then by id as --by asks,
// and records resident memory.
func (r *benchRun) load(ctx context.Context) error {
	o := r.o
	if o.rate > 0 && o.by != "id" {
		fmt.Fprintf(o.stderr, "cairnctl bench: open-loop load by x, %g queries/s for %v\n", o.rate, o.loadDuration)
		byX := func(i int) stream.QueryEvent { return stream.QueryEvent{X: r.xs[i%len(r.xs)]} }
		var err error
		if r.rep.Load, err = openLoad(ctx, r.c, r.w, r.lim, byX, o.rate, o.loadDuration, r.base+"-load-", o.stderr); err != nil {
			return fmt.Errorf("open-loop load by x: %w", err)
		}
	}
	if o.rate > 0 && o.by != "x" {
		fmt.Fprintf(o.stderr, "cairnctl bench: open-loop load by id, %g queries/s for %v\n", o.rate, o.loadDuration)
		byID := func(i int) stream.QueryEvent { return stream.QueryEvent{ID: r.ids[i%len(r.ids)]} }
		l, err := openLoad(ctx, r.c, r.w, r.lim, byID, o.rate, o.loadDuration, r.base+"-loadid-", o.stderr)
		if err != nil {
			return fmt.Errorf("open-loop load by id: %w", err)
		}
		r.rep.LoadByID = &l
	}
	r.rep.ResidentMB, r.rep.PeakResidentMB = bench.ResidentMB()
	return nil
}

// check checks the Kafka answers against the exact-kernel reference built from GET /model.
func (r *benchRun) check(ctx context.Context) error {
	fmt.Fprintf(r.o.stderr, "cairnctl bench: checking %d answers against the exact-kernel reference\n", len(r.answers))
	em, err := benchModel(ctx, r.h.d.HTTPAddr())
	if err != nil {
		return err
	}
	bb, err := benchBackbone(r.h)
	if err != nil {
		return err
	}
	r.rep.Certification, err = bench.CheckAnswers(bb, em, r.answers, r.xs)
	return err
}

// deleteLandmark deletes the top-1 landmark of the first in-process answer and times
// the deletion to its audit.
func (r *benchRun) deleteLandmark(ctx context.Context) error {
	rep := r.rep
	if len(r.firstAnswer.TopK) == 0 {
		return errors.New("the first answer names no landmark, nothing to delete")
	}
	rep.DeletedID = r.firstAnswer.TopK[0].ID
	fmt.Fprintf(r.o.stderr, "cairnctl bench: deleting landmark %s\n", rep.DeletedID)
	t2 := time.Now()
	m, err := r.c.deleteAndWait(ctx, 30*time.Minute, stream.TrainEvent{Op: stream.OpDelete, ID: rep.DeletedID, Request: r.base + "-delete"}, r.lim)
	if err != nil {
		return fmt.Errorf("deleting %s: %w", rep.DeletedID, err)
	}
	rep.DeletionToAuditSeconds = time.Since(t2).Seconds()
	var audit stream.Audit
	if err := json.Unmarshal(m.Value, &audit); err != nil {
		return fmt.Errorf("audit of %s: %w", rep.DeletedID, err)
	}
	rep.DeletionRefitSeconds = r.h.d.Status().RefitSeconds
	rep.DeletionToAuditMinusRefitSeconds = rep.DeletionToAuditSeconds - rep.DeletionRefitSeconds
	return nil
}

// poll checks cond on the daemon's status every 10 ms until it holds.
func poll(ctx context.Context, h *harness, cond func(daemon.StatusReport) bool) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond(h.d.Status()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-h.runErr:
			h.runErr <- err
			return fmt.Errorf("daemon stopped: %v", err)
		case <-tick.C:
		}
	}
	return nil
}

// percentile is bench.Percentile (xs is sorted in place).
func percentile(xs []float64, p float64) float64 { return bench.Percentile(xs, p) }
