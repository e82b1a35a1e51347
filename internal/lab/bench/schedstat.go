package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The load correction of Phases. On a machine shared with other work a goroutine that
// is ready to run waits for a core, so a phase's wall time grows with the load and a
// comparison of GOMAXPROCS 1 and 2 measures the neighbours as much as the code. Linux
// reports, per thread, the time it ran and the time it waited runnable on a run queue
// (/proc/self/task/<tid>/schedstat, fields 1 and 2). A thread's share φᵢ = runᵢ/(runᵢ +
// waitᵢ) over a phase is the fraction of a core the load left it while it had work; φ is
// their average weighted by runᵢ, so the threads that did the phase's work count and a
// thread woken only to look for work (a Go scheduler's spinning thread: microseconds of
// running after a long wait) does not. If the load was even through the phase, the
// phase would have taken φ·wall on an idle machine. Phases reports both the wall time
// and that estimate; neither sees time the hypervisor takes from the virtual machine.

// schedTimes is one thread's cumulative run and run-queue wait, in seconds.
type schedTimes struct{ run, wait float64 }

// schedSample is the schedstat of this process's threads at one instant, by thread id.
type schedSample struct {
	at      time.Time
	threads map[string]schedTimes
}

// readSched reads fields 1 and 2 of every thread's schedstat; ok is false where the
// files are not there.
func readSched() (s schedSample, ok bool) {
	s.at = time.Now()
	tasks, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		return s, false
	}
	s.threads = make(map[string]schedTimes, len(tasks))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err != nil {
			return s, false
		}
		s.threads[filepath.Base(filepath.Dir(f))] = schedTimes{float64(run) / 1e9, float64(wait) / 1e9}
	}
	return s, true
}

// schedSampler holds the samples taken every period between startSampler and its stop.
type schedSampler struct {
	mu      sync.Mutex
	samples []schedSample
	ok      bool
}

// startSampler starts sampling every period; stop ends it, waits for its goroutine and
// takes a last sample.
func startSampler(period time.Duration) (s *schedSampler, stop func()) {
	s = &schedSampler{ok: true}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	take := func() {
		smp, ok := readSched()
		s.mu.Lock()
		s.samples, s.ok = append(s.samples, smp), s.ok && ok
		s.mu.Unlock()
	}
	take()
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				take()
			}
		}
	})
	var once sync.Once
	return s, func() { once.Do(func() { cancel(); wg.Wait(); take() }) }
}

// share is φ between a and b (the run-weighted mean of the threads' shares),
// interpolating the samples linearly; NaN when the samples do not cover the interval
// or nothing ran.
func (s *schedSampler) share(a, b time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || len(s.samples) < 2 {
		return math.NaN()
	}
	ta, okA := s.at(a)
	tb, okB := s.at(b)
	if !okA || !okB {
		return math.NaN()
	}
	var sum, weight float64
	for id, e := range tb {
		st := ta[id] // zero for a thread started after a
		// Interpolated between samples, a wait is never below 0.
		run, wait := e.run-st.run, max(e.wait-st.wait, 0)
		if run <= 0 {
			continue
		}
		sum += run * run / (run + wait)
		weight += run
	}
	if weight == 0 {
		return math.NaN()
	}
	// Each term is at most run, so the share is at most 1 but for rounding (a run
	// without waits gives run·run/run, which can round above run).
	return min(sum/weight, 1)
}

// at is every thread's cumulative times at t, linear between the samples around it (a
// thread missing from the earlier sample started after it).
func (s *schedSampler) at(t time.Time) (map[string]schedTimes, bool) {
	for i := 1; i < len(s.samples); i++ {
		p, q := s.samples[i-1], s.samples[i]
		if t.Before(p.at) || t.After(q.at) {
			continue
		}
		w := 0.0
		if d := q.at.Sub(p.at); d > 0 {
			w = float64(t.Sub(p.at)) / float64(d)
		}
		out := make(map[string]schedTimes, len(q.threads))
		for id, e := range q.threads {
			st := p.threads[id]
			out[id] = schedTimes{st.run + w*(e.run-st.run), st.wait + w*(e.wait-st.wait)}
		}
		return out, true
	}
	return nil, false
}
