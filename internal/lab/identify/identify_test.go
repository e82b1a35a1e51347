package identify

import (
	"slices"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// TestRandomSets: every set holds k distinct indices in [0, m), the draw is the same
// under the same seed, and over many draws every index is picked about k/m of the time
// (a binomial count of n·k/m = 600 with σ ≈ 22; ±100 is over four σ).
func TestRandomSets(t *testing.T) {
	const m, k, n = 10, 3, 2000
	sets := randomSets(rng.New(7, "cairnctl/audit/random"), m, k, n)
	again := randomSets(rng.New(7, "cairnctl/audit/random"), m, k, n)
	count := make([]int, m)
	for i, s := range sets {
		if len(s) != k || !slices.Equal(s, again[i]) {
			t.Fatalf("set %d = %v (again %v): want %d indices, the same under the same seed", i, s, again[i], k)
		}
		u := slices.Clone(s)
		slices.Sort(u)
		if len(slices.Compact(u)) != k || u[0] < 0 || u[k-1] >= m {
			t.Fatalf("set %d = %v: want %d distinct indices in [0, %d)", i, s, k, m)
		}
		for _, l := range s {
			count[l]++
		}
	}
	for l, c := range count {
		if c < n*k/m-100 || c > n*k/m+100 {
			t.Errorf("index %d picked %d times, want %d ± 100", l, c, n*k/m)
		}
	}
}
