package produce

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/dataset"
)

// Rows sends rows [from, to) of set as upserts with upsert, batch rows per call (each
// call validates its rows and returns once all are acknowledged, as
// client.Client.Upsert does), and returns how many were acknowledged: exact on error.
// prog, when not nil, is updated after every batch.
func Rows(ctx context.Context, set *dataset.Set, from, to, batch int, prog *Progress,
	upsert func(context.Context, ...client.Point) error) (int, error) {
	sent := 0
	pts := make([]client.Point, 0, batch)
	for i := from; i < to; {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		pts = pts[:0]
		for ; i < to && len(pts) < batch; i++ {
			p := client.Point{ID: set.IDs[i], X: set.Row(i)}
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
		prog.Update(sent)
	}
	return sent, nil
}

// Progress reports a long transfer: a bar redrawn in place on a terminal, else a line
// every Every.
type Progress struct {
	w     io.Writer
	tty   bool
	label string
	total int
	start time.Time
	last  time.Time
}

// Every spaces the lines of a non-terminal progress report.
const Every = 5 * time.Second

// NewProgress reports the transfer of total items under label on w.
func NewProgress(w io.Writer, label string, total int) *Progress {
	now := time.Now()
	return &Progress{w: w, tty: IsTerminal(w), label: label, total: total, start: now, last: now}
}

// IsTerminal reports whether w is a terminal (a Cygwin or MSYS pty counts). A
// character device is not enough: /dev/null is one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Update reports done items so far, if it is time to.
func (p *Progress) Update(done int) {
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
	if now.Sub(p.last) >= Every {
		p.last = now
		fmt.Fprintln(p.w, p.line(done, now))
	}
}

// Finish writes the final state and ends the line.
func (p *Progress) Finish(done int) {
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

func (p *Progress) line(done int, now time.Time) string {
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
