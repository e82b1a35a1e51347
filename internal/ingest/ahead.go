package ingest

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// aheadKept bounds the batches prepared ahead and not yet applied (the reader prepares
// one while the State applies the one before it; a spare absorbs a race).
const aheadKept = 2

// Ahead prepares batch for Apply while Apply still works on the batch before it: the
// training reader's stream.ReaderConfig.Ahead (doc.go "Pipeline"). It decodes every
// message and computes both views' features of every message that decodes as an upsert
// (none with a FeatureSource: the featurizers compute them), which are pure functions
// of the message bytes and of the pipeline, and files the result for the Apply of the
// same messages. It touches nothing Apply changes, so it is safe to call concurrently
// with Apply, from one goroutine at a time; batch is not modified or kept.
func (in *State) Ahead(ctx context.Context, batch []stream.Message) {
	if ctx.Err() != nil || len(batch) == 0 {
		return
	}
	t := time.Now()
	p := in.ahead.get()
	p.fill(batch, in.feat, in.lim, in.erasures, in.src == nil)
	p.secs = time.Since(t).Seconds()
	in.ahead.put(p)
}

// aheadStore hands prepared batches from Ahead's goroutine to Apply's. A State and its
// successor (Succeed) share one.
type aheadStore struct {
	mu    sync.Mutex
	ready []*prepared // oldest first, at most aheadKept
	free  []*prepared // buffers to reuse, at most aheadKept
}

// prepared is one batch decoded, and featurized when rows is set, by Ahead.
type prepared struct {
	batch []stream.Message // the messages, to match Apply's batch
	dec   []decoded        // decodeAll of every message, as if all were fresh
	// rows[i] is message i's pair of rows in feats (rows 2·rows[i] and 2·rows[i]+1), or
	// -1 when it is no upsert; nil when Ahead computed no features.
	rows         []int
	ids          []string
	xs           []float64
	feats, views []float64
	secs         float64 // the wall seconds Ahead took
}

// fill decodes batch into p and, with features, computes both views of every upsert.
func (p *prepared) fill(batch []stream.Message, feat *pipeline.Features, lim stream.Limits, erasures string, features bool) {
	p.batch = append(p.batch[:0], batch...)
	all := make([]bool, len(batch))
	for i := range all {
		all[i] = true
	}
	p.dec = decodeAll(batch, all, lim, erasures)
	p.rows, p.ids, p.xs = p.rows[:0], p.ids[:0], p.xs[:0]
	if !features {
		p.rows = nil
		return
	}
	for i, d := range p.dec {
		r := -1
		if batch[i].Topic != erasures && d.err == nil && d.ev.Op == stream.OpUpsert {
			r = len(p.ids)
			p.ids = append(p.ids, d.ev.ID)
			p.xs = append(p.xs, d.ev.X...)
		}
		p.rows = append(p.rows, r)
	}
	n := len(p.ids)
	p.feats = grow(p.feats, 2*n*feat.Dim())
	p.views = grow(p.views, 2*n*feat.InputDim())
	feat.BothViewsTo(p.feats, p.views, p.xs, p.ids)
}

// matches reports whether p was prepared from exactly the messages of batch.
func (p *prepared) matches(batch []stream.Message) bool {
	return slices.EqualFunc(p.batch, batch, func(a, b stream.Message) bool {
		return a.Topic == b.Topic && a.Partition == b.Partition && a.Offset == b.Offset &&
			bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
	})
}

// get returns a prepared batch to fill, reusing a free one's buffers.
func (s *aheadStore) get() *prepared {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		p := s.free[n-1]
		s.free = s.free[:n-1]
		return p
	}
	return &prepared{}
}

// put files p for Apply, dropping the oldest prepared batch past aheadKept.
func (s *aheadStore) put(p *prepared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = append(s.ready, p)
	if len(s.ready) > aheadKept {
		s.release(s.ready[0])
		s.ready = slices.Delete(s.ready, 0, 1)
	}
}

// take removes and returns the batch prepared from exactly the messages of batch, or
// nil; the batches prepared before it are dropped (the reader hands batches in order).
func (s *aheadStore) take(batch []stream.Message) *prepared {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.ready {
		if p.matches(batch) {
			for _, old := range s.ready[:i] {
				s.release(old)
			}
			s.ready = slices.Delete(s.ready, 0, i+1)
			return p
		}
	}
	return nil
}

// recycle gives p's buffers back once Apply has taken what it needs; nil is ignored.
func (s *aheadStore) recycle(p *prepared) {
	if p == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(p)
}

// release drops p's references to the messages and keeps its buffers (s.mu is held).
func (s *aheadStore) release(p *prepared) {
	clear(p.batch)
	clear(p.ids)
	p.batch, p.dec = p.batch[:0], nil
	if len(s.free) < aheadKept {
		s.free = append(s.free, p)
	}
}

// fromAhead fills the rows of in.feats that p computed (in.have marks them) and
// returns how many upserts it had no row for. The ops are the batch's, one per message.
// When p's rows are exactly in.feats's (every upsert p computed is an upsert of the
// batch, the usual case), the buffers are swapped instead of copied.
func (in *State) fromAhead(p *prepared, q int) (missing int) {
	n := len(in.ids)
	if n == len(p.ids) && in.sameRows(p) {
		in.feats, p.feats = p.feats, in.feats
		return 0
	}
	in.have = slices.Grow(in.have[:0], n)[:n]
	clear(in.have)
	for i := range in.ops {
		o := &in.ops[i]
		if o.kind != opUpsert {
			continue
		}
		if r := p.rows[i]; r >= 0 && p.ids[r] == o.ev.ID {
			copy(in.feats[2*o.row*q:(2*o.row+2)*q], p.feats[2*r*q:(2*r+2)*q])
			in.have[o.row] = true
		} else {
			missing++
		}
	}
	return missing
}

// sameRows reports whether every upsert op's row is p's row of its message, for the
// same id.
func (in *State) sameRows(p *prepared) bool {
	for i := range in.ops {
		if o := &in.ops[i]; o.kind == opUpsert && (p.rows[i] != o.row || p.ids[o.row] != o.ev.ID) {
			return false
		}
	}
	return true
}
