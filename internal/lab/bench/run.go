package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/lab/inproc"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// Options are the settings of cairnctl bench, each named by its flag.
type Options struct {
	// Config is the daemon's configuration (--config with the flags applied: pool.m, the
	// embedded broker and HTTP addresses, model.untrained).
	Config    config.Config
	Data      string // --data
	N         int    // --n: training rows to ingest
	Queries   int    // --queries: queries per latency measurement (test-split rows)
	Reference int    // --reference: points in the direct feature-rate reference
	// Rate, LoadDuration and By are the open-loop query load: queries per second (0: no
	// load), how long, and by input (x), by stored id (id) or both ("" is both).
	Rate         float64
	LoadDuration time.Duration
	By           string
	// Backlog (--backlog) writes the training rows to a broker of the bench's own before
	// the daemon starts, and times the daemon consuming that backlog (from its first
	// applied batch to its last), so that the producer's work does not share the
	// ingest's cores; without it the rows are written while the daemon ingests them.
	Backlog bool
	Log     zerolog.Logger // the daemon's logger
	Stderr  io.Writer      // progress lines
}

// deleteTimeout bounds the wait for the deleted landmark's audit (a refit comes first).
const deleteTimeout = 30 * time.Minute

// Run is cairnctl bench: it starts the daemon in process (inproc.Start, on a temporary
// directory) and measures ingest, query latency (in process and through Kafka), the
// open-loop loads, the answers' certification against the exact-kernel reference
// (CheckAnswers), refit and deletion-to-audit times. The report holds what was
// measured up to an error.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	rep = Report{Data: o.Data, N: o.N, Queries: o.Queries, M: o.Config.Pool.M, GOMAXPROCS: runtime.GOMAXPROCS(0), IngestMode: "live",
		Note: "absolute numbers depend on the (shared) machine; ingest_vs_features_ratio is measured in the same run"}
	r := &benchRun{o: o, rep: &rep}
	if r.train, err = dataset.Open(o.Data, "train", o.N); err != nil {
		return rep, fmt.Errorf("--data: %w", err)
	}
	if r.test, err = dataset.Open(o.Data, "test", o.Queries); err != nil {
		return rep, fmt.Errorf("--data (test split for the queries): %w", err)
	}
	o.Config.Model = offline.WeightsForData(o.Config.Model, r.train.Name)

	// The reference runs before the daemon starts, so nothing else in this process
	// competes with it; the sampler gives the load correction of it and of the ingest.
	var stop func()
	r.smp, stop = startSampler(50 * time.Millisecond)
	defer stop()
	r.refAt[0] = time.Now()
	if rep.FeaturesPerSecondReference, err = FeatureRate(o.Config, r.train, o.Reference); err != nil {
		return rep, err
	}
	r.refAt[1] = time.Now()
	cfg := o.Config
	if o.Backlog {
		rep.IngestMode = "backlog"
		b, err := r.produceBacklog(ctx)
		if err != nil {
			return rep, err
		}
		defer b.Close()
		cfg.Kafka.Brokers, cfg.Kafka.EmbeddedBroker = []string{b.Addr()}, ""
	}
	if r.h, err = inproc.Start(ctx, cfg, "", o.Log); err != nil {
		return rep, err
	}
	r.readyAt = time.Now()
	defer func() {
		if cerr := r.h.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if r.c, err = r.h.Client(deleteTimeout, o.Stderr); err != nil {
		return rep, err
	}
	defer r.c.Close()
	if r.base, err = client.NewRequestID("bench"); err != nil {
		return rep, err
	}
	for _, phase := range []func(context.Context) error{r.ingest, r.queryInProcess, r.queryKafka, r.load, r.check, r.deleteLandmark} {
		if err := phase(ctx); err != nil {
			return rep, err
		}
	}
	rep.SetTargets(o.Rate, o.By)
	return rep, nil
}

// benchRun is one bench against its in-process daemon: the data, the daemon and a
// client of it, and the report the phases fill in order.
type benchRun struct {
	o           Options
	rep         *Report
	train, test *dataset.Set
	h           *inproc.Daemon
	c           *client.Client
	base        string // request id prefix
	firstAnswer stream.Attribution
	xs          [][]float64 // the query inputs
	ids         []string    // the stored points' ids, for the load by id
	answers     []stream.Attribution
	smp         *schedSampler
	refAt       [2]time.Time // the feature reference's start and end
	readyAt     time.Time    // when the daemon was ready
}

