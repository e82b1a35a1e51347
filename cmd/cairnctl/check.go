package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/storage"
)

// checkCmd is `cairnctl check --data-dir DIR [--timeout 2s]`: the full check of a
// stopped daemon's state file (storage.CheckFile: bbolt's page check, every record's
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
		path := filepath.Join(*dataDir, daemon.StateFile)
		rep, err := storage.CheckFile(path, storage.Options{LockTimeout: *timeout})
		if err != nil && !errors.Is(err, storage.ErrDamaged) && !errors.Is(err, storage.ErrUnknownFormat) && !errors.Is(err, storage.ErrCorrupt) {
			return fmt.Errorf("%w (a running daemon holds the file: stop it first)", err)
		}
		if err != nil {
			// Refused at open (truncated, unreadable meta pages, unknown format): still a
			// report, so scripts read one shape.
			rep = &storage.CheckReport{Path: path, Keys: map[string]int{}, Problems: []string{err.Error()}, ProblemCount: 1}
		}
		if err := writeJSON(stdio.Out, rep); err != nil {
			return err
		}
		if !rep.OK {
			return fmt.Errorf("%s: %d problems", path, rep.ProblemCount)
		}
		return nil
	}
}
