package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/cli"
)

// checkCmd is `cairnctl check --data-dir DIR [--timeout 2s]`: the full check of a
// stopped daemon's state file (client.CheckStore: bbolt's page check, every record's
// decoder, the audit chain, the point count, the pool records' points), opened
// read-only and never modified. It prints the report (storage.CheckReport: path, ok,
// format_version, pages, page_size, keys, problems, problem_count) and fails when the
// file has problems or cannot be checked; a file too damaged to open prints ok false
// with the reason as its one problem.
func checkCmd(fs *flag.FlagSet) cli.Func {
	dataDir := fs.String("data-dir", "", "the daemon's data directory (its cairn.db is checked; the daemon must be stopped)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the file's lock (a running daemon holds it)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *dataDir == "" {
			return fmt.Errorf("--data-dir: required (the directory holding the daemon's %s)", daemon.StateFile)
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		rep, err := cairn.CheckStore(*dataDir, *timeout)
		if err != nil {
			return err
		}
		if err := writeJSON(stdio.Out, rep); err != nil {
			return err
		}
		if !rep.OK {
			return fmt.Errorf("%s: %d problems", rep.Path, rep.ProblemCount)
		}
		return nil
	}
}
