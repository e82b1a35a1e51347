package main

import (
	"context"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/fit"
)

// TestFeatureRowsChunks checks the float32 feature rows and the chunked kernel against
// one float64 pipeline call over every row (n spans two chunks): the rows are the
// pipeline's values exactly (it rounds ψ to float32), and the kernel block agrees with
// the one-product block to 1e-12 relative.
func TestFeatureRowsChunks(t *testing.T) {
	pf := pipelineFlags{data: "mnist", h: 2, s: 64, n: featureChunk + 77, seed: 3}
	p, err := load(&pf)
	if err != nil {
		t.Fatal(err)
	}
	n, q := p.set.N, p.q
	want := make([]float64, n*q)
	p.features.FeaturesTo(want, p.viewA, n)
	got := featureRows(p.features, p.viewA, n)
	if len(got) != n {
		t.Fatalf("%d rows, want %d", len(got), n)
	}
	if w := widen(got, q); !slices.Equal(w, want) {
		t.Fatal("float32 rows differ from the pipeline's features")
	}
	z := mat.NewDense(3, q, slices.Clone(want[5*q:8*q]))
	k := kernelAgainst(p.features, p.viewA, n, z)
	var ref mat.Dense
	ref.Mul(mat.NewDense(n, q, want), z.T())
	if !mat.EqualApprox(k, &ref, 1e-12*mat.Norm(&ref, 1)) {
		t.Fatal("chunked kernel differs from the one-product kernel")
	}
}

// TestFitBlocksCache checks that fits sharing a blockCache get the blocks a fit without
// one gets, that a second fit on the same flags reuses the featurized rows (no features
// phase) and a third with the same selector its selection, and that other flags replace
// them.
func TestFitBlocksCache(t *testing.T) {
	pf := pipelineFlags{data: "mnist", h: 2, s: 64, m: 8, n: 400, seed: 1}
	c := &blockCache{}
	_, ph1, err := fitBlocks(context.Background(), &pf, "pc-ntk", 0.2, 50, c)
	if err != nil {
		t.Fatal(err)
	}
	held := c.held
	if _, ok := ph1.phases["features"]; !ok || held == nil {
		t.Fatalf("first fit: phases %v, cache %v", ph1.phases, held)
	}
	got, ph2, err := fitBlocks(context.Background(), &pf, "kcenter", 0.2, 50, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ph2.phases["features"]; ok || c.held != held {
		t.Fatalf("second fit on the same flags recomputed the features: phases %v", ph2.phases)
	}
	want, _, err := fitBlocks(context.Background(), &pf, "kcenter", 0.2, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A third fit with the same selector takes the cached selection.
	again, _, err := fitBlocks(context.Background(), &pf, "kcenter", 0.2, 50, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(held.sels) != 2 {
		t.Fatalf("cached selections: %d, want 2 (pc-ntk, kcenter)", len(held.sels))
	}
	for _, p := range []*fit.Problem{got, again} {
		for name, pair := range map[string][2]*mat.Dense{
			"K_A": {p.KA, want.KA}, "K_B": {p.KB, want.KB}, "K_mm": {p.Kmm, want.Kmm},
			"K_val": {p.Val.K, want.Val.K}, "K_test": {p.Test.K, want.Test.K},
		} {
			if !mat.Equal(pair[0], pair[1]) {
				t.Fatalf("%s with the cache differs from the block without it", name)
			}
		}
	}
	pf2 := pf
	pf2.seed = 2
	if _, _, err := fitBlocks(context.Background(), &pf2, "kcenter", 0.2, 50, c); err != nil {
		t.Fatal(err)
	}
	if c.held == held || c.key.seed != 2 {
		t.Fatal("a fit on other flags reused the cached rows")
	}
}
