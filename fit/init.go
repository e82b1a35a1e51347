package fit

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/lanczos"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// Init names an initializer of Ã₀ (paper section "Initialization", appendix "Details").
type Init int

const (
	// Kaiming draws Ã₀ with i.i.d. N(0, 2/M) entries (He et al. 2015, fan-in M).
	Kaiming Init = iota + 1
	// PCI is U_k(Λ_k + εI)^{-1/2} from the centered, symmetrized K_mm by a dense float64
	// eigendecomposition, ε = 1e-6·max|λ|.
	PCI
	// PCILanczos is PCI with the leading eigenpairs from Lanczos (2k+20 steps capped at M,
	// full reorthogonalization twice per step, own seeded start vector).
	PCILanczos
	// CSI is U_k(|Λ_k| + εI)^{-1/2} from C_al + C_alᵀ (eq. csi-aui), ||Ã₀||_F = sqrt(k).
	CSI
	// AUI is W U_k, W = (C_all + εI)^{-1/2}, U_k the leading eigenvectors of WBW
	// (eq. csi-aui), ||Ã₀||_F = sqrt(k).
	AUI
	// KrepesPCI is KREPES's own PCI: centered K_mm, no symmetrization (the lower triangle
	// is used as is, as torch.linalg.eigh does), absolute jitter 1e-6.
	KrepesPCI
)

var initNames = map[Init]string{Kaiming: "kaiming", PCI: "pci", PCILanczos: "pci-lanczos", CSI: "csi", AUI: "aui", KrepesPCI: "krepes-pci"}

// String returns the command-line name of in.
func (in Init) String() string {
	if s, ok := initNames[in]; ok {
		return s
	}
	return fmt.Sprintf("Init(%d)", int(in))
}

