package validate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// slowRanks is the textbook fractional ranking: 1 + #{j: x_j < x_i} + (#{j: x_j = x_i} − 1)/2.
func slowRanks(x []float64) []float64 {
	r := make([]float64, len(x))
	for i, xi := range x {
		less, eq := 0, 0
		for _, xj := range x {
			switch {
			case xj < xi:
				less++
			case xj == xi:
				eq++
			}
		}
		r[i] = 1 + float64(less) + float64(eq-1)/2
	}
	return r
}

// slowSpearman is the Pearson correlation of slowRanks, from the definition.
func slowSpearman(x, y []float64) float64 {
	rx, ry := slowRanks(x), slowRanks(y)
	n := float64(len(x))
	var mx, my float64
	for i := range rx {
		mx += rx[i] / n
		my += ry[i] / n
	}
	var c, vx, vy float64
	for i := range rx {
		c += (rx[i] - mx) * (ry[i] - my)
		vx += (rx[i] - mx) * (rx[i] - mx)
		vy += (ry[i] - my) * (ry[i] - my)
	}
	return c / math.Sqrt(vx*vy)
}

// TestSpearmanAgainstReference: Spearman equals the O(n²) definition on random data with
// and without ties (values rounded to a few levels), for sizes around the small cases;
// without ties it also equals the closed form 1 − 6Σd²/(n(n²−1)). Tolerance: both sides
// sum n terms of size ≤ n² in float64, so 1e-12 is generous.
func TestSpearmanAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{2, 3, 7, 50, 201} {
		for _, levels := range []float64{0, 3} {
			x, y := make([]float64, n), make([]float64, n)
			for i := range x {
				x[i], y[i] = r.NormFloat64(), r.NormFloat64()+0.5*x[i]
				if levels > 0 {
					x[i], y[i] = math.Round(levels*x[i]), math.Round(levels*y[i])
				}
			}
			got, want := Spearman(x, y), slowSpearman(x, y)
			if math.IsNaN(want) {
				if !math.IsNaN(got) {
					t.Errorf("n=%d levels=%v: got %v, want NaN", n, levels, got)
				}
				continue
			}
			if math.Abs(got-want) > 1e-12 {
				t.Errorf("n=%d levels=%v: got %v, want %v", n, levels, got, want)
			}
			if levels == 0 {
				rx, ry := slowRanks(x), slowRanks(y)
				var d2 float64
				for i := range rx {
					d2 += (rx[i] - ry[i]) * (rx[i] - ry[i])
				}
				nf := float64(n)
				if cf := 1 - 6*d2/(nf*(nf*nf-1)); math.Abs(got-cf) > 1e-12 {
					t.Errorf("n=%d: got %v, closed form %v", n, got, cf)
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		x, y []float64
	}{{"one value", []float64{1}, []float64{2}}, {"constant x", []float64{1, 1, 1}, []float64{1, 2, 3}}, {"constant y", []float64{3, 1, 2}, []float64{0, 0, 0}}} {
		if got := Spearman(c.x, c.y); !math.IsNaN(got) {
			t.Errorf("%s: got %v, want NaN", c.name, got)
		}
	}
	if got := Spearman([]float64{1, 2, 3, 4}, []float64{10, 20, 30, 1000}); got != 1 {
		t.Errorf("monotone: got %v, want 1", got)
	}
	if got := Spearman([]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}); got != -1 {
		t.Errorf("reversed: got %v, want −1", got)
	}
}

// TestLDSClosedForms: a perfectly linear datamodel (the target is Σ_{i∈S} w_i exactly)
// scored with its own weights has LDS 1 on every query; the same weights shuffled among
// the points carry no information, so the mean over many queries is near 0 (within four
// standard errors of it: a false failure has probability < 1e-4); and an affine monotone
// transform of the target changes nothing.
func TestLDSClosedForms(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const n, h, queries = 60, 40, 200
	halves := Halves(9, n, h)
	pred := make([][]float64, queries)
	shuffled := make([][]float64, queries)
	target := make([][]float64, queries)
	affine := make([][]float64, queries)
	for q := range queries {
		w := make([]float64, n)
		for i := range w {
			w[i] = r.NormFloat64()
		}
		pred[q], target[q], shuffled[q], affine[q] = make([]float64, h), make([]float64, h), make([]float64, h), make([]float64, h)
		PredictTo(pred[q], w, halves)
		for j, s := range halves {
			for _, i := range s {
				target[q][j] += w[i]
			}
			affine[q][j] = 3*target[q][j] - 7
		}
		ws := slices.Clone(w)
		r.Shuffle(n, func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		PredictTo(shuffled[q], ws, halves)
	}
	for _, tg := range [][][]float64{target, affine} {
		l := Score(pred, tg)
		if l.Mean != 1 || l.Queries != queries || l.Undefined != 0 {
			t.Errorf("linear datamodel: LDS %+v, want mean 1 over %d queries", l.Mean, queries)
		}
		if l.SE != 0 {
			t.Errorf("linear datamodel: SE %v, want 0", l.SE)
		}
	}
	l := Score(shuffled, target)
	if math.Abs(l.Mean) > 4*l.SE || l.SE <= 0 || l.SE > 0.05 {
		t.Errorf("shuffled scores: LDS %v ± %v, want ≈ 0", l.Mean, l.SE)
	}
	// A constant prediction is undefined and left out.
	pred[0] = make([]float64, h)
	if l := Score(pred, target); l.Undefined != 1 || l.Queries != queries-1 || !math.IsNaN(l.PerQuery[0]) || l.Mean != 1 {
		t.Errorf("one constant prediction: %+v", l)
	}
}

// TestHalves: every half has n/2 distinct sorted indices in range; the same seed gives the
// same halves, half j does not depend on how many are drawn, and another seed or another
// j gives another half.
func TestHalves(t *testing.T) {
	for _, n := range []int{0, 1, 7, 120} {
		hs := Halves(5, n, 6)
		for j, h := range hs {
			if len(h) != n/2 || !slices.IsSorted(h) || len(slices.Compact(slices.Clone(h))) != len(h) {
				t.Fatalf("n=%d half %d: %v", n, j, h)
			}
			for _, i := range h {
				if i < 0 || i >= n {
					t.Fatalf("n=%d half %d: index %d", n, j, i)
				}
			}
		}
	}
	a, b := Halves(5, 120, 6), Halves(5, 120, 3)
	for j := range b {
		if !slices.Equal(a[j], b[j]) {
			t.Errorf("half %d depends on the number of halves", j)
		}
	}
	if again := Halves(5, 120, 6); !slices.EqualFunc(a, again, slices.Equal) {
		t.Error("the same seed gave other halves")
	}
	if slices.Equal(a[0], a[1]) || slices.Equal(a[0], Halves(6, 120, 1)[0]) {
		t.Error("two halves (or two seeds) gave the same subset")
	}
}

func TestMedianMeanSE(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.x); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	// mean 2.5, sample variance 5/3, SE sqrt(5/3)/2.
	m, se := MeanSE([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(se-math.Sqrt(5.0/3)/2) > 1e-15 {
		t.Errorf("MeanSE: %v, %v", m, se)
	}
	if m, se := MeanSE([]float64{7}); m != 7 || !math.IsNaN(se) {
		t.Errorf("MeanSE of one value: %v, %v", m, se)
	}
}
