package main

import (
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/rng"
)

// BenchmarkCertifiedTop10 is one certified top-10 answer as the daemon will serve it, for
// m = 512 landmarks on convnet:1x28x28-16-32-10 with the evaluation draw h = 4, s = 1024:
// the query's features ψ(x_t) (one Forward and 4 Backward passes plus 4 SRHTs), the kernel
// row against the landmarks' precomputed ψ, the query's exact diagonal k*(x_t, x_t) (d = 10
// backward passes) for the conservative variance bound (eq. conservative-variance, with the
// landmarks' exact diagonals precomputed), and the certificate (Thm. topk). It reports
// each phase in ms per answer; the target is ≤ 2 ms in all.
func BenchmarkCertifiedTop10(b *testing.B) {
	f := newAnswerFixture(b)
	m, k, h, s, q := f.m, f.k, f.h, f.s, f.sk.Dim()
	bb, sk, lf, ldiag, omega, alloc, x := f.bb, f.sk, f.lf, f.ldiag, f.omega, f.alloc, f.x
	ws := bb.NewWorkspace()
	sws := sk.NewWorkspace()
	qf := make([]float64, q)
	row := make([]float64, m)
	vbar := make([]float64, m)
	var c certify.Certificate
	var rk certify.Ranker
	var tSketch, tRow, tDiag, tCert time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sk.FeaturesTo(qf, x, sws)
		t1 := time.Now()
		for l := 0; l < m; l++ {
			row[l] = floats.Dot(lf[l*q:(l+1)*q], qf)
		}
		t2 := time.Now()
		kqq := entk.ExactDiag(bb, x, ws)
		t3 := time.Now()
		certify.ConservativeRowTo(vbar, ldiag, kqq, h, s, sk.PaddedP())
		if err := rk.CertifyTo(&c, row, omega, vbar, k, alloc); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		tSketch += t1.Sub(t0)
		tRow += t2.Sub(t1)
		tDiag += t3.Sub(t2)
		tCert += t4.Sub(t3)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(tSketch), "sketch-ms")
	b.ReportMetric(ms(tRow), "row-ms")
	b.ReportMetric(ms(tDiag), "diag-ms")
	b.ReportMetric(ms(tCert), "cert-ms")
	b.ReportMetric(ms(tSketch+tRow+tDiag+tCert), "total-ms")
}

// BenchmarkCertifiedTop10Parallel is the same answer with its two independent halves on
// the machine's two cores: the query's features (then the kernel row) on one goroutine and
// its exact diagonal on another, each with its own workspace; the certificate waits for
// both. The sequential benchmark above, run beside it, is the reference for the ratio.
func BenchmarkCertifiedTop10Parallel(b *testing.B) {
	f := newAnswerFixture(b)
	m, k, h, s, q := f.m, f.k, f.h, f.s, f.sk.Dim()
	bb, sk, lf, ldiag, omega, alloc, x := f.bb, f.sk, f.lf, f.ldiag, f.omega, f.alloc, f.x
	ws2 := bb.NewWorkspace()
	sws := sk.NewWorkspace()
	qf := make([]float64, q)
	row := make([]float64, m)
	vbar := make([]float64, m)
	var c certify.Certificate
	var rk certify.Ranker
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var kqq float64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			kqq = entk.ExactDiag(bb, x, ws2)
		}()
		sk.FeaturesTo(qf, x, sws)
		for l := 0; l < m; l++ {
			row[l] = floats.Dot(lf[l*q:(l+1)*q], qf)
		}
		wg.Wait()
		certify.ConservativeRowTo(vbar, ldiag, kqq, h, s, sk.PaddedP())
		if err := rk.CertifyTo(&c, row, omega, vbar, k, alloc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "total-ms")
}

// answerFixture is the state a served query reads: the evaluation sketch, the landmarks'
// precomputed features and exact diagonals, their weights, and one query input.
type answerFixture struct {
	m, k, h, s int
	bb         entk.Backbone
	sk         *entk.Sketch
	lf, ldiag  []float64
	omega, x   []float64
	alloc      certify.Allocation
}

func newAnswerFixture(b *testing.B) *answerFixture {
	f := &answerFixture{m: 512, k: 10, h: 4, s: 1024}
	var err error
	if f.bb, err = entk.NewBackbone("convnet:1x28x28-16-32-10", 1); err != nil {
		b.Fatal(err)
	}
	if f.sk, err = entk.NewSketch(f.bb, f.h, f.s, 1, "eval"); err != nil {
		b.Fatal(err)
	}
	r := rng.New(1, "bench/certify")
	dim := f.bb.InDim()
	lx := make([]float64, f.m*dim)
	for i := range lx {
		lx[i] = r.Float64()
	}
	f.lf = make([]float64, f.m*f.sk.Dim())
	f.sk.FeaturesBatchTo(f.lf, lx, f.m)
	ws := f.bb.NewWorkspace()
	f.ldiag = make([]float64, f.m)
	for l := range f.ldiag {
		f.ldiag[l] = entk.ExactDiag(f.bb, lx[l*dim:(l+1)*dim], ws)
	}
	f.omega = make([]float64, f.m)
	for l := range f.omega {
		f.omega[l] = r.Float64()
	}
	if f.alloc, err = certify.UniformAllocation(0.05, f.m, 1); err != nil {
		b.Fatal(err)
	}
	f.x = make([]float64, dim)
	for i := range f.x {
		f.x[i] = r.Float64()
	}
	return f
}
