package fit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/gemm"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// coresProblem is BenchmarkEpoch's blocks (n training rows, M = 512, k = 256) with a
// labelled validation split of nv rows in 10 classes, so an epoch ends with the k-NN
// vote as the daemon's fits do.
func coresProblem(n, nv, m int) *Problem {
	p := benchProblem(n+nv, m)
	p.Val.K = sliceRows(p.KA, n, n+nv)
	p.KA, p.KB, p.IDs = sliceRows(p.KA, 0, n), sliceRows(p.KB, 0, n), p.IDs[:n]
	p.Val.Labels = make([]int, nv)
	for i := range nv {
		p.Val.Labels[i] = i % 10
	}
	return p
}

// BenchmarkEpochCores times one SimCLR epoch with its validation vote (the daemon's
// defaults: float32 products, batch 512, M = 512, k = 256, 1,000 validation rows) at
// GOMAXPROCS 1 and 2, alternating within each iteration, with internal/base/gemm installed
// as cairnd installs it. On a shared machine the times move with the neighbours' load,
// so it reports the median of each iteration's ratio t2/t1 (two runs seconds apart see
// about the same load) and, as a measure the load does not move much, the share of the
// two Ps' time that the runtime found nothing to run during the GOMAXPROCS 2 epochs
// (runtime/metrics /cpu/classes/idle over /cpu/classes/total, brought up to date by a
// collection before and after each run): idle f means an unloaded t2/t1 of about
// 1/(2(1−f)), work done on both Ps counted once.
func BenchmarkEpochCores(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	const n, nv, m, k = 4096, 1000, 512, 256
	p := coresProblem(n, nv, m)
	a0 := benchA0(m, k)
	opt := DefaultOptions(SimCLR)
	opt.Epochs = 1
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var ratios []float64
	var idle, total float64
	for b.Loop() {
		var t [2]float64
		for i, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			i0, t0 := cpuClasses()
			start := time.Now()
			if _, err := Adam(p, a0, opt); err != nil {
				b.Fatal(err)
			}
			t[i] = time.Since(start).Seconds()
			if i1, t1 := cpuClasses(); procs == 2 {
				idle, total = idle+i1-i0, total+t1-t0
			}
		}
		ratios = append(ratios, t[1]/t[0])
	}
	slices.Sort(ratios)
	f := idle / total
	b.ReportMetric(ratios[len(ratios)/2], "t2/t1_median")
	b.ReportMetric(f, "idle_share_2")
	b.ReportMetric(1/(2*(1-f)), "t2/t1_from_idle")
}

// cpuClasses runs a collection (which brings the runtime's CPU accounting up to date)
// and returns the idle and total CPU seconds of runtime/metrics.
func cpuClasses() (idle, total float64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64(), s[1].Value.Float64()
}

// sliceRows copies rows [lo, hi) of a.
func sliceRows(a *mat.Dense, lo, hi int) *mat.Dense {
	_, c := a.Dims()
	return mat.DenseCopyOf(a.Slice(lo, hi, 0, c))
}

