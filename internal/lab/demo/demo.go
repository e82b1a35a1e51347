package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/lab/inproc"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/produce"
	"github.com/cairnhq/cairn/stream"
)

// Options are the settings of one demo.
type Options struct {
	Config  config.Config  // the daemon's; DataDir is replaced by Run
	DataDir string         // daemon state directory, kept; "" for a temporary one, removed
	Data    string         // data set: mnist, fashion-mnist, adult:DIR or csv:FILE
	N       int            // training rows to stream in, at least 1
	Queries int            // queries to ask, at least 1: the first by stored id
	Hold    time.Duration  // serve this long after the deletion (the UI)
	Log     zerolog.Logger // the daemon's logger
	Stderr  io.Writer      // progress and waiting lines
}

// Line is one line of the demo's output.
type Line struct {
	Event string `json:"event"` // status, attribution, audit or summary
	// Query says what an attribution answers; RepeatOf is 1 on the repeated first query.
	Query    *Query `json:"query,omitempty"`
	RepeatOf int    `json:"repeat_of,omitempty"`
	// Deleted is the deleted id (audit, repeated query); DeletedAbsent whether the
	// repeated query's answer no longer names it.
	Deleted       string `json:"deleted,omitempty"`
	DeletedAbsent *bool  `json:"deleted_absent,omitempty"`
	// Data is the event as the daemon wrote it (attribution, audit), the stage of a
	// status line, or the Summary.
	Data any `json:"data"`
}

// Query is how a demo query names its point.
type Query struct {
	ID      string `json:"id,omitempty"`       // a stored training point
	TestRow *int   `json:"test_row,omitempty"` // a row of the test split, sent as x
	Row     *int   `json:"train_row,omitempty"`
	x       []float64
}

func (q Query) event(request string) stream.QueryEvent {
	if q.x != nil {
		return stream.QueryEvent{Request: request, X: q.x}
	}
	return stream.QueryEvent{Request: request, ID: q.ID}
}

// Summary is the data of the final "summary" line.
type Summary struct {
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

// AnswerTimeout bounds the wait for each answer and audit of the demo.
const AnswerTimeout = 5 * time.Minute

// Run runs the demo o and writes its lines to w (see the package documentation).
func Run(ctx context.Context, o Options, w io.Writer) (err error) {
	start := time.Now()
	enc := json.NewEncoder(w) // compact: one object per line
	r := &run{o: o, emit: func(l Line) error { return enc.Encode(l) }, secs: map[string]float64{}}
	if r.train, err = dataset.Open(o.Data, "train", o.N); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	if r.qs, err = queries(o, r.train); err != nil {
		return err
	}
	o.Config.Model = offline.WeightsForData(o.Config.Model, r.train.Name)
	if err := r.start(ctx); err != nil {
		return err
	}
	defer func() {
		if cerr := r.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	r.secs["start"] = time.Since(start).Seconds()
	h := r.h
	if err := r.emit(Line{Event: "status", Data: map[string]any{
		"stage": "ready", "data_dir": h.Config.DataDir, "broker": h.Config.Kafka.EmbeddedBroker, "http": h.Config.HTTP,
	}}); err != nil {
		return err
	}
	if r.c, err = h.Client(AnswerTimeout, o.Stderr); err != nil {
		return err
	}
	defer r.c.Close()
	if err := r.ingest(ctx); err != nil {
		return err
	}
	if r.base, err = client.NewRequestID("demo"); err != nil {
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
	if err := r.hold(ctx); err != nil {
		return err
	}
	final := h.D.Status()
	// The client's readers stop before the broker does: closed after it, they reported
	// every partition's refused connection (24 lines on stderr) as the demo ended.
	if err := r.c.Close(); err != nil {
		return err
	}
	if err := r.close(); err != nil {
		return err
	}
	r.secs["total"] = time.Since(start).Seconds()
	if err := r.emit(Line{Event: "summary", Data: Summary{
		Data: o.Data, Points: r.train.N, Queries: len(r.qs) + 1, Model: final.Model, Deleted: victim, DeletedGone: gone,
		AuditSeq: audit.Seq, AuditHash: audit.Hash, DataDir: h.Config.DataDir, Kept: r.temp == "", Seconds: r.secs,
	}}); err != nil {
		return err
	}
	if !gone {
		return fmt.Errorf("the deleted id %s was named again after its audit: exact unlearning violated", victim)
	}
	return nil
}

// run is one demo against its in-process daemon: the data and queries, the daemon and
// a client of it, where lines go, and the phase timings.
type run struct {
	o     Options
	emit  func(Line) error
	secs  map[string]float64
	train *dataset.Set
	qs    []Query
	h     *inproc.Daemon
	temp  string // the temporary data directory, "" when Options.DataDir is kept
	c     *client.Client
	base  string // request id prefix
}

// start starts the daemon in o.DataDir or a fresh temporary directory; on error
// nothing is left running or on disk.
func (r *run) start(ctx context.Context) (err error) {
	dir := r.o.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cairn-demo-"); err != nil {
			return err
		}
		r.temp = dir
	}
	if r.h, err = inproc.Start(ctx, r.o.Config, dir, r.o.Log); err != nil {
		return errors.Join(err, r.close())
	}
	return nil
}

// close stops the daemon and removes the temporary directory. It is idempotent and
// returns the daemon's error.
func (r *run) close() error {
	var err error
	if r.h != nil {
		err = r.h.Close()
	}
	if r.temp != "" {
		err = errors.Join(err, os.RemoveAll(r.temp))
	}
	return err
}

// queries are the demo's queries: the first stored point by id, then test rows (or,
// for data without a test split, stored rows' x from the end).
func queries(o Options, train *dataset.Set) ([]Query, error) {
	qs := []Query{{ID: train.IDs[0], x: nil}}
	if o.Queries <= 1 {
		return qs, nil
	}
	test, terr := dataset.Open(o.Data, "test", o.Queries-1)
	for i := range o.Queries - 1 {
		switch {
		case terr == nil:
			qs = append(qs, Query{TestRow: &i, x: test.Row(i)})
		case train.N > 1:
			// csv:FILE without {split} has no test split: use stored rows' x.
			r := train.N - 1 - i%(train.N-1)
			qs = append(qs, Query{Row: &r, x: train.Row(r)})
		default:
			return nil, fmt.Errorf("--data %s has no test split and --n 1 leaves no other row: %w", o.Data, terr)
		}
	}
	if terr != nil {
		fmt.Fprintf(o.Stderr, "cairnctl demo: no test split (%v); asking by the x of stored rows instead\n", terr)
	}
	return qs, nil
}

// ingest produces the training rows and waits for the first model on them.
func (r *run) ingest(ctx context.Context) error {
	train := r.train
	t0 := time.Now()
	prog := produce.NewProgress(r.o.Stderr, "produce", train.N)
	sent, err := produce.Rows(ctx, train, 0, train.N, 500, prog, r.c.Upsert)
	prog.Finish(sent)
	if err != nil {
		return err
	}
	r.secs["produce"] = time.Since(t0).Seconds()
	if err := r.emit(Line{Event: "status", Data: map[string]any{"stage": "produced", "produced": sent, "topic": r.c.Topics().Train}}); err != nil {
		return err
	}
	st, err := r.h.WaitModel(ctx, train.N, r.o.Stderr)
	if err != nil {
		return err
	}
	r.secs["first_model"] = time.Since(t0).Seconds()
	return r.emit(Line{Event: "status", Data: map[string]any{"stage": "model", "status": st}})
}

// ask asks every query through Kafka, emitting each attribution, and returns the
// first query's.
func (r *run) ask(ctx context.Context) (stream.Attribution, error) {
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
		if err := r.emit(Line{Event: "attribution", Query: &q, Data: a.Raw}); err != nil {
			return first, err
		}
	}
	if len(first.TopK) == 0 {
		return first, errors.New("query 1: the attribution names no point, nothing to delete")
	}
	return first, nil
}

