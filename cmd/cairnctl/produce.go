package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/mattn/go-isatty"
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
// (client.Client.Upsert), with a progress bar on stderr (periodic lines when stderr is
// not a terminal). When ctx ends (SIGINT or SIGTERM) it stops after the batch in
// flight, prints the report with the rows acknowledged so far, and fails.
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
		prog := newProgress(stdio.Err, "produce", set.N)
		sent, err := produceRows(ctx, set, 0, set.N, *batch, prog, c.Upsert)
		prog.finish(sent)
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

// produceRows sends rows [from, to) of set as upserts with upsert, batch rows per call
// (each call validates its rows and returns once all are acknowledged, as
// client.Client.Upsert does), and returns how many were acknowledged: exact on error.
func produceRows(ctx context.Context, set *dataset.Set, from, to, batch int, prog *progress,
	upsert func(context.Context, ...cairn.Point) error) (int, error) {
	sent := 0
	pts := make([]cairn.Point, 0, batch)
	for i := from; i < to; {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		pts = pts[:0]
		for ; i < to && len(pts) < batch; i++ {
			p := cairn.Point{ID: set.IDs[i], X: set.Row(i)}
			if set.Labels != nil {
				l := int64(set.Labels[i])
				p.Label = &l
			}
			pts = append(pts, p)
		}
		if err := upsert(ctx, pts...); err != nil {
			return sent, fmt.Errorf("rows %d..%d: %w", i-len(pts), i-1, err)
		}
		sent += len(pts)
		prog.update(sent)
	}
	return sent, nil
}

// progress reports a long transfer on stderr: a bar redrawn in place on a terminal,
// else a line every progressEvery so logs stay readable.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	total int
	start time.Time
	last  time.Time
}

// progressEvery spaces the lines of a non-terminal progress report.
const progressEvery = 5 * time.Second

func newProgress(w io.Writer, label string, total int) *progress {
	now := time.Now()
	return &progress{w: w, tty: isTerminal(w), label: label, total: total, start: now, last: now}
}

// isTerminal reports whether w is a terminal (a Cygwin or MSYS pty counts). A
// character device is not enough: /dev/null is one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

func (p *progress) update(done int) {
	if p == nil {
		return
	}
	now := time.Now()
	if p.tty {
		if now.Sub(p.last) < 100*time.Millisecond && done < p.total {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r%s", p.line(done, now))
		return
	}
	if now.Sub(p.last) >= progressEvery {
		p.last = now
		fmt.Fprintln(p.w, p.line(done, now))
	}
}

// finish writes the final state and ends the line.
func (p *progress) finish(done int) {
	if p == nil {
		return
	}
	now := time.Now()
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\n", p.line(done, now))
		return
	}
	fmt.Fprintln(p.w, p.line(done, now))
}

func (p *progress) line(done int, now time.Time) string {
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	filled := min(int(frac*width), width)
	rate := float64(done) / max(now.Sub(p.start).Seconds(), 1e-9)
	return fmt.Sprintf("%s [%s%s] %d/%d %3.0f%% %.0f events/s", p.label,
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, p.total, 100*frac, rate)
}
