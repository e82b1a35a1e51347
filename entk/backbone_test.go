package entk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testSpecs straddle the edges of the implementation: single-layer nets, zero residual
// blocks, odd spatial sizes (pooling floors), channel counts of 1, and a conv layer whose
// position count (11·11 = 121) and channel count (65) cross the 64-wide Dgemm blocks.
var testSpecs = []string{
	"mlp:3-2",
	"mlp:5-7-3",
	"mlp:6-9-4-1",
	"resmlp:4-6x2-3",
	"resmlp:3-5x0-2",
	"convnet:2x9x9-3-5-4",
	"convnet:1x5x6-2-3",
	"convnet:3x4x4-1-2",
	"convnet:1x11x11-65-2",
}

func bbRandVec(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// refForward is a slow, direct transcription of the PyTorch modules in arch.go, indexing
// parameters through Arch.Tensors by name; it shares no code with the implementations.
func refForward(t *testing.T, a Arch, params, x []float64) []float64 {
	t.Helper()
	byName := map[string][]float64{}
	for _, ts := range a.Tensors() {
		byName[ts.Name] = params[ts.Offset : ts.Offset+ts.Size]
	}
	lin := func(name string, in []float64, out int) []float64 {
		w, b := byName[name+"weight"], byName[name+"bias"]
		y := make([]float64, out)
		for o := range y {
			s := b[o]
			for i := range in {
				s += w[o*len(in)+i] * in[i]
			}
			y[o] = s
		}
		return y
	}
	relu := func(v []float64) []float64 {
		r := make([]float64, len(v))
		for i, x := range v {
			r[i] = math.Max(x, 0)
		}
		return r
	}
	switch a.Kind {
	case "mlp":
		widths := append(append([]int{a.In}, a.Hidden...), a.Out)
		h := x
		for l := 0; l+1 < len(widths); l++ {
			h = lin(fmt.Sprintf("%d.", 2*l), h, widths[l+1])
			if l+2 < len(widths) {
				h = relu(h)
			}
		}
		return h
	case "resmlp":
		h := relu(lin("inp.", x, a.Width))
		for k := 0; k < a.Blocks; k++ {
			u := relu(lin(fmt.Sprintf("blocks.%d.fc1.", k), h, a.Width))
			v := lin(fmt.Sprintf("blocks.%d.fc2.", k), u, a.Width)
			for i := range h {
				v[i] += h[i]
			}
			h = v
		}
		return lin("out.", h, a.Out)
	case "convnet":
		cin, hh, ww := a.C, a.H, a.W
		img := x
		for l, cout := range a.Channels {
			w, b := byName[fmt.Sprintf("%d.weight", 3*l)], byName[fmt.Sprintf("%d.bias", 3*l)]
			conv := make([]float64, cout*hh*ww)
			for co := 0; co < cout; co++ {
				for y := 0; y < hh; y++ {
					for xx := 0; xx < ww; xx++ {
						s := b[co]
						for ci := 0; ci < cin; ci++ {
							for ky := 0; ky < 3; ky++ {
								for kx := 0; kx < 3; kx++ {
									iy, ix := y+ky-1, xx+kx-1
									if iy < 0 || iy >= hh || ix < 0 || ix >= ww {
										continue
									}
									s += w[((co*cin+ci)*3+ky)*3+kx] * img[(ci*hh+iy)*ww+ix]
								}
							}
						}
						conv[(co*hh+y)*ww+xx] = math.Max(s, 0)
					}
				}
			}
			hp, wp := hh/2, ww/2
			pooled := make([]float64, cout*hp*wp)
			for co := 0; co < cout; co++ {
				for y := 0; y < hp; y++ {
					for xx := 0; xx < wp; xx++ {
						m := math.Inf(-1)
						for dy := 0; dy < 2; dy++ {
							for dx := 0; dx < 2; dx++ {
								m = math.Max(m, conv[(co*hh+2*y+dy)*ww+2*xx+dx])
							}
						}
						pooled[(co*hp+y)*wp+xx] = m
					}
				}
			}
			img, cin, hh, ww = pooled, cout, hp, wp
		}
		return lin(fmt.Sprintf("%d.", 3*len(a.Channels)+1), img, a.Out)
	}
	t.Fatalf("unknown kind %q", a.Kind)
	return nil
}

// TestForwardMatchesReference compares Forward with the direct transcription. Both sum the
// same O(fan_in) products in different orders, so they agree to a few ulps of the sum of
// |terms|; 1e-12 absolute on outputs of size O(1) leaves a wide margin.
func TestForwardMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, spec := range testSpecs {
		b, err := NewBackbone(spec, 3)
		if err != nil {
			t.Fatalf("NewBackbone(%q): %v", spec, err)
		}
		a, _ := ParseArch(spec)
		ws := b.NewWorkspace()
		out := make([]float64, b.OutDim())
		for trial := 0; trial < 3; trial++ {
			x := bbRandVec(r, b.InDim())
			b.Forward(out, x, ws)
			want := refForward(t, a, b.Params(), x)
			for i := range out {
				if math.Abs(out[i]-want[i]) > 1e-12 {
					t.Errorf("%s trial %d: f(x)[%d] = %.17g, want %.17g", spec, trial, i, out[i], want[i])
				}
			}
		}
	}
}

