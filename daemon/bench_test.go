package daemon

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkIngest measures Ingest.Apply on batches of limits.batch_events fresh upserts
// into a store already holding n0 points, against the storage-only apply of the same
// messages in the same run (decode, PutPoint, SetOffset in one transaction, no features,
// no pool). Reported: events/s of the ingest and x_storage, the ingest's time per event
// over the storage-only time. With fsync=false both stores skip fsync, so the ratio
// compares CPU work; with fsync=true every commit is durable, as in production, and
// both pay one fsync per batch. The machine is shared, so the ratio is the number to
// read, not the absolute rate.
func BenchmarkIngest(b *testing.B) {
	for _, bc := range []struct {
		arch   string
		h, s   int
		m, n0  int
		dim    int
		labels string
		fsync  bool
	}{
		{"mlp:6-8-4", 2, 16, 8, 1000, 6, "tiny", false},
		{"mlp:6-8-4", 2, 16, 8, 1000, 6, "tiny", true},
		{"mlp:6-8-4", 2, 16, 8, 8000, 6, "tiny", false},
		{"mlp:64-128-10", 4, 512, 64, 1000, 64, "mlp64", false},
	} {
		b.Run(fmt.Sprintf("%s/n0=%d/fsync=%v", bc.labels, bc.n0, bc.fsync), func(b *testing.B) {
			cfg := testConfig()
			cfg.Model.Arch = bc.arch
			cfg.Sketch = config.Sketch{H: bc.h, S: bc.s}
			cfg.Pool.M = bc.m
			cfg.Limits.MaxMessageBytes = 1 << 20
			batch := cfg.Limits.BatchEvents
			lim := stream.Limits{InputDim: bc.dim, MaxBytes: 1 << 20, MaxIDBytes: 32}
			r := rand.New(rand.NewPCG(1, 1))
			next := 0
			mkBatch := func(off int64) []stream.Message {
				ms := make([]stream.Message, batch)
				for i := range ms {
					x := make([]float64, bc.dim)
					for j := range x {
						x[j] = r.NormFloat64()
					}
					id := fmt.Sprintf("b%07d", next)
					next++
					v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
					if err != nil {
						b.Fatal(err)
					}
					ms[i] = stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: off + int64(i), Key: []byte(id), Value: v}
				}
				return ms
			}
			st := benchStore(b, bc.fsync)
			in, err := NewIngest(cfg, st, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			var off int64
			for off < int64(bc.n0) {
				if _, err := in.Apply(b.Context(), mkBatch(off)); err != nil {
					b.Fatal(err)
				}
				off += int64(batch)
			}
			if err := in.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
			batches := make([][]stream.Message, b.N)
			for i := range batches {
				batches[i] = mkBatch(off)
				off += int64(batch)
			}
			base := benchStore(b, bc.fsync)
			b.ResetTimer()
			t0 := time.Now()
			for _, ms := range batches {
				if _, err := in.Apply(b.Context(), ms); err != nil {
					b.Fatal(err)
				}
			}
			ingest := time.Since(t0)
			b.StopTimer()
			t0 = time.Now()
			for _, ms := range batches {
				if err := storageOnly(base, ms, lim); err != nil {
					b.Fatal(err)
				}
			}
			storage := time.Since(t0)
			events := float64(b.N * batch)
			b.ReportMetric(events/ingest.Seconds(), "events/s")
			b.ReportMetric(ingest.Seconds()/storage.Seconds(), "x_storage")
		})
	}
}

// storageOnly is the baseline: what applying the batch costs without features or pool.
func storageOnly(st *storage.Store, ms []stream.Message, lim stream.Limits) error {
	return st.Apply(func(tx *storage.Tx) error {
		for _, m := range ms {
			ev, err := stream.DecodeTrain(m.Value, lim)
			if err != nil {
				return err
			}
			if err := tx.PutPoint(storage.Point{ID: ev.ID, X: ev.X}); err != nil {
				return err
			}
			if err := tx.SetOffset(m.Topic, int32(m.Partition), m.Offset); err != nil {
				return err
			}
		}
		return nil
	})
}

func benchStore(b *testing.B, fsync bool) *storage.Store {
	st, err := storage.Open(filepath.Join(b.TempDir(), "cairn.db"), storage.Options{NoSync: !fsync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
