package lanczos

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// denseOp wraps a symmetric matrix as an Operator (dst = A v by gonum's MulVec).
func denseOp(a *mat.SymDense) Operator {
	return func(dst, v []float64) {
		mat.NewVecDense(len(dst), dst).MulVec(a, mat.NewVecDense(len(v), v))
	}
}

// randomSym returns a symmetric matrix with independent N(0,1) entries above the diagonal.
func randomSym(n int, r *rand.Rand) *mat.SymDense {
	a := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			a.SetSym(i, j, r.NormFloat64())
		}
	}
	return a
}

// withSpectrum returns U diag(vals) Uᵀ for a random orthogonal U (QR of a Gaussian matrix).
func withSpectrum(vals []float64, r *rand.Rand) *mat.SymDense {
	n := len(vals)
	g := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			g.Set(i, j, r.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var u mat.Dense
	qr.QTo(&u)
	var ud, a2 mat.Dense
	ud.Mul(&u, mat.NewDiagDense(n, vals))
	a2.Mul(&ud, u.T())
	a := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			a.SetSym(i, j, 0.5*(a2.At(i, j)+a2.At(j, i)))
		}
	}
	return a
}

// denseEigen is the reference: eigenvalues descending, eigenvectors in matching columns.
func denseEigen(t *testing.T, a *mat.SymDense) ([]float64, *mat.Dense) {
	t.Helper()
	var es mat.EigenSym
	if !es.Factorize(a, true) {
		t.Fatal("reference EigenSym failed")
	}
	n := a.SymmetricDim()
	asc := es.Values(nil)
	var v mat.Dense
	es.VectorsTo(&v)
	vals := make([]float64, n)
	vecs := mat.NewDense(n, n, nil)
	for c := range n {
		vals[c] = asc[n-1-c]
		for r := range n {
			vecs.Set(r, c, v.At(r, n-1-c))
		}
	}
	return vals, vecs
}

func opNorm(vals []float64) float64 {
	var m float64
	for _, v := range vals {
		m = max(m, math.Abs(v))
	}
	return m
}

// alignedDiff returns max_r |s·u(r) − v(r)| with the sign s = ±1 that aligns column i of u to v.
func alignedDiff(u, v *mat.Dense, i int) float64 {
	n, _ := u.Dims()
	var dot float64
	for r := range n {
		dot += u.At(r, i) * v.At(r, i)
	}
	s := 1.0
	if dot < 0 {
		s = -1
	}
	var d float64
	for r := range n {
		d = max(d, math.Abs(s*u.At(r, i)-v.At(r, i)))
	}
	return d
}

func randVec(n int, r *rand.Rand) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// TestFullRunMatchesDense: with steps = n and full reorthogonalization, T is orthogonally
// similar to A, so its eigenvalues are those of A up to backward error O(n ε ||A||). For
// n ≤ 100 that is < 3e-14·||A||; the tolerance 1e-10·||A|| leaves a wide margin yet would
// catch any algorithmic error (a wrong α or β changes eigenvalues at O(1)). Every Ritz
// pair must also have a residual ≤ 1e-10·||A|| measured directly with the operator.
func TestFullRunMatchesDense(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 31, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(n)))
			a := randomSym(n, r)
			want, _ := denseEigen(t, a)
			scale := opNorm(want)
			v0 := randVec(n, r)
			v0c := slices.Clone(v0)
			tri, err := Run(n, n, denseOp(a), v0, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v0, v0c) {
				t.Fatal("Run modified v0")
			}
			if tri.Steps() != n {
				t.Fatalf("steps: got %d, want %d (breakdown %v)", tri.Steps(), n, tri.Breakdown)
			}
			got, vecs, res, err := tri.Ritz()
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if d := math.Abs(got[i] - want[i]); d > 1e-10*scale {
					t.Errorf("θ_%d: got %v, want %v (diff %.3g)", i, got[i], want[i], d)
				}
				u := mat.Col(nil, i, vecs)
				if rho := ResidualNorm(denseOp(a), got[i], u); rho > 1e-10*scale {
					t.Errorf("pair %d: ||Au−θu|| = %.3g > 1e-10·||A||", i, rho)
				}
				if res[i] > 1e-10*scale {
					t.Errorf("pair %d: cheap residual %.3g, want ≈ 0 after n steps", i, res[i])
				}
			}
		})
	}
}

