package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/stream"
)

// demoCmd is `cairnctl demo [--n 2000] [--data mnist] [--data-dir DIR]
// [--embedded-broker ADDR] [--http ADDR] [--queries 3]`, the README's first command.
// It runs the daemon in process on its embedded default, feeds it --n rows through
// Kafka, waits for the model fitted on them, asks --queries queries through Kafka
// (the first by stored id, the others by test-split vectors), deletes the top-1
// landmark of the first answer, asks the first query again to show that the deleted
// id is gone, and shuts the daemon down.
//
// demo is the one cairnctl command that prints a stream: one JSON object per line
// (NDJSON), {"event":"status"|"attribution"|"audit"|"summary", …}, each printed as it
// happens. Attribution and audit lines carry the event exactly as the daemon wrote it
// under "data". It fails if any step fails or if the deleted id is named again.
func demoCmd(fs *flag.FlagSet) cli.Func {
	d := config.Default()
	n := fs.Int("n", 2000, "training rows to stream in")
	data := fs.String("data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE (the model must match its width)")
	dataDir := fs.String("data-dir", "", "daemon state directory, kept afterwards (default: a fresh temporary directory, removed at the end)")
	broker := fs.String("embedded-broker", d.Kafka.EmbeddedBroker, "listen address of the embedded Kafka broker")
	httpAddr := fs.String("http", d.HTTP, "listen address of the daemon's HTTP endpoints (cairnctl status works meanwhile)")
	queries := fs.Int("queries", 3, "queries to ask (the first by stored id, the others by test-split vectors)")
	cfgFile := fs.String("config", "", "cairnd YAML configuration (optional; the flags above override it)")
	timeout := fs.Duration("timeout", time.Hour, "bound on the whole demo")
	logLevel := fs.String("log-level", "warn", "daemon log level on stderr: debug, info, warn, error")
	untrained := fs.Bool("untrained", false, "the seeded untrained network (model.untrained) instead of the trained weights shipped for --data")
	var of onnxFlags
	of.register(fs)
	hold := fs.Duration("hold", 0, "after the deletion, keep the daemon serving this long (or until interrupted) so its UI (/ui on --http) can be browsed")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *n < 1 || *queries < 1 || *hold < 0 {
			return fmt.Errorf("--n %d, --queries %d, --hold %v: n and queries must be at least 1, hold not negative", *n, *queries, *hold)
		}
		cfg, err := config.Load(*cfgFile, os.Environ())
		if err != nil {
			return err
		}
		cfg.Kafka.EmbeddedBroker, cfg.HTTP = *broker, *httpAddr
		if *untrained {
			cfg.Model.Untrained = true
		}
		if err := of.apply(&cfg.Model); err != nil {
			return err
		}
		cfg.Kafka.Brokers = nil // the demo's daemon runs its own broker
		log, err := daemonLogger(stdio.Err, *logLevel)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return demo(ctx, demoOptions{cfg: cfg, dataDir: *dataDir, data: *data, n: *n, queries: *queries, hold: *hold, log: log, stderr: stdio.Err}, stdio.Out)
	}
}

// daemonLogger is the zerolog logger of an in-process daemon, writing to w.
func daemonLogger(w io.Writer, level string) (zerolog.Logger, error) {
	l, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return zerolog.New(w).Level(l).With().Timestamp().Str("service", "cairnd").Logger(), nil
}

type demoOptions struct {
	cfg     config.Config // DataDir is set by demo
	dataDir string        // "" for a temporary directory
	data    string
	n       int
	queries int
	hold    time.Duration // serve this long after the deletion (the UI)
	log     zerolog.Logger
	stderr  io.Writer
}

// demoLine is one line of demo's output.
type demoLine struct {
	Event string `json:"event"` // status, attribution, audit or summary
	// Query says what an attribution answers; RepeatOf is 1 on the repeated first query.
	Query    *demoQuery `json:"query,omitempty"`
	RepeatOf int        `json:"repeat_of,omitempty"`
	// Deleted is the deleted id (audit, repeated query); DeletedAbsent whether the
	// repeated query's answer no longer names it.
	Deleted       string `json:"deleted,omitempty"`
	DeletedAbsent *bool  `json:"deleted_absent,omitempty"`
	// Data is the event as the daemon wrote it (attribution, audit), the stage of a
	// status line, or the summary.
	Data any `json:"data"`
}

