package ingest

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// trainRuntime is one daemon life: broker, store, ingest and a reader goroutine.
type trainRuntime struct {
	broker *stream.Broker
	store  *storage.Store
	ingest *State
	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr error

	mu   sync.Mutex
	last map[int]int64 // highest offset handed to the handler, per partition
}

// start brings up a broker persisting to brokerDir, opens the store at path, restores
// the ingest, and runs the reader → Ingest loop in a goroutine joined by stop.
func start(t *testing.T, cfg config.Config, brokerDir, path string) *trainRuntime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	rt := &trainRuntime{cancel: cancel, last: map[int]int64{}}
	var err error
	rt.broker, err = stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: cfg.Kafka.Partitions,
		Topics: []string{cfg.Kafka.Topics.Train, cfg.Kafka.Topics.DLQ}, DataDir: brokerDir})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rt.store = openStore(t, path)
	rt.ingest = newTestIngest(t, cfg, rt.store)
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: stream.Config{Brokers: []string{rt.broker.Addr()}},
		Topics: []string{cfg.Kafka.Topics.Train}, Start: rt.ingest.Start, MaxBatch: 32, MaxWait: 50 * time.Millisecond})
	if err != nil {
		rt.stop(t)
		t.Fatal(err)
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.runErr = r.Run(ctx, func(ctx context.Context, batch []stream.Message) error {
			rt.mu.Lock()
			for _, m := range batch {
				rt.last[m.Partition] = max(rt.last[m.Partition], m.Offset)
			}
			rt.mu.Unlock()
			return rt.ingest.Handle(ctx, batch)
		})
	}()
	return rt
}

// storedOffsets reads the committed offsets of the train topic by partition. The Ingest
// belongs to the reader goroutine while it runs, so progress is watched through the
// store, which is safe for concurrent use.
func (rt *trainRuntime) storedOffsets(t *testing.T) map[int]int64 {
	t.Helper()
	offs, err := rt.store.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, o := range offs {
		out[int(o.Partition)] = o.Offset
	}
	return out
}

// waitConsumed waits until the stored offsets account for total messages (offsets
// start at 0, so partition p has consumed last+1).
func (rt *trainRuntime) waitConsumed(t *testing.T, total int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, off := range rt.storedOffsets(t) {
			n += int(off) + 1
		}
		if n == total {
			return
		}
		if n > total || time.Now().After(deadline) {
			t.Fatalf("stored offsets account for %d messages, want %d", n, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rt *trainRuntime) stop(t *testing.T) {
	t.Helper()
	rt.cancel()
	rt.wg.Wait()
	if rt.runErr != nil && !errors.Is(rt.runErr, context.Canceled) {
		t.Errorf("reader: %v", rt.runErr)
	}
	if err := rt.store.Close(); err != nil {
		t.Error(err)
	}
	if err := rt.broker.Close(); err != nil {
		t.Error(err)
	}
}

func produce(t *testing.T, addr, topic string, evs []event) {
	t.Helper()
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(t.Context(), msgs(topic, evs)...); err != nil {
		t.Fatal(err)
	}
}

// TestIngestBrokerRestart runs the ingest path against the real embedded broker and a
// bbolt file: a few hundred upserts with replacements, deletes and poison messages on 3
// partitions, consumed by the reader → Ingest loop. Checked: stored points equal the
// per-key replay; every poison message is on the dead-letter outbox once, with its
// reason; stored offsets are the last offsets handed out; after Sync both views equal
// the batch greedy reference. Then everything is closed and reopened (broker from its
// data dir, store, pool restored from bbolt): the restored pool state equals the one
// before, more events are produced, and exactly those are applied (no skipped
// re-deliveries, no duplicate dead letters), ending again at the reference.
func TestIngestBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test with the embedded broker")
	}
	cfg := testConfig()
	dir := t.TempDir()
	brokerDir, path := filepath.Join(dir, "broker"), filepath.Join(dir, "cairn.db")

	phase1 := script(t, 300, "one")
	rt := start(t, cfg, brokerDir, path)
	produce(t, rt.broker.Addr(), cfg.Kafka.Topics.Train, phase1)
	rt.waitConsumed(t, len(phase1))
	want := expect(phase1)
	checkStore(t, rt.store, want.points)
	if got := deadLetters(t, rt.store, cfg.Kafka.Topics.DLQ); !mapsEqual(got, want.poison) {
		t.Errorf("dead letters\n got %v\nwant %v", got, want.poison)
	}
	rt.mu.Lock()
	if got := rt.storedOffsets(t); !mapsEqual(got, rt.last) {
		t.Errorf("stored offsets %v, want the last offsets handed out %v", got, rt.last)
	}
	rt.mu.Unlock()
	rt.stop(t)
	s1 := rt.ingest.Stats()
	if got := s1.Upserts + s1.Deletes + s1.Missing + s1.DeadLetters; got != uint64(len(phase1)) || s1.Skipped != 0 {
		t.Errorf("phase 1 consumed %d (skipped %d), want %d (0)", got, s1.Skipped, len(phase1))
	}
	// Sync outside the reader (the ingest is ours again after stop) on a reopened store.
	st := openStore(t, path)
	in := newTestIngest(t, cfg, st)
	checkAgainstReference(t, cfg, in, st, want.points)
	synced := storedPool(t, st)
	st.Close()

	// Restart: the pool comes back from bbolt, consumption resumes after the stored offsets.
	rt = start(t, cfg, brokerDir, path)
	if ps, err := encodePool(rt.ingest.feat.Fingerprint(), rt.ingest.pool); err != nil || string(ps.Data) != string(synced.Data) {
		t.Errorf("restored pool differs from the stored one (err %v)", err)
	}
	g := newGen(t, 99, 6)
	var phase2 []event
	for i := range 100 {
		phase2 = append(phase2, g.upsert(id(1000+i)))
		if i%25 == 4 {
			phase2 = append(phase2, g.del(id(i*3)))
		}
	}
	phase2 = append(phase2, poisons("two")[:3]...)
	produce(t, rt.broker.Addr(), cfg.Kafka.Topics.Train, phase2)
	all := append(append([]event(nil), phase1...), phase2...)
	rt.waitConsumed(t, len(all))
	time.Sleep(200 * time.Millisecond) // let any duplicate delivery show up in the counts
	rt.stop(t)
	s2 := rt.ingest.Stats()
	if got := s2.Upserts + s2.Deletes + s2.Missing + s2.DeadLetters; got != uint64(len(phase2)) || s2.Skipped != 0 {
		t.Errorf("phase 2 consumed %d (skipped %d), want exactly the %d new messages", got, s2.Skipped, len(phase2))
	}
	want = expect(all)
	st = openStore(t, path)
	defer st.Close()
	checkStore(t, st, want.points)
	if got := deadLetters(t, st, cfg.Kafka.Topics.DLQ); !mapsEqual(got, want.poison) {
		t.Errorf("dead letters after restart\n got %v\nwant %v", got, want.poison)
	}
	checkAgainstReference(t, cfg, newTestIngest(t, cfg, st), st, want.points)
}
