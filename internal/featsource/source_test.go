package featsource

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/role/featurizer"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// deployment is an embedded broker with the default model (the shipped MNIST convnet,
// h = 4, s = 1024) and its training topic.
type deployment struct {
	ctx  context.Context
	cfg  config.Config
	kc   stream.Config
	feat *pipeline.Features
	lim  stream.Limits
	set  *dataset.Set
	tw   *stream.Writer // the producers', by key
	fw   *stream.Writer // the featurizers', on the record's partition
}

func newDeployment(ctx context.Context, t *testing.T, n int) *deployment {
	t.Helper()
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	cfg := config.Default()
	cfg.Kafka.Partitions = 3
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3,
		Topics: []string{cfg.Kafka.Topics.Train, featrec.Topic, cfg.Kafka.Topics.DLQ}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	d := &deployment{ctx: ctx, cfg: cfg, kc: stream.Config{Brokers: []string{b.Addr()}}, set: set}
	if d.feat, err = pipeline.NewFeatures(cfg.Model, cfg.Sketch, ""); err != nil {
		t.Fatal(err)
	}
	if d.lim, err = ingest.TrainLimits(cfg, d.feat.InputDim()); err != nil {
		t.Fatal(err)
	}
	d.lim.Indices = ingest.IndexLimits(d.feat)
	if d.tw, err = stream.NewWriter(stream.WriterConfig{Kafka: d.kc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.tw.Close() })
	if d.fw, err = stream.NewWriter(stream.WriterConfig{Kafka: d.kc, Partitioned: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.fw.Close() })
	return d
}

