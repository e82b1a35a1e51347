package ingest_test

import (
	"context"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Example wires the ingest path: the store is the source of truth, the ingest State restores
// the pool from it, and the reader resumes from the stored offsets and hands every
// batch to the State. Run returns when ctx ends; every goroutine has exited by then.
func Example() {
	cfg := config.Default()
	log := zerolog.New(os.Stderr)
	run := func(ctx context.Context) error {
		st, err := storage.Open(filepath.Join(cfg.DataDir, "cairn.db"), storage.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		in, err := ingest.New(cfg, st, log)
		if err != nil {
			return err
		}
		r, err := stream.NewReader(stream.ReaderConfig{
			Kafka:    stream.Config{Brokers: []string{cfg.Kafka.EmbeddedBroker}},
			Topics:   []string{cfg.Kafka.Topics.Train},
			Start:    in.Start,
			MaxBatch: cfg.Limits.BatchEvents,
		})
		if err != nil {
			return err
		}
		return r.Run(ctx, in.Handle)
	}
	_ = run // needs a broker; see TestIngestBrokerRestart for a running version
}
