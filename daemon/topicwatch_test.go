package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// TestTopicWatchPartitions: partitions added to the training topic of a running daemon
// (here on its embedded broker, through the Kafka protocol) make /readyz answer 503
// naming the change and log it as an error, within a few watch intervals; before the
// change the topics' part of readiness is clean.
func TestTopicWatchPartitions(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	cfg.Kafka.TopicCheckInterval = 100 * time.Millisecond
	logs := &syncBuffer{}
	d, err := New(cfg, zerolog.New(logs).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := runUntil(t, d)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(300 * time.Millisecond)
	if _, body := getAuth(t, d.HTTPAddr(), "/readyz", ""); strings.Contains(body, "topics") {
		t.Fatalf("/readyz before the change names the topics: %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(d.kafka.Brokers...)}
	resp, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: cfg.Kafka.Topics.Train, Count: int32(cfg.Kafka.Partitions + 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Errors[cfg.Kafka.Topics.Train]; err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	want := `"cairn.train": partitions=4 (was 2)`
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := getAuth(t, d.HTTPAddr(), "/readyz", "")
		if code == http.StatusServiceUnavailable && strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q after adding partitions, want 503 naming %s", code, body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, `"level":"error"`) || !strings.Contains(l, `"setting":"partitions"`) {
		t.Errorf("log lacks the partition change as an error:\n%s", l)
	}
}
