package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkIngestAhead measures ingest of the first 2,048 MNIST training rows (the
// daemon's default model with its shipped weights, batches of limits.batch_events,
// fsync on) against the bare two-view feature rate of the same rows (Features.
// BothViewsTo on all of them at once). Each iteration runs, back to back so that they
// see the same machine load: the features alone; serial, each batch applied by Apply
// alone; ahead, batch k+1 prepared by Ahead on a second goroutine while batch k is
// applied, as the training reader does; each on a fresh store. The machine is shared,
// so each takes its fastest iteration, the least disturbed. Reported: events/s of both,
// x_features (each ingest rate over the feature rate: the operator contract asks ahead
// for at least 0.9) and the share of the ahead ingest's wall time in each phase
// (Phases).
func BenchmarkIngestAhead(b *testing.B) {
	const n = 2048
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		b.Skip(err)
	}
	cfg := config.Default()
	cfg.Model = offline.WeightsForData(cfg.Model, set.Name)
	cfg.Kafka.Topics.Train = "t.train"
	lim := stream.Limits{InputDim: set.D, MaxBytes: cfg.Limits.MaxMessageBytes, MaxIDBytes: cfg.Limits.MaxIDBytes}
	batches := mnistBatches(b, set, cfg.Kafka.Topics.Train, cfg.Limits.BatchEvents, lim)
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		b.Fatal(err)
	}
	best := [3]time.Duration{1 << 62, 1 << 62, 1 << 62} // features, serial, ahead
	var ph Phases
	for b.Loop() {
		best[0] = min(best[0], featureTime(feat, set))
		for k, ahead := range []bool{false, true} {
			in, err := New(cfg, benchStore(b, true), zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			applyAll(b, in, batches, ahead)
			if d := time.Since(t0); d < best[1+k] {
				best[1+k] = d
				if ahead {
					ph = in.Stats().Phases
				}
			}
		}
	}
	b.ReportMetric(n/best[1].Seconds(), "serial_events/s")
	b.ReportMetric(n/best[2].Seconds(), "ahead_events/s")
	b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "serial_x_features")
	b.ReportMetric(best[0].Seconds()/best[2].Seconds(), "ahead_x_features")
	w := best[2].Seconds()
	for name, s := range map[string]float64{"decode": ph.Decode, "features": ph.Features, "pools": ph.Pools,
		"commit": ph.Commit, "between": ph.Between, "ahead": ph.Ahead} {
		b.ReportMetric(s/w, "ahead_share_"+name)
	}
}

// applyAll applies the batches in order, with Ahead preparing the next one on a second
// goroutine (joined before it returns) while the current one is applied, when ahead.
func applyAll(b *testing.B, in *State, batches [][]stream.Message, ahead bool) {
	ctx := context.Background()
	if !ahead {
		for _, ms := range batches {
			if _, err := in.Apply(ctx, ms); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	next := make(chan []stream.Message)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(next)
		for _, ms := range batches {
			in.Ahead(ctx, ms)
			next <- ms
		}
	})
	defer wg.Wait()
	for ms := range next {
		if _, err := in.Apply(ctx, ms); err != nil {
			b.Fatal(err)
		}
	}
}

// featureTime is the wall time of Features.BothViewsTo on every row of set at once.
func featureTime(f *pipeline.Features, set *dataset.Set) time.Duration {
	q, d := f.Dim(), f.InputDim()
	dst, views := make([]float64, 2*set.N*q), make([]float64, 2*set.N*d)
	t0 := time.Now()
	f.BothViewsTo(dst, views, set.X[:set.N*d], set.IDs[:set.N])
	return time.Since(t0)
}

// mnistBatches encodes set's rows as upserts (with their labels) on one partition of
// topic, cut into batches of size.
func mnistBatches(b *testing.B, set *dataset.Set, topic string, size int, lim stream.Limits) [][]stream.Message {
	var out [][]stream.Message
	for lo := 0; lo < set.N; lo += size {
		var ms []stream.Message
		for i := lo; i < min(lo+size, set.N); i++ {
			l := int64(set.Labels[i])
			v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &l}, lim)
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, stream.Message{Topic: topic, Offset: int64(i), Key: []byte(set.IDs[i]), Value: v})
		}
		out = append(out, ms)
	}
	return out
}
