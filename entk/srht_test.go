package entk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// denseSRHT builds S = sqrt(P/s)·R·H·D as an s×p matrix (columns past p dropped, since
// padded entries are zero) from the SRHT's own signs and rows, using the definition of H.
func denseSRHT(t *SRHT) []float64 {
	p, pad, s := t.InLen(), t.PaddedLen(), t.S()
	m := make([]float64, s*p)
	c := math.Sqrt(float64(pad)/float64(s)) / math.Sqrt(float64(pad))
	for i, row := range t.Rows() {
		for k := 0; k < p; k++ {
			h := c
			if popParity(row & k) {
				h = -c
			}
			m[i*p+k] = h * t.Signs()[k]
		}
	}
	return m
}

func popParity(x int) bool {
	odd := false
	for ; x != 0; x &= x - 1 {
		odd = !odd
	}
	return odd
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestPaddedLen(t *testing.T) {
	for _, c := range []struct{ p, want int }{
		{1, 2}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1024, 1024}, {1025, 2048},
	} {
		if got := PaddedLen(c.p); got != c.want {
			t.Errorf("PaddedLen(%d) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestNewSRHTRejects(t *testing.T) {
	for _, c := range []struct{ p, s int }{{0, 0}, {-1, 1}, {5, -1}, {5, 9}, {1, 3}, {1024, 1025}} {
		_, err := NewSRHT(c.p, c.s, rand.New(rand.NewPCG(1, 1)))
		if !errors.Is(err, ErrSketchSize) {
			t.Errorf("NewSRHT(p = %d, s = %d): got error %v, want ErrSketchSize", c.p, c.s, err)
		}
	}
	for _, c := range []struct{ p, s int }{{1, 0}, {1, 1}, {1, 2}, {5, 8}, {1024, 1024}} {
		if _, err := NewSRHT(c.p, c.s, rand.New(rand.NewPCG(1, 1))); err != nil {
			t.Errorf("NewSRHT(p = %d, s = %d): got error %v, want nil", c.p, c.s, err)
		}
	}
}

// TestSRHTMatchesDense checks ApplyTo against the dense product S v built from the draw's
// signs and rows, and that the draw is well formed (signs ±1, rows distinct, ascending).
func TestSRHTMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	for _, c := range []struct{ p, s int }{{1, 1}, {1, 2}, {3, 2}, {7, 8}, {20, 5}, {100, 128}, {300, 17}, {2049, 100}, {5000, 1000}} {
		t.Run(fmt.Sprintf("p=%d,s=%d", c.p, c.s), func(t *testing.T) {
			sr, err := NewSRHT(c.p, c.s, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range sr.Signs() {
				if e != 1 && e != -1 {
					t.Fatalf("sign %v, want ±1", e)
				}
			}
			rows := sr.Rows()
			if len(rows) != c.s || !slices.IsSorted(rows) || len(slices.Compact(slices.Clone(rows))) != c.s || rows[0] < 0 || rows[len(rows)-1] >= sr.PaddedLen() {
				t.Fatalf("rows %v: want %d distinct ascending values in [0, %d)", rows, c.s, sr.PaddedLen())
			}
			v := randVec(r, c.p)
			orig := slices.Clone(v)
			got := make([]float64, sr.OutLen())
			sr.ApplyTo(got, v, make([]float64, sr.WorkLen()))
			if !slices.Equal(v, orig) {
				t.Fatal("ApplyTo modified v")
			}
			m := denseSRHT(sr)
			tol := 1e-13 * norm2(v) * math.Sqrt(float64(sr.PaddedLen())/float64(c.s)) * float64(1+len(rows))
			for i := range got {
				want := dot(m[i*c.p:(i+1)*c.p], v)
				if math.Abs(got[i]-want) > tol {
					t.Fatalf("(Sv)[%d] = %v, want %v", i, got[i], want)
				}
			}
		})
	}
}

// TestSRHTExactAtFullWidth: at s = P the sketch is a signed permutation of an orthogonal
// matrix, so norms and inner products are preserved up to rounding (relative 1e-12).
func TestSRHTExactAtFullWidth(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, p := range []int{1, 2, 3, 100, 1024, 3000} {
		pad := PaddedLen(p)
		sr, err := NewSRHT(p, pad, r)
		if err != nil {
			t.Fatal(err)
		}
		u, v := randVec(r, p), randVec(r, p)
		su, sv := make([]float64, pad), make([]float64, pad)
		w := make([]float64, sr.WorkLen())
		sr.ApplyTo(su, u, w)
		sr.ApplyTo(sv, v, w)
		scale := norm2(u) * norm2(v)
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"<Su,Sv>", dot(su, sv), dot(u, v)},
			{"||Su||²", dot(su, su), dot(u, u)},
			{"||Sv||²", dot(sv, sv), dot(v, v)},
		} {
			if math.Abs(c.got-c.want) > 1e-12*scale {
				t.Errorf("p = %d: %s = %v, want %v", p, c.name, c.got, c.want)
			}
		}
	}
}

func TestSRHTIdentityAtZero(t *testing.T) {
	sr, err := NewSRHT(13, 0, nil) // s = 0 draws nothing, so a nil stream is fine
	if err != nil {
		t.Fatal(err)
	}
	if sr.OutLen() != 13 || sr.WorkLen() != 0 || sr.PaddedLen() != 16 || sr.Signs() != nil || sr.Rows() != nil {
		t.Fatalf("s = 0: OutLen %d WorkLen %d PaddedLen %d; want 13, 0, 16 and no draw", sr.OutLen(), sr.WorkLen(), sr.PaddedLen())
	}
	v := randVec(rand.New(rand.NewPCG(2, 3)), 13)
	got := make([]float64, 13)
	sr.ApplyTo(got, v, nil)
	if !slices.Equal(got, v) {
		t.Errorf("s = 0: got %v, want %v", got, v)
	}
}

// TestSRHTUnbiasedAndExactVariance is a Monte-Carlo check of Thm. srht-exact for
// C = v uᵀ: over N independent draws the estimates X = <Su, Sv> must have mean <u, v> and
// variance V = (P−s)/((P−1)s)·Φ, Φ = ||u||²||v||² + <u,v>² − 2Σ u_j² v_j².
//
// Tolerances: the sample mean has standard error sqrt(V/N), and the sample variance has
// standard error sqrt((m4 − V²)/N) with m4 the fourth central moment (estimated from the
// sample); both are required within 5 standard errors, which a correct implementation
// fails with probability < 1e-6 each (Gaussian approximation, N = 20000). The variance
// check separates sampling without replacement from sampling with replacement, whose
// variance lacks the factor (P−s)/(P−1) = 0.77 here (a 23% difference, against a 5-SE
// band of about 7%). u is concentrated on a few coordinates so that the diagonal
// correction of Φ matters.
func TestSRHTUnbiasedAndExactVariance(t *testing.T) {
	const p, s, N = 20, 8, 20000
	r := rand.New(rand.NewPCG(3, 1))
	u, v := randVec(r, p), randVec(r, p)
	u[0], u[5] = 6, -4
	v[0] = 3
	var uu, vv, uv, diag float64
	for j := range u {
		uu += u[j] * u[j]
		vv += v[j] * v[j]
		uv += u[j] * v[j]
		diag += u[j] * u[j] * v[j] * v[j]
	}
	P := float64(PaddedLen(p))
	phi := uu*vv + uv*uv - 2*diag
	wantVar := (P - s) / ((P - 1) * s) * phi

	xs := make([]float64, N)
	su, sv := make([]float64, s), make([]float64, s)
	w := make([]float64, PaddedLen(p))
	for i := range xs {
		sr, err := NewSRHT(p, s, r)
		if err != nil {
			t.Fatal(err)
		}
		sr.ApplyTo(su, u, w)
		sr.ApplyTo(sv, v, w)
		xs[i] = dot(su, sv)
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= N
	var m2, m4 float64
	for _, x := range xs {
		d := x - mean
		m2 += d * d
		m4 += d * d * d * d
	}
	m2 /= N - 1
	m4 /= N
	if se := math.Sqrt(wantVar / N); math.Abs(mean-uv) > 5*se {
		t.Errorf("mean <Su,Sv> = %v, want %v ± %v (5 SE)", mean, uv, 5*se)
	}
	if se := math.Sqrt((m4 - m2*m2) / N); math.Abs(m2-wantVar) > 5*se {
		t.Errorf("Var <Su,Sv> = %v, want %v ± %v (5 SE; with-replacement would give %v)", m2, wantVar, 5*se, phi/s)
	}
}

func TestSRHTApplyAllocs(t *testing.T) {
	sr, err := NewSRHT(1000, 64, rand.New(rand.NewPCG(3, 2)))
	if err != nil {
		t.Fatal(err)
	}
	v, dst, w := make([]float64, 1000), make([]float64, 64), make([]float64, sr.WorkLen())
	if a := testing.AllocsPerRun(5, func() { sr.ApplyTo(dst, v, w) }); a != 0 {
		t.Errorf("ApplyTo allocates %v times per call, want 0", a)
	}
}

// TestHeadsMoments: the h·d entries must be i.i.d. N(0, 1/d). With N = h·d entries, the
// sample mean has SE sqrt(1/(dN)) and the sample variance SE sqrt(2/N)/d (Gaussian fourth
// moment); the off-diagonal second moment E[w_a w_b] = 0 has SE 1/(d·sqrt(h)) per pair.
// Each is checked at 5 SE.
func TestHeadsMoments(t *testing.T) {
	const h, d = 4000, 5
	w := NewHeads(h, d, rand.New(rand.NewPCG(4, 1)))
	if len(w) != h*d {
		t.Fatalf("len = %d, want %d", len(w), h*d)
	}
	N := float64(h * d)
	var mean, ss float64
	for _, x := range w {
		mean += x
		ss += x * x
	}
	mean /= N
	varr := ss/N - mean*mean
	if se := math.Sqrt(1 / (d * N)); math.Abs(mean) > 5*se {
		t.Errorf("mean = %v, want 0 ± %v", mean, 5*se)
	}
	if se := math.Sqrt(2/N) / d; math.Abs(varr-1.0/d) > 5*se {
		t.Errorf("variance = %v, want %v ± %v", varr, 1.0/d, 5*se)
	}
	for a := 0; a < d; a++ {
		for b := a + 1; b < d; b++ {
			var c float64
			for j := 0; j < h; j++ {
				c += w[j*d+a] * w[j*d+b]
			}
			c /= h
			if se := 1 / (d * math.Sqrt(h)); math.Abs(c) > 5*se {
				t.Errorf("E[w_%d w_%d] = %v, want 0 ± %v", a, b, c, 5*se)
			}
		}
	}
}
