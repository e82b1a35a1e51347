package entk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
// FeaturesBatchTo (GOMAXPROCS workers) and reports examples/s. x_vjp compares the time per
// example with one Forward+Backward (a single VJP on one goroutine) timed in the same run;
// its floor is about h/GOMAXPROCS VJPs plus the h SRHTs of length P.
func BenchmarkFeaturesConvnet(b *testing.B) {
	bb, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		b.Skipf("convnet backbone not available: %v", err)
	}
	sk, err := NewSketch(bb, 4, 1024, 1, "bench")
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
	sk.FeaturesBatchTo(dst, xs, n) // warm the workspace pool
	ws := bb.NewWorkspace()
	g, w := make([]float64, bb.NumParams()), sk.Heads()[:bb.OutDim()]
	var tf, tv time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sk.FeaturesBatchTo(dst, xs, n)
		t1 := time.Now()
		for k := 0; k < n; k++ {
			VJP(bb, g, xs[k*bb.InDim():(k+1)*bb.InDim()], w, ws)
		}
		tv += time.Since(t1)
		tf += t1.Sub(t0)
	}
	b.ReportMetric(float64(b.N*n)/tf.Seconds(), "examples/s")
	b.ReportMetric(float64(tf)/float64(tv), "x_vjp")
	fwhtSink = dst[0] + g[0]
}
