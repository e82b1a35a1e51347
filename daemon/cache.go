package daemon

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cairnhq/cairn/internal/pipeline"
)

// pointCache keeps, for stored points, what a refit or a Sync needs without running the
// backbone again: the raw input, the label and the fit-draw features of both views.
// Entries are immutable once stored (a replaced point gets a new entry), so a reader may
// keep an entry after the lock is released. The ingest path writes it; refits and Sync
// read it. It is an optimization only: a missing entry is recomputed from the stored
// point, bit-identically (Features is deterministic per (id, x)).
//
// Memory is 8·(D + 2q) bytes per point (about 70 KB for MNIST at h=4, s=1024); entries
// beyond cacheBudget bytes are not kept, so a very large store degrades to recomputing.
type pointCache struct {
	mu    sync.RWMutex
	m     map[string]*cached
	bytes int
}

// cached is one point's entry. Labels are -1 when absent.
type cached struct {
	x      []float64
	label  int64
	hasLab bool
	fa, fb []float64 // nil when features are not cached (over budget)
}

// cacheBudget bounds the feature bytes the cache keeps.
const cacheBudget = 4 << 30

func newPointCache() *pointCache { return &pointCache{m: map[string]*cached{}} }

func entryBytes(e *cached) int { return 8 * (len(e.x) + len(e.fa) + len(e.fb)) }

// put stores e for id, replacing any earlier entry. Features are dropped when the
// budget is exhausted.
func (c *pointCache) put(id string, e *cached) {
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

func (c *pointCache) del(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= entryBytes(old)
		delete(c.m, id)
	}
}

func (c *pointCache) get(id string) *cached {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[id]
}

// len is the number of entries (equal to the stored points between ingest batches).
func (c *pointCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// ids returns the cached ids in increasing byte order.
func (c *pointCache) ids() []string {
	c.mu.RLock()
	out := make([]string, 0, len(c.m))
	for id := range c.m {
		out = append(out, id)
	}
	c.mu.RUnlock()
	slices.Sort(out)
	return out
}

// cacheSource is the coreset.FeatureSource of one view for Pool.Sync: cached features
// when present, else ψ recomputed from the cached input (bit-identical to ingest, as
// Features is deterministic per (id, x)). Sync asks in id order; misses are computed
// one at a time, which is the slow path after a restart.
type cacheSource struct {
	f     *pipeline.Features
	c     *pointCache
	view  int
	views []float64
}

func newCacheSource(f *pipeline.Features, c *pointCache, view int) *cacheSource {
	return &cacheSource{f: f, c: c, view: view}
}

// FeaturesTo implements coreset.FeatureSource.
func (s *cacheSource) FeaturesTo(dst []float64, id string) error {
	e := s.c.get(id)
	if e == nil {
		return fmt.Errorf("%w: %q", ErrSyncSource, id)
	}
	if f := e.view(s.view); f != nil {
		copy(dst, f)
		return nil
	}
	s.views = grow(s.views, s.f.InputDim())
	s.f.ViewTo(s.views, e.x, id, s.view)
	s.f.FeaturesTo(dst, s.views, 1)
	return nil
}

// view returns the cached features of view v (0 or 1), or nil.
func (e *cached) view(v int) []float64 {
	if v == 0 {
		return e.fa
	}
	return e.fb
}

// syncChunk is how many points featureRows featurizes per parallel batch: large enough
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