// ingest times the daemon applying the training rows, then waits for the model on
// them: from the first write of the rows (500 per acknowledged write) or, with
// Options.Backlog, from the first applied batch of the rows written before the start.
func (r *benchRun) ingest(ctx context.Context) error {
	train, rep := r.train, r.rep
	n, t0, counted := train.N, time.Now(), train.N
	if r.o.Backlog {
		// The rows are on the broker already: time from the first applied batch.
		fmt.Fprintf(r.o.Stderr, "cairnctl bench: consuming a backlog of %d rows\n", n)
		err := r.h.Poll(ctx, time.Millisecond, func(st daemon.StatusReport) bool { counted = n - int(st.Ingest.Upserts); return st.Ingest.Upserts > 0 })
		if err != nil {
			return fmt.Errorf("waiting for the first upserts: %w", err)
		}
		if counted > 0 {
			t0 = time.Now()
		} else { // one batch took them all: time it from the daemon's start
			t0, counted = r.readyAt, n
		}
	} else {
		fmt.Fprintf(r.o.Stderr, "cairnctl bench: ingesting %d rows\n", n)
		if err := upsertRows(ctx, r.c, train); err != nil {
			return err
		}
		rep.ProduceEventsPerSecond = float64(n) / time.Since(t0).Seconds()
	}
	// The client's copy of the rows is not needed once they are on the broker: drop it,
	// so that the process's resident memory is the daemon's and the broker's.
	r.ids = train.IDs
	r.train, train = nil, nil
	if err := r.h.Poll(ctx, 10*time.Millisecond, func(st daemon.StatusReport) bool { return st.Ingest.Upserts >= uint64(n) }); err != nil {
		return fmt.Errorf("waiting for %d upserts: %w", n, err)
	}
	rep.IngestEventsPerSecond = float64(counted) / time.Since(t0).Seconds()
	rep.IngestVsFeaturesRatio = rep.IngestEventsPerSecond / rep.FeaturesPerSecondReference
	st := r.h.D.Status()
	rep.IngestPhaseSeconds, rep.IngestBatches = st.Ingest.Phases, st.Ingest.Batches
	ingestAt := [2]time.Time{t0, time.Now()}

	fmt.Fprintf(r.o.Stderr, "cairnctl bench: waiting for the model on %d points\n", n)
	st, err := r.h.WaitModel(ctx, n, r.o.Stderr)
	if err != nil {
		return err
	}
	rep.RefitSeconds, rep.RefitPhaseSeconds = st.RefitSeconds, st.RefitPhases
	// The samples now cover the ingest's end.
	ls := LoadShare{Reference: r.smp.share(r.refAt[0], r.refAt[1]), Ingest: r.smp.share(ingestAt[0], ingestAt[1])}
	if !math.IsNaN(ls.Reference) && !math.IsNaN(ls.Ingest) {
		rep.LoadShare = &ls
		rep.IngestVsFeaturesRatioLoadCorrected = rep.IngestVsFeaturesRatio * ls.Reference / ls.Ingest
	}
	return nil
}

// queryInProcess times Daemon.Answer on the test rows: no Kafka, nothing stored.
func (r *benchRun) queryInProcess(context.Context) error {
	lat := make([]float64, 0, r.test.N)
	for i := range r.test.N {
		t := time.Now()
		a, err := r.h.D.Answer(stream.QueryEvent{Request: fmt.Sprintf("bench-ip-%d", i), X: r.test.Row(i)})
		if err != nil {
			return fmt.Errorf("in-process query %d: %w", i, err)
		}
		lat = append(lat, time.Since(t).Seconds()*1e3)
		if i == 0 {
			r.firstAnswer = a
		}
	}
	r.rep.QueryInProcessP50Ms, r.rep.QueryInProcessP99Ms = Percentile(lat, 0.5), Percentile(lat, 0.99)
	return nil
}

