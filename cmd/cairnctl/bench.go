package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/bench"
)

// benchCmd is `cairnctl bench [--n 5000] [--queries 200] [--data mnist] [--m 256]`: it
// runs the daemon in process on a temporary directory with m landmarks per view and
// measures ingest, query latency (in process and through Kafka), refit and
// deletion-to-audit times (bench.Run; its report is bench.Report).
func benchCmd(fs *flag.FlagSet) cli.Func {
	n := fs.Int("n", 5000, "training rows to ingest")
	queries := fs.Int("queries", 200, "queries per latency measurement (test-split rows)")
	data := fs.String("data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE (with {split})")
	m := fs.Int("m", 256, "landmarks per view (pool.m)")
	reference := fs.Int("reference", 200, "points in the direct feature-rate reference")
	broker := fs.String("embedded-broker", "127.0.0.1:0", "embedded broker address (port 0: a free port)")
	httpAddr := fs.String("http", "127.0.0.1:0", "daemon HTTP address (port 0: a free port)")
	cfgFile := fs.String("config", "", "cairnd YAML configuration (optional; the flags above override it)")
	timeout := fs.Duration("timeout", 2*time.Hour, "bound on the whole run")
	logLevel := fs.String("log-level", "warn", "daemon log level on stderr")
	untrained := fs.Bool("untrained", false, "the seeded untrained network (model.untrained) instead of the trained weights shipped for --data")
	var of onnxFlags
	of.register(fs)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	memProfile := fs.String("memprofile", "", "write the run's allocations (go tool pprof -sample_index=alloc_space) to this file at the end")
	rate := fs.Float64("rate", 30, "open-loop query load: queries per second (0: no load phase)")
	loadDur := fs.Duration("load-duration", 20*time.Second, "open-loop query load: how long")
	by := fs.String("by", "both", "open-loop query load: queries by input (x), by stored id (id), or both, one load after the other")
	backlog := fs.Bool("backlog", false, "write the training rows before the daemon starts and time it consuming them, so that the producer does not share its cores")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *rate < 0 || *loadDur <= 0 {
			return fmt.Errorf("--rate %v, --load-duration %v: the rate must be ≥ 0 and the duration positive", *rate, *loadDur)
		}
		if *by != "x" && *by != "id" && *by != "both" {
			return fmt.Errorf("--by %q: want x, id or both", *by)
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		if *memProfile != "" {
			defer writeAllocs(*memProfile, stdio)
		}
		if *n < 1 || *queries < 1 || *m < 1 || *reference < 1 {
			return fmt.Errorf("--n %d, --queries %d, --m %d, --reference %d: each must be at least 1", *n, *queries, *m, *reference)
		}
		cfg, err := config.Load(*cfgFile, os.Environ())
		if err != nil {
			return err
		}
		cfg.Pool.M, cfg.Pool.Budget = *m, ""
		cfg.Kafka.Brokers = nil
		cfg.Kafka.EmbeddedBroker, cfg.HTTP = *broker, *httpAddr
		if *untrained {
			cfg.Model.Untrained = true
		}
		if err := of.apply(&cfg.Model); err != nil {
			return err
		}
		log, err := daemonLogger(stdio.Err, *logLevel)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return jsonOut(stdio)(bench.Run(ctx, bench.Options{Config: cfg, Data: *data, N: *n, Queries: *queries, Reference: *reference,
			Log: log, Stderr: stdio.Err, Rate: *rate, LoadDuration: *loadDur, By: *by, Backlog: *backlog}))
	}
}

// writeAllocs writes the allocation profile of the run so far to path, reporting a
// failure on stderr (the run's own result stands).
func writeAllocs(path string, stdio cli.Stdio) {
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(stdio.Err, "cairnctl bench: --memprofile: %v\n", err)
	}
}
