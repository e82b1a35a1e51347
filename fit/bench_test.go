package fit

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/gemm"
)

// benchProblem is an MNIST-shaped stage-2 problem with synthetic kernel blocks: n = 4096
// points, M = 512 landmarks (two views of m = 256), k = 256, entries U(0,1).
func benchProblem(n, m int) *Problem {
	rnd := rand.New(rand.NewPCG(1, 1))
	fill := func(r, c int) *mat.Dense {
		d := make([]float64, r*c)
		for i := range d {
			d[i] = rnd.Float64()
		}
		return mat.NewDense(r, c, d)
	}
	p := &Problem{KA: fill(n, m), KB: fill(n, m)}
	for i := range n {
		p.IDs = append(p.IDs, strconv.Itoa(i))
	}
	return p
}

// benchA0 is the benchmarks' fixed m×k start.
func benchA0(m, k int) *mat.Dense {
	a0 := mat.NewDense(m, k, nil)
	for i := range m {
		for j := range k {
			a0.Set(i, j, 0.01*float64((i*7+j*13)%17-8))
		}
	}
	return a0
}

// BenchmarkEpoch times one Adam epoch (no validation) per loss and reports ns per sample
// and the ratio to the epoch's GEMM floor: the time, measured in the same run, of the
// two products per batch that any implementation needs ([K_A;K_B]Ã and its transpose
// product), so the ratio says how much the loss, clipping and Adam add.
func BenchmarkEpoch(b *testing.B) {
	const n, m, k = 4096, 512, 256
	p := benchProblem(n, m)
	a0 := benchA0(m, k)
	floor := gemmFloor(p, a0, 512)
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg, BYOL} {
		b.Run(loss.String(), func(b *testing.B) {
			opt := DefaultOptions(loss)
			opt.Epochs = 1
			b.ResetTimer()
			for b.Loop() {
				if _, err := Adam(p, a0, opt); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(per/n*1e9, "ns/sample")
			b.ReportMetric(per/floor, "x_gemm_floor")
		})
	}
}

// BenchmarkBYOLEpoch times one Adam epoch of BYOL and one of SimCLR on the same
// MNIST-shaped blocks as BenchmarkEpoch, alternating within each iteration so both see the
// same machine state, and reports the ratio of their times. BYOL adds the target's forward
// product ([K_A;K_B]Ã_t, as large as the online one), three 2B×k×k predictor products and
// the O(Mk) EMA; SimCLR's extra is its two 2B×2B×k similarity products.
func BenchmarkBYOLEpoch(b *testing.B) {
	const n, m, k = 4096, 512, 256
	p := benchProblem(n, m)
	a0 := benchA0(m, k)
	byol, simclr := DefaultOptions(BYOL), DefaultOptions(SimCLR)
	byol.Epochs, simclr.Epochs = 1, 1
	t := alternateEpochs(b, p, a0, byol, simclr)
	tb, ts := t[0], t[1]
	b.ReportMetric(tb.Seconds()/float64(b.N), "byol_s/epoch")
	b.ReportMetric(ts.Seconds()/float64(b.N), "simclr_s/epoch")
	b.ReportMetric(tb.Seconds()/ts.Seconds(), "byol/simclr")
}

var benchSink float64

// alternateEpochs runs one Adam fit under each of the two options per benchmark
// iteration, alternating so both see the same machine state, and returns their total
// times.
func alternateEpochs(b *testing.B, p *Problem, a0 *mat.Dense, x, y Options) (t [2]time.Duration) {
	var sink float64
	for b.Loop() {
		for i, opt := range [2]Options{x, y} {
			t0 := time.Now()
			r, err := Adam(p, a0, opt)
			if err != nil {
				b.Fatal(err)
			}
			t[i] += time.Since(t0)
			sink += r.History[0].TrainLoss
		}
	}
	benchSink = sink
	return t
}