// queryKafka times the test rows through Kafka one at a time: send one, wait for its
// attribution, then the next. It keeps the answers for check.
func (r *benchRun) queryKafka(ctx context.Context) error {
	test, topics := r.test, r.c.Topics()
	fmt.Fprintf(r.o.Stderr, "cairnctl bench: %d queries through Kafka\n", test.N)
	w, err := r.c.Watch(ctx, topics.Attributions, topics.DLQ)
	if err != nil {
		return err
	}
	defer w.Close()
	lat := make([]float64, 0, test.N)
	r.answers = make([]stream.Attribution, 0, test.N)
	r.xs = make([][]float64, test.N)
	for i := range test.N {
		r.xs[i] = test.Row(i)
		q := stream.QueryEvent{Request: fmt.Sprintf("%s-q%d", r.base, i), X: r.xs[i]}
		t1 := time.Now()
		sent, err := r.c.SendQuery(ctx, q)
		if err != nil {
			return err
		}
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		m, err := w.Await(actx, sent)
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
	r.rep.QueryKafkaP50Ms, r.rep.QueryKafkaP99Ms = Percentile(lat, 0.5), Percentile(lat, 0.99)
	return w.Close()
}

// load runs the open-loop query loads (when Rate > 0), by x then by id as By asks, and
// records resident memory.
func (r *benchRun) load(ctx context.Context) error {
	o := r.o
	if o.Rate > 0 && o.By != "id" {
		fmt.Fprintf(o.Stderr, "cairnctl bench: open-loop load by x, %g queries/s for %v\n", o.Rate, o.LoadDuration)
		byX := func(i int) stream.QueryEvent { return stream.QueryEvent{X: r.xs[i%len(r.xs)]} }
		var err error
		if r.rep.Load, err = openLoad(ctx, r.c, byX, o.Rate, o.LoadDuration, r.base+"-load-"); err != nil {
			return fmt.Errorf("open-loop load by x: %w", err)
		}
	}
	if o.Rate > 0 && o.By != "x" {
		fmt.Fprintf(o.Stderr, "cairnctl bench: open-loop load by id, %g queries/s for %v\n", o.Rate, o.LoadDuration)
		byID := func(i int) stream.QueryEvent { return stream.QueryEvent{ID: r.ids[i%len(r.ids)]} }
		l, err := openLoad(ctx, r.c, byID, o.Rate, o.LoadDuration, r.base+"-loadid-")
		if err != nil {
			return fmt.Errorf("open-loop load by id: %w", err)
		}
		r.rep.LoadByID = &l
	}
	r.rep.ResidentMB, r.rep.PeakResidentMB = ResidentMB()
	return nil
}

// check checks the Kafka answers against the exact-kernel reference built from GET
// /model, as `cairnctl model export --http` reads it: the reference sees only what a
// third party sees, and the daemon's backbone built from its configuration as the
// daemon builds it.
func (r *benchRun) check(ctx context.Context) error {
	fmt.Fprintf(r.o.Stderr, "cairnctl bench: checking %d answers against the exact-kernel reference\n", len(r.answers))
	m, err := r.c.Model(ctx, 0)
	if err != nil {
		return fmt.Errorf("GET /model: %w", err)
	}
	f, err := pipeline.NewFeatures(r.h.Config.Model, r.h.Config.Sketch, "")
	if err != nil {
		return err
	}
	// The gradient ranking's reference needs the stored points: the rows written, less
	// the deleted one (the rows were dropped after ingest to measure memory).
	train, err := dataset.Open(r.o.Data, "train", r.o.N)
	if err != nil {
		return err
	}
	var pts Stored
	for i, id := range train.IDs {
		if id != r.rep.DeletedID && i < len(train.Labels) {
			pts.IDs, pts.X, pts.Labels = append(pts.IDs, id), append(pts.X, train.Row(i)), append(pts.Labels, train.Labels[i])
		}
	}
	r.rep.Certification, err = CheckAnswers(f.Backbone(), &m.ModelExport, r.answers, r.xs, pts)
	return err
}

// deleteLandmark deletes the top-1 point of the first in-process answer (a landmark
// under a landmark ranking, any stored point under gradient) and times
// the deletion to its audit.
func (r *benchRun) deleteLandmark(ctx context.Context) error {
	rep := r.rep
	if len(r.firstAnswer.TopK) == 0 {
		return errors.New("the first answer names no point, nothing to delete")
	}
	rep.DeletedID = r.firstAnswer.TopK[0].ID
	fmt.Fprintf(r.o.Stderr, "cairnctl bench: deleting the first answer's top-1, %s\n", rep.DeletedID)
	before := r.h.D.Status().Refits
	t2 := time.Now()
	if _, err := r.c.DeleteAndWait(ctx, rep.DeletedID, r.base+"-delete"); err != nil {
		return fmt.Errorf("deleting %s: %w", rep.DeletedID, err)
	}
	rep.DeletionToAuditSeconds = time.Since(t2).Seconds()
	// The audit leaves in the refit's commit, before the daemon records the refit's
	// seconds: wait for the record (a few milliseconds; 10 s at most).
	dst := r.h.D.Status()
	for end := time.Now().Add(10 * time.Second); dst.Refits == before && time.Now().Before(end); dst = r.h.D.Status() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	rep.DeletionRefitSeconds, rep.DeletionRefitPhaseSeconds = dst.RefitSeconds, dst.RefitPhases
	rep.DeletionToAuditMinusRefitSeconds = rep.DeletionToAuditSeconds - rep.DeletionRefitSeconds
	return nil
}

// openLoad sends rate queries per second for dur on one goroutine, joined before it
// returns, and collects the attributions from a watch of the query and attribution
// topics. The i-th query is query(i) with the request id prefix+i; no other request id
// may start with prefix.
func openLoad(ctx context.Context, c *client.Client, query func(i int) stream.QueryEvent, rate float64, dur time.Duration, prefix string) (LoadStats, error) {
	ls := LoadStats{Rate: rate}
	topics := c.Topics()
	w, err := c.Watch(ctx, topics.Queries, topics.Attributions)
	if err != nil {
		return ls, err
	}
	defer w.Close()
	n := int(rate * dur.Seconds())
	var sendErr error
	var lagMax time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		t0 := time.Now()
		for i := range n {
			at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					sendErr = ctx.Err()
					return
				}
			}
			lagMax = max(lagMax, time.Since(at))
			q := query(i)
			q.Request = prefix + strconv.Itoa(i)
			if _, err := c.SendQuery(ctx, q); err != nil {
				sendErr = err
				return
			}
		}
	})
	pairs := NewLoadPairs(prefix, topics.Queries)
	deadline, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	for len(pairs.Latencies()) < n {
		m, err := w.Next(deadline)
		if err != nil {
			break
		}
		pairs.Add(m)
	}
	lat := pairs.Latencies()
	wg.Wait()
	if sendErr != nil {
		return ls, sendErr
	}
	ls.Sent, ls.Answered = n, len(lat)
	ls.SendLagMax = lagMax.Seconds() * 1e3
	if len(lat) > 0 {
		ls.P50Ms, ls.P99Ms, ls.MaxMs = Percentile(lat, 0.5), Percentile(lat, 0.99), slices.Max(lat)
	}
	return ls, nil
}

