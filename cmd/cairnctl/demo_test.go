package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/lab/demo"
)

// smallConfig is a daemon small enough for a test under -race (the daemon package's
// e2e configuration): mlp:784-32-10, h = 2, s = 128, m = 16 per view, short fits, quick
// idle refits; broker and HTTP on free ports.
func smallConfig() config.Config {
	c := config.Default()
	c.HTTP = "127.0.0.1:0"
	c.Kafka.EmbeddedBroker = "127.0.0.1:0"
	c.Kafka.Partitions = 2
	c.Model = config.Backbone{Arch: "mlp:784-32-10", Seed: 3, ViewSeed: 3, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 128}
	c.Pool.M = 16
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 16, 3, 64, 2
	c.Refit.Idle = 300 * time.Millisecond
	c.Refit.DeleteDebounce = 100 * time.Millisecond
	c.Refit.MinPoints = 32
	c.Audit = config.Audit{Random: 10, Reference: 100, Test: 30}
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// TestDemoFlags: demo refuses bad flags before it starts anything, naming the flag
// and its value (the run itself is tested in internal/lab/demo).
func TestDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--n", "0"}, "--n 0"},
		{[]string{"--queries", "0"}, "--queries 0"},
		{[]string{"--hold", "-1s"}, "--hold -1s"},
		{[]string{"--log-level", "loud"}, `--log-level "loud"`},
	} {
		code, _, errs := runCmd(append([]string{"demo", "--http", "127.0.0.1:0", "--embedded-broker", "127.0.0.1:0"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("demo %v: exit %d, stderr %q; want a failure naming %s", tc.args, code, errs, tc.want)
		}
	}
}

// demoLineIn is demo.Line as a reader of the output decodes it.
type demoLineIn struct {
	Event         string          `json:"event"`
	Query         *demo.Query     `json:"query"`
	RepeatOf      int             `json:"repeat_of"`
	Deleted       string          `json:"deleted"`
	DeletedAbsent *bool           `json:"deleted_absent"`
	Data          json.RawMessage `json:"data"`
}
