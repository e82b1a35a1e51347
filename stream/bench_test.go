package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/segmentio/kafka-go"
)

// memOutbox is an in-memory Outbox, so that the benchmark measures stream
// (decode, read, write) rather than bbolt's fsync.
type memOutbox struct {
	mu      sync.Mutex
	next    uint64
	entries []OutboxEntry
	acked   atomic.Int64
}

func (o *memOutbox) add(topic string, key, value []byte) {
	o.mu.Lock()
	o.next++
	o.entries = append(o.entries, OutboxEntry{Seq: o.next, Topic: topic, Key: key, Value: value})
	o.mu.Unlock()
}

func (o *memOutbox) Pending(limit int) ([]OutboxEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(limit, len(o.entries))
	return append([]OutboxEntry(nil), o.entries[:n]...), nil
}

func (o *memOutbox) Ack(seqs ...uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Pending hands out a prefix and the publisher acks it whole.
	o.entries = o.entries[len(seqs):]
	o.acked.Add(int64(len(seqs)))
	return nil
}

// benchDim makes an encoded upsert about 1 KiB: 'g' text of a uniform
// float64 is ~19 bytes with its comma.
const benchDim = 52

// BenchmarkConsumePublish measures the daemon's I/O path end to end per
// event: partition readers → DecodeTrain → outbox → Publisher → Writer
// (RequireAll) on the embedded broker over TCP, with ~1 KiB events. In the
// same run it times raw kafka-go consumption (one kafka.Reader per
// partition, FetchMessage only, no decode, no publish) of the same topic,
// and reports both rates and their ratio. The machine is shared, so the
// ratio is the number to read.
func BenchmarkConsumePublish(b *testing.B) {
	const in, out, parts = "b.train", "b.out", 3
	br := startBroker(b, parts, in, out)
	kcfg := Config{Brokers: []string{br.Addr()}}
	w := newTestWriter(b, br.Addr(), nil)
	ctx := context.Background()
	lim := Limits{InputDim: benchDim}

	r := rng.New(1, "stream/bench/events")
	msgs := make([]Message, b.N)
	var bytes int
	for i := range msgs {
		x := make([]float64, benchDim)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		id := fmt.Sprintf("p%08d", i)
		v, err := EncodeTrain(TrainEvent{Op: OpUpsert, ID: id, X: x}, lim)
		if err != nil {
			b.Fatal(err)
		}
		bytes += len(v)
		msgs[i] = Message{Topic: in, Key: []byte(id), Value: v}
	}
	prodStart := time.Now()
	for i := 0; i < len(msgs); i += 2000 {
		if err := w.Write(ctx, msgs[i:min(i+2000, len(msgs))]...); err != nil {
			b.Fatal(err)
		}
	}

	prodDur := time.Since(prodStart)

	// Raw kafka-go consumption of the same topic.
	rawStart := time.Now()
	var wg sync.WaitGroup
	var rawCount atomic.Int64
	var rawErr error
	var rawMu sync.Mutex
	pids, err := Partitions(ctx, kcfg, in)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kr := kafka.NewReader(kafka.ReaderConfig{Brokers: kcfg.Brokers, Topic: in, Partition: p, MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 250 * time.Millisecond, ReadLagInterval: -1})
			defer kr.Close()
			c, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			for rawCount.Load() < int64(b.N) {
				if _, err := kr.FetchMessage(c); err != nil {
					if rawCount.Load() < int64(b.N) {
						rawMu.Lock()
						rawErr = err
						rawMu.Unlock()
					}
					return
				}
				if rawCount.Add(1) == int64(b.N) {
					return
				}
			}
		}()
	}
	// Partition goroutines stop when the total reaches b.N; the ones still
	// blocked in FetchMessage are released by their timeout context, so
	// cancel them as soon as the count is reached.
	for rawCount.Load() < int64(b.N) && rawErr == nil {
		time.Sleep(time.Millisecond)
	}
	rawDur := time.Since(rawStart)
	wg.Wait()
	if rawErr != nil {
		b.Fatalf("raw consume: %v", rawErr)
	}

	box := &memOutbox{}
	pub, err := NewPublisher(w, box, PublisherConfig{Batch: 1024, Poll: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rd, err := NewReader(ReaderConfig{Kafka: kcfg, Topics: []string{in}, Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	var runErr [2]error
	wg.Add(2)
	go func() {
		defer wg.Done()
		runErr[0] = rd.Run(rctx, func(_ context.Context, batch []Message) error {
			for _, m := range batch {
				ev, err := DecodeTrain(m.Value, lim)
				if err != nil {
					return err
				}
				box.add(out, m.Key, fmt.Appendf(nil, `{"v":1,"applied":%q}`, ev.ID))
			}
			pub.Notify()
			return nil
		})
	}()
	go func() { defer wg.Done(); runErr[1] = pub.Run(rctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for box.acked.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	pipeDur := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	if runErr[0] != nil || runErr[1] != nil {
		b.Fatalf("reader %v, publisher %v", runErr[0], runErr[1])
	}
	if got := box.acked.Load(); got != int64(b.N) {
		b.Fatalf("published %d of %d", got, b.N)
	}
	pipeRate := float64(b.N) / pipeDur.Seconds()
	rawRate := float64(b.N) / rawDur.Seconds()
	b.ReportMetric(pipeRate, "events/s")
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(pipeRate/rawRate, "ratio-vs-raw")
	// Writer throughput with large batches, measured while loading the
	// topic: the publish half of the pipeline cannot beat it.
	b.ReportMetric(float64(b.N)/prodDur.Seconds(), "produce-events/s")
	b.ReportMetric(float64(bytes)/float64(b.N), "B/event")
}

// BenchmarkDecodeTrain measures validation of a ~1 KiB upsert against
// encoding/json.Unmarshal of the same bytes into a plain struct (which
// checks none of the rules), in the same run.
func BenchmarkDecodeTrain(b *testing.B) {
	r := rng.New(1, "stream/bench/decode")
	x := make([]float64, benchDim)
	for j := range x {
		x[j] = r.NormFloat64()
	}
	lim := Limits{InputDim: benchDim}
	raw, err := EncodeTrain(TrainEvent{Op: OpUpsert, ID: "p00000001", X: x}, lim)
	if err != nil {
		b.Fatal(err)
	}
	type plain struct {
		V  int       `json:"v"`
		Op string    `json:"op"`
		ID string    `json:"id"`
		X  []float64 `json:"x"`
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := DecodeTrain(raw, lim); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	// The reference runs as many rounds right after, so both see the
	// same machine load.
	start := time.Now()
	for range b.N {
		var p plain
		if err := json.Unmarshal(raw, &p); err != nil {
			b.Fatal(err)
		}
	}
	ref := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(ref), "x-json.Unmarshal")
}