// upsertRows writes the training rows through c, 500 per acknowledged write.
func upsertRows(ctx context.Context, c *client.Client, train *dataset.Set) error {
	const batch = 500
	for lo := 0; lo < train.N; lo += batch {
		pts := make([]client.Point, 0, batch)
		for i := lo; i < min(lo+batch, train.N); i++ {
			p := client.Point{ID: train.IDs[i], X: train.Row(i)}
			if train.Labels != nil {
				l := int64(train.Labels[i])
				p.Label = &l
			}
			pts = append(pts, p)
		}
		if err := c.Upsert(ctx, pts...); err != nil {
			return fmt.Errorf("rows %d..%d: %w", lo, lo+len(pts)-1, err)
		}
	}
	return nil
}

// produceBacklog starts a broker of the bench's own (memory only) with the daemon's
// training topic and writes the training rows to it, for Options.Backlog. The caller
// closes the broker after the daemon.
func (r *benchRun) produceBacklog(ctx context.Context) (_ *stream.Broker, err error) {
	cfg := r.o.Config
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Topics: []string{cfg.Kafka.Topics.Train},
		Partitions: cfg.Kafka.Partitions, TopicConfigs: daemon.TopicConfigs(cfg)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	cc, err := client.FromDaemon(cfg, []string{b.Addr()})
	if err != nil {
		return nil, err
	}
	c, err := client.New(cc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	fmt.Fprintf(r.o.Stderr, "cairnctl bench: writing %d rows before the daemon starts\n", r.train.N)
	t := time.Now()
	if err := upsertRows(ctx, c, r.train); err != nil {
		return nil, err
	}
	r.rep.ProduceEventsPerSecond = float64(r.train.N) / time.Since(t).Seconds()
	return b, nil
}
