package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
	"github.com/segmentio/kafka-go"
)

// BenchmarkConsumeApplyPublish is the daemon's ingest path with real durability, per ~1 KiB
// event: partition readers → DecodeTrain → one bbolt transaction per batch (points, offsets
// and outbox entries together, fsync on) → Publisher (RequireAll) → output topic, on the
// embedded broker over TCP. In the same run it times raw kafka-go consumption of the same
// topic (FetchMessage only) and reports the ratio; absolute rates on this shared 2-core
// machine are noisy, the ratio is the number to read.
func BenchmarkConsumeApplyPublish(b *testing.B) {
	const in, out, parts, dim = "bb.train", "bb.out", 3, 52
	ctx := context.Background()
	br, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: parts, Topics: []string{in, out}})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	kcfg := stream.Config{Brokers: []string{br.Addr()}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kcfg})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	lim := stream.Limits{InputDim: dim}

	r := rng.New(1, "stream/bench/e2e")
	msgs := make([]stream.Message, b.N)
	for i := range msgs {
		x := make([]float64, dim)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		id := fmt.Sprintf("p%08d", i)
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = stream.Message{Topic: in, Key: []byte(id), Value: v}
	}
	for i := 0; i < len(msgs); i += 2000 {
		if err := w.Write(ctx, msgs[i:min(i+2000, len(msgs))]...); err != nil {
			b.Fatal(err)
		}
	}

	rawRate := rawConsume(b, kcfg, in, b.N)
	applyRate := applyOnly(b, msgs, lim, out)

	st, err := storage.Open(filepath.Join(b.TempDir(), "cairn.db"), storage.Options{}) // fsync on
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	box := &outboxAdapter{s: st}
	rd, err := stream.NewReader(stream.ReaderConfig{Kafka: kcfg, Topics: []string{in}, MaxBatch: 256,
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
	if err != nil {
		b.Fatal(err)
	}
	var published atomic.Int64
	countingBox := &countingOutbox{outboxAdapter: box, acked: &published}
	pub, err := stream.NewPublisher(w, countingBox, stream.PublisherConfig{Batch: 1024, Poll: 5 * time.Millisecond, Ready: st.OutboxReady()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr [2]error
	wg.Add(2)
	go func() {
		defer wg.Done()
		runErr[0] = rd.Run(rctx, func(_ context.Context, batch []stream.Message) error {
			return st.Apply(func(tx *storage.Tx) error {
				for _, m := range batch {
					ev, err := stream.DecodeTrain(m.Value, lim)
					if err != nil {
						return err
					}
					if err := tx.PutPoint(storage.Point{ID: ev.ID, X: ev.X}); err != nil {
						return err
					}
					if _, err := tx.Enqueue(out, m.Key, fmt.Appendf(nil, `{"v":1,"applied":%q}`, ev.ID)); err != nil {
						return err
					}
					if err := tx.SetOffset(m.Topic, int32(m.Partition), m.Offset); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}()
	go func() { defer wg.Done(); runErr[1] = pub.Run(rctx) }()
	deadline := time.Now().Add(3 * time.Minute)
	for published.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	dur := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	if runErr[0] != nil || runErr[1] != nil {
		b.Fatalf("reader %v, publisher %v", runErr[0], runErr[1])
	}
	if got := published.Load(); got != int64(b.N) {
		b.Fatalf("published %d of %d", got, b.N)
	}
	rate := float64(b.N) / dur.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(rate/rawRate, "ratio-vs-raw")
	b.ReportMetric(applyRate, "apply-events/s")
	b.ReportMetric(applyRate/rawRate, "apply-ratio-vs-raw")
}

// applyOnly times the apply+commit half alone: the same events decoded and applied to a
// fresh bbolt file in transactions of 256 events (point, offset, outbox entry each; fsync
// on), as the daemon's ingest does, and returns events per second.
func applyOnly(b *testing.B, msgs []stream.Message, lim stream.Limits, out string) float64 {
	st, err := storage.Open(filepath.Join(b.TempDir(), "apply.db"), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	for i := 0; i < len(msgs); i += 256 {
		batch := msgs[i:min(i+256, len(msgs))]
		err := st.Apply(func(tx *storage.Tx) error {
			for j, m := range batch {
				ev, err := stream.DecodeTrain(m.Value, lim)
				if err != nil {
					return err
				}
				if err := tx.PutPoint(storage.Point{ID: ev.ID, X: ev.X}); err != nil {
					return err
				}
				if _, err := tx.Enqueue(out, m.Key, fmt.Appendf(nil, `{"v":1,"applied":%q}`, ev.ID)); err != nil {
					return err
				}
				if err := tx.SetOffset(m.Topic, 0, int64(i+j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return float64(len(msgs)) / time.Since(start).Seconds()
}

// countingOutbox counts acknowledged (published) entries.
type countingOutbox struct {
	*outboxAdapter
	acked *atomic.Int64
}

func (c *countingOutbox) Ack(seqs ...uint64) error {
	if err := c.outboxAdapter.Ack(seqs...); err != nil {
		return err
	}
	c.acked.Add(int64(len(seqs)))
	return nil
}

// rawConsume reads n messages of topic with one plain kafka-go reader per partition and
// returns the rate in messages per second.
func rawConsume(b *testing.B, kcfg stream.Config, topic string, n int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pids, err := stream.Partitions(ctx, kcfg, topic)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var count atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	var once sync.Once
	for _, p := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kr := kafka.NewReader(kafka.ReaderConfig{Brokers: kcfg.Brokers, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 250 * time.Millisecond, ReadLagInterval: -1})
			defer kr.Close()
			for {
				if _, err := kr.FetchMessage(ctx); err != nil {
					return // ctx cancelled once everything is read, or the timeout
				}
				if count.Add(1) == int64(n) {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	dur := time.Since(start)
	cancel()
	wg.Wait()
	if got := count.Load(); got < int64(n) {
		b.Fatalf("raw consume read %d of %d", got, n)
	}
	return float64(n) / dur.Seconds()
}
