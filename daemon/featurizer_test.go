package daemon

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/cluster"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// TestFeaturizerRole: cairnd --role featurizer on an external broker creates the
// features topic with the training topic's partitions and writes one record per upsert,
// on the upsert's partition, whose features are the daemon pipeline's bit for bit.
func TestFeaturizerRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := roleConfig(t.TempDir(), "", "featurizer")
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3, Topics: []string{cfg.Kafka.Topics.Train},
		TopicConfigs: map[string]map[string]string{cfg.Kafka.Topics.Train: cluster.TopicConfigs(cfg)[cfg.Kafka.Topics.Train]}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg.Kafka.Brokers = []string{b.Addr()}
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of cancel")
		}
	}()
	select {
	case <-d.Ready():
	case err := <-done:
		done <- nil // for the deferred check
		t.Fatalf("featurizer stopped before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("featurizer not ready after 30 s")
	}
	lim, err := ingest.TrainLimits(cfg, d.feat.InputDim())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	const n = 12
	xs := map[string][]float64{}
	var msgs []stream.Message
	for i := range n {
		id := "f" + strconv.Itoa(i)
		x := make([]float64, lim.InputDim)
		for j := range x {
			x[j] = r.Float64()
		}
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
		if err != nil {
			t.Fatal(err)
		}
		xs[id] = x
		msgs = append(msgs, stream.Message{Topic: cfg.Kafka.Topics.Train, Key: []byte(id), Value: v})
	}
	produceMsgs(t, cfg.Kafka.Brokers, msgs)
	kc := stream.Config{Brokers: cfg.Kafka.Brokers}
	var recs []stream.Message
	waitFor(t, "a feature record per upsert", 60*time.Second, func() bool {
		recs, err = stream.ReadAll(ctx, kc, featrec.Topic)
		return err == nil && len(recs) >= n
	})
	if parts, err := stream.Partitions(ctx, kc, featrec.Topic); err != nil || len(parts) != 3 {
		t.Fatalf("features topic partitions %v (%v), want the training topic's 3", parts, err)
	}
	q := d.feat.Dim()
	want, views := make([]float64, 2*q), make([]float64, 2*d.feat.InputDim())
	for _, m := range recs {
		rec, err := featrec.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Partition != m.Partition || rec.Fingerprint != d.feat.Fingerprint() {
			t.Fatalf("record on partition %d names partition %d, fingerprint %s", m.Partition, rec.Partition, rec.Fingerprint)
		}
		d.feat.BothViewsTo(want, views, xs[rec.ID], []string{rec.ID})
		for i := range want {
			if math.Float64bits(rec.Features[i]) != math.Float64bits(want[i]) {
				t.Fatalf("id %s feature %d: got %v, want %v", rec.ID, i, rec.Features[i], want[i])
			}
		}
	}
}
