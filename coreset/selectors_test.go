package coreset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestSelectorsValidDistinctDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	n, d, q := 120, 5, 16
	x := randMatrix(r, n, d, d)
	g := randMatrix(r, n, q, 6) // rank 6 < m: exercises top-up for pc-ntk and dpp
	in := SelectInput{N: n, X: x, D: d, G: g, Q: q, Seed: 4}
	for _, name := range Selectors {
		for _, m := range []int{1, 10, 130} {
			t.Run(fmt.Sprintf("%s/m%d", name, m), func(t *testing.T) {
				a, err := Select(name, in, m)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := Select(name, in, m)
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("not deterministic: %v vs %v", a.Indices, b.Indices)
				}
				want := min(m, n)
				if len(a.Indices) != want {
					t.Fatalf("len got %d, want %d", len(a.Indices), want)
				}
				seen := map[int]bool{}
				for _, i := range a.Indices {
					if i < 0 || i >= n || seen[i] {
						t.Fatalf("invalid or repeated index %d in %v", i, a.Indices)
					}
					seen[i] = true
				}
				if (name == SelPCNTK || name == SelDPP) && m >= 10 && a.Greedy != 6 {
					t.Fatalf("rank-6 sketch: Greedy got %d, want 6", a.Greedy)
				}
				in2 := in
				in2.Seed = 5
				c, _ := Select(name, in2, m)
				if name != SelPCNTK && name != SelPC && m == 10 && reflect.DeepEqual(a.Indices, c.Indices) {
					t.Fatalf("seed change did not change a random selector: %v", a.Indices)
				}
			})
		}
	}
	if _, err := Select("nope", in, 3); err == nil {
		t.Fatal("unknown selector accepted")
	}
	if _, err := Select(SelKMeans, SelectInput{N: 3, G: g[:3*q], Q: q}, 2); err == nil {
		t.Fatal("kmeans++ without inputs accepted")
	}
}

// TestSelectG32 checks that every sketch selector reads float32 rows (G32) as the
// widened float64 matrix: pc-ntk, kcenter and leverage select exactly what they select on
// G; dpp, whose products are summed over blocks of rows in float32 mode, selects the same
// rows; and a wrong shape is an error.
func TestSelectG32(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 3))
	n, q := 300, 24
	g := randMatrix(r, n, q, 10)
	g32 := make([][]float32, n)
	for i := range g32 {
		g32[i] = make([]float32, q)
		for j := range g32[i] {
			g32[i][j] = float32(g[i*q+j])
			g[i*q+j] = float64(g32[i][j])
		}
	}
	for _, name := range []string{SelPCNTK, SelKCenter, SelLeverage, SelDPP} {
		for _, m := range []int{5, 20} {
			a, err := Select(name, SelectInput{N: n, G: g, Q: q, Seed: 9}, m)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Select(name, SelectInput{N: n, G32: g32, Q: q, Seed: 9}, m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s m=%d: G32 selected %v (greedy %d), G %v (greedy %d)", name, m, b.Indices, b.Greedy, a.Indices, a.Greedy)
			}
		}
	}
	bad := append([][]float32(nil), g32...)
	bad[7] = bad[7][:q-1]
	for _, in := range []SelectInput{{N: n, G32: bad, Q: q}, {N: n + 1, G32: g32, Q: q}, {N: n, G: g, G32: g32, Q: q}} {
		if _, err := Select(SelKCenter, in, 3); err == nil {
			t.Fatalf("bad features accepted: N=%d, %d rows, G %d values", in.N, len(in.G32), len(in.G))
		}
	}
}

// TestSelectContextCanceled checks that every selector that can run for long gives up
// with the context's error when the context has ended, and that a live context selects
// what Select selects.
func TestSelectContextCanceled(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	n, d, q := 200, 6, 12
	in := SelectInput{N: n, X: randMatrix(r, n, d, d), D: d, G: randMatrix(r, n, q, q), Q: q, Seed: 2}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, name := range []string{SelPCNTK, SelKCenter, SelKMeans, SelDPP} {
		if _, err := SelectContext(ctx, name, in, 10); !errors.Is(err, context.Canceled) {
			t.Errorf("%s on an ended context: %v, want context.Canceled", name, err)
		}
		a, err := SelectContext(context.Background(), name, in, 10)
		b, _ := Select(name, in, 10)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: SelectContext %v (%v), Select %v", name, a, err, b)
		}
	}
}

