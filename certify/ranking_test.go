package certify

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// representerRef is the slow, obvious representer score of every landmark for one row.
func representerRef(row, a, b []float64, scale float64) []float64 {
	m, k := len(row), len(b)
	z := slices.Clone(b)
	for l := range m {
		for j := range k {
			z[j] += scale * row[l] * a[l*k+j]
		}
	}
	var n float64
	for _, v := range z {
		n += v * v
	}
	n = math.Sqrt(n)
	out := make([]float64, m)
	for l := range m {
		var d float64
		for j := range k {
			d += a[l*k+j] * z[j]
		}
		out[l] = row[l] * scale * d / n
	}
	return out
}

// TestRepresenterTo: the scores equal the slow reference to rounding (1e-12 relative to
// the largest score: a few ulps of sums of m·k products), and the radii hold: for rows
// perturbed anywhere within rowErr (corners and uniform draws, 200 of them), every exact
// score lies within its radius of the computed one.
func TestRepresenterTo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][2]int{{5, 3}, {33, 8}, {64, 17}} {
		m, k := sz[0], sz[1]
		row, rowErr, a, b := make([]float64, m), make([]float64, m), make([]float64, m*k), make([]float64, k)
		for l := range row {
			row[l] = r.NormFloat64()
			rowErr[l] = 1e-3 * r.Float64()
		}
		for i := range a {
			a[i] = r.NormFloat64()
		}
		for i := range b {
			b[i] = r.NormFloat64()
		}
		scale := 0.7
		score, radius, z := make([]float64, m), make([]float64, m), make([]float64, k)
		RepresenterTo(score, radius, z, row, rowErr, a, b, scale)
		want := representerRef(row, a, b, scale)
		var top float64
		for _, v := range want {
			top = max(top, math.Abs(v))
		}
		for l := range m {
			if math.Abs(score[l]-want[l]) > 1e-12*top {
				t.Fatalf("m=%d k=%d: score[%d] = %v, want %v", m, k, l, score[l], want[l])
			}
		}
		pert := make([]float64, m)
		for trial := range 200 {
			for l := range pert {
				u := 2*r.Float64() - 1
				if trial%2 == 0 {
					u = math.Copysign(1, u) // corners of the box
				}
				pert[l] = row[l] + u*rowErr[l]
			}
			exact := representerRef(pert, a, b, scale)
			for l := range m {
				if d := math.Abs(exact[l] - score[l]); d > radius[l] {
					t.Fatalf("m=%d k=%d trial %d: landmark %d moved %v, radius %v", m, k, trial, l, d, radius[l])
				}
			}
		}
	}
}

// TestCertifyIntervalsTo: the certificate of explicit intervals ranks as CertifyBoundedTo
// does with ω = 1 and the same radii, and separation decides the verdict.
func TestCertifyIntervalsTo(t *testing.T) {
	scores := []float64{5, 1, 4, 0.5, 3}
	radii := []float64{0.1, 0.1, 0.1, 0.1, 0.4}
	var r Ranker
	var c Certificate
	if err := r.CertifyIntervalsTo(&c, scores, radii, 2); err != nil {
		t.Fatal(err)
	}
	if got := c.TopKSet(); !slices.Equal(got, []int{0, 2}) || c.Verdict != Certified {
		t.Fatalf("top %v verdict %s, want [0 2] certified", got, c.Verdict)
	}
	radii[4] = 0.7 // 3 + 0.7 reaches 4 − 0.1 = 3.9? no: 3.7 < 3.9, still certified
	if err := r.CertifyIntervalsTo(&c, scores, radii, 2); err != nil || c.Verdict != Certified {
		t.Fatalf("verdict %s err %v, want certified", c.Verdict, err)
	}
	radii[4] = 0.95 // 3.95 > 3.9: the intervals cross
	if err := r.CertifyIntervalsTo(&c, scores, radii, 2); err != nil || c.Verdict != Uncertified {
		t.Fatalf("verdict %s err %v, want uncertified", c.Verdict, err)
	}
	radii[1] = math.NaN()
	if err := r.CertifyIntervalsTo(&c, scores, radii, 2); err == nil {
		t.Fatal("a NaN radius was accepted")
	}
	if err := r.CertifyIntervalsTo(&c, scores, []float64{0, 0, 0, 0, 0}, 5); err == nil {
		t.Fatal("k = m was accepted")
	}
}

