package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkKafkaRoundTrip measures the client side of `cairnctl bench`'s Kafka query
// latency: write a query, wait for its attribution, against the fake daemon (which
// answers at once), through the embedded broker. It reports the round trip against a
// single acknowledged write measured in the same run (round_trip/write), the floor
// that the Kafka path adds to a daemon's answer time.
func BenchmarkKafkaRoundTrip(b *testing.B) {
	br := startTestBroker(b)
	startFakeDaemon(b, br.Addr(), 4)
	kc := stream.Config{Brokers: []string{br.Addr()}}
	c := client{kc: kc, topics: config.Default().Kafka.Topics, stderr: io.Discard}
	ctx := context.Background()
	w, err := openWriter(kc)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	tl, err := newTail(ctx, kc, io.Discard, c.topics.Attributions, c.topics.DLQ)
	if err != nil {
		b.Fatal(err)
	}
	defer tl.Close()
	lim := stream.Limits{InputDim: 4}
	x := []float64{1, 2, 3, 4}
	// Reference: one acknowledged write of a message of the same size.
	const writes = 50
	t0 := time.Now()
	for i := range writes {
		if err := w.Write(ctx, stream.Message{Topic: "cairn.status", Key: []byte("k"), Value: fmt.Appendf(nil, `{"v":1,"request":"w%d","x":[1,2,3,4]}`, i)}); err != nil {
			b.Fatal(err)
		}
	}
	write := time.Since(t0).Seconds() / writes
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := stream.QueryEvent{Request: fmt.Sprintf("rt-%d", i), X: x}
		sent, err := c.sendQuery(ctx, w, q, lim)
		if err != nil {
			b.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = c.await(actx, tl, answer{topic: c.topics.Attributions, request: q.Request, src: c.topics.Queries, key: []byte(q.Request), sent: sent})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	rt := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(rt*1e3, "ms/roundtrip")
	b.ReportMetric(write*1e3, "ms/write")
	b.ReportMetric(rt/write, "roundtrip/write")
}
