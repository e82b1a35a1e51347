package serving

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// BenchmarkDiskRows times answers (entk similarity, K = 10) on the same model with its
// exact rows in memory and mapped from a rows file (query.exact_disk_bytes), alternating
// the two (which goes first, too) in one loop so that both see the same machine and
// neither always finds the rows in cache after the other: factored rows of the Adult
// architecture (resmlp:108-128x3-8, seeded weights, M = 512: 16.7 MB) and full rows of
// the built-in convnet (M = 256). "single" answers one query at a time (AnswerRanked),
// "batch16" sixteen per AnswerBatch (the rows read once per batch). It reports the mean
// time per query of each and disk/memory, their ratio; the answers are the same bits
// (TestDiskRowsBitIdentical), so the ratio is the cost of reading rows through the
// mapping (page cache pages instead of heap pages) alone.
func BenchmarkDiskRows(b *testing.B) {
	for _, c := range []struct {
		name, arch string
		m          int
	}{{"factored", "resmlp:108-128x3-8", 512}, {"full", "convnet:1x28x28-16-32-10", 256}} {
		bb, err := entk.NewBackbone(c.arch, 1)
		if err != nil {
			b.Fatal(err)
		}
		in := testInput(bb, c.m)
		st := Settings{Backbone: bb, H: 2, S: 16, Seed: 5, DrawName: "bench/eval", ExactMemoryBytes: 1 << 30, Fits: 1}
		mem, err := New(in, st)
		if err != nil {
			b.Fatal(err)
		}
		st.ExactMemoryBytes, st.ExactDisk = 1, NewDisk(filepath.Join(b.TempDir(), "exactrows"), 8<<30)
		dsk, err := New(in, st)
		if err != nil {
			b.Fatal(err)
		}
		if dsk.Exact == nil || dsk.Exact.Where() != RowsOnDisk || dsk.Exact.Factored() != mem.Exact.Factored() {
			b.Fatalf("disk model without disk rows of the memory model's form (%v)", dsk.ExactRowsErr)
		}
		r := rand.New(rand.NewPCG(3, 3))
		qs := make([][]float64, 32)
		for i := range qs {
			qs[i] = make([]float64, bb.InDim())
			for j := range qs[i] {
				qs[i][j] = r.NormFloat64()
			}
		}
		b.Run(c.name+"/single", func(b *testing.B) {
			var w Workspace
			var tm, td time.Duration
			for b.Loop() {
				for i, x := range qs {
					first, second, t1, t2 := mem, dsk, &tm, &td
					if i%2 == 1 {
						first, second, t1, t2 = dsk, mem, &td, &tm
					}
					*t1 += timeAnswer(b, &w, first, x)
					*t2 += timeAnswer(b, &w, second, x)
				}
			}
			reportRatio(b, tm, td, b.N*len(qs))
		})
		b.Run(c.name+"/batch16", func(b *testing.B) {
			var w Workspace
			const bs = 16
			ks, ds, rs := make([]int, bs), make([]float64, bs), make([]certify.Ranking, bs)
			for i := range bs {
				ks[i], ds[i], rs[i] = 10, 0.05, certify.Similarity
			}
			out, errs := make([]certify.Certificate, bs), make([]error, bs)
			var tm, td time.Duration
			for b.Loop() {
				for i0 := 0; i0+bs <= len(qs); i0 += bs {
					first, second, t1, t2 := mem, dsk, &tm, &td
					if (i0/bs)%2 == 1 {
						first, second, t1, t2 = dsk, mem, &td, &tm
					}
					for _, s := range []struct {
						m *Model
						t *time.Duration
					}{{first, t1}, {second, t2}} {
						t0 := time.Now()
						s.m.AnswerBatch(&w, out, errs, qs[i0:i0+bs], ks, ds, rs)
						*s.t += time.Since(t0)
					}
				}
			}
			reportRatio(b, tm, td, b.N*len(qs))
		})
	}
}

// timeAnswer times one answer of x on s.
func timeAnswer(b *testing.B, w *Workspace, s *Model, x []float64) time.Duration {
	t0 := time.Now()
	if _, err := s.AnswerRanked(w, x, 10, 0.05, certify.Similarity); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// reportRatio reports the mean milliseconds per query from memory and from disk rows
// over n queries each, and their ratio.
func reportRatio(b *testing.B, mem, disk time.Duration, n int) {
	b.ReportMetric(mem.Seconds()*1e3/float64(n), "memory_ms/query")
	b.ReportMetric(disk.Seconds()*1e3/float64(n), "disk_ms/query")
	b.ReportMetric(disk.Seconds()/mem.Seconds(), "disk/memory")
	b.ReportMetric(0, "ns/op")
}
