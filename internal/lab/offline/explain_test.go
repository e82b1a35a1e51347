package offline

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// TestExplainSoundAgainstExactKernel wires Explain to a backbone small enough for the exact
// kernel and checks Thm. topk through it: over many evaluation draws (one per seed), every
// certified top-K must equal the exact-kernel top-K of I*_ℓt = k*(x_ℓ, x_t)·ω_ℓ. With
// δ = 0.05 a wrong certificate is allowed with probability ≤ 0.05 per draw, so any of the
// 60 draws may fail only with small probability; the observed rate is 0 because Chebyshev
// radii are conservative. At least a few draws must certify, so the test cannot pass
// vacuously; and every answer's separation must match its own entries.
func TestExplainSoundAgainstExactKernel(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-16-4", 1)
	if err != nil {
		t.Fatal(err)
	}
	const m, k = 10, 3
	r := rng.New(1, "test/explain")
	lx := make([]float64, m*6)
	for i := range lx {
		lx[i] = r.NormFloat64()
	}
	x := make([]float64, 6)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	ids := make([]string, m)
	omega := make([]float64, m)
	for l := range ids {
		ids[l] = string(rune('a' + l))
		omega[l] = math.Pow(2.5, float64(m-l)) // well-spread weights, so some answers certify
	}
	ws := b.NewWorkspace()
	exact := make([]float64, m)
	for l := range exact {
		exact[l] = entk.ExactKernel(b, lx[l*6:(l+1)*6], x, ws) * omega[l]
	}
	want := topKIDs(exact, ids, k)

	certified := 0
	for seed := uint64(1); seed <= 60; seed++ {
		in := &ExplainInput{
			Backbone: b, H: 512, S: 0, Seed: seed, LandmarkX: lx, LandmarkIDs: ids,
			Omega: omega, OmegaMean: omega, A: mat.NewDense(m, 1, nil), B: []float64{0},
		}
		e, err := Explain(in, x, k, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		lower := math.Inf(1)
		var got []string
		for _, t := range e.TopK {
			lower = min(lower, t.Score-t.Radius)
			got = append(got, t.ID)
		}
		if math.Abs(lower-e.Certificate.LowerTop) > 1e-12*math.Abs(lower) ||
			math.Abs(e.Separation-(e.Certificate.LowerTop-e.Certificate.UpperRest)) > 1e-9*math.Abs(e.Separation) {
			t.Fatalf("seed %d: separation %v inconsistent with top-K %v and upper_rest %v", seed, e.Separation, e.TopK, e.Certificate.UpperRest)
		}
		if (e.Verdict == "certified") != (e.Separation > 0) {
			t.Fatalf("seed %d: verdict %s with separation %v", seed, e.Verdict, e.Separation)
		}
		if e.Verdict == "certified" {
			certified++
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("seed %d: certified top-%d %v, exact %v", seed, k, got, want)
			}
		}
		if e.Certificate.VarianceModel != "exact_two_axis" {
			t.Fatalf("variance model %q, want exact_two_axis for a small backbone", e.Certificate.VarianceModel)
		}
	}
	t.Logf("%d of 60 answers certified", certified)
	if certified < 3 {
		t.Errorf("only %d of 60 answers certified; the test would pass vacuously", certified)
	}
}

func topKIDs(scores []float64, ids []string, k int) []string {
	var out []string
	for _, i := range certify.TopKIndices(scores, k) {
		out = append(out, ids[i])
	}
	slices.Sort(out)
	return out
}
