package main

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
)

// TestSelectTolerance: select's pc-ntk follows --tolerance (default the daemon's
// pool.tolerance): its landmarks and residual curve are coreset.Greedy's with that
// Tolerance, the pivot keys of the rows (coreset.PivotKeys) and the default normalized
// rule, and --tolerance=0 gives the exact argmax's, which differ here; the JSON says
// which tolerance ran, and a tolerance outside [0, 1) is refused.
func TestSelectTolerance(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 6))
	n, q, m := 60, 6, 10
	g, path := randomFeatures(t, r, n, q, func() float64 { return math.Exp(r.NormFloat64()) }, func(j int) float64 { return float64(1 + j) })
	def := config.Default().Pool.Tolerance
	var pivots [2][]int
	for k, tau := range []float64{def, 0} {
		args := []string{"--features", path, "--m", fmt.Sprint(m), "--seed", "2"}
		if tau != def {
			args = append(args, fmt.Sprintf("--tolerance=%v", tau))
		}
		got := runSelect(t, args)
		want, err := coreset.Greedy(g, n, q, m, coreset.GreedyOptions{Normalize: true, Tolerance: tau, Keys: coreset.PivotKeys(n), TopUpKeys: coreset.TopUpKeys(2, n)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Tolerance != tau || !reflect.DeepEqual(got.Landmarks, want.Pivots) || !reflect.DeepEqual(got.ResidualTrace, want.ResidualTrace) {
			t.Errorf("tolerance %v: got %v %v %v, want %v %v", tau, got.Tolerance, got.Landmarks, got.ResidualTrace, want.Pivots, want.ResidualTrace)
		}
		pivots[k] = got.Landmarks
	}
	if reflect.DeepEqual(pivots[0], pivots[1]) {
		t.Errorf("tolerant and exact pivoting chose the same landmarks %v", pivots[0])
	}
	for _, bad := range []string{"1", "-0.1", "NaN"} {
		err := cmdRun("select", []string{"--features", path, "--m", "4", "--tolerance", bad}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--tolerance") {
			t.Errorf("--tolerance %s: %v, want an error naming --tolerance", bad, err)
		}
	}
}