// produce writes upserts of rows [from, to) and then deletes of the given rows.
func (d *deployment) produce(t *testing.T, from, to int, deletes ...int) {
	t.Helper()
	var msgs []stream.Message
	for i := from; i < to; i++ {
		l := int64(d.set.Labels[i])
		b, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: d.set.IDs[i], X: d.set.Row(i), Label: &l}, d.lim)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.Message{Topic: d.cfg.Kafka.Topics.Train, Key: []byte(d.set.IDs[i]), Value: b})
	}
	for _, i := range deletes {
		b, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: d.set.IDs[i], Request: "r" + strconv.Itoa(i)}, d.lim)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.Message{Topic: d.cfg.Kafka.Topics.Train, Key: []byte(d.set.IDs[i]), Value: b})
	}
	if err := d.tw.Write(d.ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// train reads the whole training topic.
func (d *deployment) train(t *testing.T) []stream.Message {
	t.Helper()
	msgs, err := stream.ReadAll(d.ctx, d.kc, d.cfg.Kafka.Topics.Train)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// writeRecords writes the feature records that a featurizer with pipeline feat makes
// of msgs (featurizer.Records, the role's own code) to topic.
func (d *deployment) writeRecords(t *testing.T, feat *pipeline.Features, topic string, msgs []stream.Message) int {
	t.Helper()
	f, err := featurizer.New(featurizer.Config{Kafka: d.kc, Group: featurizer.Group, Topic: d.cfg.Kafka.Topics.Train, Out: topic,
		Writer: d.fw, Features: feat, Limits: d.lim, Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.Records(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.fw.Write(d.ctx, recs...); err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// primary is a State on a fresh store, with a Source on topic when topic is not "".
type primary struct {
	in  *ingest.State
	st  *storage.Store
	src *Source
	wg  sync.WaitGroup
	end context.CancelFunc
}

func (d *deployment) primary(t *testing.T, topic string, timeout time.Duration) *primary {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "cairn.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &primary{st: st}
	if p.in, err = ingest.New(d.cfg, st, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if topic == "" {
		return p
	}
	if p.src, err = New(Config{Kafka: d.kc, Train: d.cfg.Kafka.Topics.Train, Topic: topic, Applied: p.in.Start,
		Quiet: timeout, Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	p.in.SetFeatureSource(p.src, timeout)
	ctx, cancel := context.WithCancel(d.ctx)
	p.end = cancel
	p.wg.Go(func() { _ = p.src.Run(ctx) })
	t.Cleanup(p.stop)
	return p
}

func (p *primary) stop() {
	if p.end != nil {
		p.end()
		p.wg.Wait()
	}
}

// applyAll applies msgs in batches of size batch, in order.
func (p *primary) applyAll(ctx context.Context, t *testing.T, msgs []stream.Message, batch int) {
	t.Helper()
	for lo := 0; lo < len(msgs); lo += batch {
		if _, err := p.in.Apply(ctx, msgs[lo:min(lo+batch, len(msgs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// hash is the State's StateHash.
func (p *primary) hash(t *testing.T, cfg config.Config) string {
	t.Helper()
	h, err := ingest.StateHash(cfg, p.st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// featureDeadLetters are the outbox's dead letters of feature records.
func (p *primary) featureDeadLetters(t *testing.T, dlq string) []stream.DeadLetter {
	t.Helper()
	entries, err := p.st.Pending(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	var out []stream.DeadLetter
	for _, e := range entries {
		var dl stream.DeadLetter
		if e.Topic != dlq {
			continue
		}
		if err := json.Unmarshal(e.Value, &dl); err != nil {
			t.Fatalf("dead letter %q: %v", e.Value, err)
		}
		if dl.Reason == stream.ReasonFeatureMismatch {
			out = append(out, dl)
		}
	}
	return out
}

// waitFiled waits until p's Source has filed n records.
func (p *primary) waitFiled(ctx context.Context, t *testing.T, n uint64) {
	t.Helper()
	for p.src.Stats().Filed < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d records filed of %d", p.src.Stats().Filed, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStateHashWhoeverFeaturizes: the primary's StateHash is the same bytes whether it
// computed every feature, took none (no featurizer: every batch times out, the quiet
// rule makes it quick), took half from featurizers' records, took all (with repeats),
// or was handed records of another pipeline and corrupted ones, which are
// dead-lettered (feature_mismatch) and never applied.
func TestStateHashWhoeverFeaturizes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 200
	d := newDeployment(ctx, t, n)
	// 200 upserts, then 10 deletions and 5 re-upserts of deleted points.
	d.produce(t, 0, n, 3, 17, 40, 41, 99, 120, 121, 150, 180, 199)
	d.produce(t, 40, 42)
	d.produce(t, 150, 151)
	d.produce(t, 180, 181)
	d.produce(t, 199, 200)
	msgs := d.train(t)
	const batch = 37 // batches that cut the records' featurizer batches anywhere
	upserts := n + 5

	ref := d.primary(t, "", 0)
	ref.applyAll(ctx, t, msgs, batch)
	want := ref.hash(t, d.cfg)
	if got := ref.in.Stats().Upserts; got != uint64(upserts) {
		t.Fatalf("reference applied %d upserts, want %d", got, upserts)
	}

	check := func(name string, p *primary, taken, refused int) {
		t.Helper()
		p.stop()
		st := p.in.Stats()
		if got := p.hash(t, d.cfg); got != want {
			t.Errorf("%s: StateHash %s, want %s (the primary featurizing everything)", name, got, want)
		}
		if st.Upserts != uint64(upserts) || st.FeaturesTaken != uint64(taken) || st.FeatureRefused != uint64(refused) {
			t.Errorf("%s: upserts %d, features taken %d, refused %d; want %d, %d, %d", name, st.Upserts,
				st.FeaturesTaken, st.FeatureRefused, upserts, taken, refused)
		}
		if got := len(p.featureDeadLetters(t, d.cfg.Kafka.Topics.DLQ)); got != refused {
			t.Errorf("%s: %d feature_mismatch dead letters, want %d", name, got, refused)
		}
	}

	// No featurizer: every batch waits at most the quiet time, the first one only.
	start := time.Now()
	none := d.primary(t, featrec.Topic, 300*time.Millisecond)
	none.applyAll(ctx, t, msgs, batch)
	check("no records", none, 0, 0)
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("no records: %v to apply %d messages; the quiet rule should stop the waits", el, len(msgs))
	}

	// Records of every other message, then of all (the first half twice).
	var half []stream.Message
	for i := 0; i < len(msgs); i += 2 {
		half = append(half, msgs[i])
	}
	recsHalf := d.writeRecords(t, d.feat, featrec.Topic, half)
	mixed := d.primary(t, featrec.Topic, 300*time.Millisecond)
	mixed.waitFiled(ctx, t, uint64(recsHalf))
	mixed.applyAll(ctx, t, msgs, batch)
	check("half the records", mixed, recsHalf, 0)

	recsAll := d.writeRecords(t, d.feat, featrec.Topic, msgs)
	if recsAll != upserts {
		t.Fatalf("%d records of %d upserts", recsAll, upserts)
	}
	all := d.primary(t, featrec.Topic, 10*time.Second)
	all.waitFiled(ctx, t, uint64(recsHalf+recsAll))
	all.applyAll(ctx, t, msgs, batch)
	check("every record", all, upserts, 0)

	// Another pipeline's records (another sketch seed: another fingerprint), one
	// corrupted record and one message that is not a record, on their own topic.
	const bad = "t.features.bad"
	if err := stream.EnsureTopics(ctx, d.kc, 3, 1, bad); err != nil {
		t.Fatal(err)
	}
	other, err := d.feat.Reseeded(d.cfg.Model.Seed + 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.fw.Write(ctx, stream.Message{Topic: bad, Partition: 0, Key: []byte("x"), Value: []byte("not a record")}); err != nil {
		t.Fatal(err)
	}
	f, err := featurizer.New(featurizer.Config{Kafka: d.kc, Group: featurizer.Group, Topic: d.cfg.Kafka.Topics.Train, Out: bad,
		Writer: d.fw, Features: d.feat, Limits: d.lim, Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	corrupt, err := f.Records(msgs[:1])
	if err != nil || len(corrupt) != 1 {
		t.Fatalf("record of the first upsert: %v", err)
	}
	corrupt[0].Value[len(corrupt[0].Value)-20] ^= 1 // a feature's bit: the checksum fails
	if err := d.fw.Write(ctx, corrupt...); err != nil {
		t.Fatal(err)
	}
	recsOther := d.writeRecords(t, other, bad, msgs)
	wrong := d.primary(t, bad, 10*time.Second)
	wrong.waitFiled(ctx, t, uint64(recsOther+1))
	wrong.applyAll(ctx, t, msgs, batch)
	check("records of another pipeline", wrong, 0, recsOther+2)
}

// TestFeaturizerStopsUnderLoad: two featurizers (the role's Run, in one consumer group)
// feed a primary that reads the training topic while it is produced; one featurizer is
// stopped a third of the way and the other two thirds of the way. Every upsert is
// applied exactly once (Upserts = n, nothing skipped), ingestion goes on after the
// timeout, and the StateHash is the primary's own.
func TestFeaturizerStopsUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n, chunk = 300, 50
	d := newDeployment(ctx, t, n)
	stops := make([]context.CancelFunc, 2)
	var fwg sync.WaitGroup
	for i := range stops {
		f, err := featurizer.New(featurizer.Config{Kafka: d.kc, Group: featurizer.Group, Topic: d.cfg.Kafka.Topics.Train,
			Out: featrec.Topic, SessionTimeout: 2 * time.Second, Writer: d.fw, Features: d.feat, Limits: d.lim,
			Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		fctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		fwg.Go(func() { _ = f.Run(fctx) })
	}
	defer func() {
		for _, s := range stops {
			s()
		}
		fwg.Wait()
	}()

	p := d.primary(t, featrec.Topic, time.Second)
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: d.kc, Topics: []string{d.cfg.Kafka.Topics.Train}, Start: p.in.Start,
		MaxBatch: 64, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var applied atomic.Int64
	rctx, stopReader := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	var runErr error
	rwg.Go(func() {
		runErr = r.Run(rctx, func(ctx context.Context, batch []stream.Message) error {
			err := p.in.Handle(ctx, batch)
			applied.Store(int64(p.in.Stats().Upserts))
			return err
		})
	})
	for lo := 0; lo < n; lo += chunk {
		d.produce(t, lo, lo+chunk)
		switch lo {
		case n / 3:
			stops[0]()
		case 2 * n / 3:
			stops[1]()
		}
		time.Sleep(300 * time.Millisecond)
	}
	for applied.Load() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d upserts applied before the deadline", applied.Load(), n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stopReader()
	rwg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
	p.stop()
	st := p.in.Stats()
	if st.Upserts != n || st.Skipped != 0 || p.in.Len() != n {
		t.Fatalf("upserts %d, skipped %d, points %d; want %d, 0, %d (nothing lost or applied twice)", st.Upserts, st.Skipped, p.in.Len(), n, n)
	}
	if st.FeaturesTaken == 0 {
		t.Errorf("no features taken from the featurizers: the test did not exercise them")
	}
	t.Logf("features taken from records: %d of %d; source %+v", st.FeaturesTaken, n, p.src.Stats())
	ref := d.primary(t, "", 0)
	ref.applyAll(ctx, t, d.train(t), 64)
	if got, want := p.hash(t, d.cfg), ref.hash(t, d.cfg); got != want {
		t.Errorf("StateHash %s, want %s (the same events featurized by the primary alone)", got, want)
	}
}
