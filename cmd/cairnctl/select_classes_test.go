package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/coreset"
)

// TestClassCounts: per-label landmark and stored counts, their share ratio and its
// minimum, by hand.
func TestClassCounts(t *testing.T) {
	labels := []int{2, 0, 0, 1, 0, 2, 1, 0} // 4 of label 0, 2 of 1, 2 of 2
	got := classCounts(labels, []int{1, 3, 5, 6})
	want := &classesJSON{
		Labels: []classCountJSON{
			{Label: 0, Landmarks: 1, Stored: 4, ShareRatio: 0.5}, // (1/4)/(4/8)
			{Label: 1, Landmarks: 2, Stored: 2, ShareRatio: 2},
			{Label: 2, Landmarks: 1, Stored: 2, ShareRatio: 1},
		},
		MinShareRatio: 0.5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classCounts = %+v, want %+v", got, want)
	}
	if got := classCounts(labels, []int{1}); got.MinShareRatio != 0 || got.Labels[1].Landmarks != 0 {
		t.Errorf("a label without landmarks: %+v, want ratio 0", got)
	}
	if classCounts(nil, []int{0}) != nil || classCounts(labels, nil) != nil {
		t.Error("no labels or no landmarks: want nil")
	}
}

// TestSelectNormalize: select's pc-ntk follows --normalize (default true, as the
// daemon's pool.normalize): its landmarks and residual curve are coreset.Greedy's with
// Normalize and the top-up keys of the rows, and --normalize=false gives the raw rule's
// (both by the exact argmax, --tolerance=0; TestSelectTolerance has the default). The
// JSON says which rule ran.
func TestSelectNormalize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	n, q, m := 40, 6, 8
	g := make([]float64, n*q)
	var csv strings.Builder
	for i := range n {
		s := math.Exp(2 * r.NormFloat64()) // row norms over orders of magnitude
		for j := range q {
			g[i*q+j] = s * r.NormFloat64()
			if j > 0 {
				csv.WriteByte(',')
			}
			fmt.Fprintf(&csv, "%.17g", g[i*q+j])
		}
		csv.WriteByte('\n')
	}
	path := writeTempCSV(t, csv.String())
	for _, norm := range []bool{true, false} {
		args := []string{"--features", path, "--m", fmt.Sprint(m), "--seed", "2", "--tolerance=0"}
		if !norm {
			args = append(args, "--normalize=false")
		}
		var out bytes.Buffer
		if err := cmdRun("select", args, &out); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Normalize     bool      `json:"normalize"`
			Landmarks     []int     `json:"landmarks"`
			ResidualTrace []float64 `json:"residual_trace"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want, err := coreset.Greedy(g, n, q, m, coreset.GreedyOptions{Normalize: norm, TopUpKeys: coreset.TopUpKeys(2, n)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Normalize != norm || !reflect.DeepEqual(got.Landmarks, want.Pivots) || !reflect.DeepEqual(got.ResidualTrace, want.ResidualTrace) {
			t.Errorf("normalize %v: got %v %v %v, want %v %v", norm, got.Normalize, got.Landmarks, got.ResidualTrace, want.Pivots, want.ResidualTrace)
		}
	}
}
