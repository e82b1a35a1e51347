package ingest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
)

// Points keeps, for stored points, what a refit or a Sync needs without running the
// backbone again: the raw input, the label and the fit-draw features of both views.
// Entries are immutable once stored (a replaced point gets a new entry), so a reader may
// keep an entry after the lock is released. The ingest path writes it; refits and Sync
// read it. It is an optimization only: a missing entry is recomputed from the stored
// point, bit-identically (Features is deterministic per (id, x)).
//
// The features are kept in float32, the stored precision of the fit-draw features
// (pipeline.Features: every ψ is already fl32(ψ), so keeping it in float32 is exact).
// Memory is 8·D + 4·2q bytes per point (about 39 KB for MNIST at h=4, s=1024, 2.4 GB
// for 60,000 points); features beyond cacheBudget bytes are not kept, so a very large
// store degrades to recomputing.
type Points struct {
	mu     sync.RWMutex
	m      map[string]*Entry
	bytes  int
	labels map[int64]int // stored points per label (labelled points only)
}

// Entry is one point's entry. Labels are -1 when absent.
type Entry struct {
	X        []float64 // the raw input
	Label    int64
	HasLabel bool
	// Version is the value's version (storage.Point.Version; doc.go, "Versions").
	Version int64
	// Subject is the keyed hash of the data subject the point's upsert named (nil:
	// none; erasure.go).
	Subject *storage.SubjectHash
	// Partition is the training-topic partition the value came from (-1: unknown),
	// where claims about the id go (claims.go, placed).
	Partition int32
	fa, fb    []float32 // nil when the features are not kept (over budget)
}

// cacheBudget bounds the feature bytes the cache keeps.
const cacheBudget = 4 << 30

func newPoints() *Points { return &Points{m: map[string]*Entry{}, labels: map[int64]int{}} }

// count adds d to e's label count (unlabelled entries count nowhere).
func (c *Points) count(e *Entry, d int) {
	if !e.HasLabel {
		return
	}
	if c.labels[e.Label] += d; c.labels[e.Label] == 0 {
		delete(c.labels, e.Label)
	}
}

// LabelCounts returns the number of stored points per label (a copy; labelled points
// only), kept up to date by every put and delete: O(labels), not O(points).
func (c *Points) LabelCounts() map[int64]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[int64]int, len(c.labels))
	for l, n := range c.labels {
		out[l] = n
	}
	return out
}

func entryBytes(e *Entry) int { return 8*len(e.X) + 4*(len(e.fa)+len(e.fb)) }

// put stores e for id, replacing any earlier entry. Features are dropped when the
// budget is exhausted.
func (c *Points) put(id string, e *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= entryBytes(old)
		c.count(old, -1)
	}
	c.count(e, 1)
	if c.bytes+entryBytes(e) > cacheBudget {
		e.fa, e.fb = nil, nil
	}
	c.bytes += entryBytes(e)
	c.m[id] = e
}

// keep replaces old, id's entry without features, by a copy with the features fa and fb
// (each point's fit-draw features, recomputed) if old is still id's entry: a point
// deleted or replaced meanwhile is left as it is. The budget applies as in put.
func (c *Points) keep(id string, old *Entry, fa, fb []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[id] != old || c.bytes+4*(len(fa)+len(fb)) > cacheBudget {
		return
	}
	cp := *old // every field, the subject and the partition included
	e := &cp
	e.fa, e.fb = fa, fb
	c.bytes += entryBytes(e) - entryBytes(old)
	c.m[id] = e
}

func (c *Points) del(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= entryBytes(old)
		c.count(old, -1)
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
		for i, v := range f {
			dst[i] = float64(v)
		}
		return nil
	}
	s.views = grow(s.views, s.f.InputDim())
	s.f.ViewTo(s.views, e.X, id, s.view)
	s.f.FeaturesTo(dst, s.views, 1)
	return nil
}

// View returns the kept features of view v (0 or 1) in float32, or nil. The slice is
// shared and must not be modified.
func (e *Entry) View(v int) []float32 {
	if v == 0 {
		return e.fa
	}
	return e.fb
}

// syncChunk is how many points FeatureRows featurizes per parallel batch: large enough
// to keep both cores busy, small enough that the buffer (chunk×q) stays far below the
// n×q matrices a refit builds anyway.
const syncChunk = 256

// to32 returns x in float32 (exact for the fit-draw features, which are fl32(ψ)).
func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// grow returns s resized to n, reusing its array when large enough.
func grow(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}