// TestLeadingPowerLaw is the PCI use: k leading pairs from 2k+20 steps. Spectra decaying
// like the paper's kernels (power law i^-2, geometric 0.8^i) give Lanczos convergence
// factors of about e^{-2√gap·j} (Kaniel–Paige–Saad bound), far below 1e-12 after 2k+20
// steps for these gaps, so values must agree to 1e-12·||A|| and eigenvectors (simple,
// gaps ≥ 0.01·||A||, so the error is ≤ ρ/gap) to 1e-10 entrywise. The reported cheap
// residuals must agree with the directly measured ones to 1e-12·||A|| (their difference
// is rounding only, since Q is orthonormal).
func TestLeadingPowerLaw(t *testing.T) {
	spectra := map[string]func(i int) float64{
		"power-law": func(i int) float64 { return 1 / float64((i+1)*(i+1)) },
		"geometric": func(i int) float64 { return 3 * math.Pow(0.8, float64(i)) },
	}
	for name, f := range spectra {
		for _, tc := range []struct{ n, k int }{{10, 3}, {100, 5}, {150, 10}} {
			t.Run(fmt.Sprintf("%s/n%d/k%d", name, tc.n, tc.k), func(t *testing.T) {
				r := rand.New(rand.NewPCG(2, uint64(tc.n)))
				vals := make([]float64, tc.n)
				for i := range vals {
					vals[i] = f(i)
				}
				r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
				a := withSpectrum(vals, r)
				want, wantVecs := denseEigen(t, a)
				scale := opNorm(want)
				steps := min(2*tc.k+20, tc.n)
				tri, err := Run(tc.n, steps, denseOp(a), Start(tc.n, 9, "lanczos/test"), true)
				if err != nil {
					t.Fatal(err)
				}
				got, vecs, res, err := tri.Ritz()
				if err != nil {
					t.Fatal(err)
				}
				for i := range tc.k {
					if d := math.Abs(got[i] - want[i]); d > 1e-12*scale {
						t.Errorf("θ_%d: got %v, want %v", i, got[i], want[i])
					}
					if d := alignedDiff(vecs, wantVecs, i); d > 1e-10 {
						t.Errorf("u_%d: max entry diff %.3g > 1e-10", i, d)
					}
					rho := ResidualNorm(denseOp(a), got[i], mat.Col(nil, i, vecs))
					if d := math.Abs(rho - res[i]); d > 1e-12*scale {
						t.Errorf("ρ_%d: cheap %.3g vs direct %.3g", i, res[i], rho)
					}
				}
			})
		}
	}
}

// TestUnconvergedResiduals: after few steps on a flat spectrum, Ritz pairs are far from
// converged; the cheap residual β_{k-1}|e_kᵀ s_i| must still equal the direct residual
// (Golub & Van Loan Thm. 10.1.4; rounding only, 1e-12·||A||), i.e. it reports the
// error honestly instead of hiding it.
func TestUnconvergedResiduals(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	n := 80
	a := randomSym(n, r)
	want, _ := denseEigen(t, a)
	scale := opNorm(want)
	tri, err := Run(n, 10, denseOp(a), randVec(n, r), true)
	if err != nil {
		t.Fatal(err)
	}
	got, vecs, res, err := tri.Ritz()
	if err != nil {
		t.Fatal(err)
	}
	var maxRes float64
	for i := range got {
		rho := ResidualNorm(denseOp(a), got[i], mat.Col(nil, i, vecs))
		if d := math.Abs(rho - res[i]); d > 1e-12*scale {
			t.Errorf("ρ_%d: cheap %.6g vs direct %.6g", i, res[i], rho)
		}
		maxRes = max(maxRes, res[i])
	}
	if maxRes < 1e-3*scale {
		t.Errorf("max residual %.3g: expected unconverged pairs after 10 of 80 steps", maxRes)
	}
}

// TestClustered: tight clusters (spread 1e-7) are resolved as values, but only the
// cluster's invariant subspace is stable (paper, remark after Prop. amplify): its
// projector error is ≤ ε||A||·√n / (gap between clusters = 1) ≪ 1e-10.
func TestClustered(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	n := 60
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = 0.5 * r.Float64() // bulk in [0, 0.5)
	}
	for i := range 3 {
		vals[i] = 10 + float64(i)*1e-7
		vals[3+i] = 5 + float64(i)*1e-7
	}
	a := withSpectrum(vals, r)
	want, wantVecs := denseEigen(t, a)
	tri, err := Run(n, n, denseOp(a), randVec(n, r), true)
	if err != nil {
		t.Fatal(err)
	}
	got, vecs, _, err := tri.Ritz()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if d := math.Abs(got[i] - want[i]); d > 1e-10*10 {
			t.Errorf("θ_%d: got %.15g, want %.15g", i, got[i], want[i])
		}
	}
	for _, cl := range [][2]int{{0, 3}, {3, 6}} {
		var pg, pw mat.Dense
		ug := vecs.Slice(0, n, cl[0], cl[1])
		uw := wantVecs.Slice(0, n, cl[0], cl[1])
		pg.Mul(ug, ug.T())
		pw.Mul(uw, uw.T())
		pg.Sub(&pg, &pw)
		if d := mat.Norm(&pg, math.Inf(1)); d > 1e-10 {
			t.Errorf("cluster %v: projector diff %.3g > 1e-10", cl, d)
		}
	}
}

