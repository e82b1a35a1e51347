package coreset

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
)

// TestLazyGreedyMatchesEager: the lazy selection gives the eager recursion's result bit
// for bit (pivots, pivot values, residuals, traces, factor, Gram, threshold), on full-rank
// and rank-deficient matrices, with exact ties, with top-up and KeepGram, on one, two
// and three cores (the norms, the Gram–Schmidt passes from 16 vectors on, the factor and
// the Gram run in chunks side by side), pivoting on raw and on normalized residuals,
// exact and tolerant (a small and the default tolerance, with two rows of equal key),
// and GreedyRows32 on float32 rows gives the same as Greedy on the widened matrix. Sizes
// straddle the sweep's block of sweepRows rows and the 4-row kernels.
func TestLazyGreedyMatchesEager(t *testing.T) {
	tests := []struct {
		n, q, rank, m int
		keep, topUp   bool
	}{
		{1, 4, 1, 3, false, false},
		{30, 10, 10, 7, true, false},
		{30, 10, 4, 8, true, true}, // rank-deficient: stops at 4, tops up
		{63, 17, 17, 20, false, true},
		{129, 33, 33, 40, true, false},
		{200, 12, 12, 12, true, true}, // every direction taken
		{257, 64, 64, 50, true, false},
	}
	for _, tc := range tests {
		for _, procs := range []int{1, 2, 3} {
			for _, norm := range []bool{false, true} {
				for _, tau := range []float64{0, 0.05, 0.6} {
					name := fmt.Sprintf("n%d_q%d_r%d_m%d_keep%v_topup%v_procs%d_normalize%v_tolerance%v", tc.n, tc.q, tc.rank, tc.m, tc.keep, tc.topUp, procs, norm, tau)
					t.Run(name, func(t *testing.T) {
						defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
						lazyAgainstEager(t, tc.n, tc.q, tc.rank, tc.m, tc.keep, tc.topUp, norm, tau)
					})
				}
			}
		}
	}
}

// lazyAgainstEager checks Greedy and GreedyRows32 against eagerGreedy on a random n×q
// matrix of the given rank with row norms spread over orders of magnitude (so that
// normalized and raw pivoting differ), a zero row and exact duplicate rows.
func lazyAgainstEager(t *testing.T, n, q, rank, m int, keep, topUp, norm bool, tau float64) {
	r := rand.New(rand.NewPCG(uint64(n), uint64(q)))
	g := randMatrix(r, n, q, rank)
	if norm {
		for j := 0; j < n; j++ {
			s := math.Exp(2 * r.NormFloat64())
			for i := j * q; i < (j+1)*q; i++ {
				g[i] *= s
			}
		}
		if n > 5 { // a zero row: never a candidate
			clear(g[3*q : 4*q])
		}
	}
	// Round to float32 so that the float32 rows hold the same matrix.
	for i, v := range g {
		g[i] = float64(float32(v))
	}
	if n > 3 { // exact ties: the lower index must win
		copy(g[(n-1)*q:], g[0:q])
		copy(g[(n-2)*q:], g[q:2*q])
	}
	opt := GreedyOptions{KeepGram: keep, Normalize: norm, Tolerance: tau}
	if tau > 0 && n > 3 { // two equal keys: the lower index must win
		opt.Keys = PivotKeys(n)
		opt.Keys[n-3] = opt.Keys[1]
	}
	if topUp {
		opt.TopUpKeys = TopUpKeys(7, n)
	}
	want, err := eagerGreedy(context.Background(), g, n, q, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Greedy(g, n, q, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	sameResult(t, "Greedy", got, want)
	rows := make([][]float32, n)
	for j := range rows {
		rows[j] = make([]float32, q)
		for i := range rows[j] {
			rows[j][i] = float32(g[j*q+i])
		}
	}
	got32, err := GreedyRows32(context.Background(), rows, q, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	sameResult(t, "GreedyRows32", got32, want)
}

// sameResult fails unless got and want hold the same bits in every field.
func sameResult(t *testing.T, what string, got, want *GreedyResult) {
	t.Helper()
	if !reflect.DeepEqual(got.Pivots, want.Pivots) || got.Greedy != want.Greedy {
		t.Fatalf("%s: pivots %v (greedy %d), want %v (greedy %d)", what, got.Pivots, got.Greedy, want.Pivots, want.Greedy)
	}
	if !reflect.DeepEqual(got.StepMaxRow, want.StepMaxRow) {
		t.Fatalf("%s: StepMaxRow %v, want %v", what, got.StepMaxRow, want.StepMaxRow)
	}
	for _, f := range []struct {
		name      string
		got, want []float64
	}{
		{"PivotValues", got.PivotValues, want.PivotValues},
		{"StepMax", got.StepMax, want.StepMax},
		{"ResidualTrace", got.ResidualTrace, want.ResidualTrace},
		{"Residual", got.Residual, want.Residual},
		{"Factor", got.Factor, want.Factor},
		{"Gram", got.Gram, want.Gram},
		{"Trace", []float64{got.Trace}, []float64{want.Trace}},
		{"Threshold", []float64{got.Threshold}, []float64{want.Threshold}},
	} {
		if len(f.got) != len(f.want) {
			t.Fatalf("%s: %s has %d entries, want %d", what, f.name, len(f.got), len(f.want))
		}
		for i := range f.got {
			if math.Float64bits(f.got[i]) != math.Float64bits(f.want[i]) {
				t.Fatalf("%s: %s[%d] = %v, want %v (bits differ)", what, f.name, i, f.got[i], f.want[i])
			}
		}
	}
}
