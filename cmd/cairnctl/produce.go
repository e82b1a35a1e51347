package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/produce"
)

// produceReport is the output of `cairnctl produce`.
type produceReport struct {
	Produced        int     `json:"produced"`
	Topic           string  `json:"topic"`
	Data            string  `json:"data"`
	Split           string  `json:"split"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

// produceCmd is `cairnctl produce --data mnist|fashion-mnist|adult:DIR|csv:FILE [--n N]
// [--split train] [--batch 500]`: it streams the rows of a data set to cairn.train as
// upserts {"v":1,"op":"upsert","id":…,"x":[…],"label":…} keyed by the point id
// (produce.Rows with client.Client.Upsert), with a progress bar on stderr (periodic
// lines when stderr is not a terminal). When ctx ends (SIGINT or SIGTERM) it stops
// after the batch in flight, prints the report with the rows acknowledged so far, and
// fails.
func produceCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesConfig)
	data := fs.String("data", "mnist", "data set: mnist, fashion-mnist, adult:DIR or csv:FILE")
	n := fs.Int("n", 0, "rows to send, from the first (0: the whole split)")
	split := fs.String("split", "train", "split to send: train or test")
	batch := fs.Int("batch", 500, "events per acknowledged write")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *n < 0 {
			return fmt.Errorf("--n %d: must not be negative", *n)
		}
		if *batch < 1 {
			return fmt.Errorf("--batch %d: must be at least 1", *batch)
		}
		cfg, c, err := kf.load(fs, stdio.Err, 0)
		if err != nil {
			return err
		}
		defer c.Close()
		set, err := dataset.Open(*data, *split, *n)
		if err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		warnInputDim(stdio.Err, cfg, set.D)
		start := time.Now()
		prog := produce.NewProgress(stdio.Err, "produce", set.N)
		sent, err := produce.Rows(ctx, set, 0, set.N, *batch, prog, c.Upsert)
		prog.Finish(sent)
		if err != nil && ctx.Err() == nil {
			return err
		}
		secs := time.Since(start).Seconds()
		if werr := writeJSON(stdio.Out, produceReport{
			Produced: sent, Topic: c.Topics().Train, Data: *data, Split: *split,
			Seconds: secs, EventsPerSecond: float64(sent) / secs,
		}); werr != nil {
			return werr
		}
		if ctx.Err() != nil {
			// Interrupted: the report above counts the acknowledged rows exactly.
			return fmt.Errorf("stopped after %d of %d rows: %w", sent, set.N, context.Cause(ctx))
		}
		return nil
	}
}
