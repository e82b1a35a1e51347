package main

import (
	"slices"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// BenchmarkCertifiedTop10 is one certified top-10 answer as the daemon serves it, for
// m = 512 landmarks on convnet:1x28x28-16-32-10 with the evaluation draw h = 4, s = 1024:
// the query's features ψ(x_t) and exact diagonal k*(x_t, x_t) from one entk.Query (one
// Forward, the d = 10 Jacobian rows in one multi-column backward sweep, the 4 heads as
// combinations of those rows, 4 pruned SRHTs; split over two goroutines), the kernel row
// against the landmarks' precomputed ψ (entk.KernelRowTo: one Dgemv, split over two
// goroutines), and the conservative variance bound (eq. conservative-variance, the
// landmarks' exact diagonals precomputed) with the certificate (Thm. topk). The issue's
// target is ≤ 2 ms in all.
//
// Every iteration also runs the previous sequential answer (answerReference: FeaturesTo,
// a plain Dot loop, ExactDiag, certificate) on the same input, interleaved so that both
// see the same machine load; x_old is the ratio of the new total to it. The machine is
// shared, so the ratio is the number to trust; the absolute times are pessimistic, and
// min-total-ms / min-old-ms, the fastest single answers, show the times least disturbed
// by other processes.
func BenchmarkCertifiedTop10(b *testing.B) {
	f := newAnswerFixture(b)
	m, k, h, s, q := f.m, f.k, f.h, f.s, f.sk.Dim()
	sk, lf, ldiag, omega, alloc, x := f.sk, f.lf, f.ldiag, f.omega, f.alloc, f.x
	query := sk.NewQuery()
	ref := newAnswerReference(f)
	qf := make([]float64, q)
	row := make([]float64, m)
	vbar := make([]float64, m)
	var c certify.Certificate
	var rk certify.Ranker
	// The new path must answer what the old one does: same kernel row and diagonal up to
	// rounding, hence the same top-10.
	kqq := query.FeaturesDiagTo(qf, x)
	entk.KernelRowTo(row, lf, qf)
	ref.answer(b)
	// The rows differ by ||lf||·||ψ_new − ψ_old|| ≤ 1e-12·||lf||·||ψ|| (the Query test's
	// feature tolerance) plus the two dot products' rounding, 2γ_q·Σ|lf_k ψ_k| ≤
	// 2·q·2^-53·||lf||·||ψ|| ≈ 0.9e-12·||lf||·||ψ|| for q = 4096: 2e-12 in all.
	for l := range row {
		tol := 2e-12 * floats.Norm(lf[l*q:(l+1)*q], 2) * floats.Norm(ref.qf, 2)
		if d := row[l] - ref.row[l]; d > tol || d < -tol {
			b.Fatalf("kernel row [%d]: new %v, old %v", l, row[l], ref.row[l])
		}
	}
	if d := (kqq - ref.kqq) / ref.kqq; d > 1e-12 || d < -1e-12 {
		b.Fatalf("k*(x,x): new %v, old %v", kqq, ref.kqq)
	}
	var tSketch, tRow, tCert, tOld time.Duration
	minNew, minOld := time.Duration(1<<62), time.Duration(1<<62)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		kqq := query.FeaturesDiagTo(qf, x)
		t1 := time.Now()
		entk.KernelRowTo(row, lf, qf)
		t2 := time.Now()
		certify.ConservativeRowTo(vbar, ldiag, kqq, h, s, sk.PaddedP())
		if err := rk.CertifyTo(&c, row, omega, vbar, k, alloc); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		ref.answer(b)
		old := time.Since(t3)
		tOld += old
		minNew, minOld = min(minNew, t3.Sub(t0)), min(minOld, old)
		tSketch += t1.Sub(t0)
		tRow += t2.Sub(t1)
		tCert += t3.Sub(t2)
	}
	b.StopTimer()
	if got, want := c.TopKSet(), ref.c.TopKSet(); !slices.Equal(got, want) {
		b.Fatalf("top-10: new %v, old %v", got, want)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	total := tSketch + tRow + tCert
	b.ReportMetric(ms(tSketch), "sketch+diag-ms")
	b.ReportMetric(ms(tRow), "row-ms")
	b.ReportMetric(ms(tCert), "cert-ms")
	b.ReportMetric(ms(total), "total-ms")
	b.ReportMetric(ms(tOld), "old-total-ms")
	b.ReportMetric(float64(total)/float64(tOld), "x_old")
	// The fastest answer of each kind is the one least disturbed by other processes.
	b.ReportMetric(float64(minNew.Microseconds())/1000, "min-total-ms")
	b.ReportMetric(float64(minOld.Microseconds())/1000, "min-old-ms")
}

// BenchmarkCertifiedTop10Reference is the previous sequential answer alone, with its
// phases: FeaturesTo (one Forward, 4 Backward, 4 SRHTs), the kernel row as a plain Dot
// loop, ExactDiag (one Forward, d = 10 Backward) and the certificate.
func BenchmarkCertifiedTop10Reference(b *testing.B) {
	f := newAnswerFixture(b)
	ref := newAnswerReference(f)
	var tSketch, tRow, tDiag, tCert time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ref.answer(b)
		tSketch += ref.tSketch
		tRow += ref.tRow
		tDiag += ref.tDiag
		tCert += ref.tCert
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(tSketch), "sketch-ms")
	b.ReportMetric(ms(tRow), "row-ms")
	b.ReportMetric(ms(tDiag), "diag-ms")
	b.ReportMetric(ms(tCert), "cert-ms")
	b.ReportMetric(ms(tSketch+tRow+tDiag+tCert), "total-ms")
}

