package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/demo"
)

// demoCmd is `cairnctl demo [--n 2000] [--data mnist] [--data-dir DIR]
// [--embedded-broker ADDR] [--http ADDR] [--queries 3]`, the README's first command
// (demo.Run): it runs the daemon in process on its embedded default, feeds it --n rows
// through Kafka, waits for the model fitted on them, asks --queries queries through
// Kafka (the first by stored id, the others by test-split vectors), deletes the top-1
// point of the first answer, asks the first query again to show that the deleted
// id is gone, and shuts the daemon down.
//
// demo is the one cairnctl command that prints a stream: one JSON object per line
// (NDJSON), {"event":"status"|"attribution"|"audit"|"summary", …} (demo.Line), each
// printed as it happens. It fails if any step fails or if the deleted id is named again.
func demoCmd(fs *flag.FlagSet) cli.Func {
	d := config.Default()
	n := fs.Int("n", 2000, "training rows to stream in")
	data := fs.String("data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE (the model must match its width)")
	dataDir := fs.String("data-dir", "", "daemon state directory, kept afterwards (default: a fresh temporary directory, removed at the end)")
	broker := fs.String("embedded-broker", d.Kafka.EmbeddedBroker, "listen address of the embedded Kafka broker")
	httpAddr := fs.String("http", d.HTTP, "listen address of the daemon's HTTP endpoints (cairnctl status works meanwhile)")
	queries := fs.Int("queries", 3, "queries to ask (the first by stored id, the others by test-split vectors)")
	cfgFile := fs.String("config", "", "cairnd YAML configuration (optional; the flags above override it)")
	timeout := fs.Duration("timeout", time.Hour, "bound on the whole demo")
	logLevel := fs.String("log-level", "warn", "daemon log level on stderr: debug, info, warn, error")
	untrained := fs.Bool("untrained", false, "the seeded untrained network (model.untrained) instead of the trained weights shipped for --data")
	var of onnxFlags
	of.register(fs)
	hold := fs.Duration("hold", 0, "after the deletion, keep the daemon serving this long (or until interrupted) so its UI (/ui on --http) can be browsed")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *n < 1 || *queries < 1 || *hold < 0 {
			return fmt.Errorf("--n %d, --queries %d, --hold %v: n and queries must be at least 1, hold not negative", *n, *queries, *hold)
		}
		cfg, err := config.Load(*cfgFile, os.Environ())
		if err != nil {
			return err
		}
		cfg.Kafka.EmbeddedBroker, cfg.HTTP = *broker, *httpAddr
		if *untrained {
			cfg.Model.Untrained = true
		}
		if err := of.apply(&cfg.Model); err != nil {
			return err
		}
		cfg.Kafka.Brokers = nil // the demo's daemon runs its own broker
		log, err := daemonLogger(stdio.Err, *logLevel)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return demo.Run(ctx, demo.Options{Config: cfg, DataDir: *dataDir, Data: *data, N: *n, Queries: *queries, Hold: *hold,
			Log: log, Stderr: stdio.Err}, stdio.Out)
	}
}

// daemonLogger is the zerolog logger of an in-process daemon, writing to w.
func daemonLogger(w io.Writer, level string) (zerolog.Logger, error) {
	l, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return zerolog.New(w).Level(l).With().Timestamp().Str("service", "cairnd").Logger(), nil
}
