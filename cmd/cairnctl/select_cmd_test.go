package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// refGreedy is the textbook Schur-complement pivoted Cholesky on K (paper Prop. greedy):
// pivot = argmax residual diagonal (lowest index on ties), R ← R − r_p r_pᵀ / R_pp.
// It returns the pivots and tr R after each one.
func refGreedy(k [][]float64, m int) ([]int, []float64) {
	n := len(k)
	r := make([][]float64, n)
	for i := range k {
		r[i] = append([]float64(nil), k[i]...)
	}
	var piv []int
	var tr []float64
	for t := 0; t < m; t++ {
		p := 0
		for j := 1; j < n; j++ {
			if r[j][j] > r[p][p] {
				p = j
			}
		}
		d := r[p][p]
		col := make([]float64, n)
		for i := range col {
			col[i] = r[i][p]
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				r[i][j] -= col[i] * col[j] / d
			}
		}
		piv = append(piv, p)
		var s float64
		for i := 0; i < n; i++ {
			s += r[i][i]
		}
		tr = append(tr, s)
	}
	return piv, tr
}

// TestSelectFeatures runs `cairnctl select --features` on a full-rank linear kernel and
// compares the landmarks, the residual curve, tr K and the exact d_eff with references
// computed here from K = G Gᵀ. The curve is compared at 1e-9 relative to tr K: both sides
// accumulate O(m·n·ε·max K) rounding, far below that.
func TestSelectFeatures(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, q, m = 30, 8, 6
	g := make([][]float64, n)
	var csv strings.Builder
	for i := range g {
		g[i] = make([]float64, q)
		for j := range g[i] {
			g[i][j] = r.NormFloat64() * float64(1+j%3) // uneven spectrum
			if j > 0 {
				csv.WriteByte(',')
			}
			fmt.Fprintf(&csv, "%.17g", g[i][j])
		}
		csv.WriteByte('\n')
	}
	path := writeTempCSV(t, csv.String())
	var out bytes.Buffer
	// --normalize=false --tolerance=0: refGreedy takes the exact argmax of the raw
	// residuals (TestSelectNormalize and TestSelectTolerance check the default rule).
	if err := cmdRun("select", []string{"--features", path, "--m", fmt.Sprint(m), "--lambda", "0.5", "--seed", "1", "--normalize=false", "--tolerance=0"}, &out); err != nil {
		t.Fatalf("select: %v", err)
	}
	var got struct {
		Landmarks     []int     `json:"landmarks"`
		ResidualTrace []float64 `json:"residual_trace"`
		Trace         float64   `json:"trace"`
		Deff          struct {
			Lambda     float64 `json:"lambda"`
			Exact      float64 `json:"exact"`
			SLQ        float64 `json:"slq"`
			SLQError   float64 `json:"slq_error"`
			SLQQuadErr float64 `json:"slq_quadrature_error"`
			Probes     int     `json:"slq_probes"`
			StepsUsed  int     `json:"slq_steps_used"`
		} `json:"deff"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output: %v\n%s", err, out.String())
	}

	k := make([][]float64, n)
	sym := mat.NewSymDense(n, nil)
	var trK float64
	for i := range k {
		k[i] = make([]float64, n)
		for j := range k[i] {
			for c := 0; c < q; c++ {
				k[i][j] += g[i][c] * g[j][c]
			}
			sym.SetSym(i, j, k[i][j])
		}
		trK += k[i][i]
	}
	wantPiv, wantTr := refGreedy(k, m)
	if fmt.Sprint(got.Landmarks) != fmt.Sprint(wantPiv) {
		t.Errorf("landmarks: got %v, want %v", got.Landmarks, wantPiv)
	}
	if len(got.ResidualTrace) != m {
		t.Fatalf("residual_trace has %d values, want %d", len(got.ResidualTrace), m)
	}
	for i := range wantTr {
		if math.Abs(got.ResidualTrace[i]-wantTr[i]) > 1e-9*trK {
			t.Errorf("residual_trace[%d]: got %.12g, want %.12g", i, got.ResidualTrace[i], wantTr[i])
		}
	}
	if math.Abs(got.Trace-trK) > 1e-12*trK {
		t.Errorf("trace: got %.15g, want %.15g", got.Trace, trK)
	}
	var eig mat.EigenSym
	if !eig.Factorize(sym, false) {
		t.Fatal("eigendecomposition failed")
	}
	var deff float64
	for _, l := range eig.Values(nil) {
		if l > 0 {
			deff += l / (l + 0.5)
		}
	}
	if got.Deff.Lambda != 0.5 || math.Abs(got.Deff.Exact-deff) > 1e-9*deff {
		t.Errorf("deff: got lambda %v exact %.12g, want 0.5 and %.12g", got.Deff.Lambda, got.Deff.Exact, deff)
	}
	// SLQ is stochastic: its reported errors must cover the truth within 5 of its
	// standard errors plus its quadrature bound (or be within 1%, the target).
	if e := math.Abs(got.Deff.SLQ - deff); e > math.Max(5*got.Deff.SLQError+got.Deff.SLQQuadErr, 0.01*deff) {
		t.Errorf("deff slq: got %.6g ± %.3g (quadrature ≤ %.3g), exact %.6g", got.Deff.SLQ, got.Deff.SLQError, got.Deff.SLQQuadErr, deff)
	}
	// q = 8 is below the default deflation rank: the deflated part is all of d_eff and
	// no probes run.
	if got.Deff.SLQQuadErr < 0 || got.Deff.Probes != 0 || got.Deff.SLQError != 0 || got.Deff.StepsUsed < 1 {
		t.Errorf("deff slq: quadrature error %v, standard error %v, %d probes, %d steps used", got.Deff.SLQQuadErr, got.Deff.SLQError, got.Deff.Probes, got.Deff.StepsUsed)
	}
}

func TestSelectRejects(t *testing.T) {
	path := writeTempCSV(t, "1,2\n3,4\n5,6\n")
	cases := [][]string{
		{"--features", path, "--m", "0"},
		{"--features", path, "--m", "2", "--selector", "nope"},
		{"--m", "2"}, // neither --data nor --features
		{"--features", writeTempCSV(t, "1,2\n3,x\n"), "--m", "1"},
	}
	for _, args := range cases {
		var out bytes.Buffer
		if err := cmdRun("select", args, &out); err == nil {
			t.Errorf("select %v: got nil error and %q, want an error", args, out.String())
		}
	}
}
