package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkAsk measures Ask's round trip against the in-process example daemon through
// its embedded broker (watch, write, the daemon's answer, await), and reports it against
// one acknowledged write of a message of the same size measured in the same run
// (roundtrip/write): the share of an answer's latency that the Kafka path adds.
func BenchmarkAsk(b *testing.B) {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	x := []float64{0.1, 0.2, 0.3, 1}
	const writes = 50
	t0 := time.Now()
	for i := range writes {
		v := fmt.Appendf(nil, `{"v":1,"request":"w%d","x":[0.1,0.2,0.3,1]}`, i)
		if err := w.Write(ctx, stream.Message{Topic: c.Topics().Status, Key: []byte("k"), Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	write := time.Since(t0).Seconds() / writes
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Ask(ctx, stream.QueryEvent{Request: fmt.Sprintf("rt-%d", i), X: x}); err != nil {
			b.Fatal(err)
		}
	}
	rt := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(rt*1e3, "ms/roundtrip")
	b.ReportMetric(write*1e3, "ms/write")
	b.ReportMetric(rt/write, "roundtrip/write")
}
