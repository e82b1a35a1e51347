package fit

import (
	"math"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/par"
)

// Kernel scale modes of ScaleKernels (cairnctl's --kernel-scale).
const (
	// ScaleDiag multiplies every block by 1/mean(diag K_mm).
	ScaleDiag = "diag"
	// ScaleNone leaves the blocks as they are (factor 1).
	ScaleNone = "none"
)

// ScaleKernels applies kernel scale mode to every block of p in place — KA, KB, Kmm,
// Val.K, Val.KB, Test.K and Test.KB, each when non-nil and non-empty — and returns the
// factor (1 for ScaleNone). It is the one deliberate exception to the package's
// "inputs are never modified" contract: it is applied once, before Initialize, to the
// Problem the fits will share, by every caller that must fit what cairnctl fit fits (the
// cairnctl commands and the daemon). Blocks must not share storage with one another
// (the same *mat.Dense listed twice is scaled once).
//
// Under ScaleDiag the factor is M/tr(K_mm); when tr(K_mm) ≤ 0 (no landmarks or a zero
// kernel) it is 1 and the blocks are left alone. A non-finite trace or factor is an
// ErrNotFinite error and a nil or empty Kmm an ErrShape error, both before any block is
// touched; an unknown mode is an ErrOption error.
//
// Why (our choice, measured): the raw sketched eNTK has entries of order 10–100 on MNIST;
// Adam's steps are of fixed size in Ã, so the latent would move by about M·|K|·lr per step
// (observed: SimCLR collapsing to log(2B−1) at once). For a given Ã the scaling is a
// reparametrization (K·s with Ã/s), so ω in raw-kernel units is factor·ω; it changes
// Adam's effective step and the latent scale of the spectral initializers (PCI's
// (λ+ε)^{-1/2} gives a latent scale of sqrt(factor) relative to raw).
//
// The blocks are scaled by chunks of rows side by side (internal/base/par); every entry is
// the product of its value and the factor, as Dense.Scale forms it.
//
// Before this function moved here from cairnctl, Val.KB and Test.KB were not scaled,
// which would have mixed units in the validation loss of a Problem that sets Val.KB;
// cairnctl never set them, so its results are unchanged.
func ScaleKernels(p *Problem, mode string) (float64, error) {
	scale := 1.0
	switch mode {
	case ScaleDiag:
		if p.Kmm == nil || p.Kmm.IsEmpty() {
			return 0, errorf(ErrShape, "kernel scale %q needs Kmm, got none", mode)
		}
		var tr float64
		m, _ := p.Kmm.Dims()
		for i := range m {
			tr += p.Kmm.At(i, i)
		}
		if math.IsNaN(tr) || math.IsInf(tr, 0) {
			return 0, errorf(ErrNotFinite, "kernel scale %q: trace of Kmm = %v", mode, tr)
		}
		if tr > 0 {
			scale = float64(m) / tr
		}
		if math.IsInf(scale, 0) {
			return 0, errorf(ErrNotFinite, "kernel scale %q: factor M/tr(Kmm) = %d/%v overflows", mode, m, tr)
		}
		blocks := []*mat.Dense{p.KA, p.KB, p.Kmm, p.Val.K, p.Val.KB, p.Test.K, p.Test.KB}
		for i, b := range blocks {
			if b == nil || b.IsEmpty() {
				continue
			}
			seen := false
			for _, c := range blocks[:i] {
				seen = seen || c == b
			}
			if !seen {
				scaleRowsTo(b, scale)
			}
		}
	case ScaleNone:
	default:
		return 0, errorf(ErrOption, "kernel scale %q (want %s or %s)", mode, ScaleDiag, ScaleNone)
	}
	return scale, nil
}

// DefaultInitScale is the init scale spec of cairnctl fit, explain, audit and the daemon
// (cairnctl's --init-scale default). Specs: "unit" multiplies Ã₀ by UnitLatentScale;
// "auto" is "unit" for the PCI initializers (PCI, PCILanczos, KrepesPCI) and factor 1 for
// the others; a positive finite number is a fixed factor.
//
// Why rescale (our choice, measured): the PCI initializers' Ã₀ = U(Λ+ε)^{-1/2} is multiplied
// by UnitLatentScale, so the initial training latents have unit mean per-dimension
// variance. The paper's other Stage 2 constants are absolute: Adam moves every coefficient
// by about lr = 1.25e-2 per step whatever the gradient's scale (the first bias-corrected
// step is exactly lr·sign(g)), b₀ = 0.1·1, and VICReg's variance term targets standard
// deviation 1. PCI's scale instead follows the kernel's: under ScaleKernels ScaleDiag its
// latents have per-dimension standard deviation ≈ 0.02 (the factor is ≈ 49 on MNIST), so
// b₀ dominates every latent's direction, the leading columns (entries ≈ (M·λ₁)^{-1/2}) are
// overwritten by the first steps, SimCLR sits at its collapse value log(2B−1), Barlow
// Twins' loss rises in epoch 2, and VICReg's hinge stays active. The paper rescales CSI
// and AUI (‖Ã₀‖_F = √k) but not PCI, so for CSI, AUI and Kaiming auto keeps the factor 1.
// For the scale-invariant losses the factor s acts like lr/s (up to b₀ and weight decay);
// for VICReg it also meets the variance target. Measured on MNIST (n 10000, m 256, h 2,
// s 256, PCI, seed 1), test k-NN of the selected checkpoint (initialization: 0.852
// unscaled, 0.862 scaled, the gain being b₀'s smaller weight):
//
//	setting                       BT       SimCLR   VICReg
//	factor 1,  lr 1.25e-2         0.6765   0.818    0.823
//	factor 1,  lr 3e-4            0.8615   0.8445   0.8435
//	factor 1,  lr 1e-3            0.8455   0.856    0.8445
//	factor 30, lr 1.25e-2         0.8655   0.859    0.8625
//	unit (49), lr 1.25e-2         0.860    0.8615   0.859
//
// With the unit factor, Barlow Twins and VICReg raise validation accuracy from 0.9115 to
// 0.924 and 0.9225, but test accuracy stays within noise (±0.8 points for 2000 test
// points) of the initialization; SimCLR now trains (loss 5.79 → 4.70 instead of pinned at
// 6.97) but lowers validation accuracy from its first epoch in every setting tried.
//
// Why unit, not auto, for every initializer (measured later, MNIST n 10000, m 256, h 2,
// s 256, Barlow Twins, seed 1, initialization → selected checkpoint test accuracy): with
// factor 1 Kaiming 0.797 → 0.6515, CSI 0.751 → 0.658, AUI 0.7635 → 0.6405 (each collapses
// in the first epoch, the same scale mismatch as PCI's); with the unit factor they reach
// 0.8195, 0.816 and 0.817, improving on their starts. The paper's ‖Ã₀‖_F = √k scaling of
// CSI and AUI is applied first and kept as the direction; only the scale changes.
const DefaultInitScale = "unit"