// deleteAndAskAgain deletes the top-1 point of first, emits its audit, asks the
// first query again and reports whether the deleted id is absent from the answer.
func (r *run) deleteAndAskAgain(ctx context.Context, first stream.Attribution) (victim string, audit stream.Audit, gone bool, err error) {
	victim = first.TopK[0].ID
	t2 := time.Now()
	a, err := r.c.DeleteAndWait(ctx, victim, r.base+"-delete")
	if err != nil {
		return victim, audit, false, fmt.Errorf("deleting %s: %w", victim, err)
	}
	r.secs["delete_to_audit"] = time.Since(t2).Seconds()
	audit = a.Audit
	if err := r.emit(Line{Event: "audit", Deleted: victim, Data: a.Raw}); err != nil {
		return victim, audit, false, err
	}

	// Ask the first query again. If the deleted point is the queried point itself,
	// it can no longer be named by id: send its vector instead.
	again := r.qs[0]
	if again.ID == victim {
		row := 0
		again = Query{Row: &row, x: r.train.Row(0)}
	}
	after, err := r.c.Ask(ctx, again.event(r.base+"-q1-again"))
	if err != nil {
		return victim, audit, false, fmt.Errorf("query 1 again: %w", err)
	}
	gone = !slices.ContainsFunc(after.TopK, func(s stream.Scored) bool { return s.ID == victim })
	err = r.emit(Line{Event: "attribution", Query: &again, RepeatOf: 1, Deleted: victim, DeletedAbsent: &gone, Data: after.Raw})
	return victim, audit, gone, err
}

// hold keeps the daemon serving for o.Hold, or until ctx ends, so its UI can be
// browsed.
func (r *run) hold(ctx context.Context) error {
	if r.o.Hold <= 0 {
		return nil
	}
	if err := r.emit(Line{Event: "status", Data: map[string]any{
		"stage": "holding", "ui": "http://" + r.h.D.HTTPAddr() + "/ui", "seconds": r.o.Hold.Seconds(),
	}}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(r.o.Hold):
	}
	return nil
}
