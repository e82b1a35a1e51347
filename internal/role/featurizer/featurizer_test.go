package featurizer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// testConfig is a small deployment: mlp:6-8-4, h = 2 heads, s = 16 (q = 32 per view).
func testConfig() config.Config {
	c := config.Default()
	c.Model = config.Backbone{Arch: "mlp:6-8-4", Seed: 7, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 16}
	c.Kafka.Partitions = 3
	return c
}

// trainEvents are n upserts with seeded inputs, one delete, one event that does not
// decode and a tombstone, each on an explicit partition that is not its key's.
func trainEvents(t testing.TB, lim stream.Limits, topic string, n int) (msgs []stream.Message, xs map[string][]float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	xs = map[string][]float64{}
	for i := range n {
		id := "p" + strconv.Itoa(i)
		x := make([]float64, lim.InputDim)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		b, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
		if err != nil {
			t.Fatal(err)
		}
		xs[id] = x
		msgs = append(msgs, stream.Message{Topic: topic, Partition: (i + 1) % 3, Key: []byte(id), Value: b})
	}
	del, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: "p0", Request: "r1"}, lim)
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, stream.Message{Topic: topic, Partition: 0, Key: []byte("p0"), Value: del},
		stream.Message{Topic: topic, Partition: 1, Key: []byte("bad"), Value: []byte(`{"v":1,"op":"upsert"}`)},
		stream.Message{Topic: topic, Partition: 2, Key: []byte("p1")})
	return msgs, xs
}

// TestFeaturizerRecords: on the embedded broker, a Featurizer's records of the training
// topic decode, sit on their event's partition keyed by id, name the event's offset and
// the pipeline's fingerprint, and their features equal, bit for bit, the ones the
// primary computes (BothViewsTo on the point alone, as ingest's featurize does for any
// batch); deletions, tombstones and rejected events have none. Each partition's records
// name increasing offsets: the primary's source takes a record behind a partition's
// front for missing (internal/featsource, "Waiting").
func TestFeaturizerRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 40
	rig := newRig(ctx, t, n)
	kc, train, feat, lim, xs := rig.kc, rig.train, rig.feat, rig.lim, rig.xs
	recs, _ := rig.run(ctx, t, n)
	trainAt := readOffsets(ctx, t, kc, train, lim)
	q := feat.Dim()
	want := make([]float64, 2*q)
	views := make([]float64, 2*feat.InputDim())
	seen := map[string]bool{}
	front := map[int]int64{}
	for _, m := range recs {
		rec, err := featrec.Decode(m.Value)
		if err != nil {
			t.Fatalf("record at %d@%d: %v", m.Partition, m.Offset, err)
		}
		x, ok := xs[rec.ID]
		if !ok || seen[rec.ID] {
			t.Fatalf("record of id %q: not one upsert's, or repeated", rec.ID)
		}
		seen[rec.ID] = true
		if string(m.Key) != rec.ID || m.Partition != rec.Partition || rec.Topic != train || rec.Fingerprint != feat.Fingerprint() {
			t.Fatalf("record key %q partition %d: got %+v", m.Key, m.Partition, rec)
		}
		if f, ok := front[m.Partition]; ok && rec.Offset <= f {
			t.Fatalf("partition %d: the record of offset %d follows the one of offset %d", m.Partition, rec.Offset, f)
		}
		front[m.Partition] = rec.Offset
		if at := trainAt[rec.ID]; at != [2]int64{int64(rec.Partition), rec.Offset} {
			t.Fatalf("id %q: record names %d@%d, the upsert is at %d@%d", rec.ID, rec.Partition, rec.Offset, at[0], at[1])
		}
		feat.BothViewsTo(want, views, x, []string{rec.ID})
		for i := range want {
			if math.Float64bits(rec.Features[i]) != math.Float64bits(want[i]) {
				t.Fatalf("id %q feature %d: got %v, want %v (bits differ)", rec.ID, i, rec.Features[i], want[i])
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d records, want %d (one per upsert)", len(seen), n)
	}
}

// rig is a broker holding trainEvents on the training topic, and what a Featurizer of
// testConfig needs.
type rig struct {
	kc    stream.Config
	train string
	w     *stream.Writer
	feat  *pipeline.Features
	lim   stream.Limits
	xs    map[string][]float64
}

func newRig(ctx context.Context, t *testing.T, n int) *rig {
	t.Helper()
	cfg := testConfig()
	train := cfg.Kafka.Topics.Train
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Topics: []string{train, featrec.Topic}, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kc := stream.Config{Brokers: []string{b.Addr()}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kc, Partitioned: true}) // the featurizer's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	tw, err := stream.NewWriter(stream.WriterConfig{Kafka: kc, Partitioned: true}) // the producers'
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ingest.TrainLimits(cfg, feat.InputDim())
	if err != nil {
		t.Fatal(err)
	}
	lim.Indices = ingest.IndexLimits(feat)
	msgs, xs := trainEvents(t, lim, train, n)
	if err := tw.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	return &rig{kc: kc, train: train, w: w, feat: feat, lim: lim, xs: xs}
}