func gemmFloor(p *Problem, a *mat.Dense, bs int) float64 {
	n, m := p.KA.Dims()
	_, k := a.Dims()
	kc := mat.NewDense(2*bs, m, nil)
	z := mat.NewDense(2*bs, k, nil)
	g := mat.NewDense(m, k, nil)
	best := 0.0
	for rep := range 3 {
		t0 := time.Now()
		for lo := 0; lo+bs <= n; lo += bs {
			for i := range bs {
				copy(kc.RawRowView(i), p.KA.RawRowView(lo+i))
				copy(kc.RawRowView(bs+i), p.KB.RawRowView(lo+i))
			}
			z.Mul(kc, a)
			g.Mul(kc.T(), z)
		}
		if s := time.Since(t0).Seconds(); rep == 0 || s < best {
			best = s
		}
	}
	return best
}

// BenchmarkKrepesIteration times KREPES (setup gradient pass + 10 CG iterations, each one
// exact Gauss–Newton product over all batches) and reports the cost of one CG iteration as
// a multiple of one Adam epoch measured in the same run on the same blocks (n = 2048,
// M = 512, k = 256).
func BenchmarkKrepesIteration(b *testing.B) {
	const n, m, k = 2048, 512, 256
	p := benchProblem(n, m)
	a0 := benchA0(m, k)
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		b.Run(loss.String(), func(b *testing.B) {
			opt := DefaultOptions(loss)
			opt.Epochs = 1
			t0 := time.Now()
			if _, err := Adam(p, a0, opt); err != nil {
				b.Fatal(err)
			}
			epoch := time.Since(t0).Seconds()
			ko := DefaultKrepesOptions(loss)
			ko.MaxIter, ko.Tol = 10, 0
			b.ResetTimer()
			var iter float64
			for b.Loop() {
				r, err := Krepes(p, a0, ko)
				if err != nil {
					b.Fatal(err)
				}
				iter = (r.IterateSeconds[len(r.IterateSeconds)-1] - r.SetupSeconds) / float64(len(r.IterateSeconds))
			}
			b.ReportMetric(iter/epoch, "cg_iter/adam_epoch")
		})
	}
}

// BenchmarkGNSimclrCache times one SimCLR Gauss–Newton product over all batches (a CG
// iteration's work) with the per-batch softmax and (W + Wᵀ)U kept from the first
// application (gn.at, as Krepes runs) and with them recomputed by the forward pass in
// every application (as before the cache), alternating within each iteration on
// BenchmarkKrepesIteration's blocks, with the commands' BLAS (internal/base/gemm) installed as
// cairnctl installs it; recomputed/cached is the ratio of the times.
func BenchmarkGNSimclrCache(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	const n, m, k = 2048, 512, 256
	p := benchProblem(n, m)
	opt := DefaultKrepesOptions(SimCLR)
	o := newGN(p, benchA0(m, k), opt)
	np := m*k + k
	v, dst := make([]float64, np), make([]float64, np)
	for i := range v {
		v[i] = math.Sin(float64(i))
	}
	o.apply(dst, v) // fill the cache
	var cached, recomputed time.Duration
	for b.Loop() {
		t0 := time.Now()
		o.apply(dst, v)
		cached += time.Since(t0)
		keep := o.at
		o.at = nil
		t0 = time.Now()
		o.apply(dst, v)
		recomputed += time.Since(t0)
		o.at = keep
	}
	b.ReportMetric(recomputed.Seconds()/cached.Seconds(), "recomputed/cached")
	b.ReportMetric(cached.Seconds()/float64(b.N), "s/cached_product")
}

// BenchmarkEpochPrecision times one SimCLR epoch with float32 and with float64 batch
// products (Options.Float32), alternating within each iteration, on BenchmarkEpoch's
// blocks, with the commands' BLAS (internal/base/gemm's Dgemm and Sgemm) installed as cairnd
// and cairnctl install it; f32/f64 is the ratio of the times.
func BenchmarkEpochPrecision(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	const n, m, k = 4096, 512, 256
	p := benchProblem(n, m)
	a0 := benchA0(m, k)
	f32, f64 := DefaultOptions(SimCLR), DefaultOptions(SimCLR)
	f32.Epochs, f32.Float32 = 1, true
	f64.Epochs, f64.Float32 = 1, false
	t := alternateEpochs(b, p, a0, f32, f64)
	t32, t64 := t[0], t[1]
	b.ReportMetric(t32.Seconds()/float64(b.N), "f32_s/epoch")
	b.ReportMetric(t64.Seconds()/float64(b.N), "f64_s/epoch")
	b.ReportMetric(t32.Seconds()/t64.Seconds(), "f32/f64")
}
