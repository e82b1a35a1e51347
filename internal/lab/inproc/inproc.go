package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/stream"
)

// Daemon is a cairn daemon running in this process: daemon.Run on a goroutine that
// Close joins.
type Daemon struct {
	// D is the daemon, for in-process calls (Answer, Status).
	D *daemon.Daemon
	// Config is the daemon's configuration with the addresses it bound (a port 0
	// becomes the chosen port) and its data directory.
	Config config.Config
	// Kafka reaches the daemon's brokers.
	Kafka stream.Config

	temp   bool // Config.DataDir is a temporary directory, removed by Close
	cancel context.CancelFunc
	runErr chan error
	closed bool
	err    error
}

// Start starts the daemon on cfg with its state in dataDir (a fresh temporary
// directory when empty) and returns once it is ready, or with Run's error if it stops
// before, or ctx's when ctx ends first. On error nothing is left running.
func Start(ctx context.Context, cfg config.Config, dataDir string, log zerolog.Logger) (_ *Daemon, err error) {
	h := &Daemon{Config: cfg, runErr: make(chan error, 1)}
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "cairn-inproc-"); err != nil {
			return nil, err
		}
		h.temp = true
	}
	h.Config.DataDir = dataDir
	defer func() {
		if err != nil {
			err = errors.Join(err, h.Close())
		}
	}()
	if h.D, err = daemon.New(h.Config, log); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- h.D.Run(rctx) }()
	select {
	case <-h.D.Ready():
		h.Kafka = daemon.KafkaConfig(h.Config)
		h.Kafka.Brokers, h.Kafka.ClientID = h.D.Brokers(), "cairnctl"
		h.Config.HTTP = h.D.HTTPAddr()
		if len(h.Config.Kafka.Brokers) == 0 {
			h.Config.Kafka.EmbeddedBroker = h.D.Brokers()[0]
		}
		return h, nil
	case err := <-h.runErr:
		h.runErr <- err // Close joins it again
		return nil, fmt.Errorf("daemon stopped before it was ready: %w", err)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the daemon to be ready: %w", ctx.Err())
	}
}

// Client returns a client of the daemon (client.FromDaemon) that waits answerTimeout
// for each answer and reports read errors on stderr. The caller closes it.
func (h *Daemon) Client(answerTimeout time.Duration, stderr io.Writer) (*client.Client, error) {
	cc, err := client.FromDaemon(h.Config, h.Kafka.Brokers)
	if err != nil {
		return nil, err
	}
	cc.Kafka = h.Kafka
	cc.AnswerTimeout = answerTimeout
	cc.OnReadError = func(topic string, partition int, err error) {
		fmt.Fprintf(stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
	}
	return client.New(cc)
}

// Close stops the daemon, waits for Run to return and removes a temporary data
// directory. It is idempotent and returns Run's error.
func (h *Daemon) Close() error {
	if h.closed {
		return h.err
	}
	h.closed = true
	if h.cancel != nil {
		h.cancel()
		if err := <-h.runErr; err != nil && !errors.Is(err, context.Canceled) {
			h.err = fmt.Errorf("daemon: %w", err)
		}
	}
	if h.temp {
		h.err = errors.Join(h.err, os.RemoveAll(h.Config.DataDir))
	}
	return h.err
}

// ModelReady reports whether st serves a model fitted on every stored point, with at
// least n points stored and nothing left to consume.
func ModelReady(st daemon.StatusReport, n int) bool {
	if st.Model == 0 || st.Points < n || st.ModelPoints != st.Points || st.RefitRunning {
		return false
	}
	for _, lag := range st.Lag {
		if lag != 0 {
			return false
		}
	}
	return true
}

// WaitModel polls the daemon's status until ModelReady, printing where it stands on
// stderr every 5 s.
func (h *Daemon) WaitModel(ctx context.Context, n int, stderr io.Writer) (daemon.StatusReport, error) {
	last := time.Now()
	var st daemon.StatusReport
	err := h.Poll(ctx, 50*time.Millisecond, func(s daemon.StatusReport) bool {
		st = s
		if ModelReady(s, n) {
			return true
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "cairnctl: waiting for the model: %d/%d points stored, model %d on %d points, refit running %v, lag %v\n",
				s.Points, n, s.Model, s.ModelPoints, s.RefitRunning, s.Lag)
		}
		return false
	})
	if err != nil {
		return st, fmt.Errorf("waiting for a model on %d points (last status: %d points, model %d on %d points): %w", n, st.Points, st.Model, st.ModelPoints, err)
	}
	return st, nil
}

// Poll checks cond on the daemon's status every period until it holds; it fails when
// ctx ends or the daemon stops.
func (h *Daemon) Poll(ctx context.Context, period time.Duration, cond func(daemon.StatusReport) bool) error {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond(h.D.Status()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-h.runErr:
			h.runErr <- err
			return fmt.Errorf("daemon stopped: %v", err)
		case <-tick.C:
		}
	}
	return nil
}