// TestBreakdown: the Krylov space of a matrix with d distinct eigenvalues (each with a
// nonzero component in v0) has dimension d, so the iteration must stop after exactly d
// steps with Breakdown set, no NaN, and Ritz values equal to the distinct eigenvalues.
func TestBreakdown(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	n := 40
	lowRank := func(rank int) *mat.SymDense {
		b := mat.NewDense(n, rank, nil)
		for i := range n {
			for j := range rank {
				b.Set(i, j, r.NormFloat64())
			}
		}
		a := mat.NewSymDense(n, nil)
		a.SymOuterK(1, b)
		return a
	}
	ident := mat.NewSymDense(n, nil)
	for i := range n {
		ident.SetSym(i, i, 2)
	}
	multi := make([]float64, n) // eigenvalues 3 (×10), 1 (×20), −2 (×10)
	for i := range n {
		switch {
		case i < 10:
			multi[i] = 3
		case i < 30:
			multi[i] = 1
		default:
			multi[i] = -2
		}
	}
	a5 := lowRank(5)
	inRange := make([]float64, n) // v0 = A x lies in range(A): no null component
	denseOp(a5)(inRange, randVec(n, r))
	cases := []struct {
		name  string
		a     *mat.SymDense
		v0    []float64
		steps int
		want  []float64 // nil: top values of dense eigen
	}{
		{"rank5", a5, randVec(n, r), 5 + 1, nil},
		{"rank5-in-range", a5, inRange, 5, nil},
		{"rank1", lowRank(1), randVec(n, r), 2, nil},
		{"zero", mat.NewSymDense(n, nil), randVec(n, r), 1, []float64{0}},
		{"scaled-identity", ident, randVec(n, r), 1, []float64{2}},
		{"three-distinct", withSpectrum(multi, r), randVec(n, r), 3, []float64{3, 1, -2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tri, err := Run(n, n, denseOp(tc.a), tc.v0, true)
			if err != nil {
				t.Fatal(err)
			}
			if !tri.Breakdown || tri.Steps() != tc.steps {
				t.Fatalf("got steps %d breakdown %v, want steps %d breakdown true", tri.Steps(), tri.Breakdown, tc.steps)
			}
			got, vecs, res, err := tri.Ritz()
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				all, _ := denseEigen(t, tc.a)
				want = all[:tc.steps]
				if tc.steps > 1 && tc.name != "rank5-in-range" {
					want[tc.steps-1] = 0 // the null-space direction of v0
				}
			}
			scale := math.Max(1, opNorm(want))
			for i := range got {
				if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > 1e-10*scale {
					t.Errorf("θ_%d: got %v, want %v", i, got[i], want[i])
				}
				if res[i] > 1e-10*scale {
					t.Errorf("ρ_%d = %.3g, want ≈ 0 on an invariant subspace", i, res[i])
				}
				if rho := ResidualNorm(denseOp(tc.a), got[i], mat.Col(nil, i, vecs)); rho > 1e-10*scale {
					t.Errorf("direct ρ_%d = %.3g", i, rho)
				}
			}
		})
	}
}