// TestRowProductsBlocks checks projectionDPP's products over blocks of float32 rows
// against the one-block float64 products of the same matrix (the sum over blocks differs
// only by rounding: 1e-12 relative).
func TestRowProductsBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	n, q, c := 1000, 4200, 3 // 4200·8 bytes a row: 499 rows per block, three blocks
	g32 := make([][]float32, n)
	g := make([]float64, n*q)
	for i := range g32 {
		g32[i] = make([]float32, q)
		for j := range g32[i] {
			g32[i][j] = float32(r.NormFloat64())
			g[i*q+j] = float64(g32[i][j])
		}
	}
	p32, p64 := newRowProducts(rows{n: n, q: q, f32: g32}), newRowProducts(rows{n: n, q: q, f64: g})
	if p32.block >= n || p64.block != n {
		t.Fatalf("blocks: float32 %d, float64 %d rows of %d", p32.block, p64.block, n)
	}
	b := mat.NewDense(q, c, nil)
	y := mat.NewDense(n, c, nil)
	for i := range q {
		for j := range c {
			b.Set(i, j, r.NormFloat64())
		}
	}
	for i := range n {
		for j := range c {
			y.Set(i, j, r.NormFloat64())
		}
	}
	near := func(what string, a, w *mat.Dense) {
		t.Helper()
		if !mat.EqualApprox(a, w, 1e-12*mat.Norm(w, math.Inf(1))) {
			t.Fatalf("%s: blocked product differs from the one-block product", what)
		}
	}
	var a1, w1, a2, w2, a3, w3 mat.Dense
	p32.mul(&a1, b)
	p64.mul(&w1, b)
	near("G·b", &a1, &w1)
	p32.mulT(&a2, y, false)
	p64.mulT(&w2, y, false)
	near("Gᵀ·y", &a2, &w2)
	p32.mulT(&a3, y, true)
	p64.mulT(&w3, y, true)
	near("yᵀ·G", &a3, &w3)
	var ref mat.Dense
	ref.Mul(y.T(), mat.NewDense(n, q, g))
	near("yᵀ·G against gonum", &w3, &ref)
}

// TestGreedyKernelMatchesGreedy: on the linear kernel both forms of pivoted Cholesky are
// the same algorithm.
func TestGreedyKernelMatchesGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 8))
	n, q := 60, 7
	g := randMatrix(r, n, q, 5)
	diag := make([]float64, n)
	for j := range diag {
		diag[j] = dotRef(g[j*q:(j+1)*q], g[j*q:(j+1)*q])
	}
	col := func(dst []float64, p int) {
		for j := 0; j < n; j++ {
			dst[j] = dotRef(g[j*q:(j+1)*q], g[p*q:(p+1)*q])
		}
	}
	keys := TopUpKeys(1, n)
	a, _ := GreedyKernel(diag, col, n, 9, 0, keys)
	b, _ := Greedy(g, n, q, 9, GreedyOptions{TopUpKeys: keys})
	if !reflect.DeepEqual(a.Pivots, b.Pivots) || a.Greedy != 5 {
		t.Fatalf("pivots got %v (greedy %d), want %v", a.Pivots, a.Greedy, b.Pivots)
	}
	for i := range a.ResidualTrace {
		if math.Abs(a.ResidualTrace[i]-b.ResidualTrace[i]) > 1e-10*b.Trace {
			t.Fatalf("residual %d got %v, want %v", i, a.ResidualTrace[i], b.ResidualTrace[i])
		}
	}
}

// TestKCenterFarthest checks farthest-point search against a direct recomputation.
func TestKCenterFarthest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	n, q := 50, 4
	g := randMatrix(r, n, q, q)
	idx, _ := kCenter(context.Background(), rows{n: n, q: q, f64: g}, 8, 1)
	for t1 := 1; t1 < len(idx); t1++ {
		best, bi := -1.0, -1
		for i := 0; i < n; i++ {
			md := math.Inf(1)
			in := false
			for _, c := range idx[:t1] {
				if c == i {
					in = true
				}
				md = math.Min(md, sqDist(g[i*q:(i+1)*q], g[c*q:(c+1)*q]))
			}
			if !in && md > best {
				best, bi = md, i
			}
		}
		if idx[t1] != bi {
			t.Fatalf("step %d got %d, want farthest %d", t1, idx[t1], bi)
		}
	}
}

