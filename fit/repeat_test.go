package fit

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestRepeat checks that concurrent repeated fits equal lone fits with the same seeds and
// that ω̄ and τ² are the mean and unbiased variance of the per-fit ω.
func TestRepeat(t *testing.T) {
	p := synthetic(13, 120, 16, 30, 30)
	in, err := Initialize(PCI, p, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := smallOptions(VICReg)
	opt.Epochs, opt.BatchSize = 3, 32 // 3 batches: the seed changes the order
	const r = 3
	rep, err := Repeat(p, in, opt, r, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range rep.Seeds {
		o := opt
		o.Seed = s
		lone, err := Adam(p, in.A0, o)
		if err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(lone.A, rep.Fits[i].A) {
			t.Errorf("fit %d differs from a lone fit with seed %d", i, s)
		}
	}
	if rep.Seeds[0] != opt.Seed || rep.Seeds[1] == rep.Seeds[2] {
		t.Errorf("seeds %v", rep.Seeds)
	}
	// Reference: each fit's ω divided by its mean over the landmarks, times the mean of
	// those means, then the plain mean and unbiased variance per landmark.
	scale := make([]float64, r)
	cbar := 0.0
	for i, f := range rep.Fits {
		for _, w := range f.Omega {
			scale[i] += w
		}
		scale[i] /= float64(len(f.Omega))
		cbar += scale[i] / r
	}
	for l := range rep.OmegaMean {
		var mean, v float64
		for i, f := range rep.Fits {
			mean += f.Omega[l] * cbar / scale[i]
		}
		mean /= r
		for i, f := range rep.Fits {
			d := f.Omega[l]*cbar/scale[i] - mean
			v += d * d
		}
		v /= r - 1
		if math.Abs(rep.OmegaMean[l]-mean) > 1e-14*mean || math.Abs(rep.OmegaVar[l]-v) > 1e-12*mean*mean {
			t.Errorf("landmark %d: ω̄ %g τ² %g, want %g %g", l, rep.OmegaMean[l], rep.OmegaVar[l], mean, v)
		}
	}
	if floatsMax(rep.OmegaVar) == 0 {
		t.Error("τ² = 0 for every landmark: the fit seed changed nothing")
	}
	if _, err := Repeat(p, in, opt, 0, 2); err == nil {
		t.Error("R = 0 accepted")
	}
}

func floatsMax(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
