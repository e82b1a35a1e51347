package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/internal/pipeline"
)

// Snapshot is the input of one refit or background sync, taken under the owner's lock
// (State.Snapshot): the stored points (sorted ids and their immutable cache entries),
// the pool's certificates, and the deletions awaiting their audit. A refit is a
// function of the snapshot alone (and the configuration), so the model fitted on a set
// of points does not depend on how they arrived. Its slices are the caller's; the
// entries they point to are shared and never modified.
type Snapshot struct {
	IDs      []string
	Entries  []*Entry
	Residual [2]coreset.ResidualCertificate
	Pending  []*Deletion
	Version  uint64 // State's version when taken (see Adopt)
	Taken    time.Time
}

// Snapshot captures the stored points. It fails with ErrBroken after a failure left the
// pool ahead of the store, and with ErrPoolState if the cache and the pool disagree on
// how many points there are.
func (in *State) Snapshot() (*Snapshot, error) {
	if in.broken != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroken, in.broken)
	}
	ids := in.cache.IDs()
	if len(ids) != in.pool.A.Len() {
		return nil, fmt.Errorf("%w: %d cached points, %d in the pool", ErrPoolState, len(ids), in.pool.A.Len())
	}
	s := &Snapshot{IDs: ids, Entries: make([]*Entry, len(ids)), Residual: in.Residuals(),
		Pending: slices.Clone(in.pending), Taken: time.Now(), Version: in.version}
	for i, id := range ids {
		s.Entries[i] = in.cache.Get(id)
	}
	return s, nil
}

// SnapshotOf is a snapshot of every point in c (without certificates or pending
// deletions), for rebuilding what a refit derives from the points, such as the audit
// blocks of a restored model.
func SnapshotOf(c *Points) *Snapshot {
	ids := c.IDs()
	s := &Snapshot{IDs: ids, Entries: make([]*Entry, len(ids))}
	for i, id := range ids {
		s.Entries[i] = c.Get(id)
	}
	return s
}

// FeatureRows returns the fit-draw features of view v of the given entries, one float32
// row per entry: the cached rows themselves where kept (shared, never to be modified),
// else recomputed (bit-identically, as every ψ is fl32(ψ)) on all cores, checking ctx
// between chunks of syncChunk rows. Nothing of size rows×q is copied for cached rows.
func FeatureRows(ctx context.Context, f *pipeline.Features, ids []string, entries []*Entry, v int) ([][]float32, error) {
	q, d := f.Dim(), f.InputDim()
	out := make([][]float32, len(ids))
	var miss []int
	for i, e := range entries {
		if out[i] = e.View(v); out[i] == nil {
			miss = append(miss, i)
		}
	}
	var views, buf []float64
	for lo := 0; lo < len(miss); lo += syncChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+syncChunk, len(miss))
		views, buf = grow(views, (hi-lo)*d), grow(buf, (hi-lo)*q)
		rows := miss[lo:hi]
		// The views and the float32 copies, like ψ, in chunks side by side: on one
		// goroutine they were a few per cent of a chunk's time on two cores, and more
		// the more cores ψ has.
		par.For(len(rows), rowsPerTask, par.Workers(len(rows), rowsPerTask), func(_, a, b int) {
			for r := a; r < b; r++ {
				f.ViewTo(views[r*d:(r+1)*d], entries[rows[r]].X, ids[rows[r]], v)
			}
		})
		f.FeaturesTo(buf, views, hi-lo)
		par.For(len(rows), rowsPerTask, par.Workers(len(rows), rowsPerTask), func(_, a, b int) {
			for r := a; r < b; r++ {
				out[rows[r]] = to32(buf[r*q : (r+1)*q])
			}
		})
	}
	return out, nil
}

// rowsPerTask is the row count of one chunk of FeatureRows' views and copies.
const rowsPerTask = 16

// Selection is batch greedy pivoted Cholesky of both views over a set of points
// (coreset.Config.PlanRows32 and GreedyRows32 on FeatureRows): the rows it read (the
// point cache's own where kept), the budgets and the results, ready for State.Adopt.
type Selection struct {
	G   [2][][]float32
	M   [2]int
	Res [2]*coreset.GreedyResult
}

// Select computes the Selection of the points ids (sorted) with their entries, without
// any lock and without copying cached features: the O(n q m) work of a sync
// (docs/architecture.md, "The landmark pool"). Features it had to recompute (entries
// without them, as after a restart) are kept in keep when it is not nil (Points.keep), so
// the next sync reads them. It gives up with ctx.Err() when ctx ends.
func Select(ctx context.Context, f *pipeline.Features, pcfg coreset.Config, ids []string, entries []*Entry, keep *Points) (*Selection, error) {
	s, err := selectRows(ctx, f, pcfg, ids, func(v int) ([][]float32, error) { return FeatureRows(ctx, f, ids, entries, v) })
	if err != nil {
		return nil, err
	}
	if keep != nil {
		for i, e := range entries {
			if e.fa == nil {
				keep.keep(ids[i], e, s.G[0][i], s.G[1][i])
			}
		}
	}
	return s, nil
}

