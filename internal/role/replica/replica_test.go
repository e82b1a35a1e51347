package replica

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/query"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

// TestReplicaAnswers: on the embedded broker, a Replica reads a query from its group,
// waits behind the fence for every batch, and writes the outcome straight to Kafka: a
// query by id is a dead letter on a replica (it stores no points), keyed and reasoned.
func TestReplicaAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := config.Default()
	tp := cfg.Kafka.Topics
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Topics: []string{tp.Queries, tp.DLQ}, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kc := stream.Config{Brokers: []string{b.Addr()}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lim, err := query.Limits(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	q, err := stream.EncodeQuery(stream.QueryEvent{Request: "by-id", ID: "p1"}, lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, stream.Message{Topic: tp.Queries, Key: []byte("by-id"), Value: q}); err != nil {
		t.Fatal(err)
	}
	var fences atomic.Int32
	answers := query.New(query.Config{Daemon: cfg, Limits: lim, Log: zerolog.Nop(), Metrics: metrics.New(), UI: ui.NewRecorder(4, 4)})
	r, err := New(Config{Kafka: kc, Group: "t.replicas", Topic: tp.Queries, SessionTimeout: 2 * time.Second, Writer: w,
		Fence:   func(context.Context) error { fences.Add(1); return nil },
		Model:   func(context.Context, int) (*serving.Model, error) { return nil, nil },
		Answers: answers, Faults: fault.NewTracker(zerolog.Nop(), nil)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	defer wg.Wait()
	defer stop()

	got := make(chan stream.Message, 1)
	dl, err := stream.NewReader(stream.ReaderConfig{Kafka: kc, Topics: []string{tp.DLQ},
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
	if err != nil {
		t.Fatal(err)
	}
	found := errors.New("found")
	if err := dl.Run(ctx, func(_ context.Context, batch []stream.Message) error {
		got <- batch[0]
		return found
	}); !errors.Is(err, found) {
		t.Fatalf("no dead letter: %v", err)
	}
	m := <-got
	var d stream.DeadLetter
	if err := json.Unmarshal(m.Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Reason != stream.ReasonUnavailable || d.Topic != tp.Queries {
		t.Errorf("dead letter %+v, want reason unavailable for the query topic", d)
	}
	if fences.Load() == 0 {
		t.Error("a batch was answered without the fence")
	}
}