// TestOrthogonality: with full reorthogonalization twice per step ||QᵀQ − I||_max stays at
// rounding level O(√k ε) ≈ 1e-15, checked at 1e-12; and the Lanczos relation
// A Q = Q T + β_{k−1} q_k e_kᵀ holds column by column (the last column's remainder has
// norm β_{k−1}). The spectrum (geometric decay) is the kind on which plain Lanczos loses
// orthogonality within a few tens of steps, so the check exercises the reorthogonalization.
func TestOrthogonality(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n, steps := 200, 120
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = math.Pow(0.9, float64(i))
	}
	a := withSpectrum(vals, r)
	tri, err := Run(n, steps, denseOp(a), randVec(n, r), true)
	if err != nil {
		t.Fatal(err)
	}
	k := tri.Steps()
	if k != steps {
		t.Fatalf("steps: got %d want %d", k, steps)
	}
	var qtq mat.Dense
	qtq.Mul(tri.Q.T(), tri.Q)
	for i := range k {
		for j := range k {
			want := 0.0
			if i == j {
				want = 1
			}
			if d := math.Abs(qtq.At(i, j) - want); d > 1e-12 {
				t.Fatalf("(QᵀQ)[%d,%d] = %.3g, want %v", i, j, qtq.At(i, j), want)
			}
		}
	}
	var aq mat.Dense
	aq.Mul(a, tri.Q)
	for j := range k {
		col := mat.Col(nil, j, &aq)
		floats.AddScaled(col, -tri.Alpha[j], mat.Col(nil, j, tri.Q))
		if j > 0 {
			floats.AddScaled(col, -tri.Beta[j-1], mat.Col(nil, j-1, tri.Q))
		}
		if j+1 < k {
			floats.AddScaled(col, -tri.Beta[j], mat.Col(nil, j+1, tri.Q))
			if d := floats.Norm(col, 2); d > 1e-12 {
				t.Errorf("column %d: ||A q − Q t|| = %.3g", j, d)
			}
		} else if d := floats.Norm(col, 2) - tri.Beta[j]; math.Abs(d) > 1e-12 {
			t.Errorf("last column remainder %.6g, want β = %.6g", floats.Norm(col, 2), tri.Beta[j])
		}
	}
}

// TestQuadratureMoments: k-point Gauss quadrature is exact for polynomials of degree
// ≤ 2k−1 (Golub & Meurant Thm. 6.2), so with k ≥ 2 steps, f(x)=x gives v0ᵀAv0 and
// f(x)=x² gives ||A v0||², with or without reorthogonalization (two steps lose no
// orthogonality), and f(x)=x³ = v0ᵀA³v0 with k = 2. Rounding only: 1e-12 relative.
func TestQuadratureMoments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 2, 5, 50} {
		a := randomSym(n, r)
		v0 := randVec(n, r)
		av := make([]float64, n)
		denseOp(a)(av, v0)
		aav := make([]float64, n)
		denseOp(a)(aav, av)
		m1 := floats.Dot(v0, av)
		m2 := floats.Dot(av, av)
		m3 := floats.Dot(av, aav)
		for _, reorth := range []bool{true, false} {
			for _, steps := range []int{2, 5} {
				tri, err := Run(n, steps, denseOp(a), v0, reorth)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					name string
					f    func(float64) float64
					want float64
				}{
					{"x", func(x float64) float64 { return x }, m1},
					{"x²", func(x float64) float64 { return x * x }, m2},
					{"x³", func(x float64) float64 { return x * x * x }, m3},
				} {
					got, err := tri.Quadrature(c.f)
					if err != nil {
						t.Fatal(err)
					}
					if d := math.Abs(got - c.want); d > 1e-12*math.Max(1, math.Abs(c.want))*float64(n) {
						t.Errorf("n=%d reorth=%v steps=%d f=%s: got %.15g, want %.15g", n, reorth, steps, c.name, got, c.want)
					}
				}
			}
		}
	}
}