// demoQuery is how a demo query names its point.
type demoQuery struct {
	ID      string `json:"id,omitempty"`       // a stored training point
	TestRow *int   `json:"test_row,omitempty"` // a row of the test split, sent as x
	Row     *int   `json:"train_row,omitempty"`
	x       []float64
}

func (q demoQuery) event(request string) stream.QueryEvent {
	if q.x != nil {
		return stream.QueryEvent{Request: request, X: q.x}
	}
	return stream.QueryEvent{Request: request, ID: q.ID}
}

// demoSummary is the data of the final "summary" line.
type demoSummary struct {
	Data        string             `json:"data"`
	Points      int                `json:"points"`
	Queries     int                `json:"queries"`
	Model       uint64             `json:"model"`
	Deleted     string             `json:"deleted"`
	DeletedGone bool               `json:"deleted_absent_after"`
	AuditSeq    uint64             `json:"audit_seq"`
	AuditHash   string             `json:"audit_hash"`
	DataDir     string             `json:"data_dir"`
	Kept        bool               `json:"data_dir_kept"`
	Seconds     map[string]float64 `json:"seconds"`
}

func demo(ctx context.Context, o demoOptions, stdout io.Writer) (err error) {
	start := time.Now()
	enc := json.NewEncoder(stdout) // compact: one object per line
	r := &demoRun{o: o, emit: func(l demoLine) error { return enc.Encode(l) }, secs: map[string]float64{}}
	if r.train, err = dataset.Open(o.data, "train", o.n); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	if r.qs, err = demoQueries(o, r.train); err != nil {
		return err
	}
	o.cfg.Model = weightsForData(o.cfg.Model, r.train.Name)
	if r.h, err = startHarness(ctx, o.cfg, o.dataDir, o.log); err != nil {
		return err
	}
	defer func() {
		if cerr := r.h.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	r.secs["start"] = time.Since(start).Seconds()
	h := r.h
	if err := r.emit(demoLine{Event: "status", Data: map[string]any{
		"stage": "ready", "data_dir": h.cfg.DataDir, "broker": h.cfg.Kafka.EmbeddedBroker, "http": h.cfg.HTTP,
	}}); err != nil {
		return err
	}
	if r.c, err = h.client(o.stderr); err != nil {
		return err
	}
	defer r.c.Close()
	if err := r.ingest(ctx); err != nil {
		return err
	}
	if r.base, err = cairn.NewRequestID("demo"); err != nil {
		return err
	}
	first, err := r.ask(ctx)
	if err != nil {
		return err
	}
	victim, audit, gone, err := r.deleteAndAskAgain(ctx, first)
	if err != nil {
		return err
	}

	if o.hold > 0 {
		if err := r.emit(demoLine{Event: "status", Data: map[string]any{
			"stage": "holding", "ui": "http://" + h.d.HTTPAddr() + "/ui", "seconds": o.hold.Seconds(),
		}}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.hold):
		}
	}
	final := h.d.Status()
	if err := h.close(); err != nil {
		return err
	}
	r.secs["total"] = time.Since(start).Seconds()
	if err := r.emit(demoLine{Event: "summary", Data: demoSummary{
		Data: o.data, Points: r.train.N, Queries: len(r.qs) + 1, Model: final.Model, Deleted: victim, DeletedGone: gone,
		AuditSeq: audit.Seq, AuditHash: audit.Hash, DataDir: h.cfg.DataDir, Kept: !h.temp, Seconds: r.secs,
	}}); err != nil {
		return err
	}
	if !gone {
		return fmt.Errorf("the deleted id %s was named again after its audit: exact unlearning violated", victim)
	}
	return nil
}

// demoAnswerTimeout bounds the wait for each answer and audit of the demo.
const demoAnswerTimeout = 5 * time.Minute

// demoRun is one demo against its in-process daemon: the data and queries, the
// harness and a client of it, where events go, and the phase timings.
type demoRun struct {
	o     demoOptions
	emit  func(demoLine) error
	secs  map[string]float64
	train *dataset.Set
	qs    []demoQuery
	h     *harness
	c     *cairn.Client
	base  string // request id prefix
}