// BenchmarkEpochOne is one epoch of BenchmarkEpochCores at the current GOMAXPROCS (for
// profiles).
func BenchmarkEpochOne(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	p := coresProblem(4096, 1000, 512)
	a0 := benchA0(512, 256)
	opt := DefaultOptions(SimCLR)
	opt.Epochs = 1
	for b.Loop() {
		if _, err := Adam(p, a0, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStep times one float32 SimCLR batch step at the daemon's shape (2B = 1,024
// rows, M = 512, k = 256: gather, loss and gradient, clipping, Adam) at the current
// GOMAXPROCS, its loops on par.For's goroutines ("for") and on a par.Team ("team"), with
// internal/base/gemm installed as cairnd installs it. A fit at n = 60,000 takes about
// 4,200 such steps.
func BenchmarkStep(b *testing.B) {
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	const n, m, k, bs = 4096, 512, 256, 512
	p := benchProblem(n, m)
	a0 := benchA0(m, k)
	opt := DefaultOptions(SimCLR)
	order := rand.New(rand.NewPCG(2, 2)).Perm(n)
	for _, useTeam := range []bool{false, true} {
		b.Run(map[bool]string{false: "for", true: "team"}[useTeam], func(b *testing.B) {
			md, _, err := startModel(p, a0, opt.BiasInit)
			if err != nil {
				b.Fatal(err)
			}
			md.f32 = true
			ad := newAdam(len(md.theta), opt.WeightDecay, opt.DecoupledDecay)
			if useTeam {
				team := par.NewTeam(runtime.GOMAXPROCS(0))
				defer team.Close()
				md.team, md.loss.team, ad.team = team, team, team
			}
			step := 0
			for b.Loop() {
				lo := (step * bs) % n
				md.gather(p, order[lo:lo+bs])
				md.lossGrad(SimCLR, opt.Params)
				md.update(ad, opt, step, 1<<20)
				step++
			}
		})
	}
}

// TestStepCores: with internal/base/gemm installed, at GOMAXPROCS 1, 2 and 3, on par.For's
// goroutines and on a par.Team of GOMAXPROCS workers, one float32 batch step (gather, loss and
// gradient for each loss that uses float32 products, clipping and the Adam step, both
// weight decay forms) gives the serial step's loss, latents' gradient, ∂L/∂θ and θ bit
// for bit, on a batch of 2B = 2·150 rows (not a multiple of the 64-row chunks or the
// symmetrization's tiles) and M = 70, k = 40.
func TestStepCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	old := blas32.Implementation()
	defer blas32.Use(old)
	blas32.Use(gemm.Implementation{}) // cairnd's: the batch products take its blocked path
	const n, m, k = 400, 70, 40
	p := synthetic(9, n, m, 2, 2)
	rows := rand.New(rand.NewPCG(6, 6)).Perm(n)[:150]
	start := func() *model {
		md := newModel(m, k)
		rnd := rand.New(rand.NewPCG(4, 4))
		for i := range md.theta {
			md.theta[i] = 0.3 * rnd.NormFloat64()
		}
		md.f32 = true
		return md
	}
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		for _, decoupled := range []bool{false, true} {
			opt := DefaultOptions(loss)
			opt.DecoupledDecay = decoupled
			want := start()
			serialGather32(want, p, rows)
			wl := serialLossGrad32(want, loss, opt.Params)
			wantG := mat.DenseCopyOf(want.g)
			wantGrad := slices.Clone(want.grad)
			serialUpdate(want, opt)
			for _, procs := range []int{1, 2, 3} {
				runtime.GOMAXPROCS(procs)
				for _, team := range []*par.Team{nil, par.NewTeam(procs)} {
					name := fmt.Sprintf("%v decoupled %v GOMAXPROCS %d team %v", loss, decoupled, procs, team != nil)
					got := start()
					got.team, got.loss.team = team, team
					got.gather(p, rows)
					gl := got.lossGrad(loss, opt.Params)
					switch {
					case gl != wl:
						t.Errorf("%s: loss %v, serial %v", name, gl, wl)
					case !slices.Equal(got.g.RawMatrix().Data, wantG.RawMatrix().Data):
						t.Errorf("%s: ∂L/∂z differs from the serial step's", name)
					case !slices.Equal(got.grad, wantGrad):
						t.Errorf("%s: ∂L/∂θ differs from the serial step's", name)
					}
					ad := newAdam(len(got.theta), opt.WeightDecay, opt.DecoupledDecay)
					ad.team = team
					got.update(ad, opt, 3, 10)
					if !slices.Equal(got.theta, want.theta) {
						t.Errorf("%s: θ after the step differs from the serial step's", name)
					}
					team.Close()
				}
			}
		}
	}
}

// serialUpdate is model.update's clipping and Adam step (step 3 of 10) as plain loops.
func serialUpdate(md *model, opt Options) {
	g := md.grad
	var ss float64
	for _, v := range g {
		ss += v * v
	}
	if nrm := math.Sqrt(ss); nrm > opt.ClipNorm {
		s := opt.ClipNorm / nrm
		for i := range g {
			g[i] *= s
		}
	}
	ad := newAdam(len(md.theta), opt.WeightDecay, opt.DecoupledDecay)
	ad.t++
	lr := cosineLR(opt.LR, 3, 10)
	c1 := 1 - math.Pow(ad.beta1, float64(ad.t))
	c2 := 1 - math.Pow(ad.beta2, float64(ad.t))
	for i, gi := range g {
		th := md.theta
		if ad.decoupled {
			ad.m[i] = ad.beta1*ad.m[i] + (1-ad.beta1)*gi
			ad.v[i] = ad.beta2*ad.v[i] + (1-ad.beta2)*gi*gi
			th[i] -= lr*(ad.m[i]/c1)/(math.Sqrt(ad.v[i]/c2)+ad.eps) + lr*ad.wd*th[i]
			continue
		}
		gi += ad.wd * th[i]
		ad.m[i] = ad.beta1*ad.m[i] + (1-ad.beta1)*gi
		ad.v[i] = ad.beta2*ad.v[i] + (1-ad.beta2)*gi*gi
		th[i] -= lr * (ad.m[i] / c1) / (math.Sqrt(ad.v[i]/c2) + ad.eps)
	}
}

// TestAdamStepChunks: Adam steps over more coordinates than one chunk (10,000 against
// 4,096) give the plain loop's θ and moments at GOMAXPROCS 1 and 3.
func TestAdamStepChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const n = 10000
	rnd := rand.New(rand.NewPCG(8, 8))
	g, th := make([]float64, n), make([]float64, n)
	for i := range g {
		g[i], th[i] = rnd.NormFloat64(), rnd.NormFloat64()
	}
	for _, decoupled := range []bool{false, true} {
		want := slices.Clone(th)
		ref := newAdam(n, 3e-5, decoupled)
		for range 3 {
			ref.t++
			c1, c2 := 1-math.Pow(ref.beta1, float64(ref.t)), 1-math.Pow(ref.beta2, float64(ref.t))
			ref.stepRange(want, g, 0.01, c1, c2, 0, n)
		}
		for _, procs := range []int{1, 3} {
			runtime.GOMAXPROCS(procs)
			got := slices.Clone(th)
			ad := newAdam(n, 3e-5, decoupled)
			for range 3 {
				ad.step(got, g, 0.01)
			}
			if !slices.Equal(got, want) || !slices.Equal(ad.m, ref.m) || !slices.Equal(ad.v, ref.v) {
				t.Errorf("decoupled %v GOMAXPROCS %d: chunked Adam differs from the plain loop", decoupled, procs)
			}
		}
	}
}

