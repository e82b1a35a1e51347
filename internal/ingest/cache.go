package ingest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cairnhq/cairn/internal/pipeline"
)

// Points keeps, for stored points, what a refit or a Sync needs without running the
// backbone again: the raw input, the label and the fit-draw features of both views.
// Entries are immutable once stored (a replaced point gets a new entry), so a reader may
// keep an entry after the lock is released. The ingest path writes it; refits and Sync
// read it. It is an optimization only: a missing entry is recomputed from the stored
// point, bit-identically (Features is deterministic per (id, x)).
//
// Memory is 8·(D + 2q) bytes per point (about 70 KB for MNIST at h=4, s=1024); entries
// beyond cacheBudget bytes are not kept, so a very large store degrades to recomputing.
type Points struct {
	mu    sync.RWMutex
	m     map[string]*Entry
	bytes int
}

// Entry is one point's entry. Labels are -1 when absent.
type Entry struct {
	X        []float64 // the raw input
	Label    int64
	HasLabel bool
	fa, fb   []float64 // nil when features are not Entry (over budget)
}

// cacheBudget bounds the feature bytes the cache keeps.
const cacheBudget = 4 << 30

func newPoints() *Points { return &Points{m: map[string]*Entry{}} }

func entryBytes(e *Entry) int { return 8 * (len(e.X) + len(e.fa) + len(e.fb)) }

// put stores e for id, replacing any earlier entry. Features are dropped when the
// budget is exhausted.
func (c *Points) put(id string, e *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= entryBytes(old)
	}
	if c.bytes+entryBytes(e) > cacheBudget {
		e.fa, e.fb = nil, nil
	}
	c.bytes += entryBytes(e)
	c.m[id] = e
}

func (c *Points) del(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= entryBytes(old)
		delete(c.m, id)
	}
}

func (c *Points) Get(id string) *Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[id]
}

// len is the number of entries (equal to the stored points between ingest batches).
func (c *Points) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// ids returns the Entry ids in increasing byte order.
func (c *Points) IDs() []string {
	c.mu.RLock()
	out := make([]string, 0, len(c.m))
	for id := range c.m {
		out = append(out, id)
	}
	c.mu.RUnlock()
	slices.Sort(out)
	return out
}

// cacheSource is the coreset.FeatureSource of one view for Pool.Sync: Entry features
// when present, else ψ recomputed from the Entry input (bit-identical to ingest, as
// Features is deterministic per (id, x)). Sync asks in id order; misses are computed
// one at a time, which is the slow path after a restart.
type cacheSource struct {
	f     *pipeline.Features
	c     *Points
	view  int
	views []float64
}

func newCacheSource(f *pipeline.Features, c *Points, view int) *cacheSource {
	return &cacheSource{f: f, c: c, view: view}
}

// FeaturesTo implements coreset.FeatureSource.
func (s *cacheSource) FeaturesTo(dst []float64, id string) error {
	e := s.c.Get(id)
	if e == nil {
		return fmt.Errorf("%w: %q", ErrSyncSource, id)
	}
	if f := e.View(s.view); f != nil {
		copy(dst, f)
		return nil
	}
	s.views = grow(s.views, s.f.InputDim())
	s.f.ViewTo(s.views, e.X, id, s.view)
	s.f.FeaturesTo(dst, s.views, 1)
	return nil
}

// view returns the Entry features of view v (0 or 1), or nil.
func (e *Entry) View(v int) []float64 {
	if v == 0 {
		return e.fa
	}
	return e.fb
}

// syncChunk is how many points FeatureRows featurizes per parallel batch: large enough
// to keep both cores busy, small enough that the buffer (chunk×q) stays far below the
// n×q matrices a refit builds anyway.
const syncChunk = 256

// grow returns s resized to n, reusing its array when large enough.
func grow(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}
