package ui

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample records read() every interval, and once at once, until ctx ends; it returns
// nil then. The daemon runs it on a goroutine of its own (a work component).
func (r *Recorder) Sample(ctx context.Context, every time.Duration, read func() Reading) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r.Record(read())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// LabelRows returns the overview's per-label rows (each with its label, points and
// landmarks) with each row's coverage set, its landmark share over its point share,
// sorted by label (numerically when the labels are integers, as they always are on
// the wire). rows is modified.
func LabelRows(rows []LabelRow) []LabelRow {
	var points, landmarks int
	for _, r := range rows {
		points, landmarks = points+r.Points, landmarks+r.Landmarks
	}
	for i, r := range rows {
		if r.Points > 0 && landmarks > 0 {
			rows[i].Coverage = (float64(r.Landmarks) / float64(landmarks)) / (float64(r.Points) / float64(points))
		}
	}
	slices.SortFunc(rows, func(a, b LabelRow) int {
		x, errA := strconv.Atoi(a.Label)
		y, errB := strconv.Atoi(b.Label)
		if errA == nil && errB == nil {
			return x - y
		}
		return strings.Compare(a.Label, b.Label)
	})
	return rows
}