// run runs a Featurizer until the features topic holds want records, and returns them
// and what the featurizer skipped.
func (r *rig) run(ctx context.Context, t *testing.T, want int) ([]stream.Message, uint64) {
	t.Helper()
	f, err := New(Config{Kafka: r.kc, Group: Group, Topic: r.train, Out: featrec.Topic, SessionTimeout: 2 * time.Second,
		Writer: r.w, Features: r.feat, Limits: r.lim, Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = f.Run(runCtx) })
	recs := waitRecords(ctx, t, r.kc, want)
	stop()
	wg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
	return recs, f.Skipped()
}

// TestFeaturizerSkipsApplied: events below the applied offsets the primary published
// (featrec.AppliedGroup; here events 0–4 of partitions 0 and 1, nothing of partition
// 2) get no record, and are counted as skipped; every other upsert gets its record.
func TestFeaturizerSkipsApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 40
	rig := newRig(ctx, t, n)
	next := map[int]int64{0: 5, 1: 5}
	pr, err := stream.NewProgress(rig.kc, featrec.AppliedGroup, rig.train)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.Publish(ctx, next); err != nil {
		t.Fatal(err)
	}
	all, err := stream.ReadAll(ctx, rig.kc, rig.train)
	if err != nil {
		t.Fatal(err)
	}
	at := readOffsets(ctx, t, rig.kc, rig.train, rig.lim)
	want, below := 0, 0
	for _, pos := range at {
		if v, ok := next[int(pos[0])]; ok && pos[1] < v {
			continue
		}
		want++
	}
	for _, m := range all {
		if v, ok := next[m.Partition]; ok && m.Offset < v {
			below++
		}
	}
	recs, skipped := rig.run(ctx, t, want)
	if len(recs) != want {
		t.Fatalf("%d records, want %d: the upserts at or above the applied offsets", len(recs), want)
	}
	for _, m := range recs {
		rec, err := featrec.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := next[rec.Partition]; ok && rec.Offset < v {
			t.Errorf("a record for %d@%d, which the primary applied (next %d)", rec.Partition, rec.Offset, v)
		}
	}
	if skipped != uint64(below) {
		t.Errorf("skipped %d events, want the %d below the applied offsets", skipped, below)
	}
}

// waitRecords reads the features topic until it holds at least n records.
func waitRecords(ctx context.Context, t *testing.T, kc stream.Config, n int) []stream.Message {
	t.Helper()
	for {
		recs, err := stream.ReadAll(ctx, kc, featrec.Topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			time.Sleep(200 * time.Millisecond) // records beyond n would show in a last read
			if recs, err = stream.ReadAll(ctx, kc, featrec.Topic); err != nil {
				t.Fatal(err)
			}
			return recs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d records of %d before the deadline: %v", len(recs), n, errors.New("timeout"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readOffsets returns each upsert id's partition and offset on the training topic.
func readOffsets(ctx context.Context, t *testing.T, kc stream.Config, topic string, lim stream.Limits) map[string][2]int64 {
	t.Helper()
	msgs, err := stream.ReadAll(ctx, kc, topic)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string][2]int64{}
	for _, m := range msgs {
		if ev, err := stream.DecodeTrain(m.Value, lim); m.Value != nil && err == nil && ev.Op == stream.OpUpsert {
			at[string(m.Key)] = [2]int64{int64(m.Partition), m.Offset}
		}
	}
	return at
}