// TestFirstNotFinite: the first non-finite entry in row-major order is found across
// chunk boundaries (256 rows), as the plain scan finds it, and a finite block has none.
func TestFirstNotFinite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a := mat.NewDense(700, 5, nil)
	if _, _, ok := firstNotFinite(a); !ok {
		t.Fatal("a zero block has a non-finite entry")
	}
	for _, c := range []struct {
		bad  [][2]int
		i, j int
	}{
		{[][2]int{{0, 0}}, 0, 0},
		{[][2]int{{699, 4}}, 699, 4},
		{[][2]int{{600, 1}, {300, 3}, {255, 2}}, 255, 2},
		{[][2]int{{257, 0}, {256, 4}}, 256, 4},
	} {
		b := mat.DenseCopyOf(a)
		for k, ij := range c.bad {
			b.Set(ij[0], ij[1], []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[k%3])
		}
		if i, j, ok := firstNotFinite(b); ok || i != c.i || j != c.j {
			t.Errorf("non-finite at %v: got (%d, %d, %v), want (%d, %d)", c.bad, i, j, ok, c.i, c.j)
		}
	}
}

// TestAdamCores: a whole fit (SimCLR, float32, a labelled validation split, three
// epochs) gives the same Ã, b, history and ω at GOMAXPROCS 1, 2 and 3.
func TestAdamCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	p := synthetic(11, 300, 40, 150, 2)
	a0 := benchA0(40, 12)
	opt := DefaultOptions(SimCLR)
	opt.Epochs, opt.BatchSize = 3, 64
	var want *Result
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		got, err := Adam(p, a0, opt)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = got
			continue
		}
		if !slices.Equal(got.A.RawMatrix().Data, want.A.RawMatrix().Data) || !slices.Equal(got.B, want.B) ||
			!slices.Equal(got.Omega, want.Omega) || got.BestEpoch != want.BestEpoch {
			t.Errorf("GOMAXPROCS %d: the fit differs from GOMAXPROCS 1's", procs)
		}
		for e := range got.History {
			if h, w := got.History[e], want.History[e]; h.TrainLoss != w.TrainLoss || h.ValMetric != w.ValMetric {
				t.Errorf("GOMAXPROCS %d epoch %d: loss %v val %v, GOMAXPROCS 1 %v %v", procs, e+1, h.TrainLoss, h.ValMetric, w.TrainLoss, w.ValMetric)
			}
		}
	}
}

// The float32 batch step as it was before its row loops ran side by side (fit's
// f32.go at the commit before), kept as the reference the parallel step must equal bit
// for bit.

