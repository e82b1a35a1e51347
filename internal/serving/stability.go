package serving

import (
	"slices"

	"github.com/cairnhq/cairn/entk"
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
// itself in one pool and not in the other.
func ReseedJaccardExcept(b entk.Backbone, a, c Landmarks, qs [][]float64, skip []string, k int, budget int64) (float64, bool) {
	if len(qs) == 0 || k < 1 || distinct(a.IDs) <= k+1 || distinct(c.IDs) <= k+1 {
		return 0, false
	}
	ra := NewExactRows(b, a.X, len(a.IDs), budget)
	rc := NewExactRows(b, c.X, len(c.IDs), budget)
	if ra == nil || rc == nil {
		return 0, false
	}
	// One workspace serves both pools when their rows have the same representation (the
	// same query row then fits both).
	wa := new(Workspace)
	ra.ready(wa, b)
	wc := wa
	if ra.Factored() != rc.Factored() {
		wc = new(Workspace)
		rc.ready(wc, b)
	}
	rowA, rowC := make([]float64, len(a.IDs)), make([]float64, len(c.IDs))
	var sum float64
	for i, x := range qs {
		var self string
		if skip != nil {
			self = skip[i]
		}
		ra.queryTo(wa, wa.phi, x)
		if wc != wa {
			rc.queryTo(wc, wc.phi, x)
		}
		ra.kernelRowTo(wa, rowA, wa.phi)
		rc.kernelRowTo(wc, rowC, wc.phi)
		ta, tc := topIDs(rowA, a.IDs, k, self), topIDs(rowC, c.IDs, k, self)
		in := 0
		for _, id := range ta {
			if slices.Contains(tc, id) {
				in++
			}
		}
		sum += float64(in) / float64(2*k-in)
	}
	return sum / float64(len(qs)), true
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