// TestVJPFiniteDifference checks every coordinate of J_xᵀ w against a central difference
// of θ ↦ <w, f_θ(x)>. With ReLU and max-pool the output is piecewise affine in any single
// parameter (each parameter enters each layer linearly and the rest is piecewise linear),
// so the central difference is exact away from kinks and its error is rounding only:
// ≈ ε·Σ|terms|/h ≈ 2e-16·O(10)/1e-6 ≈ 1e-9. Tolerance 1e-7·(1+|g|). A kink within h = 1e-6
// of a random Gaussian input has probability ~1e-6 per unit; the draws are seeded, so a
// failure is a bug, not bad luck.
func TestVJPFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const h = 1e-6
	for _, spec := range testSpecs {
		if strings.HasSuffix(spec, "-65-2") {
			continue // 2.5k parameters × 2 forwards is slow; covered by the directional test
		}
		b, err := NewBackbone(spec, 5)
		if err != nil {
			t.Fatal(err)
		}
		x, w := bbRandVec(r, b.InDim()), bbRandVec(r, b.OutDim())
		ws := b.NewWorkspace()
		got := make([]float64, b.NumParams())
		VJP(b, got, x, w, ws)
		params := append([]float64(nil), b.Params()...)
		obj := func(p []float64) float64 {
			bb, err := FromParams(spec, p)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float64, bb.OutDim())
			bb.Forward(out, x, bb.NewWorkspace())
			s := 0.0
			for i := range out {
				s += w[i] * out[i]
			}
			return s
		}
		for k := range params {
			old := params[k]
			params[k] = old + h
			fp := obj(params)
			params[k] = old - h
			fm := obj(params)
			params[k] = old
			want := (fp - fm) / (2 * h)
			if math.Abs(got[k]-want) > 1e-7*(1+math.Abs(want)) {
				t.Errorf("%s: dθ[%d] = %.12g, finite difference %.12g", spec, k, got[k], want)
			}
		}
	}
}

