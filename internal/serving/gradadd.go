package serving

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
)

// WithGradPoints returns a copy of s whose gradient rows also cover pts, points stored
// since its rows were built: a point with no unmasked row at its version and label gets
// one (one forward and one backward pass, on every core), and a row of its id at another
// version or label is masked. So the gradient ranking keeps ranking every labelled stored
// point between refits, not only those of the last refit's snapshot. Points without a
// label in [0, d) are skipped, as NewGradRows skips them; an id given twice gets the row
// of its last point.
//
// When the rows would take more than budget bytes (masked rows included, until a refit
// drops them), or a new row is not finite, the copy has no rows and GradErr says why: its
// default answers fall back as a model without rows does. It returns s itself when s has
// no rows or every point is covered already.
func (s *Model) WithGradPoints(pts []GradPoint, budget int64) *Model {
	g := s.Grad
	if g == nil || len(pts) == 0 {
		return s
	}
	d := g.b.OutDim()
	want := make(map[string]int, len(pts)) // id → its last labelled point in pts
	for j, pt := range pts {
		if pt.Label >= 0 && pt.Label < d {
			want[pt.ID] = j
		}
	}
	// One pass over the unmasked rows (an id has at most one): a row at the wanted
	// version and label covers its point; a row at another is masked.
	gact := make([]int, 0, len(s.gactive)+len(want))
	for _, i := range s.gactive {
		if j, ok := want[g.IDs[i]]; ok {
			if g.versions[i] != pts[j].Version || g.labels[i] != pts[j].Label {
				continue
			}
			delete(want, g.IDs[i])
		}
		gact = append(gact, i)
	}
	var add []GradPoint
	for j, pt := range pts { // in pts's order, each id once
		if k, ok := want[pt.ID]; ok && k == j {
			add = append(add, pt)
		}
	}
	if len(add) == 0 {
		return s
	}
	c := *s
	if n := len(g.IDs) + len(add); GradBytes(n, g.dim) > budget {
		c.Grad, c.gactive = nil, nil
		c.GradErr = fmt.Errorf("%w: %d gradient rows of %d floats (the last refit's and those of the points stored since) take %d bytes, over query.gradient_memory_bytes %d",
			ErrRanking, n, g.dim, GradBytes(n, g.dim), budget)
		return &c
	}
	ng, err := g.extended(add)
	if err != nil {
		c.Grad, c.gactive, c.GradErr = nil, nil, err
		return &c
	}
	for i := len(g.IDs); i < len(ng.IDs); i++ {
		gact = append(gact, i)
	}
	c.Grad, c.gactive = ng, gact
	return &c
}

// extended is g with a row for each of pts appended. The rows' blocks, ids and norms live
// in arrays that g's headers share: a header appends in place only when it is the longest
// (its length is tail, which it advances before writing), so no header ever writes where
// another reads; any other copies the ids, norms and the partial last block. No full
// block is ever copied: an extension costs its own rows, not the stored ones.
func (g *GradRows) extended(pts []GradPoint) (*GradRows, error) {
	n0, n := len(g.IDs), len(g.IDs)+len(pts)
	ng := *g
	if g.tail == nil || !g.tail.CompareAndSwap(int64(n0), int64(n)) {
		ng.IDs, ng.versions, ng.labels = slices.Clip(g.IDs), slices.Clip(g.versions), slices.Clip(g.labels)
		ng.xs = slices.Clip(g.xs)
		ng.norms = slices.Clip(g.norms)
		// Full blocks are never written again and stay shared; the partial last one is
		// copied.
		ng.blocks = slices.Clone(g.blocks[:(n0+gradBlock-1)/gradBlock])
		if r := n0 % gradBlock; r != 0 {
			last := make([]float32, gradBlock*g.dim)
			copy(last, g.blocks[n0/gradBlock][:r*g.dim])
			ng.blocks[len(ng.blocks)-1] = last
		}
		ng.tail = new(atomic.Int64)
		ng.tail.Store(int64(n))
	}
	for _, pt := range pts {
		ng.IDs, ng.versions, ng.labels = append(ng.IDs, pt.ID), append(ng.versions, pt.Version), append(ng.labels, pt.Label)
		ng.xs = append(ng.xs, pt.X)
		ng.classes = max(ng.classes, pt.Label+1)
	}
	ng.norms = slices.Grow(ng.norms, len(pts))[:n]
	ng.blocks = ng.blocks[:(n0+gradBlock-1)/gradBlock]
	ng.grow(n)
	const chunk = 8
	par.For(len(pts), chunk, par.Workers(len(pts), chunk), func(_, lo, hi int) {
		var w Workspace
		r := make([]float64, ng.dim)
		for j := lo; j < hi; j++ {
			pt := pts[j]
			ng.norms[n0+j] = ng.rowTo(&w, r, pt.X, func(c, out []float64) { entk.PointCotangentTo(c, out, pt.Label, true) })
			dst := ng.row(n0 + j)
			for k, v := range r {
				dst[k] = float32(v)
			}
		}
	})
	for j := n0; j < len(ng.norms); j++ {
		if v := ng.norms[j]; math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: point %q has a non-finite gradient row", ErrModel, ng.IDs[j])
		}
	}
	return &ng, nil
}