// answerReference is the sequential answer the Query path replaced, kept as the
// benchmarks' reference; answer leaves its phase times in the t fields.
type answerReference struct {
	f                           *answerFixture
	ws                          *entk.Workspace
	sws                         *entk.SketchWorkspace
	qf, row, vbar               []float64
	kqq                         float64
	c                           certify.Certificate
	rk                          certify.Ranker
	tSketch, tRow, tDiag, tCert time.Duration
}

func newAnswerReference(f *answerFixture) *answerReference {
	return &answerReference{
		f: f, ws: f.bb.NewWorkspace(), sws: f.sk.NewWorkspace(),
		qf: make([]float64, f.sk.Dim()), row: make([]float64, f.m), vbar: make([]float64, f.m),
	}
}

func (r *answerReference) answer(b *testing.B) {
	f := r.f
	q := f.sk.Dim()
	t0 := time.Now()
	f.sk.FeaturesTo(r.qf, f.x, r.sws)
	t1 := time.Now()
	for l := 0; l < f.m; l++ {
		r.row[l] = floats.Dot(f.lf[l*q:(l+1)*q], r.qf)
	}
	t2 := time.Now()
	r.kqq = entk.ExactDiag(f.bb, f.x, r.ws)
	t3 := time.Now()
	certify.ConservativeRowTo(r.vbar, f.ldiag, r.kqq, f.h, f.s, f.sk.PaddedP())
	if err := r.rk.CertifyTo(&r.c, r.row, f.omega, r.vbar, f.k, f.alloc); err != nil {
		b.Fatal(err)
	}
	t4 := time.Now()
	r.tSketch, r.tRow, r.tDiag, r.tCert = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)
}

// BenchmarkCertifiedTop10Parallel is the previous answer with its two independent halves
// on the machine's two cores: the query's features (then the kernel row) on one goroutine
// and its exact diagonal on another, each with its own workspace (two Forwards, 14
// Backwards); the certificate waits for both. It is kept as the reference for the first
// attempt at using the second core; BenchmarkCertifiedTop10Reference is its sequential
// counterpart.
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