// TestVJPDirectional checks <J_xᵀ w, v> = d/dt <w, f_{θ+tv}(x)> along random directions v
// for every spec, including the large one. Along a direction moving all parameters f is a
// polynomial of degree ≤ L+1 in t within one activation pattern, so the central difference
// has truncation error h²/6·|∂³| ≈ 1e-10·O(10) plus rounding 1e-16·O(10)/1e-5; tolerance
// 1e-6·(1+|want|).
func TestVJPDirectional(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const h = 1e-5
	for _, spec := range testSpecs {
		b, _ := NewBackbone(spec, 7)
		ws := b.NewWorkspace()
		x, w := bbRandVec(r, b.InDim()), bbRandVec(r, b.OutDim())
		g := make([]float64, b.NumParams())
		VJP(b, g, x, w, ws)
		for trial := 0; trial < 3; trial++ {
			v := bbRandVec(r, b.NumParams())
			got := 0.0
			for i := range v {
				got += g[i] * v[i]
			}
			shift := func(s float64) float64 {
				p := append([]float64(nil), b.Params()...)
				for i := range p {
					p[i] += s * v[i] / math.Sqrt(float64(len(p)))
				}
				bb, _ := FromParams(spec, p)
				out := make([]float64, bb.OutDim())
				bb.Forward(out, x, bb.NewWorkspace())
				sum := 0.0
				for i := range out {
					sum += w[i] * out[i]
				}
				return sum
			}
			want := (shift(h) - shift(-h)) / (2 * h) * math.Sqrt(float64(len(v)))
			if math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
				t.Errorf("%s trial %d: <J^T w, v> = %.12g, finite difference %.12g", spec, trial, got, want)
			}
		}
	}
}

// TestBackwardRepeatable checks the contract that many Backward calls may follow one
// Forward (one per head): interleaving heads gives the same result as fresh Forwards, and
// neither Forward nor Backward allocates.
func TestBackwardRepeatable(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, spec := range testSpecs {
		b, _ := NewBackbone(spec, 9)
		ws := b.NewWorkspace()
		x := bbRandVec(r, b.InDim())
		w1, w2 := bbRandVec(r, b.OutDim()), bbRandVec(r, b.OutDim())
		want1, want2 := make([]float64, b.NumParams()), make([]float64, b.NumParams())
		VJP(b, want1, x, w1, b.NewWorkspace())
		VJP(b, want2, x, w2, b.NewWorkspace())
		out := make([]float64, b.OutDim())
		got := make([]float64, b.NumParams())
		for i := range got {
			got[i] = math.NaN() // Backward must overwrite all of dst
		}
		b.Forward(out, x, ws)
		b.Backward(got, w2, ws)
		b.Backward(got, w1, ws)
		for i := range got {
			if got[i] != want1[i] {
				t.Fatalf("%s: after two Backwards, dθ[%d] = %v, want %v", spec, i, got[i], want1[i])
			}
		}
		b.Backward(got, w2, ws)
		for i := range got {
			if got[i] != want2[i] {
				t.Fatalf("%s: third Backward dθ[%d] = %v, want %v", spec, i, got[i], want2[i])
			}
		}
		if n := testing.AllocsPerRun(5, func() { b.Forward(out, x, ws); b.Backward(got, w1, ws) }); n != 0 {
			t.Errorf("%s: Forward+Backward allocates %v times per run, want 0", spec, n)
		}
	}
}

func TestWorkspaceMisuse(t *testing.T) {
	b1, _ := NewBackbone("mlp:3-2", 1)
	b2, _ := NewBackbone("mlp:3-2", 2)
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	out, x := make([]float64, 2), make([]float64, 3)
	mustPanic("foreign workspace", func() { b1.Forward(out, x, b2.NewWorkspace()) })
	mustPanic("backward before forward", func() { b1.Backward(make([]float64, b1.NumParams()), out, b1.NewWorkspace()) })
	mustPanic("short x", func() { b1.Forward(out, x[:2], b1.NewWorkspace()) })
}

