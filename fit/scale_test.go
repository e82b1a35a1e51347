package fit

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// scaleProblem returns a Problem with every block ScaleKernels touches set, entries of
// the order of the raw MNIST eNTK (offset 20, spread 5), and K_mm = L Lᵀ (PSD, positive
// trace) so the diag factor is well defined.
func scaleProblem(seed uint64) *Problem {
	rnd := rng.New(seed, "fit/scale_test/problem")
	const n, m, nv, nt = 12, 5, 4, 3
	l := randDense(rnd, m, m, 2, 1)
	kmm := mat.NewDense(m, m, nil)
	kmm.Mul(l, l.T())
	return &Problem{
		KA: randDense(rnd, n, m, 5, 20), KB: randDense(rnd, n, m, 5, 20), Kmm: kmm,
		Val:  Split{K: randDense(rnd, nv, m, 5, 20), KB: randDense(rnd, nv, m, 5, 20)},
		Test: Split{K: randDense(rnd, nt, m, 5, 20), KB: randDense(rnd, nt, m, 5, 20)},
	}
}

// problemBlocks lists the blocks of p that ScaleKernels must scale, with their names.
func problemBlocks(p *Problem) ([]string, []*mat.Dense) {
	return []string{"KA", "KB", "Kmm", "Val.K", "Val.KB", "Test.K", "Test.KB"},
		[]*mat.Dense{p.KA, p.KB, p.Kmm, p.Val.K, p.Val.KB, p.Test.K, p.Test.KB}
}

// copyProblem deep-copies the blocks of p (nil stays nil).
func copyProblem(p *Problem) *Problem {
	c := func(a *mat.Dense) *mat.Dense {
		if a == nil {
			return nil
		}
		return mat.DenseCopyOf(a)
	}
	return &Problem{KA: c(p.KA), KB: c(p.KB), Kmm: c(p.Kmm),
		Val: Split{K: c(p.Val.K), KB: c(p.Val.KB)}, Test: Split{K: c(p.Test.K), KB: c(p.Test.KB)}}
}

// TestScaleKernels checks both modes and the errors. Under diag, the mean of diag K_mm
// afterwards is 1: it is the sum of M products fl(s·K_ii) with s = fl(M/tr), each within
// one rounding (2⁻⁵³) of exact, so the mean is within ~(M+2)·2⁻⁵³ ≈ 1e-15 of 1; 1e-13 is
// generous. Every block must equal its unscaled copy times the returned factor bit for
// bit (elementwise products, the same rounding whichever Dense holds them), and the factor
// must equal M over the trace summed here independently (mat.Trace).
func TestScaleKernels(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		p := scaleProblem(seed)
		orig := copyProblem(p)
		m, _ := orig.Kmm.Dims()
		want := float64(m) / mat.Trace(orig.Kmm)
		got, err := ScaleKernels(p, ScaleDiag)
		if err != nil {
			t.Fatalf("seed %d: ScaleKernels(diag): %v", seed, err)
		}
		if math.Abs(got-want) > 1e-15*want {
			t.Errorf("seed %d: factor %v, want M/tr(Kmm) = %v", seed, got, want)
		}
		var mean float64
		for i := range m {
			mean += p.Kmm.At(i, i) / float64(m)
		}
		if math.Abs(mean-1) > 1e-13 {
			t.Errorf("seed %d: mean diag Kmm after diag scaling = %v, want 1", seed, mean)
		}
		names, after := problemBlocks(p)
		_, before := problemBlocks(orig)
		for i, b := range after {
			var w mat.Dense
			w.Scale(got, before[i])
			if !mat.Equal(b, &w) {
				t.Errorf("seed %d: %s is not its unscaled copy times the factor %v", seed, names[i], got)
			}
		}
	}

	p := scaleProblem(4)
	orig := copyProblem(p)
	if got, err := ScaleKernels(p, ScaleNone); err != nil || got != 1 {
		t.Errorf("ScaleKernels(none) = %v, %v; want 1, nil", got, err)
	}
	names, after := problemBlocks(p)
	_, before := problemBlocks(orig)
	for i, b := range after {
		if !mat.Equal(b, before[i]) {
			t.Errorf("none: %s changed", names[i])
		}
	}

	// Optional blocks may be nil, and a block listed twice is scaled once.
	p = scaleProblem(5)
	p.Val.KB, p.Test = nil, Split{}
	p.KB = p.KA
	orig = copyProblem(p)
	f, err := ScaleKernels(p, ScaleDiag)
	if err != nil {
		t.Fatalf("nil optional blocks: %v", err)
	}
	var w mat.Dense
	w.Scale(f, orig.KA)
	if !mat.Equal(p.KA, &w) {
		t.Errorf("KB == KA: K_A not scaled exactly once by %v", f)
	}

	// A zero K_mm has no scale: factor 1, blocks left alone.
	p = scaleProblem(6)
	p.Kmm.Zero()
	orig = copyProblem(p)
	if f, err := ScaleKernels(p, ScaleDiag); err != nil || f != 1 || !mat.Equal(p.KA, orig.KA) {
		t.Errorf("zero Kmm: factor %v, err %v, K_A changed %v; want 1, nil, false", f, err, !mat.Equal(p.KA, orig.KA))
	}

	for _, c := range []struct {
		name   string
		mode   string
		edit   func(p *Problem)
		target error
	}{
		{"unknown mode", "Diag", func(*Problem) {}, ErrOption},
		{"empty mode", "", func(*Problem) {}, ErrOption},
		{"nil Kmm", ScaleDiag, func(p *Problem) { p.Kmm = nil }, ErrShape},
		{"NaN Kmm", ScaleDiag, func(p *Problem) { p.Kmm.Set(0, 0, math.NaN()) }, ErrNotFinite},
		{"Inf Kmm", ScaleDiag, func(p *Problem) { p.Kmm.Set(1, 1, math.Inf(1)) }, ErrNotFinite},
		{"overflowing factor", ScaleDiag, func(p *Problem) {
			p.Kmm.Zero()
			p.Kmm.Set(0, 0, 1e-320)
		}, ErrNotFinite},
	} {
		p := scaleProblem(7)
		c.edit(p)
		orig := copyProblem(p)
		f, err := ScaleKernels(p, c.mode)
		if !errors.Is(err, c.target) {
			t.Errorf("%s: ScaleKernels(%q) = %v, %v; want error %v", c.name, c.mode, f, err, c.target)
		}
		if !mat.Equal(p.KA, orig.KA) || !mat.Equal(p.Test.KB, orig.Test.KB) {
			t.Errorf("%s: blocks modified although ScaleKernels failed", c.name)
		}
	}
}

