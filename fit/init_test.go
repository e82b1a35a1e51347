package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// spdWithSpectrum returns Q diag(vals) Qᵀ for a random orthogonal Q (QR of a Gaussian).
func spdWithSpectrum(rnd *rand.Rand, vals []float64) *mat.Dense {
	m := len(vals)
	g := randDense(rnd, m, m, 1, 0)
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	var t mat.Dense
	t.Mul(&q, mat.NewDiagDense(m, vals))
	out := mat.NewDense(m, m, nil)
	out.Mul(&t, q.T())
	return out
}

// TestPCILanczosMatchesDense compares the Lanczos PCI with the dense one on a K_mm with a
// geometric spectrum (gaps well above the Ritz residuals, so Prop. amplify bounds the
// subspace error by ρ/γ ≈ 1e-14/1e-3): projector distance ≤ 1e-10, and Ritz residuals
// below 1e-10·λ_max.
func TestPCILanczosMatchesDense(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct{ m, k int }{{60, 10}, {40, 25}, {30, 50}} {
		vals := make([]float64, tc.m)
		for i := range vals {
			vals[i] = math.Pow(0.8, float64(i))
		}
		p := &Problem{KA: mat.NewDense(2, tc.m, nil), Kmm: spdWithSpectrum(rnd, vals)}
		d, err := Initialize(PCI, p, tc.k, 1)
		if err != nil {
			t.Fatal(err)
		}
		l, err := Initialize(PCILanczos, p, tc.k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if e := LanczosError(l, d); !(e <= 1e-10) {
			t.Errorf("m=%d k=%d: projector error %g > 1e-10", tc.m, tc.k, e)
		}
		for i, r := range l.RitzResiduals {
			if r > 1e-10 {
				t.Errorf("m=%d k=%d: Ritz residual %d = %g", tc.m, tc.k, i, r)
			}
		}
		if l.Retained != d.Retained {
			t.Errorf("m=%d k=%d: retained %d (Lanczos) vs %d (dense)", tc.m, tc.k, l.Retained, d.Retained)
		}
		// k > M: the output dimension is capped below M (the centering null vector is
		// dropped too).
		if _, c := d.A0.Dims(); c != d.Retained || c > min(tc.k, tc.m-1) {
			t.Errorf("m=%d k=%d: Ã₀ has %d columns, retained %d", tc.m, tc.k, c, d.Retained)
		}
	}
}

// TestPCIWhitens checks PCI's defining identity: with C = H K H and Ã₀ = U_k(Λ_k+ε)^{-1/2},
// Ã₀ᵀ C Ã₀ = diag(λ_i/(λ_i+ε)) (to 1e-12, rounding of an eigendecomposition of a matrix
// with entries O(1)).
func TestPCIWhitens(t *testing.T) {
	rnd := rand.New(rand.NewPCG(6, 6))
	m, k := 20, 6
	x := randDense(rnd, m, 4, 1, 0)
	kmm := mat.NewDense(m, m, nil)
	kmm.Mul(x, x.T()) // rank 4: the centered matrix has rank ≤ 4, so λ_5.. ≈ 0
	p := &Problem{KA: mat.NewDense(2, m, nil), Kmm: kmm}
	in, err := Initialize(PCI, p, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := centered(kmm, true)
	var t1, g mat.Dense
	t1.Mul(c, in.A0)
	g.Mul(in.A0.T(), &t1)
	if in.Retained != 4 {
		t.Errorf("retained %d eigenpairs of a rank-4 centered matrix, want 4", in.Retained)
	}
	for i := range in.Retained {
		for j := range in.Retained {
			want := 0.0
			if i == j {
				want = in.Values[i] / (in.Values[i] + in.Jitter)
			}
			if math.Abs(g.At(i, j)-want) > 1e-9 {
				t.Errorf("(Ã₀ᵀCÃ₀)[%d,%d] = %g, want %g", i, j, g.At(i, j), want)
			}
		}
	}
}

// TestCrossViewInits checks CSI and AUI against their defining equations (eq. csi-aui):
// CSI columns are eigenvectors of S = C_al + C_alᵀ; AUI columns solve the generalized
// problem B a = μ (C_all + εI) a; both have ||Ã₀||_F = sqrt(k).
func TestCrossViewInits(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	n, m, k := 50, 12, 5
	ka := randDense(rnd, n, m, 1, 0.5)
	kb := mat.DenseCopyOf(ka)
	noise := randDense(rnd, n, m, 0.3, 0)
	kb.Add(kb, noise)
	p := &Problem{KA: ka, KB: kb}
	ca, cb := centerCols(ka), centerCols(kb)
	var cal mat.Dense
	cal.Mul(ca.T(), cb)
	cal.Scale(1/float64(n), &cal)
	var s mat.Dense
	s.Add(&cal, cal.T())
	var call, bb mat.Dense
	call.Mul(ca.T(), ca)
	bb.Mul(cb.T(), cb)
	call.Add(&call, &bb)
	call.Scale(1/(2*float64(n)), &call)
	for _, in := range []Init{CSI, AUI} {
		r, err := Initialize(in, p, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if f := mat.Norm(r.A0, 2); math.Abs(f-math.Sqrt(float64(k))) > 1e-12 {
			t.Errorf("%v: ||Ã₀||_F = %g, want %g", in, f, math.Sqrt(float64(k)))
		}
		for c := range k {
			a := mat.VecDenseCopyOf(r.A0.ColView(c))
			var lhs, rhs mat.VecDense
			if in == CSI {
				lhs.MulVec(&s, a)
				mu := mat.Dot(a, &lhs) / mat.Dot(a, a)
				rhs.ScaleVec(mu, a)
			} else {
				var b mat.Dense
				b.Scale(0.5, &s)
				lhs.MulVec(&b, a)
				var w mat.Dense
				w.Add(&call, scaledIdentity(m, r.Jitter))
				rhs.MulVec(&w, a)
				mu := mat.Dot(a, &lhs) / mat.Dot(a, &rhs)
				rhs.ScaleVec(mu, &rhs)
			}
			lhs.SubVec(&lhs, &rhs)
			// Residual relative to ||S||·||a||; 1e-10 covers rounding in the chained products
			// of W = (C_all + εI)^{-1/2} (condition ≲ 1e6 by the jitter).
			if e := mat.Norm(&lhs, 2) / (mat.Norm(&s, 2) * mat.Norm(a, 2)); e > 1e-10 {
				t.Errorf("%v column %d: eigen-residual %g", in, c, e)
			}
		}
	}
}

func scaledIdentity(m int, v float64) *mat.Dense {
	d := mat.NewDense(m, m, nil)
	for i := range m {
		d.Set(i, i, v)
	}
	return d
}

// TestKrepesPCIArm checks the KREPES arm against a reference built the slow way: H K H by
// explicit products with H = I − 11ᵀ/M, on an unsymmetrized K, then the lower triangle
// mirrored (what torch.linalg.eigh reads), eigenpairs, and U(Λ + 1e-6)^{-1/2}; columns
// compared up to sign.
func TestKrepesPCIArm(t *testing.T) {
	rnd := rand.New(rand.NewPCG(8, 8))
	m, k := 10, 4
	x := randDense(rnd, m, m, 1, 0)
	asym := mat.NewDense(m, m, nil)
	asym.Mul(x, x.T())
	for i := range m {
		for j := i + 1; j < m; j++ {
			asym.Set(i, j, asym.At(i, j)+0.5) // perturb only the upper triangle
		}
	}
	h := scaledIdentity(m, 1)
	for i := range m {
		for j := range m {
			h.Set(i, j, h.At(i, j)-1/float64(m))
		}
	}
	var t1, c mat.Dense
	t1.Mul(h, asym)
	c.Mul(&t1, h)
	low := mat.NewSymDense(m, nil)
	for i := range m {
		for j := 0; j <= i; j++ {
			low.SetSym(i, j, c.At(i, j))
		}
	}
	var es mat.EigenSym
	es.Factorize(low, true)
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	got, err := Initialize(KrepesPCI, &Problem{KA: mat.NewDense(2, m, nil), Kmm: asym}, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Jitter != 1e-6 {
		t.Errorf("jitter %g, want 1e-6", got.Jitter)
	}
	for c := range k {
		i := m - 1 - c // gonum returns ascending eigenvalues
		s := 1 / math.Sqrt(vals[i]+1e-6)
		sign := 1.0
		if got.A0.At(0, c)*vecs.At(0, i) < 0 {
			sign = -1
		}
		for r := range m {
			if want := sign * vecs.At(r, i) * s; math.Abs(got.A0.At(r, c)-want) > 1e-10*math.Abs(s) {
				t.Fatalf("column %d row %d: got %g, want %g", c, r, got.A0.At(r, c), want)
			}
		}
	}
	pci, _ := Initialize(PCI, &Problem{KA: mat.NewDense(2, m, nil), Kmm: asym}, k, 1)
	if mat.EqualApprox(pci.A0, got.A0, 1e-3) {
		t.Errorf("PCI did not symmetrize: equals the KREPES arm")
	}
}