func serialGather32(md *model, p *Problem, rows []int) {
	bs := len(rows)
	md.p32.kcat = ensure32(md.p32.kcat, 2*bs*md.m)
	for i, r := range rows {
		for h, src := range [2][]float64{p.KA.RawRowView(r), p.KB.RawRowView(r)} {
			dst := md.p32.kcat[(h*bs+i)*md.m : (h*bs+i+1)*md.m]
			for j, v := range src {
				dst[j] = float32(v)
			}
		}
	}
}

func serialLossGrad32(md *model, loss Loss, lp LossParams) float64 {
	p := &md.p32
	m, k := md.m, md.k
	r := len(p.kcat) / m
	bs := r / 2
	p.a = ensure32(p.a, m*k)
	for i, v := range md.theta[:m*k] {
		p.a[i] = float32(v)
	}
	p.z = ensure32(p.z, r*k)
	serialSgemm(false, false, r, k, m, p.kcat, m, p.a, k, p.z, k)
	md.z = ensure(md.z, r, k)
	md.g = ensure(md.g, r, k)
	zd := md.z.RawMatrix().Data
	for i := range r {
		row, src := zd[i*k:(i+1)*k], p.z[i*k:(i+1)*k]
		for j, v := range src {
			row[j] = float64(v) + md.b[j]
		}
	}
	za := md.z.Slice(0, bs, 0, k).(*mat.Dense)
	zb := md.z.Slice(bs, r, 0, k).(*mat.Dense)
	ga := md.g.Slice(0, bs, 0, k).(*mat.Dense)
	gb := md.g.Slice(bs, r, 0, k).(*mat.Dense)
	var l float64
	if loss == SimCLR {
		l = serialSimclr32(&md.loss, ga, gb, lp.Temperature, za, zb)
	} else {
		l = md.loss.grad(ga, gb, loss, lp, za, zb)
	}
	gd := md.g.RawMatrix().Data
	p.g = ensure32(p.g, r*k)
	for i, v := range gd {
		p.g[i] = float32(v)
	}
	p.ga = ensure32(p.ga, m*k)
	serialSgemm(true, false, m, k, r, p.kcat, m, p.g, k, p.ga, k)
	for i, v := range p.ga {
		md.grad[i] = float64(v)
	}
	gbias := md.grad[m*k : m*k+k]
	clear(gbias)
	for i := range r {
		floats64AddTo(gbias, gd[i*k:(i+1)*k])
	}
	return l
}

func serialSimclr32(ws *lossWS, ga, gb *mat.Dense, tau float64, za, zb *mat.Dense) float64 {
	br, k := za.Dims()
	n := 2 * br
	ws.u = ensure(ws.u, n, k)
	ws.r = ensureVec(ws.r, n)
	ws.rowScale = ensureVec(ws.rowScale, n)
	ws.u32 = ensure32(ws.u32, n*k)
	ws.s32 = ensure32(ws.s32, n*n)
	ws.gu32 = ensure32(ws.gu32, n*k)
	for i := range n {
		src := rowOf(za, zb, i)
		var ss float64
		for _, v := range src {
			ss += v * v
		}
		r := math.Max(math.Sqrt(ss), normEps)
		ws.r[i] = r
		row, row32 := ws.u.RawRowView(i), ws.u32[i*k:(i+1)*k]
		for j, v := range src {
			u := v / r
			row[j] = u
			row32[j] = float32(u)
		}
	}
	serialSgemm(false, true, n, n, k, ws.u32, k, ws.u32, k, ws.s32, n)
	var total float64
	scale, invTau := 1/float64(n), 1/tau
	invTau32 := float32(invTau)
	// s32 holds S and is overwritten, row by row, by the unnormalized e (diagonal 0).
	for i := range n {
		row := ws.s32[i*n : (i+1)*n]
		p := (i + br) % n
		mx := float32(math.Inf(-1))
		for j, v := range row {
			if j != i && v > mx {
				mx = v
			}
		}
		m64 := float64(mx)
		sp := float64(row[p])
		z := vec.ExpShift32(row[:i], mx, invTau32) + vec.ExpShift32(row[i+1:], mx, invTau32)
		row[i] = 0
		total += -(sp-m64)*invTau + math.Log(z)
		ws.rowScale[i] = scale / z
	}
	// W + Wᵀ in place, tile by tile (see symTile), scaled per row.
	for i0 := 0; i0 < n; i0 += symTile32 {
		for j0 := i0; j0 < n; j0 += symTile32 {
			for i := i0; i < min(i0+symTile32, n); i++ {
				ci := ws.rowScale[i]
				ri := ws.s32[i*n : (i+1)*n]
				for j := max(j0, i+1); j < min(j0+symTile32, n); j++ {
					v := float32(float64(ri[j])*ci + float64(ws.s32[j*n+i])*ws.rowScale[j])
					ri[j], ws.s32[j*n+i] = v, v
				}
			}
		}
	}
	for i := range br {
		v := ws.s32[i*n+i+br] - float32(2*scale)
		ws.s32[i*n+i+br], ws.s32[(i+br)*n+i] = v, v
	}
	serialSgemm(false, false, n, k, n, ws.s32, n, ws.u32, k, ws.gu32, k)
	for i := range n {
		dst := rowOf(ga, gb, i)
		g32 := ws.gu32[i*k : (i+1)*k]
		u := ws.u.RawRowView(i)
		var ug float64
		for j, v := range g32 {
			ug += u[j] * float64(v)
		}
		inv := 1 / (tau * ws.r[i])
		for j, v := range g32 {
			dst[j] = (float64(v) - u[j]*ug) * inv
		}
	}
	return total * scale
}