// TestQuadratureEffectiveDimension: the SLQ use, v0ᵀ A(A+λI)⁻¹ v0 for a PSD power-law A.
// With steps = n (reorth) the rule is exact up to rounding (1e-10 relative). With 40 of
// 200 steps and no reorthogonalization the Gauss rule of this smooth f converges
// geometrically and stays stable despite lost orthogonality (Knizhnerman 1996); 1e-6
// relative is a loose bound on what the test measures (≈1e-14).
func TestQuadratureEffectiveDimension(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const lambda = 1e-2
	for _, tc := range []struct {
		n, steps int
		reorth   bool
		tol      float64
	}{{60, 60, true, 1e-10}, {200, 40, false, 1e-6}, {200, 40, true, 1e-6}} {
		vals := make([]float64, tc.n)
		for i := range vals {
			vals[i] = 1 / math.Pow(float64(i+1), 1.5)
		}
		a := withSpectrum(vals, r)
		v0 := randVec(tc.n, r)
		// Reference: solve (A+λI) y = A v0 densely; v0ᵀ y = v0ᵀ A(A+λI)⁻¹ v0.
		shifted := mat.NewSymDense(tc.n, nil)
		shifted.CopySym(a)
		for i := range tc.n {
			shifted.SetSym(i, i, shifted.At(i, i)+lambda)
		}
		av := make([]float64, tc.n)
		denseOp(a)(av, v0)
		var y mat.VecDense
		if err := y.SolveVec(shifted, mat.NewVecDense(tc.n, av)); err != nil {
			t.Fatal(err)
		}
		want := floats.Dot(v0, y.RawVector().Data)
		tri, err := Run(tc.n, tc.steps, denseOp(a), v0, tc.reorth)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tri.Quadrature(func(x float64) float64 { return x / (x + lambda) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("n=%d steps=%d reorth=%v rel %.3g", tc.n, tc.steps, tc.reorth, math.Abs(got-want)/want)
		if rel := math.Abs(got-want) / want; rel > tc.tol {
			t.Errorf("n=%d steps=%d reorth=%v: got %.15g, want %.15g (rel %.3g)", tc.n, tc.steps, tc.reorth, got, want, rel)
		}
	}
}

func TestGaussWeightsSumToOne(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	a := randomSym(30, r)
	tri, err := Run(30, 12, denseOp(a), randVec(30, r), false)
	if err != nil {
		t.Fatal(err)
	}
	_, w, err := tri.Gauss()
	if err != nil {
		t.Fatal(err)
	}
	if got := floats.Sum(w); math.Abs(got-1) > 1e-13 {
		t.Errorf("Σ τ² = %.16g, want 1", got)
	}
	_, vecs, _, err := tri.Ritz()
	if err != nil || vecs != nil {
		t.Errorf("Ritz without basis: got vectors %v err %v, want nil, nil", vecs, err)
	}
}

func TestErrors(t *testing.T) {
	id := func(dst, v []float64) { copy(dst, v) }
	nanOp := func(dst, v []float64) {
		copy(dst, v)
		dst[len(dst)-1] = math.NaN()
	}
	cases := []struct {
		name string
		op   Operator
		v0   []float64
		want error
	}{
		{"zero-start", id, []float64{0, 0, 0}, ErrZeroStart},
		{"nan-start", id, []float64{1, math.NaN(), 0}, ErrZeroStart},
		{"inf-start", id, []float64{1, math.Inf(1), 0}, ErrZeroStart},
		{"nan-op", nanOp, []float64{1, 2, 3}, ErrNotFinite},
	}
	for _, tc := range cases {
		_, err := Run(3, 3, tc.op, tc.v0, true)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestPanicsOnShape(t *testing.T) {
	id := func(dst, v []float64) { copy(dst, v) }
	cases := []struct {
		name     string
		n, steps int
		v0       []float64
	}{
		{"n0", 0, 1, nil},
		{"steps0", 2, 0, []float64{1, 1}},
		{"len", 3, 2, []float64{1, 1}},
	}
	for _, tc := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			Run(tc.n, tc.steps, id, tc.v0, true)
		}()
	}
}

func TestStepsCappedAndStart(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	a := randomSym(4, r)
	tri, err := Run(4, 50, denseOp(a), randVec(4, r), true)
	if err != nil {
		t.Fatal(err)
	}
	if tri.Steps() != 4 || tri.Breakdown {
		t.Errorf("got steps %d breakdown %v, want 4 false", tri.Steps(), tri.Breakdown)
	}
	s1, s2, s3 := Start(5, 1, "a"), Start(5, 1, "a"), Start(5, 1, "b")
	if !slices.Equal(s1, s2) || slices.Equal(s1, s3) {
		t.Errorf("Start: same stream %v vs %v, other name %v", s1, s2, s3)
	}
}

var sink float64

// BenchmarkLeading compares PCI's Lanczos (k = 10 leading pairs, 2k+20 steps, full
// reorth) with a dense EigenSym of the same m×m matrix in the same run; ratio =
// dense time / Lanczos time.
func BenchmarkLeading(b *testing.B) {
	for _, m := range []int{200, 500} {
		b.Run(fmt.Sprint(m), func(b *testing.B) {
			r := rand.New(rand.NewPCG(11, 11))
			a := randomSym(m, r)
			op := denseOp(a)
			v0 := randVec(m, r)
			k := 10
			var dense, lz float64
			for b.Loop() {
				t0 := nowNS()
				var es mat.EigenSym
				es.Factorize(a, true)
				t1 := nowNS()
				tri, _ := Run(m, 2*k+20, op, v0, true)
				vals, _, _, _ := tri.Ritz()
				t2 := nowNS()
				dense += t1 - t0
				lz += t2 - t1
				sink += vals[0] + es.Values(nil)[0]
			}
			b.ReportMetric(dense/lz, "dense/lanczos")
		})
	}
}
