package main

import (
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/fit"
)

// TestRunFitRejectsBadLR checks that a non-positive or non-finite --lr is refused before
// any data is loaded, with the flag named in the error.
func TestRunFitRejectsBadLR(t *testing.T) {
	for _, flag := range []string{"--lr", "--init-scale"} {
		for _, v := range []string{"0", "-1e-3", "NaN", "+Inf", "units"} {
			err := runFit([]string{"--data", "mnist", flag, v}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), strings.TrimLeft(flag, "-")) {
				t.Errorf("%s %s: got error %v, want one naming %s", flag, v, err, flag)
			}
		}
	}
}

// TestUnitLatentScale checks that scaling Ã₀ by unitLatentScale gives latents whose
// per-dimension variances, computed here as E[z²] − E[z]² (a different formula from the
// two-pass one under test), average to 1. Both are float64 sums of 50 terms of size O(1):
// agreement to 1e-12 leaves ample room for rounding (~1e-15 per operation).
func TestUnitLatentScale(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ka := mat.NewDense(50, 6, nil)
	a0 := mat.NewDense(6, 4, nil)
	for _, m := range []*mat.Dense{ka, a0} {
		rows, cols := m.Dims()
		for i := range rows {
			for j := range cols {
				m.Set(i, j, 3+r.NormFloat64()) // a large common offset, as in kernel rows
			}
		}
	}
	s := unitLatentScale(ka, a0)
	var z mat.Dense
	z.Mul(ka, a0)
	z.Scale(s, &z)
	n, k := z.Dims()
	var mv float64
	for j := range k {
		var m1, m2 float64
		for i := range n {
			m1 += z.At(i, j) / float64(n)
			m2 += z.At(i, j) * z.At(i, j) / float64(n)
		}
		mv += (m2 - m1*m1) / float64(k)
	}
	if math.Abs(mv-1) > 1e-9 {
		t.Errorf("mean latent variance after scaling by %v = %v, want 1", s, mv)
	}
	for _, c := range []struct {
		spec string
		in   fit.Init
		want float64
	}{{"auto", fit.PCI, s}, {"auto", fit.Kaiming, 1}, {"unit", fit.CSI, s}, {"2.5", fit.PCI, 2.5}} {
		a := mat.DenseCopyOf(a0)
		got, err := scaleInit(c.spec, c.in, ka, a)
		var want mat.Dense
		want.Scale(c.want, a0)
		if err != nil || got != c.want || !mat.Equal(a, &want) {
			t.Errorf("scaleInit(%q, %v): factor %v, err %v, want factor %v and Ã₀ scaled by it", c.spec, c.in, got, err, c.want)
		}
	}
	if got := unitLatentScale(ka, mat.NewDense(6, 4, nil)); got != 1 {
		t.Errorf("zero Ã₀: scale %v, want 1", got)
	}
}
