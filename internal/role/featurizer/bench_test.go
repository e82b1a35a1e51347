package featurizer

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkRecords measures a featurizer's work per batch of 64 training upserts
// (decode, both views' features, encoding), without Kafka, under the default model and
// sketch (the shipped MNIST convnet, h = 4, s = 1024) and the small test deployment;
// it reports events/s.
func BenchmarkRecords(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  config.Config
	}{{"default", config.Default()}, {"mlp-6-8-4", testConfig()}} {
		b.Run(bc.name, func(b *testing.B) {
			feat, err := pipeline.NewFeatures(bc.cfg.Model, bc.cfg.Sketch, "")
			if err != nil {
				b.Skipf("pipeline: %v", err)
			}
			lim, err := ingest.TrainLimits(bc.cfg, feat.InputDim())
			if err != nil {
				b.Fatal(err)
			}
			msgs, _ := trainEvents(b, lim, bc.cfg.Kafka.Topics.Train, 64)
			msgs = msgs[:64]
			for i := range msgs {
				msgs[i].Offset = int64(i)
			}
			f := &Featurizer{cfg: Config{Out: "out", Features: feat, Limits: lim, Faults: fault.NewTracker(zerolog.Nop(), nil)}}
			var sink []stream.Message
			b.ResetTimer()
			for b.Loop() {
				if sink, err = f.Records(msgs); err != nil || len(sink) != 64 {
					b.Fatalf("%d records: %v", len(sink), err)
				}
			}
			b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
