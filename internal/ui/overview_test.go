package ui

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestLabelRows: rows sort numerically by label, and a label's coverage is its share of
// the landmarks over its share of the points (1 for a pool that mirrors the points).
func TestLabelRows(t *testing.T) {
	rows := LabelRows([]LabelRow{{Label: "10", Points: 10, Landmarks: 1}, {Label: "2", Points: 30, Landmarks: 3},
		{Label: "0", Points: 60, Landmarks: 0}})
	want := []struct {
		label    string
		coverage float64
	}{{"0", 0}, {"2", (3.0 / 4) / (30.0 / 100)}, {"10", (1.0 / 4) / (10.0 / 100)}}
	for i, w := range want {
		if rows[i].Label != w.label || math.Abs(rows[i].Coverage-w.coverage) > 1e-12 {
			t.Errorf("row %d: %+v, want label %s coverage %g", i, rows[i], w.label, w.coverage)
		}
	}
}

// TestSample: Sample records a reading at once and then every interval, until ctx
// ends.
func TestSample(t *testing.T) {
	r := NewRecorder(4, 8)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan error, 1)
	go func() {
		done <- r.Sample(ctx, time.Millisecond, func() Reading {
			n++
			if n == 3 {
				cancel()
			}
			return Reading{At: time.Now()}
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Errorf("%d readings, want at least 3", n)
	}
}