// TestInitStatistics checks PyTorch's default init: every weight and bias of a tensor with
// fan-in F lies in [−1/√F, 1/√F] and has variance 1/(3F). Pooled over n draws, the sample
// variance of U(−c, c) has standard error c²·√(4/45)/√n (fourth central moment c⁴/5), so
// |var·3F − 1| < 6·√(4/45)·3/√n = 5.4/√n is a 6σ bound.
func TestInitStatistics(t *testing.T) {
	for _, spec := range []string{"mlp:50-300-7", "convnet:3x8x8-20-6", "resmlp:10-40x2-3"} {
		b, err := NewBackbone(spec, 11)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := ParseArch(spec)
		p := b.Params()
		for _, ts := range a.Tensors() {
			F := float64(ts.fanIn())
			if strings.HasSuffix(ts.Name, "bias") {
				// A bias's fan-in is its weight's: the tensor just before it.
				continue
			}
			bound := 1 / math.Sqrt(F)
			vals := p[ts.Offset : ts.Offset+ts.Size]
			s := 0.0
			for _, v := range vals {
				if math.Abs(v) > bound {
					t.Fatalf("%s %s: |%v| > bound %v", spec, ts.Name, v, bound)
				}
				s += v * v
			}
			n := float64(len(vals))
			ratio := s / n * 3 * F
			if tol := 5.4 / math.Sqrt(n); math.Abs(ratio-1) > tol {
				t.Errorf("%s %s: 3·fan_in·var = %.4f, want 1 ± %.4f (n=%v)", spec, ts.Name, ratio, tol, n)
			}
		}
		// Biases: bound 1/√fan_in of their weight.
		ts := a.Tensors()
		for i := 1; i < len(ts); i += 2 {
			bound := 1 / math.Sqrt(float64(ts[i-1].fanIn()))
			for _, v := range p[ts[i].Offset : ts[i].Offset+ts[i].Size] {
				if math.Abs(v) > bound {
					t.Fatalf("%s %s: |%v| > bound %v", spec, ts[i].Name, v, bound)
				}
			}
		}
	}
	// Same seed, same draw; other seed, other draw.
	b1, _ := NewBackbone("mlp:4-3", 1)
	b2, _ := NewBackbone("mlp:4-3", 1)
	b3, _ := NewBackbone("mlp:4-3", 2)
	if b1.Params()[0] != b2.Params()[0] || b1.Params()[0] == b3.Params()[0] {
		t.Errorf("init not a function of seed: %v %v %v", b1.Params()[0], b2.Params()[0], b3.Params()[0])
	}
}

func TestParseArch(t *testing.T) {
	cases := []struct {
		spec    string
		in, out int
		params  int
		names   string // first and last tensor names
	}{
		{"mlp:784-256-256-10", 784, 10, 784*256 + 256 + 256*256 + 256 + 256*10 + 10, "0.weight 4.bias"},
		{"mlp:3-2", 3, 2, 8, "0.weight 0.bias"},
		{"resmlp:108-128x3-8", 108, 8, 108*128 + 128 + 3*2*(128*128+128) + 128*8 + 8, "inp.weight out.bias"},
		{"resmlp:3-5x0-2", 3, 2, 3*5 + 5 + 5*2 + 2, "inp.weight out.bias"},
		{"convnet:1x28x28-16-32-10", 784, 10, 16*9 + 16 + 32*16*9 + 32 + 32*7*7*10 + 10, "0.weight 7.bias"},
		{"convnet:2x9x9-3-5-4", 162, 4, 3*2*9 + 3 + 5*3*9 + 5 + 5*2*2*4 + 4, "0.weight 7.bias"},
		{"convnet:1x3x2-4-1", 6, 1, 4*9 + 4 + 4*1*1*1 + 1, "0.weight 4.bias"},
	}
	for _, c := range cases {
		a, err := ParseArch(c.spec)
		if err != nil {
			t.Errorf("ParseArch(%q): %v", c.spec, err)
			continue
		}
		ts := a.Tensors()
		names := ts[0].Name + " " + ts[len(ts)-1].Name
		if a.In != c.in || a.Out != c.out || a.NumParams() != c.params || names != c.names {
			t.Errorf("ParseArch(%q) = in %d out %d P %d tensors %q, want %d %d %d %q", c.spec, a.In, a.Out, a.NumParams(), names, c.in, c.out, c.params, c.names)
		}
	}
	bad := []struct{ spec, part string }{
		{"", "kind:sizes"},
		{"mlp", "kind:sizes"},
		{"cnn:1-2", `unknown kind "cnn"`},
		{"mlp:784", "at least"},
		{"mlp:784--10", "empty size"},
		{"mlp:784-0-10", `"0" must be positive`},
		{"mlp:784-+5-10", `"+5" is not a decimal`},
		{"mlp:784-a-10", `"a" is not a decimal`},
		{"mlp:784-99999999999999999999-10", "exceeds the limit"},
		{"mlp:1048576-1048576-1048576", "parameters, more than the limit"},
		{"resmlp:108-128-8", `"128": want WIDTHxBLOCKS`},
		{"resmlp:108-128x-8", "empty size"},
		{"resmlp:108-128x3", "in-WIDTHxBLOCKS-out"},
		{"convnet:28x28-16-10", `input part "28x28"`},
		{"convnet:1x28x28-10", "at least one conv"},
		{"convnet:1x3x3-4-4-10", "reduces to 0x0"},
		{"convnet:1x28x28-16-32-", "empty size"},
	}
	for _, c := range bad {
		_, err := ParseArch(c.spec)
		if !errors.Is(err, ErrArchSpec) || !strings.Contains(err.Error(), c.part) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.spec)) {
			t.Errorf("ParseArch(%q) error = %v, want ErrArchSpec naming the spec and %q", c.spec, err, c.part)
		}
	}
}

