package daemon

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
)

// testConfig is a small daemon: mlp:6-8-4 (P = 92, padded 128), h = 2 heads, s = 16,
// so q = 32 features per view, m = 8 landmarks per view.
func testConfig() config.Config {
	c := config.Default()
	c.Model = config.Backbone{Arch: "mlp:6-8-4", Seed: 7, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 16}
	c.Pool.M = 8
	c.Kafka.Topics.Train = "t.train"
	c.Kafka.Topics.DLQ = "t.dlq"
	c.Kafka.Partitions = 3
	c.Limits.MaxMessageBytes = 2048
	c.Limits.MaxIDBytes = 32
	return c
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
}

func openStore(t testing.TB, path string) *storage.Store {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
