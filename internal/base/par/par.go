package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers is how many goroutines For should use for n rows in chunks of size: GOMAXPROCS,
// at most one per chunk, at least 1. Callers size per-goroutine workspaces by it.
func Workers(n, size int) int {
	return max(1, min(runtime.GOMAXPROCS(0), Chunks(n, size)))
}

// Chunks is the number of chunks of size rows that cover n rows (0 for n ≤ 0). size
// must be positive.
func Chunks(n, size int) int {
	if size < 1 {
		panic("par: chunk size < 1")
	}
	if n <= 0 {
		return 0
	}
	return (n + size - 1) / size
}

// For calls f(w, lo, hi) for every chunk [lo, hi) = [c·size, min((c+1)·size, n)) of
// [0, n), on up to workers goroutines (the caller's and workers−1 more, joined before
// it returns), w being the goroutine's index in [0, workers). It is
//
//	for lo := 0; lo < n; lo += size { f(0, lo, min(lo+size, n)) }
//
// with the chunks run side by side. size must be positive.
func For(n, size, workers int, f func(w, lo, hi int)) {
	chunks := Chunks(n, size)
	workers = max(1, min(workers, chunks))
	if workers == 1 {
		for lo := 0; lo < n; lo += size {
			f(0, lo, min(lo+size, n))
		}
		return
	}
	var next atomic.Int64
	run := func(w int) {
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			f(w, c*size, min((c+1)*size, n))
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { run(w) })
	}
	run(0)
	wg.Wait()
}
