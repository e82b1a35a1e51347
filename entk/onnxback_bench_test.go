package entk

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/entk/onnx"
)

// BenchmarkONNXFeatures times ψ (FeaturesBatchTo, h = 4, s = 1024, 32 examples) on ONNX
// backbones. "convnet-export" is the MNIST convnet exported to ONNX (exportONNX) with
// the built-in ConvNet timed in the same loop: x_builtin is the ONNX time over the
// built-in one (which has the multi-head backward sweep and the AVX2 convolution).
// Each reference model under entk/onnx/testdata, when present, is timed against one
// Forward+Backward of its own (x_vjp: ψ's time per example over a VJP's; h heads cost
// about h backward passes and one forward). examples/cpu-s counts the process's CPU time
// (user and system, all threads) over the ψ calls alone: on a shared machine it moves
// far less with other processes' load than the wall-clock rate, and it compares with
// PyTorch's rows per CPU-second (scripts/onnx-psi-speed). x_heads is ψ's time over that
// of the same sketch with one Backward per head (the backbone's BackwardHeads hidden),
// timed in the same loop: the multi-head sweep's gain, whatever the machine's load.
func BenchmarkONNXFeatures(b *testing.B) {
	b.Run("convnet-export", func(b *testing.B) {
		bi, err := NewBackbone("convnet:1x28x28-16-32-10", 1)
		if err != nil {
			b.Fatal(err)
		}
		ob, err := LoadONNXBytes(exportONNX(b, bi), onnx.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchONNX(b, ob, bi)
	})
	for _, name := range []string{"convnet", "resnet20", "vit", "embmlp"} {
		path := filepath.Join("onnx", "testdata", name+".onnx")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		b.Run(name, func(b *testing.B) {
			ob, _, err := LoadONNX(path, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchONNX(b, ob, nil)
		})
	}
}

// benchONNX times ψ on ob and, in the same loop, ψ on ref (nil: one VJP per example).
func benchONNX(b *testing.B, ob Backbone, ref Backbone) {
	sk, err := NewSketch(ob, 4, 1024, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var skr *Sketch
	if ref != nil {
		if skr, err = NewSketch(ref, 4, 1024, 1, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	const n = 32
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, n*ob.InDim())
	for i := range xs {
		xs[i] = r.Float64()
	}
	dst := make([]float64, n*sk.Dim())
	sk.FeaturesBatchTo(dst, xs, n)
	skh, err := NewSketch(perHead{ob}, 4, 1024, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	skh.FeaturesBatchTo(dst, xs, n)
	ws := ob.NewWorkspace()
	g, w := make([]float64, ob.NumParams()), sk.Heads()[:ob.OutDim()]
	var tf, tr, th, cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		th0 := time.Now()
		skh.FeaturesBatchTo(dst, xs, n)
		th += time.Since(th0)
		c0 := processCPU(b)
		t0 := time.Now()
		sk.FeaturesBatchTo(dst, xs, n)
		t1 := time.Now()
		cpu += processCPU(b) - c0
		if skr != nil {
			skr.FeaturesBatchTo(dst, xs, n)
		} else {
			for k := 0; k < n; k++ {
				VJP(ob, g, xs[k*ob.InDim():(k+1)*ob.InDim()], w, ws)
			}
		}
		tr += time.Since(t1)
		tf += t1.Sub(t0)
	}
	b.ReportMetric(float64(b.N*n)/tf.Seconds(), "examples/s")
	b.ReportMetric(float64(b.N*n)/cpu.Seconds(), "examples/cpu-s")
	if skr != nil {
		b.ReportMetric(float64(tf)/float64(tr), "x_builtin")
	} else {
		b.ReportMetric(float64(tf)/float64(tr), "x_vjp")
	}
	b.ReportMetric(float64(tf)/float64(th), "x_heads")
	fwhtSink = dst[0] + g[0]
}

// perHead is a backbone with its BackwardHeads hidden, so that a sketch of it runs one
// Backward per head.
type perHead struct{ Backbone }

// processCPU is the process's CPU time so far, user and system, all threads.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
