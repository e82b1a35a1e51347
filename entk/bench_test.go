package entk

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// BenchmarkFWHT times FWHT against copy(dst, v) of the same buffer and against the plain
// radix-2 butterfly loop of FWHT's doc comment, interleaved in the same loop so all see the
// same machine load; x_copy and x_plain are the ratios of FWHT's time to theirs. Small
// sizes run several transforms per timing so the clock's own cost stays negligible.
func BenchmarkFWHT(b *testing.B) {
	for lg := 10; lg <= 20; lg += 2 {
		n := 1 << lg
		b.Run(fmt.Sprintf("n=2^%d", lg), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			v := make([]float64, n)
			for i := range v {
				v[i] = r.NormFloat64()
			}
			dst := make([]float64, n)
			reps := max(1, (1<<16)>>lg)
			var tf, tc, tp time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for k := 0; k < reps; k++ {
					FWHT(v)
				}
				t1 := time.Now()
				for k := 0; k < reps; k++ {
					copy(dst, v)
				}
				t2 := time.Now()
				for k := 0; k < reps; k++ {
					plainFWHT(v)
				}
				tf += t1.Sub(t0)
				tc += t2.Sub(t1)
				tp += time.Since(t2)
			}
			b.ReportMetric(float64(tf)/float64(tc), "x_copy")
			b.ReportMetric(float64(tf)/float64(tp), "x_plain")
			b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N*reps), "ns/fwht")
			fwhtSink = dst[0]
		})
	}
}

var fwhtSink float64

// BenchmarkFeaturesConvnet times ψ for the MNIST convnet at h = 4, s = 1024 through
// FeaturesBatchTo (GOMAXPROCS workers) and reports examples/s. In the same loop it times
// the old computation (oldFeaturesTo: one Forward, then per head one Backward and the full
// SRHT, on as many goroutines) and one Forward+Backward (a single VJP on one goroutine), so
// all see the same machine load: x_old is the new time per example over the old one
// (old_examples/s its rate) and x_vjp the new time over one VJP's.
func BenchmarkFeaturesConvnet(b *testing.B) {
	benchFeatures(b, "convnet:1x28x28-16-32-10", 4, 1024)
}

var featuresRows = flag.Int("features.rows", 512,
	"BenchmarkFeaturesConvnetBatch: rows per FeaturesBatchTo call (512: an ingest batch of 256 events, two views)")

// BenchmarkFeaturesConvnetBatch times FeaturesBatchTo alone (the MNIST convnet, h = 4,
// s = 1024) on -features.rows rows per call, the size of the ingest's calls, and reports
// examples/s. Run it with -cpu 1,2,4,... for ψ's parallel efficiency: BenchmarkFeaturesConvnet's
// 32 rows give each of 16 workers two, so there the join's wait on the slowest worker
// counts as much as the work.
func BenchmarkFeaturesConvnetBatch(b *testing.B) {
	n := *featuresRows
	sk, xs := convnetSketch(b, n)
	dst := make([]float64, n*sk.Dim())
	sk.FeaturesBatchTo(dst, xs, n) // warm the workspace pool
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sk.FeaturesBatchTo(dst, xs, n)
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "examples/s")
	fwhtSink = dst[0]
}

// BenchmarkFeaturesDense is BenchmarkFeaturesConvnet on the dense backbones, which have no
// BackwardHeads: the difference from the old path is only the pruned SRHT.
func BenchmarkFeaturesDense(b *testing.B) {
	for _, arch := range []string{"mlp:784-256-10", "resmlp:784-128x2-10"} {
		b.Run(arch, func(b *testing.B) { benchFeatures(b, arch, 4, 1024) })
	}
}