// unitLatentScaleRef is UnitLatentScale from its definition, by plain loops: z = K_A Ã₀
// entry by entry, the population variance of each column by the two-pass formula,
// their mean, and 1/sqrt of it.
func unitLatentScaleRef(ka, a0 *mat.Dense) float64 {
	n, m := ka.Dims()
	_, k := a0.Dims()
	var vbar float64
	for j := range k {
		z := make([]float64, n)
		for i := range n {
			for l := range m {
				z[i] += ka.At(i, l) * a0.At(l, j)
			}
		}
		var mu float64
		for _, v := range z {
			mu += v
		}
		mu /= float64(n)
		var v float64
		for _, x := range z {
			v += (x - mu) * (x - mu)
		}
		vbar += v / float64(n)
	}
	vbar /= float64(k)
	return 1 / math.Sqrt(vbar)
}

// TestUnitLatentScale compares UnitLatentScale with the from-definition reference and
// checks that scaling Ã₀ by it gives latents whose per-dimension variances, computed here
// as E[z²] − E[z]² (a third formula), average to 1.
//
// Tolerances: z has entries ≈ 54 (offset 3 in both factors, M = 6) and per-dimension
// standard deviation ≈ 8; the product's summation order differs between gonum's Mul and
// the reference loop, which perturbs each centred z by ~M·2⁻⁵³·54 ≈ 4e-14, i.e. ~5e-15
// relative to the standard deviation, and the two-pass variance adds ~n·2⁻⁵³. 1e-12
// relative is far above both. The one-pass E[z²] − E[z]² loses about log10(E[z²]/var)
// ≈ 2 digits to cancellation, so 1e-9 there.
func TestUnitLatentScale(t *testing.T) {
	rnd := rng.New(1, "fit/scale_test/unit")
	for _, c := range []struct{ n, m, k int }{{50, 6, 4}, {7, 3, 1}, {2, 9, 5}} {
		// A large common offset, as in kernel rows.
		ka := randDense(rnd, c.n, c.m, 1, 3)
		a0 := randDense(rnd, c.m, c.k, 1, 3)
		kaCopy, a0Copy := mat.DenseCopyOf(ka), mat.DenseCopyOf(a0)
		s := UnitLatentScale(ka, a0)
		if want := unitLatentScaleRef(ka, a0); math.Abs(s-want) > 1e-12*want {
			t.Errorf("n %d m %d k %d: UnitLatentScale = %v, want %v", c.n, c.m, c.k, s, want)
		}
		if !mat.Equal(ka, kaCopy) || !mat.Equal(a0, a0Copy) {
			t.Errorf("n %d m %d k %d: UnitLatentScale modified its arguments", c.n, c.m, c.k)
		}
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
			t.Errorf("n %d m %d k %d: mean latent variance after scaling by %v = %v, want 1", c.n, c.m, c.k, s, mv)
		}
	}

	// Identical rows of small integers times an integer Ã₀: z is integer-valued, every
	// sum is exact, so the mean is exactly the common value and the variance exactly 0.
	// (With real-valued rows the mean carries a rounding error and the variance is ~1e-30,
	// not 0: UnitLatentScale then returns a huge factor, as the cairnctl code it came from
	// did.)
	ka := randDense(rnd, 10, 4, 1, 3)
	constRows := mat.NewDense(10, 4, nil)
	intA0 := mat.NewDense(4, 3, nil)
	for i := range 10 {
		constRows.SetRow(i, []float64{3, 1, 4, 1})
	}
	for i := range 4 {
		intA0.SetRow(i, []float64{float64(i), -2, 5})
	}
	nan := randDense(rnd, 4, 3, 1, 0)
	nan.Set(2, 1, math.NaN())
	for _, c := range []struct {
		name   string
		ka, a0 *mat.Dense
	}{
		{"zero Ã₀", ka, mat.NewDense(4, 3, nil)},
		{"identical rows (zero variance)", constRows, intA0},
		{"NaN in Ã₀", ka, nan},
		{"overflowing latents", ka, mat.NewDense(4, 3, []float64{1e300, -1e300, 1e300, 1e300, 1e300, -1e300, -1e300, 1e300, 1e300, 1e300, 1e300, 1e300})},
	} {
		if got := UnitLatentScale(c.ka, c.a0); got != 1 {
			t.Errorf("%s: UnitLatentScale = %v, want 1", c.name, got)
		}
	}
}

