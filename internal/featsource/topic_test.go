package featsource

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/stream"
)

// TestFeaturesTopicRetention: a Source that finds no features topic creates it with
// featrec's retention and segment time (an hour each), so that the records, data
// derived from training inputs, do not outlive the points they describe by long.
func TestFeaturesTopicRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc := runSource(ctx, t, 2, func(kc stream.Config) Config {
		return Config{Train: "t.train", Topic: featrec.Topic, Kafka: kc,
			Applied: func(string, int) (int64, bool, error) { return 0, false, nil }, Faults: fault.NewTracker(zerolog.Nop(), nil)}
	})
	cl := &kafka.Client{Addr: kafka.TCP(kc.Brokers...)}
	for {
		resp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: featrec.Topic, ConfigNames: []string{"retention.ms", "segment.ms"}}}})
		if err == nil && len(resp.Resources) == 1 && resp.Resources[0].Error == nil {
			got := map[string]string{}
			for _, e := range resp.Resources[0].ConfigEntries {
				got[e.ConfigName] = e.ConfigValue
			}
			if got["retention.ms"] != featrec.Retention || got["segment.ms"] != featrec.Segment {
				t.Fatalf("%s: retention.ms %q, segment.ms %q; want %s and %s", featrec.Topic,
					got["retention.ms"], got["segment.ms"], featrec.Retention, featrec.Segment)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the features topic was not created: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPublishApplied: while Config.Publish says the daemon leads, a running Source
// publishes, as featrec.AppliedGroup's offsets, the offset after each training
// partition's applied one (partitions with none are left out); while it does not lead,
// nothing is published.
func TestPublishApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var leads atomic.Bool
	applied := func(_ string, p int) (int64, bool, error) { return int64(10 * p), p != 2, nil }
	kc := runSource(ctx, t, 3, func(kc stream.Config) Config {
		return Config{Train: "t.train", Topic: featrec.Topic, Kafka: kc, Applied: applied,
			Faults: fault.NewTracker(zerolog.Nop(), nil), Publish: leads.Load}
	})
	pr, err := stream.NewProgress(kc, featrec.AppliedGroup, "t.train")
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	time.Sleep(3 * publishEvery)
	if got, err := pr.Read(ctx, []int{0, 1, 2}); err != nil || len(got) != 0 {
		t.Fatalf("not leading: published %v (err %v), want nothing", got, err)
	}
	leads.Store(true)
	want := map[int]int64{0: 1, 1: 11}
	for {
		got, err := pr.Read(ctx, []int{0, 1, 2})
		if err == nil && maps.Equal(got, want) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("leading: published %v (err %v), want %v", got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runSource starts a broker with the training topic t.train of parts partitions and
// runs a Source of the Config that cfg makes for it until the test ends.
func runSource(ctx context.Context, t *testing.T, parts int, cfg func(stream.Config) Config) stream.Config {
	t.Helper()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: parts, Topics: []string{"t.train"}})
	if err != nil {
		t.Fatal(err)
	}
	kc := stream.Config{Brokers: []string{b.Addr()}}
	s, err := New(cfg(kc))
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done; b.Close() })
	return kc
}
