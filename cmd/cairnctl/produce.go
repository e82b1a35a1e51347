package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/stream"
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
// upserts {"v":1,"op":"upsert","id":…,"x":[…],"label":…} keyed by the point id, with a
// progress bar on stderr (periodic lines when stderr is not a terminal). When ctx ends
// (SIGINT or SIGTERM) it stops after the batch in flight, prints the report with the
// rows acknowledged so far, and fails.
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
		cfg, kc, err := kf.load(fs)
		if err != nil {
			return err
		}
		set, err := dataset.Open(*data, *split, *n)
		if err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		warnInputDim(stdio.Err, cfg, set.D)
		w, err := openWriter(kc)
		if err != nil {
			return err
		}
		defer w.Close()
		p := producer{w: w, topic: cfg.Kafka.Topics.Train, lim: inputLimits(cfg, set.D), batch: *batch}
		start := time.Now()
		prog := newProgress(stdio.Err, "produce", set.N)
		sent, err := p.produce(ctx, set, 0, set.N, prog)
		prog.finish(sent)
		if err != nil && ctx.Err() == nil {
			return err
		}
		secs := time.Since(start).Seconds()
		if werr := writeJSON(stdio.Out, produceReport{
			Produced: sent, Topic: p.topic, Data: *data, Split: *split,
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

// producer writes a data set's rows as upserts to the training topic.
type producer struct {
	w     *stream.Writer
	topic string
	lim   stream.Limits // InputDim is the data's width
	batch int
}

// produce sends rows [from, to) of set and returns how many were acknowledged. Each
// event is validated by stream.EncodeTrain under p.lim, as the daemon will validate
// it, so a row the daemon would reject is reported here, naming the row, instead.
// Batches of p.batch events are written synchronously (all acknowledged before the
// next), so the count returned on error is exact.
func (p producer) produce(ctx context.Context, set *dataset.Set, from, to int, prog *progress) (int, error) {
	sent := 0
	msgs := make([]stream.Message, 0, p.batch)
	for i := from; i < to; {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		msgs = msgs[:0]
		for ; i < to && len(msgs) < p.batch; i++ {
			ev := stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i)}
			if set.Labels != nil {
				l := int64(set.Labels[i])
				ev.Label = &l
			}
			body, err := stream.EncodeTrain(ev, p.lim)
			if err != nil {
				return sent, fmt.Errorf("row %d (id %q): %w", i, set.IDs[i], err)
			}
			msgs = append(msgs, stream.Message{Topic: p.topic, Key: []byte(ev.ID), Value: body})
		}
		if err := p.w.Write(ctx, msgs...); err != nil {
			return sent, fmt.Errorf("writing rows %d..%d to %s: %w", i-len(msgs), i-1, p.topic, err)
		}
		sent += len(msgs)
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