// SelectFresh is Select with no feature read from the point cache: the selection a
// pipeline with another sketch makes of the same points (the reseeded pool of
// MeasureReseed). The rows of prev, what an earlier SelectFresh returned (nil: none),
// are reused where they are f's (the same fingerprint) for the same id and input, bit
// for bit; every other row is computed under f (FeatureRows). A point's features are a
// function of the pipeline, its id and its input alone (the views are seeded by id), so
// a reused row has the bits a fresh one has and the selection is the same. It returns
// the rows of this selection for the next call (FreshRows).
func SelectFresh(ctx context.Context, f *pipeline.Features, pcfg coreset.Config, ids []string, entries []*Entry,
	prev *FreshRows) (*Selection, *FreshRows, error) {
	bare := make([]*Entry, len(entries))
	reused := 0
	for i, e := range entries {
		bare[i] = &Entry{X: e.X}
		if bare[i].fa, bare[i].fb = prev.rowsOf(f.Fingerprint(), ids[i], e.X); bare[i].fa != nil {
			reused++
		}
	}
	s, err := selectRows(ctx, f, pcfg, ids, func(v int) ([][]float32, error) { return FeatureRows(ctx, f, ids, bare, v) })
	if err != nil {
		return nil, nil, err
	}
	return s, newFreshRows(f, ids, entries, s, reused), nil
}

// FreshRows are the rows of both views that one SelectFresh read or computed, kept for
// the next SelectFresh: the reseed measurement of every refit featurizes every point
// under the reseeded sketch, and between two refits few points change (a deletion's
// refit: one). They are kept while they fit the point cache's budget (2·n·q float32,
// as the cache's own features; over it, Kept is false and nothing is reused). The rows
// are shared with the selection that read them and never modified.
type FreshRows struct {
	// Reused is how many points' rows the SelectFresh that returned this took from the
	// call before, Points how many points it selected from.
	Reused, Points int
	// Kept reports whether the rows are held for the next call.
	Kept bool
	fp   string
	at   map[string]int
	x    [][]float64
	g    [2][][]float32
}

// newFreshRows keeps the rows of selection s, of the points ids with their entries
// under f, when they fit the point cache's budget.
func newFreshRows(f *pipeline.Features, ids []string, entries []*Entry, s *Selection, reused int) *FreshRows {
	r := &FreshRows{Reused: reused, Points: len(ids)}
	if int64(len(ids))*int64(2*f.Dim())*4 > cacheBudget {
		return r
	}
	r.Kept, r.fp, r.g = true, f.Fingerprint(), s.G
	r.at, r.x = make(map[string]int, len(ids)), make([][]float64, len(ids))
	for i, id := range ids {
		r.at[id], r.x[i] = i, entries[i].X
	}
	return r
}

// rowsOf returns the kept rows of id under the pipeline of fingerprint fp when they are
// of the input x, bit for bit (−0 is not 0), else nil.
func (r *FreshRows) rowsOf(fp, id string, x []float64) (fa, fb []float32) {
	if r == nil || !r.Kept || r.fp != fp {
		return nil, nil
	}
	i, ok := r.at[id]
	if !ok || !vec.SameBits(r.x[i], x) {
		return nil, nil
	}
	return r.g[0][i], r.g[1][i]
}

// selectRows runs both views' greedy selections on the rows that rows returns.
func selectRows(ctx context.Context, f *pipeline.Features, pcfg coreset.Config, ids []string, rows func(v int) ([][]float32, error)) (*Selection, error) {
	s := &Selection{}
	// The two views' selections are independent: they run side by side (joined here),
	// each refreshing stale rows on half the cores (GreedyOptions.Beside).
	var errs [2]error
	var wg sync.WaitGroup
	for v := range 2 {
		wg.Go(func() {
			var opt coreset.GreedyOptions
			if s.G[v], errs[v] = rows(v); errs[v] != nil {
				return
			}
			if s.M[v], opt, errs[v] = pcfg.PlanRows32(ids, s.G[v]); errs[v] != nil {
				return
			}
			opt.Beside = 1
			s.Res[v], errs[v] = coreset.GreedyRows32(ctx, s.G[v], f.Dim(), s.M[v], opt)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// PointsHash identifies a set of points: SHA-256 over the sorted ids with their inputs
// and labels. A model records the hash of the points it was fitted on.
func PointsHash(ids []string, entries []*Entry) string {
	h := sha256.New()
	var b [8]byte
	for i, id := range ids {
		binary.LittleEndian.PutUint64(b[:], uint64(len(id)))
		h.Write(b[:])
		h.Write([]byte(id))
		e := entries[i]
		for _, v := range e.X {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
		lab := uint64(math.MaxUint64)
		if e.HasLabel {
			lab = uint64(e.Label)
		}
		binary.LittleEndian.PutUint64(b[:], lab)
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DropPending forgets the pending deletions that were audited (their records left
// the store in the audit's transaction).
func (in *State) DropPending(done []*Deletion) {
	in.pending = slices.DeleteFunc(in.pending, func(r *Deletion) bool { return slices.Contains(done, r) })
}