// demoQueries are the demo's queries: the first stored point by id, then test rows
// (or, for data without a test split, stored rows' x from the end).
func demoQueries(o demoOptions, train *dataset.Set) ([]demoQuery, error) {
	qs := []demoQuery{{ID: train.IDs[0], x: nil}}
	if o.queries <= 1 {
		return qs, nil
	}
	test, terr := dataset.Open(o.data, "test", o.queries-1)
	for i := range o.queries - 1 {
		switch {
		case terr == nil:
			qs = append(qs, demoQuery{TestRow: &i, x: test.Row(i)})
		case train.N > 1:
			// csv:FILE without {split} has no test split: use stored rows' x.
			r := train.N - 1 - i%(train.N-1)
			qs = append(qs, demoQuery{Row: &r, x: train.Row(r)})
		default:
			return nil, fmt.Errorf("--data %s has no test split and --n 1 leaves no other row: %w", o.data, terr)
		}
	}
	if terr != nil {
		fmt.Fprintf(o.stderr, "cairnctl demo: no test split (%v); asking by the x of stored rows instead\n", terr)
	}
	return qs, nil
}

// ingest produces the training rows and waits for the first model on them.
func (r *demoRun) ingest(ctx context.Context) error {
	h, train := r.h, r.train
	t0 := time.Now()
	prog := newProgress(r.o.stderr, "produce", train.N)
	sent, err := produceRows(ctx, train, 0, train.N, 500, prog, r.c.Upsert)
	prog.finish(sent)
	if err != nil {
		return err
	}
	r.secs["produce"] = time.Since(t0).Seconds()
	if err := r.emit(demoLine{Event: "status", Data: map[string]any{"stage": "produced", "produced": sent, "topic": r.c.Topics().Train}}); err != nil {
		return err
	}
	st, err := h.waitModel(ctx, train.N, r.o.stderr)
	if err != nil {
		return err
	}
	r.secs["first_model"] = time.Since(t0).Seconds()
	return r.emit(demoLine{Event: "status", Data: map[string]any{"stage": "model", "status": st}})
}

// ask asks every query through Kafka, emitting each attribution, and returns the
// first query's.
func (r *demoRun) ask(ctx context.Context) (stream.Attribution, error) {
	var first stream.Attribution
	for i, q := range r.qs {
		t1 := time.Now()
		a, err := r.c.Ask(ctx, q.event(fmt.Sprintf("%s-q%d", r.base, i+1)))
		if err != nil {
			return first, fmt.Errorf("query %d: %w", i+1, err)
		}
		r.secs[fmt.Sprintf("query_%d", i+1)] = time.Since(t1).Seconds()
		if i == 0 {
			first = a.Attribution
		}
		if err := r.emit(demoLine{Event: "attribution", Query: &q, Data: a.Raw}); err != nil {
			return first, err
		}
	}
	if len(first.TopK) == 0 {
		return first, errors.New("query 1: the attribution names no landmark, nothing to delete")
	}
	return first, nil
}

// deleteAndAskAgain deletes the top-1 landmark of first, emits its audit, asks the
// first query again and reports whether the deleted id is absent from the answer.
func (r *demoRun) deleteAndAskAgain(ctx context.Context, first stream.Attribution) (victim string, audit stream.Audit, gone bool, err error) {
	victim = first.TopK[0].ID
	t2 := time.Now()
	a, err := r.c.DeleteAndWait(ctx, victim, r.base+"-delete")
	if err != nil {
		return victim, audit, false, fmt.Errorf("deleting %s: %w", victim, err)
	}
	r.secs["delete_to_audit"] = time.Since(t2).Seconds()
	audit = a.Audit
	if err := r.emit(demoLine{Event: "audit", Deleted: victim, Data: a.Raw}); err != nil {
		return victim, audit, false, err
	}

	// Ask the first query again. If the deleted landmark is the queried point itself,
	// it can no longer be named by id: send its vector instead.
	again := r.qs[0]
	if again.ID == victim {
		row := 0
		again = demoQuery{Row: &row, x: r.train.Row(0)}
	}
	after, err := r.c.Ask(ctx, again.event(r.base+"-q1-again"))
	if err != nil {
		return victim, audit, false, fmt.Errorf("query 1 again: %w", err)
	}
	gone = !slices.ContainsFunc(after.TopK, func(s stream.Scored) bool { return s.ID == victim })
	err = r.emit(demoLine{Event: "attribution", Query: &again, RepeatOf: 1, Deleted: victim, DeletedAbsent: &gone, Data: after.Raw})
	return victim, audit, gone, err
}

