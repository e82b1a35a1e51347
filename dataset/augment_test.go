package dataset

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// refView is the slow reference: the documented draw order written out directly.
func refView(seed uint64, shape [3]int, x []float64, id string, view int) []float64 {
	r := rng.New(seed, "dataset/view/"+id+"/"+fmt.Sprint(view))
	out := make([]float64, len(x))
	if shape == [3]int{} {
		for j := range x {
			masked := r.Float64() < 0.1
			e := r.NormFloat64()
			if masked {
				out[j] = 0.05 * e
			} else {
				out[j] = x[j] + 0.05*e
			}
		}
		return out
	}
	dy := r.IntN(5) - 2
	dx := r.IntN(5) - 2
	c, h, w := shape[0], shape[1], shape[2]
	for ch := range c {
		for i := range h {
			for j := range w {
				v := 0.0
				if si, sj := i-dy, j-dx; si >= 0 && si < h && sj >= 0 && sj < w {
					v = x[ch*h*w+si*w+sj]
				}
				out[ch*h*w+i*w+j] = v + 0.05*r.NormFloat64()
			}
		}
	}
	return out
}

func TestViewMatchesReference(t *testing.T) {
	x := make([]float64, 2*5*6)
	for i := range x {
		x[i] = float64(i) / 7
	}
	for _, shape := range [][3]int{{}, {2, 5, 6}, {1, 1, 60}} {
		a := NewAugmenter(len(x), shape, 42)
		for _, id := range []string{"a", "mnist/train/000001", ""} {
			for view := range 2 {
				got := make([]float64, len(x))
				xc := slices.Clone(x)
				a.ViewTo(got, x, id, view)
				if !slices.Equal(x, xc) {
					t.Fatal("ViewTo modified x")
				}
				if want := refView(42, shape, x, id, view); !slices.Equal(got, want) {
					t.Errorf("shape %v id %q view %d: got %v, want %v", shape, id, view, got[:4], want[:4])
				}
			}
		}
	}
}

// TestViewDeterminism: a view depends on (seed, id, view) only: a second augmenter and a
// different call order give identical bytes; changing any of the three changes it.
func TestViewDeterminism(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	view := func(a *Augmenter, id string, v int) []float64 {
		out := make([]float64, len(x))
		a.ViewTo(out, x, id, v)
		return out
	}
	a, b := NewAugmenter(9, [3]int{}, 7), NewAugmenter(9, [3]int{}, 7)
	p0, q1 := view(a, "p", 0), view(a, "q", 1)
	if q, p := view(b, "q", 1), view(b, "p", 0); !slices.Equal(p, p0) || !slices.Equal(q, q1) {
		t.Error("views depend on call order or augmenter instance")
	}
	for _, c := range []struct {
		name string
		got  []float64
	}{
		{"other view", view(a, "p", 1)},
		{"other id", view(a, "p2", 0)},
		{"other seed", view(NewAugmenter(9, [3]int{}, 8), "p", 0)},
	} {
		if slices.Equal(c.got, p0) {
			t.Errorf("%s: identical to view (7, p, 0)", c.name)
		}
	}
}

// TestTabularStatistics estimates by Monte-Carlo the mask rate, the noise mean and std
// and the correlation between the two views' noise, over M = 200 ids × 2 views × 500
// features = 200000 draws. With x = 10 a masked entry is ≈ 0 ± 0.05 and a kept one
// ≈ 10 ± 0.05, so the threshold 5 classifies without error (100σ). Standard errors:
// mask rate √(0.09/M) = 6.7e-4 (tolerance 0.004, 6σ); noise mean 0.05/√M = 1.1e-4
// (tolerance 7e-4); noise std relative 1/√(2M) = 1.6e-3 (tolerance 1%); view-0/view-1
// noise correlation over 100000 pairs 1/√1e5 = 3.2e-3 (tolerance 0.02).
func TestTabularStatistics(t *testing.T) {
	const d, ids = 500, 200
	x := make([]float64, d)
	for i := range x {
		x[i] = 10
	}
	a := NewAugmenter(d, [3]int{}, 3)
	v0, v1 := make([]float64, d), make([]float64, d)
	var masked, total int
	var s, ss, s01, s0s, s1s float64
	for k := range ids {
		id := fmt.Sprintf("row-%d", k)
		a.ViewTo(v0, x, id, 0)
		a.ViewTo(v1, x, id, 1)
		for j := range d {
			var e [2]float64
			for vi, v := range [2]float64{v0[j], v1[j]} {
				base := 10.0
				if v < 5 {
					masked++
					base = 0
				}
				e[vi] = v - base
				s += e[vi]
				ss += e[vi] * e[vi]
				total++
			}
			s01 += e[0] * e[1]
			s0s += e[0] * e[0]
			s1s += e[1] * e[1]
		}
	}
	rate := float64(masked) / float64(total)
	mean := s / float64(total)
	std := math.Sqrt(ss/float64(total) - mean*mean)
	corr := s01 / math.Sqrt(s0s*s1s)
	if math.Abs(rate-MaskProb) > 0.004 {
		t.Errorf("mask rate: got %.5f, want %.2f ± 0.004", rate, MaskProb)
	}
	if math.Abs(mean) > 7e-4 {
		t.Errorf("noise mean: got %.3g, want 0 ± 7e-4", mean)
	}
	if math.Abs(std/NoiseStd-1) > 0.01 {
		t.Errorf("noise std: got %.5f, want %.2f ± 1%%", std, NoiseStd)
	}
	if math.Abs(corr) > 0.02 {
		t.Errorf("view noise correlation: got %.4f, want 0 ± 0.02", corr)
	}
}