// TestScaleInit checks the factor ScaleInit applies for every initializer name ParseInit
// accepts: auto is the unit factor for the PCI variants and 1 for Kaiming, CSI and AUI;
// unit is the unit factor for all; a number is that factor. Ã₀ must be scaled by exactly
// the returned factor (bit for bit: the same elementwise products) and K_A left alone.
func TestScaleInit(t *testing.T) {
	rnd := rng.New(1, "fit/scale_test/init")
	ka := randDense(rnd, 30, 6, 1, 3)
	a0 := randDense(rnd, 6, 4, 0.1, 0)
	unit := unitLatentScaleRef(ka, a0)
	autoUnit := map[string]bool{"pci": true, "pci-lanczos": true, "krepes-pci": true, "kaiming": false, "csi": false, "aui": false}
	for name, isUnit := range autoUnit {
		in, err := ParseInit(name)
		if err != nil {
			t.Fatalf("ParseInit(%q): %v", name, err)
		}
		autoWant := 1.0
		if isUnit {
			autoWant = unit
		}
		for _, c := range []struct {
			spec string
			want float64
		}{{DefaultInitScale, unit}, {"auto", autoWant}, {"unit", unit}, {"2.5", 2.5}, {"1", 1}, {"1e-3", 1e-3}} {
			a := mat.DenseCopyOf(a0)
			kaCopy := mat.DenseCopyOf(ka)
			got, err := ScaleInit(c.spec, in, ka, a)
			if err != nil {
				t.Errorf("ScaleInit(%q, %s): %v", c.spec, name, err)
				continue
			}
			// The unit factor is compared with the reference at the tolerance derived in
			// TestUnitLatentScale; fixed factors exactly.
			if math.Abs(got-c.want) > 1e-12*c.want {
				t.Errorf("ScaleInit(%q, %s): factor %v, want %v", c.spec, name, got, c.want)
			}
			var want mat.Dense
			want.Scale(got, a0)
			if !mat.Equal(a, &want) {
				t.Errorf("ScaleInit(%q, %s): Ã₀ is not the original times the factor %v", c.spec, name, got)
			}
			if !mat.Equal(ka, kaCopy) {
				t.Errorf("ScaleInit(%q, %s): K_A modified", c.spec, name)
			}
		}
	}

	for _, c := range []struct {
		name   string
		spec   string
		ka, a0 *mat.Dense
		target error
	}{
		{"zero", "0", ka, a0, ErrOption},
		{"negative", "-1", ka, a0, ErrOption},
		{"NaN", "NaN", ka, a0, ErrOption},
		{"+Inf", "+Inf", ka, a0, ErrOption},
		{"word", "abc", ka, a0, ErrOption},
		{"empty", "", ka, a0, ErrOption},
		{"upper case", "Auto", ka, a0, ErrOption},
		{"nil Ã₀", "2", ka, nil, ErrShape},
		{"nil K_A for unit", "unit", nil, a0, ErrShape},
		{"mismatched K_A", "unit", randDense(rnd, 30, 5, 1, 3), a0, ErrShape},
	} {
		var a *mat.Dense
		if c.a0 != nil {
			a = mat.DenseCopyOf(c.a0)
		}
		f, err := ScaleInit(c.spec, PCI, c.ka, a)
		if !errors.Is(err, c.target) {
			t.Errorf("%s: ScaleInit(%q) = %v, %v; want error %v", c.name, c.spec, f, err, c.target)
		}
		if a != nil && !mat.Equal(a, c.a0) {
			t.Errorf("%s: Ã₀ modified although ScaleInit failed", c.name)
		}
	}
}

