package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Team is For for a run of many short loops, an optimizer's steps: its worker goroutines
// are started once, by NewTeam, and joined by Close. Between loops each worker spins for
// up to Spin before it sleeps, so a loop that follows within that time starts on every
// core at once. For's goroutines start one after another instead: the runtime wakes one
// sleeping thread, which wakes the next when it finds work, each wake-up costing tens of
// microseconds on a virtual machine. On a 16-core machine a step of the fit took about
// 25 loops whose goroutines each ran about 110 µs, while the last of a loop's goroutines
// started 90 µs (median) after the first, and For waits for every one of them to start
// (fit.BenchmarkEpochOne's trace, docs/performance.md).
//
// A Team obeys For's contract (chunks, worker indices, the join, determinism). For and
// Close are for one goroutine, the Team's owner: a Team's For must not be called from two
// goroutines at once, nor from inside one of its own loops. A nil *Team is valid: its For
// is For with Workers goroutines.
type Team struct {
	size     int
	gen      atomic.Uint64 // loops published; a worker runs a loop when it sees gen move
	cur      atomic.Pointer[loop]
	sleeping atomic.Int32
	mu       sync.Mutex // guards the sleepers' wait on cond
	cond     sync.Cond
	closed   atomic.Bool
	wg       sync.WaitGroup
}

// Spin is how long an idle worker of a Team polls for the next loop before it sleeps
// until woken: longer than most serial stretches between the loops of a fit step, short
// enough that an idle team costs at most this much CPU per worker after its last loop.
// The longest stretch, the gradient's squared norm over 131,328 parameters in one chain
// (clipNorm), took 0.46 ms on the 2-core build machine: the workers sleep through it.
const Spin = 300 * time.Microsecond

// loop is one For call of a Team: its chunks, the next one to hand out and how many are
// done (finished is closed when the last is).
type loop struct {
	f                      func(w, lo, hi int)
	n, size, chunks, limit int
	next, done             atomic.Int64
	finished               chan struct{}
}

// NewTeam starts a team of size goroutines in all, the caller of For counting as worker
// 0 (size−1 goroutines; none for size ≤ 1, where For runs the chunks in order on the
// caller). The owner must call Close.
func NewTeam(size int) *Team {
	t := &Team{size: max(1, size)}
	t.cond.L = &t.mu
	for w := 1; w < t.size; w++ {
		t.wg.Go(func() { t.work(w) })
	}
	return t
}

// Size is the team's worker count (GOMAXPROCS for a nil Team).
func (t *Team) Size() int {
	if t == nil {
		return runtime.GOMAXPROCS(0)
	}
	return t.size
}

// Workers is how many workers For uses for n rows in chunks of size: at most Size, at
// most one per chunk, at least 1. Callers size per-worker workspaces by it.
func (t *Team) Workers(n, size int) int {
	return max(1, min(t.Size(), Chunks(n, size)))
}

// For calls f(w, lo, hi) for every chunk [c·size, min((c+1)·size, n)) of [0, n), as the
// package's For does, on up to Workers(n, size) of the team's workers (w < Workers).
func (t *Team) For(n, size int, f func(w, lo, hi int)) {
	if t == nil {
		For(n, size, Workers(n, size), f)
		return
	}
	chunks := Chunks(n, size)
	limit := t.Workers(n, size)
	if limit == 1 {
		for lo := 0; lo < n; lo += size {
			f(0, lo, min(lo+size, n))
		}
		return
	}
	l := &loop{f: f, n: n, size: size, chunks: chunks, limit: limit, finished: make(chan struct{})}
	t.cur.Store(l)
	t.gen.Add(1)
	if t.sleeping.Load() > 0 {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	}
	l.run(0)
	start := time.Now()
	for i := 1; l.done.Load() < int64(chunks); i++ {
		if i&1023 == 0 && time.Since(start) > Spin {
			<-l.finished // a chunk still running elsewhere: sleep until it ends
			return
		}
	}
}

// run hands out l's chunks to worker w until none is left.
func (l *loop) run(w int) {
	for {
		c := int(l.next.Add(1)) - 1
		if c >= l.chunks {
			return
		}
		l.f(w, c*l.size, min((c+1)*l.size, l.n))
		if l.done.Add(1) == int64(l.chunks) {
			close(l.finished)
		}
	}
}

// work is worker w's life: wait for a loop, take its chunks, until Close.
func (t *Team) work(w int) {
	var seen uint64
	for {
		seen = t.wait(seen)
		if t.closed.Load() {
			return
		}
		// The loop published with seen, or a later one: a worker that loads a loop
		// after its chunks are gone takes none, so either is safe to run.
		if l := t.cur.Load(); w < l.limit {
			l.run(w)
		}
	}
}

// wait returns the generation once it differs from seen: polling for up to Spin, then
// asleep on cond until For or Close wakes it.
func (t *Team) wait(seen uint64) uint64 {
	start := time.Now()
	for i := 1; ; i++ {
		if g := t.gen.Load(); g != seen {
			return g
		}
		if i&1023 == 0 && time.Since(start) > Spin {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sleeping.Add(1)
	defer t.sleeping.Add(-1)
	for {
		if g := t.gen.Load(); g != seen {
			return g
		}
		t.cond.Wait()
	}
}

// Close stops the workers and joins them. The team must not be used after it.
func (t *Team) Close() {
	if t == nil {
		return
	}
	t.closed.Store(true)
	t.gen.Add(1)
	t.mu.Lock()
	t.cond.Broadcast()
	t.mu.Unlock()
	t.wg.Wait()
}
