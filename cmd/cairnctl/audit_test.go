package main

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/cairnhq/cairn/internal/lab/identify"
)

// TestAuditTableConsistent runs `cairnctl audit` on a small MNIST problem and recomputes
// every percentile and permutation p-value of the table from the reported effects (paper
// appendix D: π = #{Δ(R_t) < Δ_ω}/N, p = (1 + #{Δ(R_t) ≥ Δ_ω})/(N+1)), checks that the
// random sets are shared across rankings (one effects row per seed), and that seed
// stability is a Jaccard mean in [0, 1].
func TestAuditTableConsistent(t *testing.T) {
	args := []string{"--data", "mnist", "--n", "400", "--m", "8", "--h", "2", "--s", "64", "--dim", "16",
		"--epochs", "2", "--k", "3", "--random", "12", "--seeds", "2", "--test-n", "60", "--seed", "5"}
	var out bytes.Buffer
	if err := cmdRun("audit", args, &out); err != nil {
		t.Skipf("audit on MNIST: %v (is the GoMNIST module downloaded?)", err)
	}
	var r identify.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.RandomEffects) != 2 || len(r.Confidence) != 2 {
		t.Fatalf("got %d random-effect rows and %d confidences, want 2 (one per seed)", len(r.RandomEffects), len(r.Confidence))
	}
	for _, name := range []string{"displacement", "contribution", "leave_one_out", "reselection"} {
		row := r.Rankings[name]
		if row == nil || len(row.Effects) != 2 {
			t.Fatalf("ranking %s missing or incomplete: %+v", name, row)
		}
		for s, eff := range row.Effects {
			rnd := r.RandomEffects[s]
			if len(rnd) != 12 {
				t.Fatalf("seed %d: %d random effects, want 12", s, len(rnd))
			}
			var below, atLeast int
			for _, v := range rnd {
				if v < eff {
					below++
				} else {
					atLeast++
				}
			}
			if want := float64(below) / 12; math.Abs(row.Percentiles[s]-want) > 1e-12 {
				t.Errorf("%s seed %d: percentile %v, recomputed %v", name, s, row.Percentiles[s], want)
			}
			if want := float64(1+atLeast) / 13; math.Abs(row.PValues[s]-want) > 1e-12 {
				t.Errorf("%s seed %d: p-value %v, recomputed %v", name, s, row.PValues[s], want)
			}
			if len(row.TopK[s]) != 3 {
				t.Errorf("%s seed %d: top-K has %d ids, want 3", name, s, len(row.TopK[s]))
			}
		}
	}
	for s := range 2 { // Latent-Space Reselection's first pick is the top-1 by ω
		if d, l := r.Rankings["displacement"].TopK[s][0], r.Rankings["reselection"].TopK[s][0]; d != l {
			t.Errorf("seed %d: reselection starts with %s, displacement with %s", s, l, d)
		}
	}
	if !(r.SeedStability >= 0 && r.SeedStability <= 1) {
		t.Errorf("seed stability %v outside [0, 1]", r.SeedStability)
	}
	for _, c := range r.Confidence {
		if !(c > 0 && c <= 1) {
			t.Errorf("confidence %v outside (0, 1]", c)
		}
	}
}