func benchFeatures(b *testing.B, arch string, h, s int) {
	bb, err := NewBackbone(arch, 1)
	if err != nil {
		b.Skipf("backbone %s not available: %v", arch, err)
	}
	sk, err := NewSketch(bb, h, s, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	const n = 32
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, n*bb.InDim())
	for i := range xs {
		xs[i] = r.Float64()
	}
	dst := make([]float64, n*sk.Dim())
	old := make([]float64, n*sk.Dim())
	sk.FeaturesBatchTo(dst, xs, n) // warm the workspace pool
	oldWss := make([]*SketchWorkspace, min(runtime.GOMAXPROCS(0), n))
	for i := range oldWss {
		oldWss[i] = sk.NewWorkspace()
	}
	oldFeaturesBatchTo(sk, old, xs, n, oldWss)
	ws := bb.NewWorkspace()
	g, w := make([]float64, bb.NumParams()), sk.Heads()[:bb.OutDim()]
	var tf, to, tv time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sk.FeaturesBatchTo(dst, xs, n)
		t1 := time.Now()
		oldFeaturesBatchTo(sk, old, xs, n, oldWss)
		t2 := time.Now()
		for k := 0; k < n; k++ {
			VJP(bb, g, xs[k*bb.InDim():(k+1)*bb.InDim()], w, ws)
		}
		tv += time.Since(t2)
		to += t2.Sub(t1)
		tf += t1.Sub(t0)
	}
	b.ReportMetric(float64(b.N*n)/tf.Seconds(), "examples/s")
	b.ReportMetric(float64(b.N*n)/to.Seconds(), "old_examples/s")
	b.ReportMetric(float64(tf)/float64(to), "x_old")
	b.ReportMetric(float64(tf)/float64(tv), "x_vjp")
	fwhtSink = dst[0] + old[0] + g[0]
}

// BenchmarkFeaturesSIMD times ψ (FeaturesBatchTo, the MNIST convnet, h = 4, s = 1024)
// with the AVX2/FMA kernels and with the portable loops, interleaved in the same loop so
// both see the same machine load: x_portable is the kernels' time over the loops'.
func BenchmarkFeaturesSIMD(b *testing.B) {
	if !hasAVX2FMA {
		b.Skip("no AVX2/FMA on this machine")
	}
	const n = 32
	sk, xs := convnetSketch(b, n)
	dst := make([]float64, n*sk.Dim())
	sk.FeaturesBatchTo(dst, xs, n)
	var ta, tp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sk.FeaturesBatchTo(dst, xs, n)
		t1 := time.Now()
		restore := portable()
		sk.FeaturesBatchTo(dst, xs, n)
		restore()
		ta += t1.Sub(t0)
		tp += time.Since(t1)
	}
	b.ReportMetric(float64(b.N*n)/ta.Seconds(), "examples/s")
	b.ReportMetric(float64(b.N*n)/tp.Seconds(), "portable_examples/s")
	b.ReportMetric(float64(ta)/float64(tp), "x_portable")
	fwhtSink = dst[0]
}

// BenchmarkKernelRow times KernelRowTo for m = 512 landmarks of q = 4096 features (the
// certified answer's kernel row) against one gonum Dgemv over the same matrix on one
// goroutine and against KernelRowTo's kernel on one goroutine (row-1g-ms), interleaved so
// all see the same load: x_dgemv is KernelRowTo's time over Dgemv's.
func BenchmarkKernelRow(b *testing.B) {
	const m, q = 512, 4096
	r := rand.New(rand.NewPCG(1, 3))
	lf, f := make([]float64, m*q), make([]float64, q)
	for i := range lf {
		lf[i] = r.NormFloat64()
	}
	for i := range f {
		f[i] = r.NormFloat64()
	}
	dst, ref := make([]float64, m), make([]float64, m)
	impl := blas64.Implementation()
	var tk, tg, t1g time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		KernelRowTo(dst, lf, f)
		t1 := time.Now()
		impl.Dgemv(blas.NoTrans, m, q, 1, lf, q, f, 1, 0, ref, 1)
		t2 := time.Now()
		kernelRowRange(dst, lf, f, 0, m)
		t1g += time.Since(t2)
		tg += t2.Sub(t1)
		tk += t1.Sub(t0)
	}
	b.ReportMetric(float64(tk.Microseconds())/1000/float64(b.N), "row-ms")
	b.ReportMetric(float64(t1g.Microseconds())/1000/float64(b.N), "row-1g-ms")
	b.ReportMetric(float64(tg.Microseconds())/1000/float64(b.N), "dgemv-ms")
	b.ReportMetric(float64(tk)/float64(tg), "x_dgemv")
	fwhtSink = dst[0] + ref[0]
}

// convnetSketch is the MNIST convnet's sketch at h = 4, s = 1024 (backbone seed 1) and n
// seeded inputs with entries uniform in [0, 1).
func convnetSketch(b *testing.B, n int) (*Sketch, []float64) {
	bb, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		b.Fatal(err)
	}
	sk, err := NewSketch(bb, 4, 1024, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, n*bb.InDim())
	for i := range xs {
		xs[i] = r.Float64()
	}
	return sk, xs
}
