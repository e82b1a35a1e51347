package daemon

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkQueryKafka is the latency of one query through Kafka on a running daemon
// (small MNIST model of e2eConfig): produce the query, wait for its attribution on
// cairn.attributions, one at a time. It reports p50/p99 in ms, and the in-process
// answer (Daemon.Answer) measured in the same run, whose ratio shows what Kafka and the
// outbox add to the computation.
func BenchmarkQueryKafka(b *testing.B) {
	set, err := dataset.Open("mnist", "train", 200)
	if err != nil {
		b.Skip(err)
	}
	cfg := e2eConfig(b.TempDir())
	d, err := New(cfg, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-d.Ready()
	rows := make([]int, set.N)
	for i := range rows {
		rows[i] = i
	}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: d.Brokers()}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	lim := stream.Limits{InputDim: set.D}
	var msgs []stream.Message
	for _, i := range rows {
		lab := int64(set.Labels[i])
		v, _ := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &lab}, lim)
		msgs = append(msgs, stream.Message{Topic: cfg.Kafka.Topics.Train, Key: []byte(set.IDs[i]), Value: v})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	for d.Status().ModelPoints != set.N {
		time.Sleep(50 * time.Millisecond)
	}
	got := make(chan string, 16)
	rd, err := stream.NewReader(stream.ReaderConfig{Kafka: stream.Config{Brokers: d.Brokers()},
		Topics: []string{cfg.Kafka.Topics.Attributions}, Start: func(string, int) (int64, bool, error) { return 0, false, nil },
		MaxWait: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() {
		rdone <- rd.Run(rctx, func(_ context.Context, batch []stream.Message) error {
			for _, m := range batch {
				got <- string(m.Key)
			}
			return nil
		})
	}()
	defer func() { stop(); <-rdone }()
	var kafkaLat, procLat []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := fmt.Sprintf("bench-%d", i)
		ev := stream.QueryEvent{Request: req, ID: set.IDs[i%set.N]}
		v, _ := stream.EncodeQuery(ev, lim)
		t0 := time.Now()
		if err := w.Write(ctx, stream.Message{Topic: cfg.Kafka.Topics.Queries, Key: []byte(req), Value: v}); err != nil {
			b.Fatal(err)
		}
		for k := range got {
			if k == req {
				break
			}
		}
		kafkaLat = append(kafkaLat, time.Since(t0).Seconds())
		t0 = time.Now()
		if _, err := d.Answer(ev); err != nil {
			b.Fatal(err)
		}
		procLat = append(procLat, time.Since(t0).Seconds())
	}
	b.StopTimer()
	q := func(v []float64, p float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return 1000 * s[min(len(s)-1, int(p*float64(len(s))))]
	}
	b.ReportMetric(q(kafkaLat, 0.5), "kafka-p50-ms")
	b.ReportMetric(q(kafkaLat, 0.99), "kafka-p99-ms")
	b.ReportMetric(q(procLat, 0.5), "inproc-p50-ms")
	b.ReportMetric(q(kafkaLat, 0.5)/q(procLat, 0.5), "kafka/inproc")
}