// TestProjectionDPPMarginals: the inclusion probability of row i in a projection DPP is
// K_ii = ||U_i||² (rank-k projection). With k = rank(G), ||U_i||² is the leverage score;
// the Monte-Carlo frequency over 400 seeds must match within 5 binomial standard errors.
func TestProjectionDPPMarginals(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	n, q, k := 12, 3, 3
	g := randMatrix(r, n, q, q)
	// leverage scores via the exact projection G (GᵀG)⁻¹ Gᵀ
	lev := leverage(g, n, q)
	counts := make([]float64, n)
	const trials = 400
	for s := 0; s < trials; s++ {
		idx, rank, err := projectionDPP(context.Background(), rows{n: n, q: q, f64: g}, k, uint64(s))
		if err != nil || rank != k || len(idx) != k {
			t.Fatalf("seed %d: idx %v rank %d err %v", s, idx, rank, err)
		}
		for _, i := range idx {
			counts[i]++
		}
	}
	for i := range counts {
		p := lev[i]
		se := math.Sqrt(p * (1 - p) / trials)
		if got := counts[i] / trials; math.Abs(got-p) > 5*se+1e-9 {
			t.Fatalf("row %d: frequency %v, want marginal %v (SE %v)", i, got, p, se)
		}
	}
}

func leverage(g []float64, n, q int) []float64 {
	// (GᵀG)⁻¹ by Gauss–Jordan on the q×q matrix (q tiny)
	a := make([][]float64, q)
	for i := range a {
		a[i] = make([]float64, 2*q)
		for j := 0; j < q; j++ {
			for r := 0; r < n; r++ {
				a[i][j] += g[r*q+i] * g[r*q+j]
			}
		}
		a[i][q+i] = 1
	}
	for c := 0; c < q; c++ {
		p := a[c][c]
		for j := range a[c] {
			a[c][j] /= p
		}
		for r := 0; r < q; r++ {
			if r != c {
				f := a[r][c]
				for j := range a[r] {
					a[r][j] -= f * a[c][j]
				}
			}
		}
	}
	out := make([]float64, n)
	for r := 0; r < n; r++ {
		for i := 0; i < q; i++ {
			for j := 0; j < q; j++ {
				out[r] += g[r*q+i] * a[i][q+j] * g[r*q+j]
			}
		}
	}
	return out
}

func TestResidualCurveMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	n, q := 40, 6
	g := randMatrix(r, n, q, 4)
	order := []int{3, 17, 3 + 1, 9, 22, 5} // 6 landmarks in a rank-4 kernel
	got := make([]float64, len(order))
	ResidualCurveTo(got, g, n, q, order)
	src := rowsMap(g, n, q)
	var trK float64
	for _, f := range src {
		trK += dotRef(f, f)
	}
	for t1 := range order {
		k := min(t1+1, 4)
		z := []string{}
		for _, p := range order[:k] {
			z = append(z, fmt.Sprintf("%06d", p))
		}
		want := refResidual(t, src, z)
		if math.Abs(got[t1]-want) > 1e-9*trK {
			t.Fatalf("prefix %d: got %v, want %v", t1+1, got[t1], want)
		}
	}
}

func TestFitPowerLaw(t *testing.T) {
	m := []float64{1, 2, 4, 8, 16, 32}
	y := make([]float64, len(m))
	for i := range m {
		y[i] = 3 * math.Pow(m[i], -0.7)
	}
	pl, err := FitPowerLaw(m, y)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(pl.Beta-0.7) > 1e-12 || math.Abs(pl.C-3) > 1e-12 || math.Abs(pl.R2-1) > 1e-12 {
		t.Fatalf("got %+v, want C=3 β=0.7 R²=1", pl)
	}
	if _, err := FitPowerLaw([]float64{1, 2}, []float64{0, 1}); err == nil {
		t.Fatal("one positive point accepted")
	}
}

func TestCoverage(t *testing.T) {
	labels := []int{0, 0, 1, 2, 1, 2, 0}
	tests := []struct {
		order             []int
		kappa, seen, clss int
	}{
		{[]int{0, 2, 3}, 3, 3, 3},
		{[]int{0, 1, 6, 4, 5}, 5, 3, 3},
		{[]int{0, 1, 2}, -1, 2, 3},
		{nil, -1, 0, 3},
	}
	for _, tc := range tests {
		k, s, c := Coverage(labels, tc.order)
		if k != tc.kappa || s != tc.seen || c != tc.clss {
			t.Errorf("Coverage(%v) = %d,%d,%d; want %d,%d,%d", tc.order, k, s, c, tc.kappa, tc.seen, tc.clss)
		}
	}
}

