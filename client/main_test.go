package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/stream"
)

// The examples talk to a real cairnd run in process, as `cairnctl demo` runs it: the
// daemon with its embedded broker (kfake) on free ports, a tiny untrained network
// (mlp:4-16-4) and small sketch, pool and fits so that a model is served within about a
// second, started on first use and stopped by TestMain.

// examplePoints is the number of points the example daemon serves a model on: p0 … p39.
const examplePoints = 40

// tinyConfig is a daemon small enough for examples under -race: brokers and HTTP on
// free ports, in dataDir.
func tinyConfig(dataDir string) config.Config {
	c := config.Default()
	c.DataDir = dataDir
	c.HTTP = "127.0.0.1:0"
	c.Kafka.EmbeddedBroker = "127.0.0.1:0"
	c.Kafka.Partitions = 2
	c.Model = config.Backbone{Arch: "mlp:4-16-4", Seed: 3, ViewSeed: 3, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 32}
	c.Pool.M = 8
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 8, 3, 32, 2
	c.Refit.Idle = 200 * time.Millisecond
	c.Refit.DeleteDebounce = 50 * time.Millisecond
	c.Refit.MinPoints = 16
	c.Audit = config.Audit{Random: 10, Reference: 20, Test: 10}
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// examplePoint is point i of the example data: four features, label i mod 3.
func examplePoint(i int) client.Point {
	l := int64(i % 3)
	f := float64(i)
	return client.Point{ID: fmt.Sprintf("p%d", i), X: []float64{math.Sin(f), math.Cos(f), f / examplePoints, float64(l)}, Label: &l}
}

// runningDaemon is a daemon run in process until stop.
type runningDaemon struct {
	d      *daemon.Daemon
	cfg    config.Config
	cancel context.CancelFunc
	done   chan error
}

// startDaemon runs a tiny daemon in dataDir, streams examplePoints points into it and
// returns once it serves a model fitted on all of them.
func startDaemon(dataDir string) (_ *runningDaemon, err error) {
	cfg := tinyConfig(dataDir)
	d, err := daemon.New(cfg, zerolog.New(io.Discard))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningDaemon{d: d, cfg: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	defer func() {
		if err != nil {
			err = errors.Join(err, r.stop())
		}
	}()
	select {
	case <-d.Ready():
	case err := <-r.done:
		r.done <- err
		return r, fmt.Errorf("daemon stopped before it was ready: %w", err)
	case <-time.After(time.Minute):
		return r, errors.New("daemon not ready within a minute")
	}
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: d.Brokers()}})
	if err != nil {
		return r, err
	}
	defer c.Close()
	pts := make([]client.Point, examplePoints)
	for i := range pts {
		pts[i] = examplePoint(i)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := c.Upsert(wctx, pts...); err != nil {
		return r, err
	}
	return r, r.waitModel(wctx, examplePoints)
}

// waitModel waits until the daemon serves a model fitted on every stored point, with
// at least n stored and nothing left to consume.
func (r *runningDaemon) waitModel(ctx context.Context, n int) error {
	for {
		st := r.d.Status()
		lag := int64(0)
		for _, l := range st.Lag {
			lag += l
		}
		if st.Model > 0 && st.Points >= n && st.ModelPoints == st.Points && !st.RefitRunning && lag == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a model on %d points (status %+v): %w", n, st, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the daemon and waits for Run to return.
func (r *runningDaemon) stop() error {
	r.cancel()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

var (
	live struct {
		once sync.Once
		d    *runningDaemon
		err  error
	}
	stopped struct {
		once sync.Once
		dir  string
		err  error
	}
	tempDirs []string
)

// mustLive returns the running example daemon, started on first use.
func mustLive() *runningDaemon {
	live.once.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-client-example-")
		if err != nil {
			live.err = err
			return
		}
		tempDirs = append(tempDirs, dir)
		live.d, live.err = startDaemon(dir)
	})
	if live.err != nil {
		panic(fmt.Sprintf("example daemon: %v", live.err))
	}
	return live.d
}

// brokers is the example daemon's Kafka bootstrap address (its embedded broker).
func brokers() []string { return mustLive().d.Brokers() }

// httpAddr is the example daemon's HTTP address.
func httpAddr() string { return mustLive().d.HTTPAddr() }

// stoppedDataDir is the data directory of a daemon that served a model on the example
// points, deleted p1 and was stopped.
func stoppedDataDir() string {
	stopped.once.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-client-stopped-")
		if err != nil {
			stopped.err = err
			return
		}
		tempDirs = append(tempDirs, dir)
		stopped.dir = dir
		r, err := startDaemon(dir)
		if err != nil {
			stopped.err = err
			return
		}
		stopped.err = errors.Join(deleteOne(r, "p1"), r.stop())
	})
	if stopped.err != nil {
		panic(fmt.Sprintf("stopped example daemon: %v", stopped.err))
	}
	return stopped.dir
}

// deleteOne deletes id on r and waits for its audit.
func deleteOne(r *runningDaemon, id string) error {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: r.d.Brokers()}})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.DeleteAndWait(ctx, id, "")
	return err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if live.d != nil {
		if err := live.d.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "example daemon:", err)
			code = 1
		}
	}
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// stoppedConfig is the configuration the daemon of stoppedDataDir ran with.
func stoppedConfig() config.Config { return tinyConfig(stoppedDataDir()) }
