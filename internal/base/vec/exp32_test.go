package vec

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var benchStart = time.Now()

func nowSecondsVec() float64 { return time.Since(benchStart).Seconds() }

// ulps32 is the distance in float32 units in the last place between a and b (both
// positive and finite).
func ulps32(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

// TestExpShift32Accuracy checks every e_j against math.Exp of the clamped argument,
// rounded to float32: within 2 ulp, on a grid over [−90, 90] and random points, with
// shifts and scales like a softmax row's; and the returned sum against the float64 sum of
// the outputs within 10⁻¹³ relative (a different summation order only).
func TestExpShift32Accuracy(t *testing.T) {
	for _, wide := range []bool{false, true} {
		if wide && !hasAVX512 {
			t.Log("no AVX-512 here: only the portable loop is checked")
			continue
		}
		saved := hasAVX512
		hasAVX512 = wide
		r := rand.New(rand.NewPCG(1, 3))
		var x []float32
		for v := -90.0; v <= 90; v += 0.0137 {
			x = append(x, float32(v))
		}
		for range 20000 {
			x = append(x, float32(180*r.Float64()-90))
		}
		for _, c := range []struct{ shift, scale float32 }{{0, 1}, {0.83, 1 / 0.107}, {-2, 0.5}} {
			got := slices.Clone(x)
			sum := ExpShift32(got, c.shift, c.scale)
			var want float64
			for j, v := range x {
				arg := min(max(float32(v-c.shift)*c.scale, expLo), expHi)
				w := float32(math.Exp(float64(arg)))
				if d := ulps32(got[j], w); d > 2 {
					t.Fatalf("wide=%v shift %v scale %v: exp(%v) = %v, want %v (%d ulp)", wide, c.shift, c.scale, arg, got[j], w, d)
				}
				want += float64(got[j])
			}
			if math.Abs(sum-want) > 1e-13*want {
				t.Fatalf("wide=%v: sum %v, want %v", wide, sum, want)
			}
		}
		hasAVX512 = saved
	}
}

// TestExpShift32Bits: the AVX-512 loop gives the portable loop's bits, outputs and sum,
// for lengths around multiples of 16 and arguments that meet both clamps.
func TestExpShift32Bits(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: only the portable loop runs")
	}
	r := rand.New(rand.NewPCG(2, 3))
	for _, n := range []int{1, 15, 16, 17, 33, 1023, 1024} {
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(r.NormFloat64() * 40)
		}
		a, b := slices.Clone(x), slices.Clone(x)
		sa := ExpShift32(a, 0.25, 1/0.107)
		hasAVX512 = false
		sb := ExpShift32(b, 0.25, 1/0.107)
		hasAVX512 = true
		if sa != sb || !slices.Equal(a, b) {
			t.Fatalf("n = %d: AVX-512 and portable loops differ (sums %v, %v)", n, sa, sb)
		}
	}
}

// BenchmarkExpShift32 times a 1,024-entry softmax row with ExpShift32 and with
// math.Exp in float64 (what SimCLR's row pass did before) in the same loop; x_math is the
// ratio of the times.
func BenchmarkExpShift32(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	x := make([]float32, 1024)
	for j := range x {
		x[j] = float32(2*r.Float64() - 1)
	}
	buf := make([]float32, len(x))
	var tv, tm float64
	var sink float64
	for b.Loop() {
		copy(buf, x)
		t0 := nowSecondsVec()
		sink += ExpShift32(buf, 0.9, 1/0.107)
		t1 := nowSecondsVec()
		copy(buf, x)
		var z float64
		for j, v := range buf {
			e := float32(math.Exp((float64(v) - 0.9) / 0.107))
			buf[j] = e
			z += float64(e)
		}
		sink += z
		tm += nowSecondsVec() - t1
		tv += t1 - t0
	}
	benchSinkExp = sink
	b.ReportMetric(tv/float64(b.N)/1024*1e9, "ns/exp")
	b.ReportMetric(tv/tm, "x_math")
}

var benchSinkExp float64
