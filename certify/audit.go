package certify

import (
	"fmt"
	"math"
	"sort"
)

// Deletion-audit statistics of appendix D (app:identifiability). Δ_ω is the deletion
// effect of a ranking's top-K landmarks, Δ(R_t) those of N random sets of the same size.

func checkEffects(deltaOmega float64, random []float64) error {
	if len(random) == 0 {
		return fmt.Errorf("%w: no random deletion effects", ErrEmpty)
	}
	if math.IsNaN(deltaOmega) || math.IsInf(deltaOmega, 0) {
		return fmt.Errorf("%w: deltaOmega = %v", ErrValue, deltaOmega)
	}
	for t, x := range random {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: random[%d] = %v", ErrValue, t, x)
		}
	}
	return nil
}

// Percentile returns π_ω = (1/N) Σ_t 1[Δ(R_t) < Δ_ω]: the fraction of random deletions
// that do strictly less damage than deleting the ranking's top landmarks.
func Percentile(deltaOmega float64, random []float64) (float64, error) {
	if err := checkEffects(deltaOmega, random); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range random {
		if x < deltaOmega {
			n++
		}
	}
	return float64(n) / float64(len(random)), nil
}

// PermutationPValue returns the one-sided permutation p-value
// p_ω = (1 + #{t : Δ(R_t) ≥ Δ_ω})/(N + 1); it is never below 1/(N+1).
func PermutationPValue(deltaOmega float64, random []float64) (float64, error) {
	if err := checkEffects(deltaOmega, random); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range random {
		if x >= deltaOmega {
			n++
		}
	}
	return float64(1+n) / float64(len(random)+1), nil
}

// Jaccard returns |A∩B|/|A∪B| for two sets of landmark indices (duplicates ignored); two
// empty sets give 1.
func Jaccard(a, b []int) float64 {
	sa := make(map[int]bool, len(a))
	for _, x := range a {
		sa[x] = true
	}
	sb := make(map[int]bool, len(b))
	inter := 0
	for _, x := range b {
		if sb[x] {
			continue
		}
		sb[x] = true
		if sa[x] {
			inter++
		}
	}
	union := len(sa) + len(sb) - inter
	if union == 0 {
		return 1
	}
	return float64(inter) / float64(union)
}

// SeedStability returns J = C(s,2)^{-1} Σ_{u<v} Jaccard(S_u, S_v), the mean pairwise
// Jaccard overlap of the top-K sets from s ≥ 2 training seeds.
func SeedStability(sets [][]int) (float64, error) {
	if len(sets) < 2 {
		return 0, fmt.Errorf("%w: %d sets, want ≥ 2", ErrEmpty, len(sets))
	}
	var sum float64
	pairs := 0
	for u := range sets {
		for v := u + 1; v < len(sets); v++ {
			sum += Jaccard(sets[u], sets[v])
			pairs++
		}
	}
	return sum / float64(pairs), nil
}

// Coverage is the KREPES class coverage number of a ranking.
type Coverage struct {
	// Kappa is κ_C: rank the pool by ω (highest first, ties by lower index) and count the
	// landmarks until every class appears. 0 when some class never appears.
	Kappa   int   `json:"kappa"`
	Covered bool  `json:"covered"`
	Missing []int `json:"missing,omitempty"` // classes absent from the pool
}

// CoverageNumber computes κ_C for the pool's weights omega and labels (labels[ℓ] in
// [0, classes)). The optimum is κ_C = classes. It returns an error wrapping ErrValue for a
// label out of range or a NaN weight, and panics on unequal lengths.
func CoverageNumber(omega []float64, labels []int, classes int) (Coverage, error) {
	if len(omega) != len(labels) {
		panic(fmt.Sprintf("certify: CoverageNumber lengths omega %d, labels %d", len(omega), len(labels)))
	}
	if classes < 1 {
		return Coverage{}, fmt.Errorf("%w: classes = %d, want ≥ 1", ErrValue, classes)
	}
	order := make([]int, len(omega))
	for i := range order {
		if math.IsNaN(omega[i]) {
			return Coverage{}, fmt.Errorf("%w: omega[%d] = NaN", ErrValue, i)
		}
		if labels[i] < 0 || labels[i] >= classes {
			return Coverage{}, fmt.Errorf("%w: labels[%d] = %d, want 0 ≤ label < %d", ErrValue, i, labels[i], classes)
		}
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return omega[order[a]] > omega[order[b]] })
	seen := make([]bool, classes)
	left := classes
	for rank, l := range order {
		if !seen[labels[l]] {
			seen[labels[l]] = true
			left--
			if left == 0 {
				return Coverage{Kappa: rank + 1, Covered: true}, nil
			}
		}
	}
	var c Coverage
	for cl, ok := range seen {
		if !ok {
			c.Missing = append(c.Missing, cl)
		}
	}
	return c, nil
}
