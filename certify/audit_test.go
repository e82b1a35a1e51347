package certify

import (
	"errors"
	"math"
	"testing"
)

func TestPercentileAndPValue(t *testing.T) {
	tests := []struct {
		name    string
		delta   float64
		random  []float64
		wantPct float64
		wantP   float64
	}{
		// 3 of 5 below 0.5; #{≥ 0.5} = 2 (0.5 ties count against the ranking) → p = 3/6.
		{"ties", 0.5, []float64{0.1, 0.2, 0.5, 0.9, 0.3}, 3.0 / 5, 3.0 / 6},
		{"beats all", 10, []float64{1, 2, 3}, 1, 1.0 / 4},
		{"beats none", -1, []float64{1, 2, 3}, 0, 1},
		// The paper's N = 30: beating all 30 gives π = 1 and the smallest p = 1/31.
		{"N=30 best", 1, make([]float64, 30), 1, 1.0 / 31},
	}
	for _, tc := range tests {
		pct, err := Percentile(tc.delta, tc.random)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PermutationPValue(tc.delta, tc.random)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(pct-tc.wantPct) > 1e-15 || math.Abs(p-tc.wantP) > 1e-15 {
			t.Errorf("%s: percentile, p = %v, %v; want %v, %v", tc.name, pct, p, tc.wantPct, tc.wantP)
		}
	}
	if _, err := Percentile(1, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: error = %v, want ErrEmpty", err)
	}
	if _, err := PermutationPValue(math.NaN(), []float64{1}); !errors.Is(err, ErrValue) {
		t.Errorf("NaN: error = %v, want ErrValue", err)
	}
}

func TestJaccardAndStability(t *testing.T) {
	tests := []struct {
		a, b []int
		want float64
	}{
		{[]int{1, 2, 3}, []int{2, 3, 4}, 2.0 / 4},
		{[]int{1, 2}, []int{1, 2}, 1},
		{[]int{1}, []int{2}, 0},
		{nil, nil, 1},
		{[]int{1, 1, 2}, []int{2, 2}, 1.0 / 2},
	}
	for _, tc := range tests {
		if got := Jaccard(tc.a, tc.b); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Jaccard(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	// Pairs: (A,B) 1/2, (A,C) 1, (B,C) 1/2 → mean 2/3.
	j, err := SeedStability([][]int{{1, 2, 3}, {2, 3, 4}, {3, 1, 2}})
	if err != nil || math.Abs(j-2.0/3) > 1e-15 {
		t.Errorf("SeedStability = %v, %v; want 2/3", j, err)
	}
	if _, err := SeedStability([][]int{{1}}); !errors.Is(err, ErrEmpty) {
		t.Errorf("one set: error = %v, want ErrEmpty", err)
	}
}

func TestCoverageNumber(t *testing.T) {
	tests := []struct {
		name    string
		omega   []float64
		labels  []int
		classes int
		want    Coverage
	}{
		// Ranked by ω: idx 2 (c1), 0 (c0), 3 (c0), 1 (c2) → all three classes at rank 4.
		{"late class", []float64{0.8, 0.1, 0.9, 0.5}, []int{0, 2, 1, 0}, 3, Coverage{Kappa: 4, Covered: true}},
		{"optimum", []float64{3, 2, 1}, []int{0, 1, 1}, 2, Coverage{Kappa: 2, Covered: true}},
		{"absent class", []float64{3, 2, 1}, []int{0, 1, 1}, 4, Coverage{Missing: []int{2, 3}}},
		// Tie in ω: lower index first, so idx 0 (c0) then idx 1 (c0) then idx 2 (c1).
		{"ties", []float64{1, 1, 1}, []int{0, 0, 1}, 2, Coverage{Kappa: 3, Covered: true}},
	}
	for _, tc := range tests {
		got, err := CoverageNumber(tc.omega, tc.labels, tc.classes)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Kappa != tc.want.Kappa || got.Covered != tc.want.Covered || !equalInts(got.Missing, tc.want.Missing) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if _, err := CoverageNumber([]float64{1}, []int{5}, 3); !errors.Is(err, ErrValue) {
		t.Errorf("label out of range: error = %v, want ErrValue", err)
	}
}
