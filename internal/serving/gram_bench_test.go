package serving

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// BenchmarkGramExact times the Gram matrix of a serving form's exact rows (gramExact: M
// = 512 full rows of the built-in convnet, 20,490 floats each, as the 10,000-point
// refit's) beside the same kernel (vec.Dots32BatchTo) on blocks that stay in cache, one
// per goroutine of par.Workers, with as many multiply-adds per call. It reports each as
// multiply-adds per second and gram/cached, their time per multiply-add over the cached
// blocks': near 1, the Gram matrix runs at the kernel's own rate, and how it scales
// with cores (-cpu 1,2) is how the machine's cores scale on this kernel.
func BenchmarkGramExact(b *testing.B) {
	bb, err := entk.NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		b.Fatal(err)
	}
	const m = 512
	r := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, m*bb.InDim())
	for i := range xs {
		xs[i] = r.Float64()
	}
	ex := NewExactRows(bb, xs, m, 1<<30)
	if ex == nil || ex.fac != nil {
		b.Fatal("no full exact rows")
	}
	e := ex.dim
	macs := float64(m) * float64(m+1) / 2 * float64(e) // the lower triangle
	// The cached blocks: 16 vectors against 64 rows of e floats each (lanes 32 KiB).
	const nv, nz = 16, 64
	lf := make([]float32, nz*e)
	for i := range lf {
		lf[i] = r.Float32()
	}
	fs := make([][]float64, nv)
	for q := range fs {
		fs[q] = make([]float64, e)
		for j := range fs[q] {
			fs[q][j] = r.Float64()
		}
	}
	calls := int(macs / float64(nv*nz*e))
	workers := par.Workers(calls, 1)
	dst, lanes := make([][]float64, workers), make([][]float64, workers)
	for w := range dst {
		dst[w] = make([]float64, nv*nz)
	}
	var tg, tc time.Duration
	for b.Loop() {
		t0 := time.Now()
		g := gramExact(ex.lf, m, e)
		tg += time.Since(t0)
		sink = g[m*m-1]
		t1 := time.Now()
		par.For(calls, 1, workers, func(w, lo, hi int) {
			for range hi - lo {
				lanes[w] = vec.Dots32BatchTo(dst[w], fs, lf, e, e, nz, lanes[w])
			}
		})
		tc += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(macs*n/tg.Seconds(), "gram_MAC/s")
	b.ReportMetric(float64(calls*nv*nz*e)*n/tc.Seconds(), "cached_MAC/s")
	b.ReportMetric(tg.Seconds()/tc.Seconds()*float64(calls*nv*nz*e)/macs, "gram/cached")
}

// sink keeps the benchmarks' results alive.
var sink float64