// ParseInitScale interprets init scale spec (see DefaultInitScale) for initializer in:
// unit reports whether the factor is UnitLatentScale's (factor is then 0), else factor is
// the fixed factor. A spec that is neither "auto", "unit" nor a positive finite number is
// an ErrOption error.
func ParseInitScale(spec string, in Init) (factor float64, unit bool, err error) {
	switch spec {
	case "unit":
		return 0, true, nil
	case "auto":
		if in == PCI || in == PCILanczos || in == KrepesPCI {
			return 0, true, nil
		}
		return 1, false, nil
	}
	v, err := strconv.ParseFloat(spec, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, false, errorf(ErrOption, "init scale %q must be auto, unit or a positive finite number", spec)
	}
	return v, false, nil
}

// UnitLatentScale returns 1/sqrt(v̄), v̄ the mean over the k latent dimensions of the
// (population) variance over the n training rows of z = K_A Ã₀ (ka is n×M, a0 M×k):
//
//	for j: μ_j = Σ_i z_ij / n;  v_j = Σ_i (z_ij − μ_j)² / n
//	v̄ = Σ_j v_j / k
//
// the factor that gives the initial latents unit mean per-dimension variance, the scale
// VICReg's variance term (target standard deviation 1) and the absolute b₀ = 0.1·1 and
// learning rate assume. It returns 1 when v̄ is zero or not finite. Neither argument is
// modified; mismatched or empty shapes panic (a programmer error: Initialize returns Ã₀
// with K_A's column count as its row count).
//
// The columns' sums run in chunks of columns side by side (internal/base/par), each in row
// order, and v̄ sums the v_j in column order, so the factor has the plain loops' bits.
func UnitLatentScale(ka, a0 *mat.Dense) float64 {
	var z mat.Dense
	z.Mul(ka, a0)
	n, k := z.Dims()
	vs := make([]float64, k)
	const cols = 16
	par.For(k, cols, par.Workers(k, cols), func(_, lo, hi int) {
		mu, ss := make([]float64, hi-lo), make([]float64, hi-lo)
		for i := range n {
			floats64AddTo(mu, z.RawRowView(i)[lo:hi])
		}
		for j := range mu {
			mu[j] /= float64(n)
		}
		for i := range n {
			for j, x := range z.RawRowView(i)[lo:hi] {
				d := x - mu[j]
				ss[j] += d * d
			}
		}
		for j := range ss {
			vs[lo+j] = ss[j] / float64(n)
		}
	})
	var v float64
	for _, vj := range vs {
		v += vj
	}
	v /= float64(k)
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	return 1 / math.Sqrt(v)
}

// ScaleInit multiplies a0 (Ã₀ of initializer in, modified in place) by the factor that
// init scale spec selects (see DefaultInitScale) and returns the factor. ka is the
// training view K_A after ScaleKernels; it is not modified. The scaled Ã₀ is the fit's Ã₀:
// ω is measured from it. Every caller that must fit what cairnctl fit fits calls it with
// DefaultInitScale after Initialize, after ScaleKernels(p, ScaleDiag) before Initialize.
// A bad spec is an ErrOption error, and a nil, empty or mismatched ka or a0 (needed for
// the unit factor) an ErrShape error; a0 is untouched on error.
func ScaleInit(spec string, in Init, ka, a0 *mat.Dense) (float64, error) {
	f, unit, err := ParseInitScale(spec, in)
	if err != nil {
		return 0, err
	}
	if a0 == nil || a0.IsEmpty() {
		return 0, errorf(ErrShape, "init scale %q: no Ã₀", spec)
	}
	if unit {
		if ka == nil || ka.IsEmpty() {
			return 0, errorf(ErrShape, "init scale %q: no K_A", spec)
		}
		if _, m := ka.Dims(); m != a0.RawMatrix().Rows {
			return 0, errorf(ErrShape, "init scale %q: K_A has %d columns, Ã₀ %d rows", spec, m, a0.RawMatrix().Rows)
		}
		f = UnitLatentScale(ka, a0)
	}
	if f != 1 {
		a0.Scale(f, a0)
	}
	return f, nil
}

// scaleRowsTo multiplies every entry of b by f in place, chunks of rows side by side.
func scaleRowsTo(b *mat.Dense, f float64) {
	r, _ := b.Dims()
	par.For(r, 256, par.Workers(r, 256), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := b.RawRowView(i)
			for j, v := range row {
				row[j] = f * v
			}
		}
	})
}
