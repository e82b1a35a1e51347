package certify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// refSRHT is the obviously-correct reference sketch of eq. composed:
// S x = sqrt(P/s) · R H D x with H the normalized Walsh–Hadamard matrix built entry by entry
// (H_jk = (−1)^{popcount(j&k)}/sqrt(P)), D = diag(signs), R = the first s rows of perm.
type refSRHT struct {
	p, s  int
	signs []float64
	rows  []int
}

func newRefSRHT(r *rand.Rand, p, s int) *refSRHT {
	sk := &refSRHT{p: p, s: s, signs: make([]float64, p)}
	for i := range sk.signs {
		sk.signs[i] = 1
		if r.IntN(2) == 0 {
			sk.signs[i] = -1
		}
	}
	sk.rows = r.Perm(p)[:s]
	return sk
}

func hadamard(j, k int) float64 {
	if popcount(j&k)%2 == 1 {
		return -1
	}
	return 1
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// hadamardTables caches the ±1 Hadamard matrix per size (tests run sequentially).
var hadamardTables = map[int][]float64{}

func hadamardTable(p int) []float64 {
	if t, ok := hadamardTables[p]; ok {
		return t
	}
	t := make([]float64, p*p)
	for j := 0; j < p; j++ {
		for k := 0; k < p; k++ {
			t[j*p+k] = hadamard(j, k)
		}
	}
	hadamardTables[p] = t
	return t
}

// apply returns S x for len(x) ≤ p (x is zero-padded).
func (sk *refSRHT) apply(x []float64) []float64 {
	out := make([]float64, sk.s)
	scale := math.Sqrt(float64(sk.p)/float64(sk.s)) / math.Sqrt(float64(sk.p))
	tab := hadamardTable(sk.p)
	for i, j := range sk.rows {
		var acc float64
		row := tab[j*sk.p : (j+1)*sk.p]
		for k, v := range x {
			acc += row[k] * sk.signs[k] * v
		}
		out[i] = scale * acc
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// moments returns the sample mean, the unbiased sample variance and the fourth central
// moment of xs.
func moments(xs []float64) (mean, variance, m4 float64) {
	for _, x := range xs {
		mean += x
	}
	n := float64(len(xs))
	mean /= n
	for _, x := range xs {
		d := (x - mean) * (x - mean)
		variance += d
		m4 += d * d
	}
	return mean, variance / (n - 1), m4 / n
}

// varianceTolerance is z standard errors of the sample variance of n iid draws:
// Var(s²) = (μ₄ − σ⁴(n−3)/(n−1))/n ≤ (μ₄ − σ⁴)/n + 2σ⁴/n², estimated with the empirical
// fourth moment (the sketched inner products are far from Gaussian, so 2σ⁴/(n−1) would be
// wrong). z = 5 makes a false failure a ≈1e-6 event under a normal approximation of s².
func varianceTolerance(variance, m4 float64, n int) float64 {
	nf := float64(n)
	return 5 * math.Sqrt(math.Max(m4-variance*variance, 0)/nf+2*variance*variance/(nf*nf))
}

func TestSRHTFactor(t *testing.T) {
	tests := []struct {
		p, s int
		want float64
	}{
		{256, 32, 224.0 / (255.0 * 32)},
		{256, 256, 0},
		{256, 0, 0},
		{2, 1, 1},
		{8, 1, 1},
	}
	for _, tc := range tests {
		if got := SRHTFactor(tc.p, tc.s); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("SRHTFactor(%d, %d) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
	for _, bad := range [][3]int{{0, 1, 8}, {1, -1, 8}, {1, 9, 8}, {1, 2, 12}, {1, 1, 1}} {
		if err := CheckBudget(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("CheckBudget(%d, %d, %d) = nil, want error", bad[0], bad[1], bad[2])
		}
	}
}

func TestPhiClosedForms(t *testing.T) {
	p := 16
	ej := make([]float64, p)
	ej[5] = 1
	ones := make([]float64, p)
	for i := range ones {
		ones[i] = 1
	}
	tests := []struct {
		name string
		v, u []float64
		want float64
	}{
		// Thm. srht-exact: u = v = e_j gives Φ = 0, the SRHT norm of e_j is exact.
		{"e_j,e_j", ej, ej, 0},
		// u = v = 1: ‖u‖⁴ + ‖u‖⁴ − 2P = 2P² − 2P.
		{"ones,ones", ones, ones, 2*float64(p*p) - 2*float64(p)},
		// e_j and 1: 1·P + 1 − 2·1 = P − 1.
		{"e_j,ones", ej, ones, float64(p) - 1},
	}
	for _, tc := range tests {
		if got := PhiRankOne(tc.v, tc.u); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("PhiRankOne(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPhiDenseMatchesRankOne(t *testing.T) {
	r := rng.New(1, "certify/test/phi")
	for _, p := range []int{1, 2, 7, 33} {
		u, v := make([]float64, p), make([]float64, p)
		for i := range u {
			u[i], v[i] = r.NormFloat64(), r.NormFloat64()
		}
		c := make([]float64, p*p) // C = v uᵀ
		for j := 0; j < p; j++ {
			for k := 0; k < p; k++ {
				c[j*p+k] = v[j] * u[k]
			}
		}
		got, want := PhiDense(c, p), PhiRankOne(v, u)
		if math.Abs(got-want) > 1e-10*(1+math.Abs(want)) {
			t.Errorf("p=%d: PhiDense = %v, PhiRankOne = %v", p, got, want)
		}
	}
}

// TestSRHTExactEnumeration checks Thm. srht-exact with no sampling error: for small P it
// enumerates every sign vector and every s-subset of rows, so the variance is exact.
func TestSRHTExactEnumeration(t *testing.T) {
	r := rng.New(1, "certify/test/enum")
	for _, tc := range []struct{ p, s int }{{4, 1}, {4, 2}, {8, 3}, {8, 8}} {
		c := make([]float64, tc.p*tc.p) // a general non-symmetric C
		for i := range c {
			c[i] = r.NormFloat64()
		}
		var trC float64
		for j := 0; j < tc.p; j++ {
			trC += c[j*tc.p+j]
		}
		var n, sum, sum2 float64
		subsets := combinations(tc.p, tc.s)
		for mask := 0; mask < 1<<tc.p; mask++ {
			sk := &refSRHT{p: tc.p, s: tc.s, signs: make([]float64, tc.p)}
			for i := range sk.signs {
				sk.signs[i] = 1
				if mask>>i&1 == 1 {
					sk.signs[i] = -1
				}
			}
			for _, rows := range subsets {
				sk.rows = rows
				est := traceSSC(sk, c)
				n++
				sum += est
				sum2 += est * est
			}
		}
		mean := sum / n
		gotVar := sum2/n - mean*mean
		wantVar := SRHTVariance(PhiDense(c, tc.p), tc.p, tc.s)
		if math.Abs(mean-trC) > 1e-9 {
			t.Errorf("P=%d s=%d: E tr(SᵀSC) = %v, want tr C = %v", tc.p, tc.s, mean, trC)
		}
		if math.Abs(gotVar-wantVar) > 1e-9*(1+wantVar) {
			t.Errorf("P=%d s=%d: Var = %v, want %v", tc.p, tc.s, gotVar, wantVar)
		}
	}
}

// traceSSC returns tr(SᵀSC) = tr(SCSᵀ) = Σ_i S_i C S_iᵀ over the sketch rows S_i, built
// entry by entry.
func traceSSC(sk *refSRHT, c []float64) float64 {
	p := sk.p
	var tr float64
	scale := math.Sqrt(float64(p)/float64(sk.s)) / math.Sqrt(float64(p))
	row := make([]float64, p)
	for _, j := range sk.rows {
		for k := 0; k < p; k++ {
			row[k] = scale * hadamard(j, k) * sk.signs[k]
		}
		for a := 0; a < p; a++ {
			for b := 0; b < p; b++ {
				tr += row[a] * c[a*p+b] * row[b]
			}
		}
	}
	return tr
}

func combinations(p, s int) [][]int {
	var out [][]int
	var rec func(start int, cur []int)
	rec = func(start int, cur []int) {
		if len(cur) == s {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for i := start; i < p; i++ {
			rec(i+1, append(cur, i))
		}
	}
	rec(0, nil)
	return out
}

// TestSRHTExactMonteCarlo checks Thm. srht-exact for ⟨Su, Sv⟩ over independent draws of the
// reference SRHT, including P not a power of two (zero padding).
func TestSRHTExactMonteCarlo(t *testing.T) {
	const p, s, draws = 64, 8, 6000
	r := rng.New(1, "certify/test/srht-mc")
	gauss := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	spiky := func(n int, idx ...int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = 0.05 * r.NormFloat64()
		}
		for _, i := range idx {
			x[i] = 3 + r.Float64()
		}
		return x
	}
	g := gauss(p)
	cases := []struct {
		name string
		u, v []float64
	}{
		{"dense-gaussian", gauss(p), gauss(p)},
		{"spiky", spiky(p, 3, 17), spiky(p, 3, 40)},
		{"u=v", g, g},
		{"padded-50", gauss(50), gauss(50)},
	}
	for _, tc := range cases {
		xs := make([]float64, draws)
		for i := range xs {
			sk := newRefSRHT(r, p, s)
			xs[i] = dot(sk.apply(tc.u), sk.apply(tc.v))
		}
		mean, got, m4 := moments(xs)
		want := SRHTVariance(PhiRankOne(tc.v, tc.u), p, s)
		if tol := varianceTolerance(got, m4, draws); math.Abs(got-want) > tol {
			t.Errorf("%s: measured Var = %v, predicted %v (tolerance %v)", tc.name, got, want, tol)
		}
		if tol := 5 * math.Sqrt(got/draws); math.Abs(mean-dot(tc.u, tc.v)) > tol {
			t.Errorf("%s: mean = %v, want ⟨u,v⟩ = %v (tolerance %v)", tc.name, mean, dot(tc.u, tc.v), tol)
		}
	}
	// u = v = e_j: Φ = 0, so every draw is exactly ‖e_j‖² = 1.
	ej := make([]float64, p)
	ej[9] = 1
	for i := 0; i < 50; i++ {
		sk := newRefSRHT(r, p, s)
		if got := dot(sk.apply(ej), sk.apply(ej)); math.Abs(got-1) > 1e-12 {
			t.Fatalf("e_j draw %d: ‖Se_j‖² = %v, want 1", i, got)
		}
	}
}

func TestConservativeVarianceValues(t *testing.T) {
	tests := []struct {
		kxx, kyy float64
		h, s, p  int
		want     float64
	}{
		{1, 1, 1, 0, 8, 2},
		{2, 3, 4, 0, 8, 6 * 0.5},
		{1, 1, 1, 1, 2, 2 + 1*(2+4)},
		{1, 1, 2, 8, 8, 1},
	}
	for _, tc := range tests {
		if got := ConservativeVariance(tc.kxx, tc.kyy, tc.h, tc.s, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ConservativeVariance(%v,%v,h=%d,s=%d,P=%d) = %v, want %v", tc.kxx, tc.kyy, tc.h, tc.s, tc.p, got, tc.want)
		}
	}
	u, v := []float64{1, 2}, []float64{3, -1}
	if got, want := JLVariance(u, v, 4), (5.0*10+1)/4; got != want {
		t.Errorf("JLVariance = %v, want %v", got, want)
	}
}