// harness runs a daemon in process: Run on a goroutine the harness joins in close.
type harness struct {
	d    *daemon.Daemon
	cfg  config.Config
	kc   stream.Config
	temp bool // cfg.DataDir is a temporary directory, removed by close

	cancel context.CancelFunc
	runErr chan error
	closed bool
	err    error
}

// startHarness starts the daemon on cfg with its state in dataDir (a fresh temporary
// directory when empty) and returns once it is ready, or with Run's error if it stops
// before.
func startHarness(ctx context.Context, cfg config.Config, dataDir string, log zerolog.Logger) (_ *harness, err error) {
	h := &harness{cfg: cfg, runErr: make(chan error, 1)}
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "cairn-demo-"); err != nil {
			return nil, err
		}
		h.temp = true
	}
	h.cfg.DataDir = dataDir
	defer func() {
		if err != nil {
			err = errors.Join(err, h.close())
		}
	}()
	if h.d, err = daemon.New(h.cfg, log); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- h.d.Run(rctx) }()
	select {
	case <-h.d.Ready():
		// The daemon reports the addresses it bound (a port 0 in the configuration
		// becomes the chosen port).
		h.kc = daemon.KafkaConfig(h.cfg)
		h.kc.Brokers, h.kc.ClientID = h.d.Brokers(), "cairnctl"
		h.cfg.HTTP = h.d.HTTPAddr()
		if len(h.cfg.Kafka.Brokers) == 0 {
			h.cfg.Kafka.EmbeddedBroker = h.d.Brokers()[0]
		}
		return h, nil
	case err := <-h.runErr:
		h.runErr <- err // close joins it again
		return nil, fmt.Errorf("daemon stopped before it was ready: %w", err)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the daemon to be ready: %w", ctx.Err())
	}
}

// client is a client of the daemon (client.FromDaemon) that waits demoAnswerTimeout
// for each answer and reports read errors on stderr.
func (h *harness) client(stderr io.Writer) (*cairn.Client, error) {
	cc, err := cairn.FromDaemon(h.cfg, h.kc.Brokers)
	if err != nil {
		return nil, err
	}
	cc.Kafka = h.kc
	cc.AnswerTimeout = demoAnswerTimeout
	cc.OnReadError = func(topic string, partition int, err error) {
		fmt.Fprintf(stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
	}
	return cairn.New(cc)
}

// close stops the daemon, waits for Run to return and removes a temporary data
// directory. It is idempotent and returns Run's error.
func (h *harness) close() error {
	if h.closed {
		return h.err
	}
	h.closed = true
	if h.cancel != nil {
		h.cancel()
		if err := <-h.runErr; err != nil && !errors.Is(err, context.Canceled) {
			h.err = fmt.Errorf("daemon: %w", err)
		}
	}
	if h.temp {
		h.err = errors.Join(h.err, os.RemoveAll(h.cfg.DataDir))
	}
	return h.err
}

// modelReady reports whether st serves a model fitted on every stored point, with at
// least n points stored and nothing left to consume.
func modelReady(st daemon.StatusReport, n int) bool {
	if st.Model == 0 || st.Points < n || st.ModelPoints != st.Points || st.RefitRunning {
		return false
	}
	for _, lag := range st.Lag {
		if lag != 0 {
			return false
		}
	}
	return true
}

// waitModel polls the daemon's status until modelReady, printing where it stands on
// stderr now and then.
func (h *harness) waitModel(ctx context.Context, n int, stderr io.Writer) (daemon.StatusReport, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		st := h.d.Status()
		if modelReady(st, n) {
			return st, nil
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "cairnctl: waiting for the model: %d/%d points stored, model %d on %d points, refit running %v, lag %v\n",
				st.Points, n, st.Model, st.ModelPoints, st.RefitRunning, st.Lag)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("waiting for a model on %d points (last status: %d points, model %d on %d points): %w", n, st.Points, st.Model, st.ModelPoints, ctx.Err())
		case err := <-h.runErr:
			h.runErr <- err
			return st, fmt.Errorf("daemon stopped while waiting for the model: %v", err)
		case <-tick.C:
		}
	}
}
