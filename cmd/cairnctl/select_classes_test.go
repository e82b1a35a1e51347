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

// TestSelectNormalize: select's pc-ntk follows --normalize (default true, as the
// daemon's pool.normalize): its landmarks and residual curve are coreset.Greedy's with
// Normalize and the top-up keys of the rows, and --normalize=false gives the raw rule's
// (both by the exact argmax, --tolerance=0; TestSelectTolerance has the default). The
// JSON says which rule ran.
func TestSelectNormalize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	n, q, m := 40, 6, 8
	// Row norms over orders of magnitude.
	g, path := randomFeatures(t, r, n, q, func() float64 { return math.Exp(2 * r.NormFloat64()) }, func(int) float64 { return 1 })
	for _, norm := range []bool{true, false} {
		args := []string{"--features", path, "--m", fmt.Sprint(m), "--seed", "2", "--tolerance=0"}
		if !norm {
			args = append(args, "--normalize=false")
		}
		got := runSelect(t, args)
		want, err := coreset.Greedy(g, n, q, m, coreset.GreedyOptions{Normalize: norm, TopUpKeys: coreset.TopUpKeys(2, n)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Normalize != norm || !reflect.DeepEqual(got.Landmarks, want.Pivots) || !reflect.DeepEqual(got.ResidualTrace, want.ResidualTrace) {
			t.Errorf("normalize %v: got %v %v %v, want %v %v", norm, got.Normalize, got.Landmarks, got.ResidualTrace, want.Pivots, want.ResidualTrace)
		}
	}
}

// selectedRows are the fields of select's JSON that the pivot-rule tests compare with
// coreset.Greedy.
type selectedRows struct {
	Normalize     bool      `json:"normalize"`
	Tolerance     float64   `json:"tolerance"`
	Landmarks     []int     `json:"landmarks"`
	ResidualTrace []float64 `json:"residual_trace"`
}

// runSelect runs `cairnctl select` with args and decodes its output.
func runSelect(t *testing.T, args []string) selectedRows {
	t.Helper()
	var out bytes.Buffer
	if err := cmdRun("select", args, &out); err != nil {
		t.Fatal(err)
	}
	var got selectedRows
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// randomFeatures returns n random rows of q features (row-major; row i scaled by a
// rowScale() drawn for it, column j divided by colDiv(j)) and the path of the same rows
// written as a CSV file with every digit.
func randomFeatures(t *testing.T, r *rand.Rand, n, q int, rowScale func() float64, colDiv func(int) float64) ([]float64, string) {
	t.Helper()
	g := make([]float64, n*q)
	var csv strings.Builder
	for i := range n {
		s := rowScale()
		for j := range q {
			g[i*q+j] = s * r.NormFloat64() / colDiv(j)
			if j > 0 {
				csv.WriteByte(',')
			}
			fmt.Fprintf(&csv, "%.17g", g[i*q+j])
		}
		csv.WriteByte('\n')
	}
	return g, writeTempCSV(t, csv.String())
}
