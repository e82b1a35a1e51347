package inproc

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
)

// TestStartClose starts a small daemon on free ports and a temporary directory: it is
// ready with the addresses it bound, Poll sees its status, a client of it can be made,
// Close removes the directory and is idempotent, and Poll then fails rather than hang.
func TestStartClose(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP, cfg.Kafka.EmbeddedBroker = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Model = config.Backbone{Arch: "mlp:784-32-10", Seed: 3, Untrained: true}
	cfg.Sketch, cfg.Pool.M = config.Sketch{H: 2, S: 128}, 16
	cfg.ShutdownTimeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := Start(ctx, cfg, "", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if h.Config.HTTP == "127.0.0.1:0" || len(h.Kafka.Brokers) != 1 || h.Config.Kafka.EmbeddedBroker != h.Kafka.Brokers[0] {
		t.Errorf("bound addresses: http %q, brokers %v, embedded %q", h.Config.HTTP, h.Kafka.Brokers, h.Config.Kafka.EmbeddedBroker)
	}
	if err := h.Poll(ctx, time.Millisecond, func(st daemon.StatusReport) bool { return st.Points == 0 }); err != nil {
		t.Errorf("Poll on an empty daemon: %v", err)
	}
	c, err := h.Client(time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	dir := h.Config.DataDir
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s after Close: %v, want it removed", dir, err)
	}
	short, scancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer scancel()
	if err := h.Poll(short, time.Millisecond, func(daemon.StatusReport) bool { return false }); err == nil {
		t.Error("Poll after Close returned nil")
	}
}
