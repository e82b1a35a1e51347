package offline

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
	pf := Pipeline{Data: "mnist", H: 2, S: 64, N: featureChunk + 77, Seed: 3}
	p, err := Load(&pf)
	if err != nil {
		t.Fatal(err)
	}
	n, q := p.Set.N, p.Q
	want := make([]float64, n*q)
	p.Features.FeaturesTo(want, p.ViewA, n)
	got := FeatureRows(p.Features, p.ViewA, n)
	if len(got) != n {
		t.Fatalf("%d rows, want %d", len(got), n)
	}
	if w := Widen(got, q); !slices.Equal(w, want) {
		t.Fatal("float32 rows differ from the pipeline's features")
	}
	z := mat.NewDense(3, q, slices.Clone(want[5*q:8*q]))
	k := kernelAgainst(p.Features, p.ViewA, n, z)
	var ref mat.Dense
	ref.Mul(mat.NewDense(n, q, want), z.T())
	if !mat.EqualApprox(k, &ref, 1e-12*mat.Norm(&ref, 1)) {
		t.Fatal("chunked kernel differs from the one-product kernel")
	}
}

// TestBlocksCache checks that fits sharing a BlockCache get the blocks a fit without
// one gets, that a second fit on the same flags reuses the featurized rows (no features
// phase) and a third with the same selector its selection, and that other flags replace
// them.
func TestBlocksCache(t *testing.T) {
	pf := Pipeline{Data: "mnist", H: 2, S: 64, M: 8, N: 400, Seed: 1}
	c := &BlockCache{}
	_, ph1, err := Blocks(context.Background(), &pf, "pc-ntk", 0.2, 50, c)
	if err != nil {
		t.Fatal(err)
	}
	held := c.held
	if _, ok := ph1.Phases["features"]; !ok || held == nil {
		t.Fatalf("first fit: phases %v, cache %v", ph1.Phases, held)
	}
	got, ph2, err := Blocks(context.Background(), &pf, "kcenter", 0.2, 50, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ph2.Phases["features"]; ok || c.held != held {
		t.Fatalf("second fit on the same flags recomputed the features: phases %v", ph2.Phases)
	}
	want, _, err := Blocks(context.Background(), &pf, "kcenter", 0.2, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A third fit with the same selector takes the cached selection.
	again, _, err := Blocks(context.Background(), &pf, "kcenter", 0.2, 50, c)
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
	pf2.Seed = 2
	if _, _, err := Blocks(context.Background(), &pf2, "kcenter", 0.2, 50, c); err != nil {
		t.Fatal(err)
	}
	if c.held == held || c.key.Seed != 2 {
		t.Fatal("a fit on other flags reused the cached rows")
	}
}
