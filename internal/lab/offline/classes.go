package offline

import (
	"math"
	"slices"
)

// ClassCounts is how a view's landmarks spread over the labels, against the stored
// points: for each label its count among the landmarks and among the stored points, and
// the ratio of the two shares, (landmarks/M)/(stored/N) (1: the label has its share of
// the landmarks; 0: it has none). MinShareRatio is the smallest ratio over the labels,
// the number the coverage target bounds (every class at least half its share: ≥ 0.5).
type ClassCounts struct {
	Labels        []ClassCount `json:"labels"`
	MinShareRatio float64      `json:"min_share_ratio"`
}

// ClassCount is one label's row of ClassCounts.
type ClassCount struct {
	Label      int     `json:"label"`
	Landmarks  int     `json:"landmarks"`
	Stored     int     `json:"stored"`
	ShareRatio float64 `json:"share_ratio"`
}

// Classes returns the class counts of the landmarks idx (row indices into labels)
// against all rows of labels, labels in increasing order; nil when there are no rows or
// no landmarks. A landmark row counts once per occurrence.
func Classes(labels, idx []int) *ClassCounts {
	if len(labels) == 0 || len(idx) == 0 {
		return nil
	}
	stored, chosen := map[int]int{}, map[int]int{}
	for _, l := range labels {
		stored[l]++
	}
	for _, i := range idx {
		chosen[labels[i]]++
	}
	keys := make([]int, 0, len(stored))
	for l := range stored {
		keys = append(keys, l)
	}
	slices.Sort(keys)
	out := &ClassCounts{MinShareRatio: math.Inf(1)}
	n, m := float64(len(labels)), float64(len(idx))
	for _, l := range keys {
		c := ClassCount{Label: l, Landmarks: chosen[l], Stored: stored[l]}
		c.ShareRatio = (float64(c.Landmarks) / m) / (float64(c.Stored) / n)
		out.MinShareRatio = math.Min(out.MinShareRatio, c.ShareRatio)
		out.Labels = append(out.Labels, c)
	}
	return out
}