// TestImageShift: on a hand image whose pixels are 10·(index+1), exactly one of the 25
// shifts (dy, dx) ∈ [−2,2]² explains a view to within 6σ = 0.3 per pixel (the others miss
// some pixel by ≥ 10). Over 2500 ids each shift should occur 100 times (binomial std
// 9.8); every count must lie in [50, 150] (5σ), and the mean residual std must be σ
// within 3% (≈ 2500·70 residuals, relative standard error 1/√(2·175000) = 1.7e-3).
func TestImageShift(t *testing.T) {
	const h, w, n = 7, 10, 2500
	x := make([]float64, h*w)
	for i := range x {
		x[i] = 10 * float64(i+1)
	}
	shifted := func(dy, dx int) []float64 {
		out := make([]float64, h*w)
		for i := range h {
			for j := range w {
				if si, sj := i-dy, j-dx; si >= 0 && si < h && sj >= 0 && sj < w {
					out[i*w+j] = x[si*w+sj]
				}
			}
		}
		return out
	}
	a := NewAugmenter(h*w, [3]int{1, h, w}, 11)
	counts := map[[2]int]int{}
	dst := make([]float64, h*w)
	var ss float64
	var cnt int
	for k := range n {
		a.ViewTo(dst, x, fmt.Sprint(k), k%2)
		var found [][2]int
		for dy := -2; dy <= 2; dy++ {
			for dx := -2; dx <= 2; dx++ {
				ref, ok := shifted(dy, dx), true
				for i := range dst {
					if math.Abs(dst[i]-ref[i]) > 0.3 {
						ok = false
						break
					}
				}
				if ok {
					found = append(found, [2]int{dy, dx})
					for i := range dst {
						ss += (dst[i] - ref[i]) * (dst[i] - ref[i])
						cnt++
					}
				}
			}
		}
		if len(found) != 1 {
			t.Fatalf("id %d: %d shifts explain the view (%v), want exactly 1", k, len(found), found)
		}
		counts[found[0]]++
	}
	if len(counts) != 25 {
		t.Errorf("%d distinct shifts seen, want 25", len(counts))
	}
	for s, c := range counts {
		if c < 50 || c > 150 {
			t.Errorf("shift %v: %d of %d, want 100 ± 50", s, c, n)
		}
	}
	if std := math.Sqrt(ss / float64(cnt)); math.Abs(std/NoiseStd-1) > 0.03 {
		t.Errorf("image noise std %.5f, want %.2f ± 3%%", std, NoiseStd)
	}
}

func TestAugmenterPanics(t *testing.T) {
	x := make([]float64, 4)
	a := NewAugmenter(4, [3]int{1, 2, 2}, 1)
	cases := []struct {
		name string
		f    func()
	}{
		{"view-2", func() { a.ViewTo(make([]float64, 4), x, "p", 2) }},
		{"dst-len", func() { a.ViewTo(make([]float64, 3), x, "p", 0) }},
		{"x-len", func() { a.ViewTo(make([]float64, 4), x[:3], "p", 0) }},
		{"overlap", func() { a.ViewTo(x, x, "p", 0) }},
		{"shape", func() { NewAugmenter(5, [3]int{1, 2, 2}, 1) }},
		{"d0", func() { NewAugmenter(0, [3]int{}, 1) }},
	}
	for _, tc := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

var sink float64

// BenchmarkViewMNIST reports the cost of one image view relative to copying the image
// (ratio measured in the same run; the machine is shared, so only the ratio is meaningful).
func BenchmarkViewMNIST(b *testing.B) {
	x := make([]float64, 784)
	for i := range x {
		x[i] = float64(i%255) / 255
	}
	a := NewAugmenter(784, [3]int{1, 28, 28}, 1)
	dst := make([]float64, 784)
	var tv, tc float64
	for b.Loop() {
		t0 := nowNS()
		for k := range 100 {
			a.ViewTo(dst, x, "mnist/train/000001", k&1)
		}
		t1 := nowNS()
		for range 100 {
			copy(dst, x)
		}
		t2 := nowNS()
		tv += t1 - t0
		tc += t2 - t1
		sink += dst[0]
	}
	b.ReportMetric(tv/tc, "view/copy")
}