// TestScaleCores: ScaleKernels scales every block as Dense.Scale does, and
// UnitLatentScale returns the plain loops' factor, bit for bit at GOMAXPROCS 1, 2 and
// 3 (600 rows: two full chunks of 256 and a short one; k = 37 columns: two chunks of
// 16 and a short one).
func TestScaleCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	p := synthetic(13, 600, 30, 2, 2)
	a0 := benchA0(30, 37)
	wantKA := mat.DenseCopyOf(p.KA)
	var tr float64
	for i := range 30 {
		tr += p.Kmm.At(i, i)
	}
	wantKA.Scale(30/tr, wantKA)
	// UnitLatentScale's plain loops, on the scaled K_A.
	var z mat.Dense
	z.Mul(wantKA, a0)
	var v float64
	for j := range 37 {
		var mu, ss float64
		for i := range 600 {
			mu += z.At(i, j)
		}
		mu /= 600
		for i := range 600 {
			d := z.At(i, j) - mu
			ss += d * d
		}
		v += ss / 600
	}
	wantF := 1 / math.Sqrt(v/37)
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		q := &Problem{KA: mat.DenseCopyOf(p.KA), KB: mat.DenseCopyOf(p.KB), Kmm: mat.DenseCopyOf(p.Kmm)}
		if _, err := ScaleKernels(q, ScaleDiag); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(q.KA.RawMatrix().Data, wantKA.RawMatrix().Data) {
			t.Errorf("GOMAXPROCS %d: ScaleKernels differs from Dense.Scale", procs)
		}
		if f := UnitLatentScale(q.KA, a0); f != wantF {
			t.Errorf("GOMAXPROCS %d: UnitLatentScale = %v, the plain loops %v", procs, f, wantF)
		}
	}
}

// TestSgemmZeroed: sgemm (C zeroed, then β = 1) gives the bits of a Sgemm with β = 0,
// with internal/base/gemm's blocked path (products above its size threshold, every transpose
// the step uses, C entries that start non-zero) and with gonum's.
func TestSgemmZeroed(t *testing.T) {
	old := blas32.Implementation()
	defer blas32.Use(old)
	rnd := rand.New(rand.NewPCG(2, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rnd.NormFloat64())
		}
		return v
	}
	for _, impl := range []blas.Float32{gemm.Implementation{}, old} {
		blas32.Use(impl)
		for _, c := range []struct {
			tA, tB  bool
			m, n, k int
		}{{false, false, 130, 70, 90}, {true, false, 70, 40, 300}, {false, true, 300, 300, 40}, {false, false, 3, 5, 7}} {
			a, b := fill(c.m*c.k), fill(c.k*c.n)
			lda, ldb := c.k, c.n
			if c.tA {
				lda = c.m
			}
			if c.tB {
				ldb = c.k
			}
			got, want := fill(c.m*c.n), fill(c.m*c.n)
			ta, tb := blas.NoTrans, blas.NoTrans
			if c.tA {
				ta = blas.Trans
			}
			if c.tB {
				tb = blas.Trans
			}
			impl.Sgemm(ta, tb, c.m, c.n, c.k, 1, a, lda, b, ldb, 0, want, c.n)
			sgemm(nil, c.tA, c.tB, c.m, c.n, c.k, a, lda, b, ldb, got, c.n)
			if !slices.Equal(got, want) {
				t.Errorf("%T %+v: sgemm differs from Sgemm with β = 0", impl, c)
			}
		}
	}
}

// serialSgemm is sgemm as it was: the installed Sgemm with β = 0.
func serialSgemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	blas32.Implementation().Sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
}
