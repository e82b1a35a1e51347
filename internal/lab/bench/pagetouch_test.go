package bench

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkPageFirstTouch measures what growing memory costs on this machine: writing one
// byte into each 4 KiB page of a fresh anonymous mapping (each write a page fault the
// kernel serves with a zeroed page) against writing the same pages again (mapped
// already), 64 MiB per round. It reports both in µs per page and their ratio. A point
// the primary stores grows its feature cache by 32 KiB (8 pages) and kafka-go reads
// each record into a fresh allocation, so where the first touch is dear (a PVM guest:
// docs/performance.md, "Featurizers": its paragraph on page faults) it is a large part of the
// primary's CPU per event.
func BenchmarkPageFirstTouch(b *testing.B) {
	const size, page = 64 << 20, 4096
	var first, again time.Duration
	for range b.N {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Skipf("mmap: %v", err)
		}
		t := time.Now()
		for i := 0; i < size; i += page {
			m[i] = 1
		}
		first += time.Since(t)
		t = time.Now()
		for i := 0; i < size; i += page {
			m[i] = 2
		}
		again += time.Since(t)
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
	}
	pages := float64(b.N * size / page)
	b.ReportMetric(float64(first.Nanoseconds())/pages/1e3, "µs/page-first")
	b.ReportMetric(float64(again.Nanoseconds())/pages/1e3, "µs/page-again")
	b.ReportMetric(float64(first)/float64(again), "first/again")
}
