package par

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestTeamFor: a Team's For visits every chunk once with For's bounds and worker indices
// below Workers, for teams of 1 to 5 workers and a nil team, over loops that follow each
// other at once (the workers spinning) and after a pause longer than Spin (the workers
// asleep); Close joins every worker.
func TestTeamFor(t *testing.T) {
	before := runtime.NumGoroutine()
	cases := []struct{ n, size int }{{0, 4}, {-3, 4}, {1, 4}, {4, 4}, {10, 4}, {1000, 7}, {64, 1}, {5, 1}}
	for _, size := range []int{0, 1, 2, 3, 5} {
		var team *Team
		if size > 0 {
			team = NewTeam(size)
		}
		for rep := range 3 {
			if rep == 2 {
				time.Sleep(3 * Spin)
			}
			for _, c := range cases {
				checkChunks(t, fmt.Sprintf("a team of %d", size), c.n, c.size, team.Workers(c.n, c.size), func(f func(w, lo, hi int)) {
					team.For(c.n, c.size, f)
				})
			}
		}
		team.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before the teams", n, before)
	}
}

// TestTeamUsesWorkers: on a team of 4 with chunks that wait for each other, For runs
// four chunks at once (the workers take part), and For returns only after every chunk
// has returned, also when the caller's own chunks end first.
func TestTeamUsesWorkers(t *testing.T) {
	team := NewTeam(4)
	defer team.Close()
	for rep := range 20 {
		var arrived sync.WaitGroup
		arrived.Add(4)
		var done [8]bool
		team.For(8, 1, func(w, lo, _ int) {
			if lo < 4 {
				arrived.Done()
				arrived.Wait() // four chunks at once, or this never returns
			}
			if w != 0 && lo >= 4 {
				time.Sleep(time.Millisecond) // a worker's chunk outlasts the caller's
			}
			done[lo] = true
		})
		for c, d := range done {
			if !d {
				t.Fatalf("rep %d: chunk %d not done when For returned", rep, c)
			}
		}
	}
}

// TestTeamSerialBits: TestForSerialBits's per-row computation and chunk-ordered sum give
// the serial bits on teams of every size.
func TestTeamSerialBits(t *testing.T) {
	n, size := 1003, 64
	x := make([]float64, n)
	for i := range x {
		x[i] = 1 / float64(i+1)
	}
	want := make([]float64, n)
	var wantSum float64
	for i, v := range x {
		want[i] = v*v + 1/(v+3)
		wantSum += want[i]
	}
	for _, s := range []int{1, 2, 3, 7} {
		team := NewTeam(s)
		got := make([]float64, n)
		sums := make([]float64, Chunks(n, size))
		team.For(n, size, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				got[i] = x[i]*x[i] + 1/(x[i]+3)
				sums[lo/size] += got[i]
			}
		})
		team.Close()
		var sum float64
		for _, v := range sums {
			sum += v
		}
		if !slices.Equal(got, want) {
			t.Errorf("team %d: rows differ from the serial loop's", s)
		}
		if s == 1 && sum != wantSum {
			t.Errorf("team 1: sum %v, serial %v", sum, wantSum)
		}
	}
}

// BenchmarkTeamFor times an empty loop of 16 chunks on a Team and on For, at the
// current GOMAXPROCS: the cost of handing out a loop.
func BenchmarkTeamFor(b *testing.B) {
	f := func(_, _, _ int) {}
	b.Run("team", func(b *testing.B) {
		team := NewTeam(runtime.GOMAXPROCS(0))
		defer team.Close()
		for b.Loop() {
			team.For(16, 1, f)
		}
	})
	b.Run("for", func(b *testing.B) {
		for b.Loop() {
			For(16, 1, Workers(16, 1), f)
		}
	})
}
