package offline

import (
	"reflect"
	"testing"
)

// TestClasses: per-label landmark and stored counts, their share ratio and its
// minimum, by hand.
func TestClasses(t *testing.T) {
	labels := []int{2, 0, 0, 1, 0, 2, 1, 0} // 4 of label 0, 2 of 1, 2 of 2
	got := Classes(labels, []int{1, 3, 5, 6})
	want := &ClassCounts{
		Labels: []ClassCount{
			{Label: 0, Landmarks: 1, Stored: 4, ShareRatio: 0.5}, // (1/4)/(4/8)
			{Label: 1, Landmarks: 2, Stored: 2, ShareRatio: 2},
			{Label: 2, Landmarks: 1, Stored: 2, ShareRatio: 1},
		},
		MinShareRatio: 0.5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classCounts = %+v, want %+v", got, want)
	}
	if got := Classes(labels, []int{1}); got.MinShareRatio != 0 || got.Labels[1].Landmarks != 0 {
		t.Errorf("a label without landmarks: %+v, want ratio 0", got)
	}
	if Classes(nil, []int{0}) != nil || Classes(labels, nil) != nil {
		t.Error("no labels or no landmarks: want nil")
	}
}
