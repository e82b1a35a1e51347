package ingest

import (
	"context"
	"slices"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
)

// Reseed is the measurement behind the pool part of an answer's stability: what a
// deployment that differs only in model.seed would select from the same points, and how
// much the top-k of a query moves between the two pools.
type Reseed struct {
	// Jaccard is serving.ReseedJaccard of the served and the reseeded pool over the
	// sample queries; Measured is false when it could not be computed (exact rows over
	// budget, too few landmarks or queries).
	Jaccard  float64
	Measured bool
	// Seed is the reseeded pipeline's seed, Queries the sample's size, PoolJaccard the
	// Jaccard index of the two pools' distinct ids.
	Seed        uint64
	Queries     int
	PoolJaccard float64
	// Rows are the served pool's exact rows when the measurement computed them in
	// memory (serving.ReseedJaccardRows), for the inputs RowsX (view A's pivots, then
	// view B's, as serving.Input.LandmarkX lists them); nil otherwise.
	Rows  *serving.ExactRows
	RowsX []float64
	// Fresh are the reseeded features of every point, for the next measurement to reuse
	// (SelectFresh); nil when the measurement did not get to them.
	Fresh *FreshRows
}

// RowsOf returns Rows when they are of the landmark inputs x, bit for bit (−0 is not
// 0), else nil.
func (rs Reseed) RowsOf(x []float64) *serving.ExactRows {
	if rs.Rows == nil || !vec.SameBits(rs.RowsX, x) {
		return nil
	}
	return rs.Rows
}

// MeasureReseed selects the pool again under the sketch of seed rng.Seed(seed,
// "ingest/reseed") (the views are f's: model.view_seed is shared), with every feature
// computed afresh (SelectFresh), and compares the top-k by exact eNTK similarity under
// both pools for nq stored points (the first in the order of rng.Seed(seed,
// "ingest/reseed/query/<id>"), a uniform sample of the data), each ranked against the
// other points only (serving.ReseedJaccardExcept), as an unseen input is. Sampling only
// points that are landmarks of neither pool biased the figure low: those sit in dense
// regions, among many near-equal neighbours (Fashion-MNIST: 0.56–0.68 measured against
// 0.89 between two daemons).
// Its cost is a sync's featurization and selection plus both pools' exact rows: O(n)
// like a sync, scheduled with the refit; the served pool's rows, when held in memory,
// come back in Rows for the serving form to reuse. prev is an earlier measurement's
// outcome (zero: none): the reseeded features of the points it holds with the same
// input (Fresh) and the exact rows of the landmarks it holds with the same input (Rows)
// are reused, so a refit after a few changes featurizes only those points and computes
// only the new landmarks' rows; the outcome is the same bit for bit. sel is the served
// selection of snap.
func MeasureReseed(ctx context.Context, f *pipeline.Features, pcfg coreset.Config, seed uint64, snap *Snapshot,
	sel *Selection, k, nq int, budget int64, disk *serving.Disk, prev Reseed) (Reseed, error) {
	rs := Reseed{Seed: rng.Seed(seed, "ingest/reseed")}
	g, err := f.Reseeded(rs.Seed)
	if err != nil {
		return rs, err
	}
	pc := pcfg
	pc.Seed = rs.Seed
	sh, fresh, err := SelectFresh(ctx, g, pc, snap.IDs, snap.Entries, prev.Fresh)
	if err != nil {
		return rs, err
	}
	a, used := landmarksOf(f, snap, sel)
	c, usedC := landmarksOf(f, snap, sh)
	inter := 0
	for id := range used {
		if usedC[id] {
			inter++
		}
	}
	if u := len(used) + len(usedC) - inter; u > 0 {
		rs.PoolJaccard = float64(inter) / float64(u)
	}
	cand := make([]int, len(snap.IDs))
	for i := range cand {
		cand[i] = i
	}
	key := func(i int) uint64 { return rng.Seed(seed, "ingest/reseed/query/"+snap.IDs[i]) }
	slices.SortFunc(cand, func(x, y int) int {
		if kx, ky := key(x), key(y); kx != ky {
			if kx < ky {
				return -1
			}
			return 1
		}
		return x - y
	})
	cand = cand[:min(nq, len(cand))]
	qs, skip := make([][]float64, len(cand)), make([]string, len(cand))
	for j, i := range cand {
		qs[j], skip[j] = snap.Entries[i].X, snap.IDs[i]
	}
	rs.Queries, rs.Fresh = len(qs), fresh
	rs.Jaccard, rs.Measured, rs.Rows = serving.ReseedJaccardRows(f.Backbone(), a, c, qs, skip, k, budget, disk,
		serving.Known{Rows: prev.Rows, X: prev.RowsX})
	if rs.Rows != nil {
		rs.RowsX = a.X
	}
	return rs, ctx.Err()
}

// landmarksOf lists a selection's pivots of both views (view A's, then view B's) with
// their augmented inputs, and the set of their ids.
func landmarksOf(f *pipeline.Features, snap *Snapshot, sel *Selection) (serving.Landmarks, map[string]bool) {
	d := f.InputDim()
	var l serving.Landmarks
	used := map[string]bool{}
	for v := range 2 {
		for _, r := range sel.Res[v].Pivots {
			id := snap.IDs[r]
			x := make([]float64, d)
			f.ViewTo(x, snap.Entries[r].X, id, v)
			l.IDs, l.X = append(l.IDs, id), append(l.X, x...)
			used[id] = true
		}
	}
	return l, used
}