// BenchmarkConvnetForwardBackward4 is the feature-map hot path for MNIST: one Forward and
// four Backward (h = 4 heads) per example. It reports examples/s for one core and, as the
// same-run reference the ratio is measured against, the examples/s a memory copy of the
// Backward output (P floats, 4 times) would allow.
func BenchmarkConvnetForwardBackward4(b *testing.B) {
	benchHeads(b, "convnet:1x28x28-16-32-10", 4)
}

func BenchmarkResMLPForwardBackward4(b *testing.B) { benchHeads(b, "resmlp:108-128x3-8", 4) }

func benchHeads(b *testing.B, spec string, h int) {
	bb, err := NewBackbone(spec, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := bbRandVec(r, bb.InDim())
	for i := range x {
		x[i] = math.Abs(x[i]) // MNIST-like non-negative pixels
	}
	ws := bb.NewWorkspace()
	ws4 := make([][]float64, h)
	for j := range ws4 {
		ws4[j] = bbRandVec(r, bb.OutDim())
	}
	out := make([]float64, bb.OutDim())
	dst := make([]float64, bb.NumParams())
	// Reference, timed in the same run: copying dst h times, the least a caller does with
	// h VJP outputs. Timed with a wall clock (a nested testing.Benchmark would deadlock).
	src := make([]float64, bb.NumParams())
	const nRef = 2000
	t0 := time.Now()
	for i := 0; i < nRef; i++ {
		for j := 0; j < h; j++ {
			copy(dst, src)
		}
	}
	refPerEx := time.Since(t0).Seconds() / nRef
	var sink float64
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		bb.Forward(out, x, ws)
		for j := 0; j < h; j++ {
			bb.Backward(dst, ws4[j], ws)
		}
		sink += dst[0]
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	// CPU time, unlike wall time, is not inflated by other processes on the shared machine.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "examples/cpu-s")
	perEx := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(1/perEx, "examples/s/core")
	b.ReportMetric(perEx/refPerEx, "x_copy_time")
	_ = sink
}

// TestPoolTies pins the max-pool convention on exact ties: the gradient goes to the first
// maximal element of the window in row-major order, and a window whose maximum is ≤ 0
// passes none (ReLU'(0) = 0). z is position-major (z[p*C+c]) for a 4×5 map, 2 channels.
func TestPoolTies(t *testing.T) {
	c := convLayer{cout: 2, h: 4, w: 5, hp: 2, wp: 2} // odd width: column 4 is dropped
	z := make([]float64, 4*5*2)
	set := func(y, x, ch int, v float64) { z[(y*5+x)*2+ch] = v }
	// channel 0: window (0,0) tie between (0,1) and (1,0) → first is (0,1);
	//            window (0,1) all equal 2 → (0,2); window (1,0) all ≤ 0 → inactive;
	//            window (1,1) max at (3,3); column 4 holds a larger value that must be ignored.
	set(0, 1, 0, 3)
	set(1, 0, 0, 3)
	for _, p := range [][2]int{{0, 2}, {0, 3}, {1, 2}, {1, 3}} {
		set(p[0], p[1], 0, 2)
	}
	for _, p := range [][2]int{{2, 0}, {2, 1}, {3, 0}, {3, 1}} {
		set(p[0], p[1], 0, -1)
	}
	set(3, 3, 0, 1)
	set(3, 4, 0, 9)
	// channel 1: all zeros → every output 0 and inactive.
	pooled := make([]float64, 8)
	outs, poss := c.reluPoolTo(pooled, nil, nil, z)
	wantPooled := []float64{3, 2, 0, 1, 0, 0, 0, 0}
	for i := range wantPooled {
		if pooled[i] != wantPooled[i] {
			t.Errorf("pooled[%d] = %v, want %v", i, pooled[i], wantPooled[i])
		}
	}
	got := map[int32]int32{}
	for i, o := range outs {
		got[o] = poss[i]
	}
	want := map[int32]int32{0: 0*5 + 1, 1: 0*5 + 2, 3: 3*5 + 3}
	if len(got) != len(want) {
		t.Fatalf("active outputs %v, want %v", got, want)
	}
	for o, p := range want {
		if got[o] != p {
			t.Errorf("output %d routes to position %d, want %d", o, got[o], p)
		}
	}
}

// FuzzParseArch: specs come from config files and flags, so the parser must never panic,
// and an accepted spec must describe a consistent, bounded network.
func FuzzParseArch(f *testing.F) {
	for _, s := range append(testSpecs, "mlp:784-256-256-10", "resmlp:108-128x3-8", "convnet:1x28x28-16-32-10", "convnet:1x3x3-4-4-10", "mlp:1048576-1048576-1048576") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		a, err := ParseArch(spec)
		if err != nil {
			if !errors.Is(err, ErrArchSpec) {
				t.Fatalf("ParseArch(%q): error %v does not wrap ErrArchSpec", spec, err)
			}
			return
		}
		p := a.NumParams()
		if p <= 0 || p > maxParams || a.In <= 0 || a.Out <= 0 {
			t.Fatalf("ParseArch(%q): P = %d, in %d, out %d", spec, p, a.In, a.Out)
		}
		ts := a.Tensors()
		if last := ts[len(ts)-1]; last.Offset+last.Size != p || last.Shape[0] != a.Out {
			t.Fatalf("ParseArch(%q): tensors end at %d with shape %v, want P = %d, out %d", spec, last.Offset+last.Size, last.Shape, p, a.Out)
		}
	})
}

// ExampleNewBackbone computes one vector–Jacobian product J_xᵀ w, the unit of work of the
// sketched feature map (one per Gaussian head).
func ExampleNewBackbone() {
	b, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	ws := b.NewWorkspace() // one per goroutine
	x := make([]float64, b.InDim())
	w := make([]float64, b.OutDim())
	w[3] = 1
	g := make([]float64, b.NumParams())
	VJP(b, g, x, w, ws) // g = J_xᵀ e_3, the gradient of output 3 in state_dict order
	fmt.Println(b.InDim(), b.OutDim(), b.NumParams(), g[len(g)-10:][3])
	// Output: 784 10 20490 1
}

func ExampleParseArch() {
	_, err := ParseArch("resmlp:108-128-8")
	fmt.Println(err)
	// Output: entk: bad architecture spec "resmlp:108-128-8": part "128": want WIDTHxBLOCKS, e.g. 128x3
}
