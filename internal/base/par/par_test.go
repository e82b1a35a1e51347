package par

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// TestFor: every chunk is visited once with the documented bounds, whatever the worker
// count; worker indices stay below the count; a size that does not divide n ends in a
// short chunk; n ≤ 0 visits nothing.
func TestFor(t *testing.T) {
	for _, c := range []struct{ n, size, workers int }{
		{0, 4, 2}, {-3, 4, 2}, {1, 4, 2}, {4, 4, 3}, {10, 4, 1}, {10, 4, 2}, {10, 4, 8}, {1000, 7, 3}, {64, 1, 5},
	} {
		checkChunks(t, fmt.Sprintf("For with %d workers", c.workers), c.n, c.size, max(1, c.workers), func(f func(w, lo, hi int)) {
			For(c.n, c.size, c.workers, f)
		})
	}
}

// checkChunks runs loop with a recording f and checks that it visited every chunk of
// [0, n) of size once, with the documented bounds, on worker indices below limit.
func checkChunks(t *testing.T, name string, n, size, limit int, loop func(f func(w, lo, hi int))) {
	t.Helper()
	var mu sync.Mutex
	var got [][2]int
	maxW := -1
	loop(func(w, lo, hi int) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, [2]int{lo, hi})
		maxW = max(maxW, w)
	})
	slices.SortFunc(got, func(a, b [2]int) int { return a[0] - b[0] })
	var want [][2]int
	for lo := 0; lo < n; lo += size {
		want = append(want, [2]int{lo, min(lo+size, n)})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s, n %d size %d: chunks %v, want %v", name, n, size, got, want)
	}
	if maxW >= limit {
		t.Fatalf("%s, n %d size %d: worker index %d, limit %d", name, n, size, maxW, limit)
	}
}

// TestWorkers: at most GOMAXPROCS, at most one per chunk, at least one.
func TestWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for _, c := range []struct{ n, size, want int }{{0, 4, 1}, {4, 4, 1}, {5, 4, 2}, {100, 4, 3}} {
		if got := Workers(c.n, c.size); got != c.want {
			t.Errorf("Workers(%d, %d) at GOMAXPROCS 3 = %d, want %d", c.n, c.size, got, c.want)
		}
	}
}

// TestForSerialBits: a per-row computation with a chunk-ordered reduction after it gives
// the serial loop's bits at every worker count (the pattern the callers follow).
func TestForSerialBits(t *testing.T) {
	n, size := 1003, 64
	x := make([]float64, n)
	for i := range x {
		x[i] = 1 / float64(i+1)
	}
	serialRows := make([]float64, n)
	var serialSum float64
	for i, v := range x {
		serialRows[i] = v*v + 0.1
		serialSum += serialRows[i]
	}
	for _, workers := range []int{1, 2, 3, 16} {
		rows := make([]float64, n)
		For(n, size, workers, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				rows[i] = x[i]*x[i] + 0.1
			}
		})
		var sum float64
		for _, v := range rows {
			sum += v
		}
		if !slices.Equal(rows, serialRows) || sum != serialSum {
			t.Errorf("%d workers: sum %v, serial %v", workers, sum, serialSum)
		}
	}
}
