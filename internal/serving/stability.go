package serving

import (
	"slices"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
)

// Landmarks are one pool's landmarks as a ranking reads them: ids and their augmented
// inputs (M×D, row-major), in model row order.
type Landmarks struct {
	IDs []string
	X   []float64
}

// ReseedJaccard is the pool part of an answer's stability: the mean, over the query
// inputs qs (each of length D), of the Jaccard index of the sets of point ids among the
// top-k landmarks by exact eNTK similarity k*(x_t, x_ℓ) under the served pool a and
// under pool c, the pool a deployment with another model.seed selects from the same
// points. A landmark id counts once (its best view). It returns false when either pool's
// exact rows (full or factored, NewExactRows) exceed budget bytes, when a pool has no
// more than k distinct ids, or when qs is empty. The rows are computed on all cores and
// dropped afterwards.
func ReseedJaccard(b entk.Backbone, a, c Landmarks, qs [][]float64, k int, budget int64) (float64, bool) {
	return ReseedJaccardExcept(b, a, c, qs, nil, k, budget)
}

// ReseedJaccardExcept is ReseedJaccard with query i leaving out the landmarks of id
// skip[i] in both pools (skip nil or "": none): a stored point asked as a query is then
// ranked against the other points only, as an unseen input would be, instead of finding
// itself in one pool and not in the other. The queries run side by side on all cores
// (one workspace per goroutine), each query's index computed as on one goroutine, and
// the indices are summed in query order after, so the mean does not depend on
// GOMAXPROCS.
func ReseedJaccardExcept(b entk.Backbone, a, c Landmarks, qs [][]float64, skip []string, k int, budget int64) (float64, bool) {
	return ReseedJaccardOn(b, a, c, qs, skip, k, budget, nil)
}

// ReseedJaccardOn is ReseedJaccardExcept with either pool's rows on disk when they
// exceed budget bytes and fit disk's (as New serves them: a model whose rows are on
// disk gets its stability measured too; nil: memory only), bit for bit the memory
// result. Disk rows are unmapped before it returns.
func ReseedJaccardOn(b entk.Backbone, a, c Landmarks, qs [][]float64, skip []string, k int, budget int64, disk *Disk) (float64, bool) {
	j, ok, _ := ReseedJaccardRows(b, a, c, qs, skip, k, budget, disk, Known{})
	return j, ok
}

// ReseedJaccardRows is ReseedJaccardOn that also returns the served pool a's exact rows
// when it computed them in memory, with their Gram matrix computed: New given them as
// Input.Exact for the same landmark inputs a.X and budget builds the model it would
// build from scratch (the rows are a pure function of the backbone, the inputs and the
// budget), without computing them again. Otherwise (rows on disk, none computed) it
// returns nil. The caller owns the rows and must not modify them.
//
// The rows in memory reuse what they can (NewExactRowsReusing): a's the rows of prev
// (the rows an earlier call returned, with their inputs: after a refit that left the
// pool as it was, all of them, with their Gram matrix), and c's the rows of a and of
// prev (the two pools share most landmarks: tolerant pivoting selects the same points
// under both seeds). The outcome is the same bit for bit.
func ReseedJaccardRows(b entk.Backbone, a, c Landmarks, qs [][]float64, skip []string, k int, budget int64, disk *Disk,
	prev Known) (float64, bool, *ExactRows) {
	if len(qs) == 0 || k < 1 || distinct(a.IDs) <= k+1 || distinct(c.IDs) <= k+1 {
		return 0, false, nil
	}
	ra, errA := exactRowsOn(b, a.X, len(a.IDs), budget, disk, 0, prev)
	rc, errC := exactRowsOn(b, c.X, len(c.IDs), budget, disk, 0, Known{Rows: ra, X: a.X}, prev)
	defer rc.drop()
	if ra == nil || rc == nil || errA != nil || errC != nil {
		ra.drop()
		return 0, false, nil
	}
	j := reseedMean(b, a, c, ra, rc, qs, skip, k)
	if ra.disk {
		ra.drop()
		return j, true, nil
	}
	ra.gram(len(a.IDs))
	return j, true, ra
}

// reseedMean is ReseedJaccardOn's mean over qs, given both pools' rows.
func reseedMean(b entk.Backbone, a, c Landmarks, ra, rc *ExactRows, qs [][]float64, skip []string, k int) float64 {
	jac := make([]float64, len(qs))
	workers := par.Workers(len(qs), 1)
	ws := make([]*reseedWorker, workers)
	par.For(len(qs), 1, workers, func(w, lo, hi int) {
		if ws[w] == nil { // only goroutine w touches ws[w]
			ws[w] = newReseedWorker(b, ra, rc)
		}
		for i := lo; i < hi; i++ {
			var self string
			if skip != nil {
				self = skip[i]
			}
			jac[i] = ws[w].jaccard(ra, rc, a.IDs, c.IDs, qs[i], self, k)
		}
	})
	var sum float64
	for _, j := range jac {
		sum += j
	}
	return sum / float64(len(qs))
}

// reseedWorker is one goroutine's scratch for ReseedJaccardExcept: a workspace per pool
// (one for both when their rows have the same representation: the same query row then
// fits both) and a kernel row per pool.
type reseedWorker struct {
	wa, wc     *Workspace
	rowA, rowC []float64
}

// newReseedWorker readies a reseedWorker for the rows ra and rc on backbone b.
func newReseedWorker(b entk.Backbone, ra, rc *ExactRows) *reseedWorker {
	r := &reseedWorker{wa: new(Workspace), rowA: make([]float64, len(ra.diag)), rowC: make([]float64, len(rc.diag))}
	ra.ready(r.wa, b)
	r.wc = r.wa
	if ra.Factored() != rc.Factored() {
		r.wc = new(Workspace)
		rc.ready(r.wc, b)
	}
	return r
}

// jaccard is the Jaccard index of the top-k ids of the query x under the pools' rows
// ra (ids aIDs) and rc (cIDs), leaving out the id self.
func (r *reseedWorker) jaccard(ra, rc *ExactRows, aIDs, cIDs []string, x []float64, self string, k int) float64 {
	ra.queryTo(r.wa, r.wa.phi, x)
	if r.wc != r.wa {
		rc.queryTo(r.wc, r.wc.phi, x)
	}
	ra.kernelRowTo(r.wa, r.rowA, r.wa.phi)
	rc.kernelRowTo(r.wc, r.rowC, r.wc.phi)
	ta, tc := topIDs(r.rowA, aIDs, k, self), topIDs(r.rowC, cIDs, k, self)
	in := 0
	for _, id := range ta {
		if slices.Contains(tc, id) {
			in++
		}
	}
	return float64(in) / float64(2*k-in)
}

// topIDs returns the k distinct ids of highest score (an id scores its best landmark),
// ties by the lower landmark row, leaving out skip.
func topIDs(row []float64, ids []string, k int, skip string) []string {
	best := map[string]int{} // id → its best landmark row
	for l, id := range ids {
		if id == skip {
			continue
		}
		if b, ok := best[id]; !ok || row[l] > row[b] {
			best[id] = l
		}
	}
	rows := make([]int, 0, len(best))
	for _, l := range best {
		rows = append(rows, l)
	}
	slices.SortFunc(rows, func(x, y int) int {
		switch {
		case row[x] > row[y]:
			return -1
		case row[x] < row[y]:
			return 1
		}
		return x - y
	})
	out := make([]string, k)
	for i := range out {
		out[i] = ids[rows[i]]
	}
	return out
}

func distinct(ids []string) int {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	return len(seen)
}
