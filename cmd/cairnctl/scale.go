package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/bench"
)

// benchScaleCmd is `cairnctl bench-scale`: a deployment of cairnd processes
// (bench.Scale; its report is bench.ScaleReport).
func benchScaleCmd(fs *flag.FlagSet) cli.Func {
	var o bench.ScaleOptions
	fs.IntVar(&o.N, "n", 2000, "training rows the primary ingests")
	fs.IntVar(&o.Queries, "queries", 3000, "queries per throughput round (test-split rows, repeated)")
	fs.StringVar(&o.Data, "data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE (with {split})")
	replicas := fs.String("replicas", "1,2,3", "replica counts of the throughput rounds (\"\": none)")
	featurizers := fs.String("featurizers", "", "featurizer counts of the ingestion rounds, e.g. 1,2,3 (\"\": none)")
	fs.StringVar(&o.Model, "model", "", "ONNX file the ingestion rounds' processes use instead of the configured model")
	fs.DurationVar(&o.FeaturizerTimeout, "featurizer-timeout", 0, "the primaries' ingest.featurizer_timeout in the ingestion rounds (0: the configured one)")
	fs.BoolVar(&o.Fitted, "fitted", false, "the ingestion rounds' primaries serve a model fitted on the warm-up and ingest labelled rows (each point's gradient row too)")
	fs.IntVar(&o.Procs, "gomaxprocs", 1, "GOMAXPROCS of each replica")
	bin := fs.String("cairnd", "", "the cairnd binary (default: cairnd next to cairnctl, else on PATH)")
	fs.BoolVar(&o.Kill, "kill", true, "kill a replica under load (with --featurizers, also a featurizer in an extra round of two)")
	fs.BoolVar(&o.Takeover, "takeover", true, "kill the primary with a standby running")
	fs.StringVar(&o.ConfigFile, "config", "", "cairnd YAML configuration the deployment starts from (optional)")
	timeout := fs.Duration("timeout", time.Hour, "bound on the whole run")
	fs.BoolVar(&o.Keep, "keep", false, "keep the deployment's directory (data, logs) and print its path on stderr")
	return func(ctx context.Context, stdio cli.Stdio) error {
		var err error
		if *featurizers != "" {
			if o.Featurizers, err = parseInts("--featurizers", *featurizers); err != nil {
				return err
			}
		}
		if *replicas != "" || len(o.Featurizers) == 0 {
			if o.Replicas, err = parseInts("--replicas", *replicas); err != nil {
				return err
			}
		}
		for _, c := range o.Featurizers {
			if c < 1 || c > 16 {
				return fmt.Errorf("--featurizers %q: counts must be in [1, 16]", *featurizers)
			}
		}
		if o.N < 1 || o.Queries < 1 || o.Procs < 1 {
			return fmt.Errorf("--n %d, --queries %d, --gomaxprocs %d, --replicas %q: each must be at least 1", o.N, o.Queries, o.Procs, *replicas)
		}
		for _, c := range o.Replicas {
			if c < 1 || c > 16 {
				return fmt.Errorf("--replicas %q: counts must be in [1, 16]", *replicas)
			}
		}
		if o.Bin, err = bench.CairndPath(*bin); err != nil {
			return err
		}
		if o.Config, err = config.Load(o.ConfigFile, os.Environ()); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		o.Stderr = stdio.Err
		rep, err := bench.Scale(ctx, o)
		if werr := writeJSON(stdio.Out, rep); err == nil {
			err = werr
		}
		return err
	}
}