// ParseInit maps a command-line name to an Init.
func ParseInit(s string) (Init, error) {
	for in, name := range initNames {
		if name == s {
			return in, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want kaiming, pci, pci-lanczos, csi, aui or krepes-pci)", ErrInit, s)
}

// InitResult is an initialization with its diagnostics.
type InitResult struct {
	// A0 is Ã₀, M × Retained. The spectral initializers keep only usable eigenpairs
	// among the k leading ones (not beyond M, not after an early Lanczos breakdown, not
	// at or below the jitter: see invSqrtInit), so the output dimension is capped there
	// rather than padded with zero columns: Adam's first steps move every coordinate by
	// about lr whatever its gradient, and on a kernel with a large common component
	// (every eNTK entry positive) the padded coordinates move all latents together,
	// which collapsed SimCLR to log(2B−1) on MNIST with M = 32 < k = 256.
	A0 *mat.Dense
	// Retained is the number of columns of A0 (k for Kaiming).
	Retained int
	// Values are the retained eigenvalues (descending), nil for Kaiming.
	Values []float64
	// Jitter is the ε used.
	Jitter float64
	// RitzResiduals are ||A u_i − θ_i u_i||₂ of the retained Ritz pairs (PCILanczos only),
	// each checked by an explicit product.
	RitzResiduals []float64
	// LanczosSteps is the number of Lanczos steps taken (PCILanczos only).
	LanczosSteps int
}

// Initialize computes Ã₀ with k columns by the named initializer. Kaiming and the Lanczos
// start vector use the streams "fit/init/kaiming" and "fit/init/pci/lanczos" of seed,
// so no initializer advances any other random state. PCI variants need p.Kmm; CSI and
// AUI use p.KA and p.KB.
func Initialize(in Init, p *Problem, k int, seed uint64) (*InitResult, error) {
	if k < 1 {
		return nil, fmt.Errorf("%w: k = %d", ErrOption, k)
	}
	if p.KA == nil {
		return nil, fmt.Errorf("%w: KA is required", ErrShape)
	}
	_, m := p.KA.Dims()
	switch in {
	case Kaiming:
		r := rng.New(seed, "fit/init/kaiming")
		a := mat.NewDense(m, k, nil)
		sd := math.Sqrt(2 / float64(m))
		for i := range m {
			for j := range k {
				a.Set(i, j, sd*r.NormFloat64())
			}
		}
		return &InitResult{A0: a, Retained: k}, nil
	case PCI, PCILanczos, KrepesPCI:
		if p.Kmm == nil {
			return nil, fmt.Errorf("%w: %v needs Kmm", ErrShape, in)
		}
		if r, c := p.Kmm.Dims(); r != m || c != m {
			return nil, fmt.Errorf("%w: Kmm is %d×%d, want %d×%d", ErrShape, r, c, m, m)
		}
		c := centered(p.Kmm, in != KrepesPCI)
		if in == PCILanczos {
			return pciLanczos(c, k, seed)
		}
		vals, vecs, err := eigDesc(c)
		if err != nil {
			return nil, err
		}
		var res *InitResult
		if in == KrepesPCI {
			res = invSqrtInit(vals, vecs, k, 1e-6, -1e-6, false)
		} else {
			eps := 1e-6 * maxAbs(vals)
			res = invSqrtInit(vals, vecs, k, eps, eps, false)
		}
		if res.Retained == 0 {
			return nil, fmt.Errorf("%w: %v found no usable eigenpair (K_mm is zero after centering?)", ErrEigen, in)
		}
		return res, nil
	case CSI, AUI:
		return crossView(in, p, k)
	}
	return nil, fmt.Errorf("%w: %d", ErrInit, int(in))
}

// centered returns H K H, H = I − 11ᵀ/M (double centering). With sym, K is first replaced
// by (K + Kᵀ)/2; without, the lower triangle of H K H is mirrored (KREPES's arm).
func centered(k *mat.Dense, sym bool) *mat.SymDense {
	m, _ := k.Dims()
	c := mat.NewDense(m, m, nil)
	if sym {
		c.Add(k, k.T())
		c.Scale(0.5, c)
	} else {
		c.Copy(k)
	}
	row := make([]float64, m)
	col := make([]float64, m)
	var all float64
	for i := range m {
		for j := range m {
			v := c.At(i, j)
			row[i] += v
			col[j] += v
			all += v
		}
	}
	mf := float64(m)
	out := mat.NewSymDense(m, nil)
	for i := range m {
		for j := 0; j <= i; j++ {
			// Lower triangle (i ≥ j): H K H entries.
			out.SetSym(i, j, c.At(i, j)-row[i]/mf-col[j]/mf+all/(mf*mf))
		}
	}
	return out
}

// eigDesc returns the eigenvalues of s in descending order with matching eigenvector
// columns (dense float64: gonum's LAPACK dsyev, its rotations on all cores, eigenSym).
func eigDesc(s *mat.SymDense) ([]float64, *mat.Dense, error) {
	vals, vecs, ok := eigenSym(s)
	if !ok {
		return nil, nil, fmt.Errorf("%w: dense symmetric eigensolver did not converge", ErrEigen)
	}
	n := len(vals)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] > vals[idx[b]] })
	ov := make([]float64, n)
	for c, i := range idx {
		ov[c] = vals[i]
	}
	out := mat.NewDense(n, n, nil)
	par.For(n, 64, par.Workers(n, 64), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			dst, src := out.RawRowView(r), vecs.RawRowView(r)
			for c, i := range idx {
				dst[c] = src[i]
			}
		}
	})
	return ov, out, nil
}