// TestFitStability checks the closed forms (no fit variance: 1 when the served top-K is
// the mean's, K−1 of K shared gives (K−1)/(K+1)) and a Monte-Carlo oracle: Gaussian
// refits drawn from the same model, top-K Jaccard averaged over 20,000 draws, within
// 0.03 (the estimate's approximation, E[I]/(2K − E[I]) for E[I/(2K − I)], is what the
// tolerance covers; the Monte-Carlo error is ~0.002).
func TestFitStability(t *testing.T) {
	kappa := []float64{1, 1, 1, 1, 1, 1}
	mean := []float64{6, 5, 4, 3, 2, 1}
	zero := make([]float64, 6)
	if j := FitStability(kappa, mean, zero, []int{0, 1, 2}); j != 1 {
		t.Errorf("no variance, served = mean top-3: J = %v, want 1", j)
	}
	if j, want := FitStability(kappa, mean, zero, []int{0, 1, 3}), 2.0/4; math.Abs(j-want) > 1e-12 {
		t.Errorf("no variance, one swapped: J = %v, want %v", j, want)
	}
	r := rand.New(rand.NewPCG(2, 2))
	m, k := 40, 10
	kappa, mean = make([]float64, m), make([]float64, m)
	tau2 := make([]float64, m)
	for l := range m {
		kappa[l] = 0.5 + r.Float64()
		mean[l] = r.Float64() * 3
		tau2[l] = 0.05 * r.Float64()
	}
	mu := make([]float64, m)
	for l := range m {
		mu[l] = kappa[l] * mean[l]
	}
	served := make([]int, k)
	TopKTo(served, mu)
	got := FitStability(kappa, mean, tau2, served)
	var sum float64
	draws := 20000
	sc, top := make([]float64, m), make([]int, k)
	for range draws {
		for l := range m {
			sc[l] = mu[l] + math.Abs(kappa[l])*math.Sqrt(tau2[l])*r.NormFloat64()
		}
		TopKTo(top, sc)
		in := 0
		for _, a := range top {
			if slices.Contains(served, a) {
				in++
			}
		}
		sum += float64(in) / float64(2*k-in)
	}
	if mc := sum / float64(draws); math.Abs(got-mc) > 0.03 {
		t.Errorf("FitStability %v, Monte-Carlo %v", got, mc)
	}
}

// TestParseRanking: every listed name parses, another does not.
func TestParseRanking(t *testing.T) {
	for _, r := range Rankings {
		if got, err := ParseRanking(string(r)); err != nil || got != r {
			t.Errorf("ParseRanking(%q) = %q, %v", r, got, err)
		}
	}
	if _, err := ParseRanking("influence"); err == nil {
		t.Error("an unknown ranking parsed")
	}
}

// TestGradientCosineRadius: for exact gradient scores and norms drawn at random and
// computed values anywhere within their stated errors (the corners of the error box and
// random points inside it), the exact cosine lies within the returned radius of the
// score; the radius is within 10% of the first-order bound (ra + |a|·2·rel)/(qn·rn), so it
// is not loose; zero norms give a zero score and radius; the radius never passes
// |score| + 1.
func TestGradientCosineRadius(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range 2000 {
		qn, rn := math.Exp(3*r.NormFloat64()), math.Exp(3*r.NormFloat64())
		cos := 2*r.Float64() - 1
		a := cos * qn * rn
		ra := math.Abs(a) * math.Exp(-3-10*r.Float64())
		rel := math.Exp(-10 - 20*r.Float64())
		exact := a / (qn * rn)
		for k := range 12 {
			s := func(i int) float64 { // corner bit i, or a random sign past the 8 corners
				if k < 8 {
					return float64(2*(k>>i&1) - 1)
				}
				return 2*r.Float64() - 1
			}
			ac, qc, rc := a+s(0)*ra, qn*(1+s(1)*rel), rn*(1+s(2)*rel)
			score, radius := GradientCosineRadius(ac, ra, qc, rc, rel)
			if math.Abs(score-exact) > radius {
				t.Fatalf("a %v±%v qn %v rn %v rel %v: score %v radius %v, exact %v", a, ra, qn, rn, rel, score, radius, exact)
			}
			if first := (ra + math.Abs(ac)*2*rel) / (qc * rc); radius > 1.1*first+1e-300 && radius < math.Abs(score)+1 {
				t.Fatalf("radius %v, first-order bound %v", radius, first)
			}
			if radius > math.Abs(score)+1 {
				t.Fatalf("radius %v past |score| + 1 = %v", radius, math.Abs(score)+1)
			}
		}
	}
	if s, rad := GradientCosineRadius(0, 0, 0, 3, 1e-11); s != 0 || rad != 0 {
		t.Errorf("zero query norm: %v ± %v, want 0 ± 0", s, rad)
	}
}