// TestThinQ checks projectionDPP's thin QR factor against gonum's full QR: orthonormal
// columns spanning a's columns, equal to the first columns of mat.QR's Q up to sign
// (both are Householder QRs, unique up to the signs of R's diagonal).
func TestThinQ(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	a := mat.NewDense(40, 7, randMatrix(r, 40, 7, 7))
	q := thinQ(a)
	if rr, c := q.Dims(); rr != 40 || c != 7 {
		t.Fatalf("thinQ is %d×%d, want 40×7", rr, c)
	}
	var qtq mat.Dense
	qtq.Mul(q.T(), q)
	var id mat.Dense
	id.CloneFrom(mat.NewDiagDense(7, []float64{1, 1, 1, 1, 1, 1, 1}))
	if !mat.EqualApprox(&qtq, &id, 1e-12) {
		t.Fatal("QᵀQ ≠ I")
	}
	var full mat.QR
	full.Factorize(a)
	var qf mat.Dense
	full.QTo(&qf)
	for j := range 7 {
		s := mat.Dot(q.ColView(j), qf.ColView(j))
		if math.Abs(math.Abs(s)-1) > 1e-10 {
			t.Fatalf("column %d: |⟨q, q_full⟩| = %v, want 1", j, math.Abs(s))
		}
	}
}

// TestSelectPCNTKNormalize: pc-ntk with Normalize is Greedy with Normalize and the top-up
// keys of the row indices, on G and on G32 alike, and differs from the raw rule on rows
// whose norms spread over orders of magnitude.
func TestSelectPCNTKNormalize(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n, q, m := 150, 10, 24 // m beyond the rank: the top-up rule fills it
	g := randMatrix(r, n, q, 8)
	scaleRows(r, g, n, q)
	want, err := Greedy(g, n, q, m, GreedyOptions{Normalize: true, TopUpKeys: TopUpKeys(4, n)})
	if err != nil {
		t.Fatal(err)
	}
	g32 := make([][]float32, n)
	for i := range g32 {
		g32[i] = make([]float32, q)
		for j := range g32[i] {
			g32[i][j] = float32(g[i*q+j])
		}
	}
	want32, _ := GreedyRows32(context.Background(), g32, q, m, GreedyOptions{Normalize: true, TopUpKeys: TopUpKeys(4, n)})
	for _, tc := range []struct {
		in   SelectInput
		want *GreedyResult
	}{{SelectInput{N: n, G: g, Q: q, Seed: 4, Normalize: true}, want}, {SelectInput{N: n, G32: g32, Q: q, Seed: 4, Normalize: true}, want32}} {
		sel, err := Select(SelPCNTK, tc.in, m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sel.Indices, tc.want.Pivots) || sel.Greedy != tc.want.Greedy || !reflect.DeepEqual(sel.ResidualTrace, tc.want.ResidualTrace) {
			t.Fatalf("pc-ntk normalized: %v (greedy %d), want %v (greedy %d)", sel.Indices, sel.Greedy, tc.want.Pivots, tc.want.Greedy)
		}
	}
	raw, _ := Select(SelPCNTK, SelectInput{N: n, G: g, Q: q, Seed: 4}, m)
	if reflect.DeepEqual(raw.Indices[:raw.Greedy], want.Pivots[:want.Greedy]) {
		t.Fatalf("raw and normalized pc-ntk chose the same pivots %v", raw.Indices)
	}
}

// TestSelectPCNTKTolerance: pc-ntk with Tolerance is Greedy with Tolerance and the pivot
// keys of the row indices (PivotKeys), raw and normalized, and differs from the exact
// argmax.
func TestSelectPCNTKTolerance(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	n, q, m := 150, 10, 24
	g := randMatrix(r, n, q, 8)
	scaleRows(r, g, n, q)
	for _, norm := range []bool{false, true} {
		want, err := Greedy(g, n, q, m, GreedyOptions{Normalize: norm, Tolerance: 0.6, Keys: PivotKeys(n), TopUpKeys: TopUpKeys(4, n)})
		if err != nil {
			t.Fatal(err)
		}
		sel, err := Select(SelPCNTK, SelectInput{N: n, G: g, Q: q, Seed: 4, Normalize: norm, Tolerance: 0.6}, m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sel.Indices, want.Pivots) || sel.Greedy != want.Greedy || !reflect.DeepEqual(sel.ResidualTrace, want.ResidualTrace) {
			t.Fatalf("normalize %v: pc-ntk tolerant: %v (greedy %d), want %v (greedy %d)", norm, sel.Indices, sel.Greedy, want.Pivots, want.Greedy)
		}
		exact, _ := Select(SelPCNTK, SelectInput{N: n, G: g, Q: q, Seed: 4, Normalize: norm}, m)
		if reflect.DeepEqual(exact.Indices[:exact.Greedy], sel.Indices[:sel.Greedy]) {
			t.Fatalf("normalize %v: exact and tolerant pc-ntk chose the same pivots %v", norm, sel.Indices)
		}
	}
}