// TestParseInitScale checks the spec grammar directly, including the unit flag the
// factor-only ScaleInit test cannot see.
func TestParseInitScale(t *testing.T) {
	for _, c := range []struct {
		spec     string
		in       Init
		factor   float64
		unit, ok bool
	}{
		{"auto", PCI, 0, true, true},
		{"auto", PCILanczos, 0, true, true},
		{"auto", KrepesPCI, 0, true, true},
		{"auto", Kaiming, 1, false, true},
		{"auto", CSI, 1, false, true},
		{"auto", AUI, 1, false, true},
		{"unit", Kaiming, 0, true, true},
		{"30", PCI, 30, false, true},
		{"0.5", AUI, 0.5, false, true},
		{"0", PCI, 0, false, false},
		{"-1", PCI, 0, false, false},
		{"NaN", PCI, 0, false, false},
		{"-Inf", PCI, 0, false, false},
		{"abc", PCI, 0, false, false},
		{" 2", PCI, 0, false, false},
	} {
		f, u, err := ParseInitScale(c.spec, c.in)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrOption)) {
			t.Errorf("ParseInitScale(%q, %v): error %v, want ok %v (ErrOption otherwise)", c.spec, c.in, err, c.ok)
			continue
		}
		if c.ok && (f != c.factor || u != c.unit) {
			t.Errorf("ParseInitScale(%q, %v) = %v, %v; want %v, %v", c.spec, c.in, f, u, c.factor, c.unit)
		}
	}
}

// FuzzParseInitScale feeds arbitrary specs (and kernel scale modes) from outside: no
// panic; an accepted spec is auto, unit or a positive finite number equal to its
// strconv parse; an accepted mode is diag or none.
func FuzzParseInitScale(f *testing.F) {
	for _, s := range []string{"auto", "unit", "2.5", "0", "-1", "NaN", "Inf", "1e309", "0x1p-3", "abc", "", "diag", "none"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		for _, in := range []Init{Kaiming, PCI, PCILanczos, CSI, AUI, KrepesPCI, 0} {
			factor, unit, err := ParseInitScale(spec, in)
			if err != nil {
				if !errors.Is(err, ErrOption) {
					t.Fatalf("ParseInitScale(%q): error %v does not wrap ErrOption", spec, err)
				}
				continue
			}
			switch {
			case spec == "auto" || spec == "unit":
			case unit:
				t.Fatalf("ParseInitScale(%q): unit for a numeric spec", spec)
			default:
				v, perr := strconv.ParseFloat(spec, 64)
				if perr != nil || v != factor || !(factor > 0) || math.IsInf(factor, 0) {
					t.Fatalf("ParseInitScale(%q) accepted factor %v", spec, factor)
				}
			}
		}
		p := scaleProblem(8)
		if _, err := ScaleKernels(p, spec); (err == nil) != (spec == ScaleDiag || spec == ScaleNone) {
			t.Fatalf("ScaleKernels(%q): error %v", spec, err)
		}
	})
}