func maxAbs(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// invSqrtInit returns U_k (Λ_k + εI)^{-1/2} (with |Λ_k| when abs), from eigenpairs in
// descending order, leaving zero every column whose (|)λ(|) ≤ cut. The relative-jitter
// arms pass cut = ε: an eigenvalue at or below the jitter is numerically null (the
// constant vector that double centering annihilates, or anything beyond the rank of
// K_mm), and keeping it would scale a noise direction by up to ε^{-1/2}, about 1e3 times
// the leading direction's (λ₁+ε)^{-1/2}. On MNIST with M = 32 < k that one column made
// every latent point the same way and pinned SimCLR at log(2B−1). KREPES's arm passes
// cut = −ε, keeping every column with λ + ε > 0 as KREPES does (reproduction arm).
func invSqrtInit(vals []float64, vecs *mat.Dense, k int, eps, cut float64, abs bool) *InitResult {
	m, nv := vecs.Dims()
	var cols [][]float64
	res := &InitResult{Jitter: eps}
	for c := 0; c < min(k, nv); c++ {
		l := vals[c]
		if abs {
			l = math.Abs(l)
		}
		if !(l > cut) || !(l+eps > 0) {
			continue
		}
		s := 1 / math.Sqrt(l+eps)
		col := make([]float64, m)
		for r := range m {
			col[r] = vecs.At(r, c) * s
		}
		cols = append(cols, col)
		res.Values = append(res.Values, vals[c])
	}
	res.A0 = fromCols(m, cols)
	res.Retained = len(cols)
	return res
}

// fromCols returns the m×len(cols) matrix with the given columns (m×1 zero when empty,
// which Initialize reports as an error).
func fromCols(m int, cols [][]float64) *mat.Dense {
	a := mat.NewDense(m, max(len(cols), 1), nil)
	for c, col := range cols {
		a.SetCol(c, col)
	}
	return a
}

// pciLanczos is PCI from Lanczos Ritz pairs of the centered K_mm: 2k+20 steps capped at
// M, full reorthogonalization (twice per step), start vector from "fit/init/pci/lanczos".
// The Ritz residuals are recomputed by explicit products (Prop. amplify bounds the
// initializer's error by them).
func pciLanczos(c *mat.SymDense, k int, seed uint64) (*InitResult, error) {
	m, _ := c.Dims()
	op := func(dst, v []float64) {
		dv := mat.NewVecDense(len(dst), dst)
		dv.MulVec(c, mat.NewVecDense(len(v), v))
	}
	steps := min(2*k+20, m)
	td, err := lanczos.Run(m, steps, op, lanczos.Start(m, seed, "fit/init/pci/lanczos"), true)
	if err != nil {
		return nil, fmt.Errorf("fit: PCI Lanczos: %w", err)
	}
	vals, vecs, _, err := td.Ritz()
	if err != nil {
		return nil, fmt.Errorf("fit: PCI Lanczos: %w", err)
	}
	// ε from the largest |Ritz value|, which approximates max|λ| from the extreme end of
	// the spectrum Lanczos resolves first.
	eps := 1e-6 * maxAbs(vals)
	res := invSqrtInit(vals, vecs, k, eps, eps, false)
	if res.Retained == 0 {
		return nil, fmt.Errorf("%w: PCI Lanczos found no usable Ritz pair", ErrEigen)
	}
	res.LanczosSteps = td.Steps()
	u := make([]float64, m)
	for i := 0; i < res.Retained; i++ {
		mat.Col(u, i, vecs)
		res.RitzResiduals = append(res.RitzResiduals, lanczos.ResidualNorm(op, vals[i], u))
	}
	return res, nil
}

// LanczosError compares two initializers' retained subspaces: it returns
// ||P_L − P_D||_F, where P is the orthogonal projector onto the span of the first r
// non-zero columns (r = the smaller retained count). Comparing projectors is immune to
// eigenvector signs and to rotations inside clustered eigenvalues (the paper's remark
// after Prop. amplify), which individual vectors are not.
func LanczosError(lanczosInit, denseInit *InitResult) float64 {
	r := min(lanczosInit.Retained, denseInit.Retained)
	pl := projector(lanczosInit.A0, r)
	pd := projector(denseInit.A0, r)
	pl.Sub(pl, pd)
	return mat.Norm(pl, 2) // Frobenius norm for a matrix argument of norm type 2
}

// projector returns Q Qᵀ for Q the first r columns of a, normalized (PCI columns are
// orthogonal eigenvectors scaled by (λ+ε)^{-1/2}).
func projector(a *mat.Dense, r int) *mat.Dense {
	m, _ := a.Dims()
	q := mat.NewDense(m, max(r, 1), nil)
	for c := range r {
		col := mat.Col(nil, c, a)
		var ss float64
		for _, v := range col {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss)
		for i := range col {
			q.Set(i, c, col[i]*inv)
		}
	}
	p := mat.NewDense(m, m, nil)
	if r > 0 {
		p.Mul(q, q.T())
	}
	return p
}

// crossView computes CSI and AUI (paper eq. csi-aui) from the view blocks centered over
// the n training rows:
//
//	C_al = K_Aᵀ K_B/n,  C_all = (K_Aᵀ K_A + K_Bᵀ K_B)/(2n),  B = (C_al + C_alᵀ)/2
//	CSI: eigenpairs of C_al + C_alᵀ (largest algebraic first), U_k(|Λ_k| + εI)^{-1/2}
//	AUI: W = (C_all + εI)^{-1/2}, U_k the leading eigenvectors of W B W, Ã₀ = W U_k
//
// Every ε is 1e-6 times the largest |eigenvalue| of the matrix decomposed; both results
// are rescaled to ||Ã₀||_F = sqrt(k), k the number of columns kept.
func crossView(in Init, p *Problem, k int) (*InitResult, error) {
	n, m := p.KA.Dims()
	ca, cb := centerCols(p.KA), centerCols(p.KB)
	cal := mat.NewDense(m, m, nil)
	cal.Mul(ca.T(), cb)
	cal.Scale(1/float64(n), cal)
	sum := mat.NewSymDense(m, nil)
	for i := range m {
		for j := i; j < m; j++ {
			sum.SetSym(i, j, cal.At(i, j)+cal.At(j, i))
		}
	}
	var res *InitResult
	if in == CSI {
		vals, vecs, err := eigDesc(sum)
		if err != nil {
			return nil, err
		}
		eps := 1e-6 * maxAbs(vals)
		res = invSqrtInit(vals, vecs, k, eps, eps, true)
	} else {
		call := mat.NewSymDense(m, nil)
		var aa, bb mat.Dense
		aa.Mul(ca.T(), ca)
		bb.Mul(cb.T(), cb)
		for i := range m {
			for j := i; j < m; j++ {
				// Symmetrized: (X + Xᵀ)/2 of each Gram block, then pooled.
				v := (aa.At(i, j) + aa.At(j, i) + bb.At(i, j) + bb.At(j, i)) / (4 * float64(n))
				call.SetSym(i, j, v)
			}
		}
		cv, cvec, err := eigDesc(call)
		if err != nil {
			return nil, err
		}
		eps := 1e-6 * maxAbs(cv)
		// W = V diag((λ + ε)^{-1/2}) Vᵀ; C_all is PSD up to rounding, and a rounding-negative
		// λ with λ + ε ≤ 0 is clamped to ε so W stays finite.
		w := mat.NewDense(m, m, nil)
		sv := mat.NewDense(m, m, nil)
		for c := range m {
			l := cv[c] + eps
			if l <= 0 {
				l = eps
			}
			s := 1 / math.Sqrt(l)
			for r := range m {
				sv.Set(r, c, cvec.At(r, c)*s)
			}
		}
		w.Mul(sv, cvec.T())
		var t1, t2 mat.Dense
		t1.Mul(w, sum)
		t1.Scale(0.5, &t1) // W B, B = sum/2
		t2.Mul(&t1, w)
		wbw := mat.NewSymDense(m, nil)
		for i := range m {
			for j := i; j < m; j++ {
				wbw.SetSym(i, j, (t2.At(i, j)+t2.At(j, i))/2)
			}
		}
		vals, vecs, err := eigDesc(wbw)
		if err != nil {
			return nil, err
		}
		// Generalized eigenvalues μ with |μ| ≤ 1e-6·max|μ| belong to (near-)null directions
		// of B, which W scales by up to ε^{-1/2}; as in invSqrtInit they are left zero so
		// they cannot dominate the Frobenius normalization.
		cut := 1e-6 * maxAbs(vals)
		res = &InitResult{Jitter: eps}
		var cols [][]float64
		for c := 0; c < min(k, m); c++ {
			if !(math.Abs(vals[c]) > cut) {
				continue
			}
			col := mat.NewVecDense(m, nil)
			col.MulVec(w, vecs.ColView(c))
			cols = append(cols, col.RawVector().Data)
			res.Values = append(res.Values, vals[c])
		}
		res.A0, res.Retained = fromCols(m, cols), len(cols)
	}
	if res.Retained == 0 {
		return nil, fmt.Errorf("%w: %v found no usable eigenpair (all below the jitter)", ErrEigen, in)
	}
	f := mat.Norm(res.A0, 2)
	if f > 0 {
		res.A0.Scale(math.Sqrt(float64(res.Retained))/f, res.A0)
	}
	return res, nil
}

// centerCols returns x with each column's mean over the rows subtracted.
func centerCols(x *mat.Dense) *mat.Dense {
	r, c := x.Dims()
	out := mat.DenseCopyOf(x)
	for j := range c {
		var mu float64
		for i := range r {
			mu += x.At(i, j)
		}
		mu /= float64(r)
		for i := range r {
			out.Set(i, j, out.At(i, j)-mu)
		}
	}
	return out
}
