package certify

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func randDense(r *rand.Rand, n, m int) *mat.Dense {
	d := mat.NewDense(n, m, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			d.Set(i, j, r.NormFloat64())
		}
	}
	return d
}

// refEmbed is z_i = b + Σ_{j∉removed} k_ij a_j by plain loops.
func refEmbed(k *mat.Dense, e Encoder, removed []int) [][]float64 {
	n, m := k.Dims()
	_, kk := e.A.Dims()
	drop := map[int]bool{}
	for _, j := range removed {
		drop[j] = true
	}
	z := make([][]float64, n)
	for i := range z {
		z[i] = append([]float64(nil), e.B...)
		for j := 0; j < m; j++ {
			if drop[j] {
				continue
			}
			for c := 0; c < kk; c++ {
				z[i][c] += k.At(i, j) * e.A.At(j, c)
			}
		}
	}
	return z
}

// refConfidence is the 50-NN cosine confidence written from its definition: for each test
// point, rank reference points by cosine similarity (ties by index), take the 50 nearest,
// and score the share of the most frequent label.
func refConfidence(ref, test [][]float64, labels []int) float64 {
	cos := func(u, v []float64) float64 {
		var uv, uu, vv float64
		for i := range u {
			uv += u[i] * v[i]
			uu += u[i] * u[i]
			vv += v[i] * v[i]
		}
		if uu == 0 || vv == 0 {
			return 0
		}
		return uv / math.Sqrt(uu*vv)
	}
	var total float64
	for _, t := range test {
		idx := make([]int, len(ref))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return cos(t, ref[idx[a]]) > cos(t, ref[idx[b]]) })
		k := min(50, len(ref))
		// The share of the majority class; which class wins a tie does not change it.
		count := map[int]int{}
		bestN := 0
		for _, i := range idx[:k] {
			count[labels[i]]++
			bestN = max(bestN, count[labels[i]])
		}
		total += float64(bestN) / float64(k)
	}
	return total / float64(len(test))
}

func TestEmbedTo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	k := randDense(r, 7, 5)
	e := Encoder{A: randDense(r, 5, 3), B: []float64{0.1, -0.2, 0.3}}
	for _, removed := range [][]int{nil, {0}, {1, 4}, {0, 1, 2, 3, 4}} {
		got := mat.NewDense(7, 3, nil)
		e.EmbedTo(got, k, removed)
		want := refEmbed(k, e, removed)
		for i := range want {
			for c := range want[i] {
				if math.Abs(got.At(i, c)-want[i][c]) > 1e-12 {
					t.Fatalf("removed %v: z[%d][%d] = %v, want %v", removed, i, c, got.At(i, c), want[i][c])
				}
			}
		}
	}
}

// TestDeletionEffect builds an encoder where landmark 0 alone separates two classes and
// the rest is noise: deleting it must destroy the k-NN confidence, deleting a noise
// landmark must not; both checked against refConfidence.
func TestDeletionEffect(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const nr, nt, m, kk = 120, 40, 6, 4
	mk := func(n int) (*mat.Dense, []int) {
		k := mat.NewDense(n, m, nil)
		lab := make([]int, n)
		for i := 0; i < n; i++ {
			lab[i] = i % 2
			k.Set(i, 0, 5*float64(2*lab[i]-1)) // class signal on landmark 0
			for j := 1; j < m; j++ {
				k.Set(i, j, 0.3*r.NormFloat64())
			}
		}
		return k, lab
	}
	ref, refLab := mk(nr)
	test, _ := mk(nt)
	a := randDense(r, m, kk)
	e := Encoder{A: a, B: make([]float64, kk)}

	full, err := Confidence(e, ref, test, refLab, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]int{nil, {0}, {3}, {1, 2}} {
		got, err := DeletionEffect(full, e, ref, test, refLab, s)
		if err != nil {
			t.Fatal(err)
		}
		want := refConfidence(refEmbed(ref, e, nil), refEmbed(test, e, nil), refLab) -
			refConfidence(refEmbed(ref, e, s), refEmbed(test, e, s), refLab)
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("Δ(%v) = %v, reference %v", s, got, want)
		}
	}
	sig, _ := DeletionEffect(full, e, ref, test, refLab, []int{0})
	noise, _ := DeletionEffect(full, e, ref, test, refLab, []int{3})
	if !(full > 0.95 && sig > 0.3 && math.Abs(noise) < 0.1) {
		t.Errorf("conf %v, Δ(signal) %v, Δ(noise) %v: want conf > 0.95, Δ(signal) > 0.3, |Δ(noise)| < 0.1", full, sig, noise)
	}
}

func TestContributionAndLeaveOneOut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const n, m, kk = 9, 4, 3
	k := randDense(r, n, m)
	e := Encoder{A: randDense(r, m, kk), B: []float64{0.5, 0, -0.5}}
	contrib := make([]float64, m)
	ContributionTo(contrib, e, k)
	loo := make([]float64, m)
	LeaveOneOutTo(loo, e, k)
	norm := func(v []float64) []float64 {
		s := vecNorm(v)
		out := make([]float64, len(v))
		for i := range v {
			out[i] = v[i] / s
		}
		return out
	}
	full := refEmbed(k, e, nil)
	for j := 0; j < m; j++ {
		var c, l float64
		without := refEmbed(k, e, []int{j})
		for i := 0; i < n; i++ {
			term := make([]float64, kk)
			for q := range term {
				term[q] = k.At(i, j) * e.A.At(j, q)
			}
			c += vecNorm(term)
			u, w := norm(full[i]), norm(without[i])
			var d2 float64
			for q := range u {
				d2 += (u[q] - w[q]) * (u[q] - w[q])
			}
			l += math.Sqrt(d2)
		}
		if want := c / n; math.Abs(contrib[j]-want) > 1e-12 {
			t.Errorf("contribution[%d] = %v, want %v", j, contrib[j], want)
		}
		if want := l / n; math.Abs(loo[j]-want) > 1e-12 {
			t.Errorf("leave-one-out[%d] = %v, want %v", j, loo[j], want)
		}
	}
}

func TestTopKIndices(t *testing.T) {
	got := TopKIndices([]float64{1, 3, 3, 2, 5}, 3)
	want := []int{4, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("TopKIndices = %v, want %v", got, want)
		}
	}
}

// TestReselection: Latent-Space Reselection against a reference that recomputes every
// candidate's distance to the span of the picks by least squares (gonum QR) at each step:
// the same order while the distances are well separated; the first pick is the top-1
// by ω; rows beyond the rank of D = A − A₀ follow in decreasing ω; and on a displacement
// with two copies of the largest row, the copy is not picked second.
func TestReselection(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 3))
	const m, k = 30, 6
	a, a0 := mat.NewDense(m, k, nil), mat.NewDense(m, k, nil)
	for i := range m {
		for j := range k {
			a.Set(i, j, r.NormFloat64()*(1+float64(i%5)))
			a0.Set(i, j, 0.1*r.NormFloat64())
		}
	}
	// Row 7 duplicates the largest displacement row.
	var d mat.Dense
	d.Sub(a, a0)
	omega := make([]float64, m)
	top := 0
	for i := range m {
		omega[i] = mat.Norm(d.RowView(i), 2)
		if omega[i] > omega[top] {
			top = i
		}
	}
	if top == 7 {
		t.Fatal("fixture: the largest row is the copy")
	}
	for j := range k {
		a.Set(7, j, a.At(top, j))
		a0.Set(7, j, a0.At(top, j))
	}
	d.Sub(a, a0)
	for i := range m {
		omega[i] = mat.Norm(d.RowView(i), 2)
	}
	got := make([]float64, m)
	ReselectionTo(got, a, a0)
	order := TopKIndices(got, m)
	// Reference: k greedy picks by least-squares distance to the span of the picks.
	var ref []int
	for len(ref) < k {
		best, bd := -1, 0.0
		for l := range m {
			if slices.Contains(ref, l) {
				continue
			}
			dist := omega[l] * omega[l]
			if len(ref) > 0 {
				z := mat.NewDense(k, len(ref), nil)
				for c, p := range ref {
					z.SetCol(c, d.RawRowView(p))
				}
				var x, proj mat.VecDense
				y := mat.NewVecDense(k, append([]float64(nil), d.RawRowView(l)...))
				if err := x.SolveVec(z, y); err != nil {
					t.Fatal(err)
				}
				proj.MulVec(z, &x)
				proj.SubVec(y, &proj)
				dist = mat.Dot(&proj, &proj)
			}
			if dist > bd*(1+1e-9) {
				best, bd = l, dist
			}
		}
		ref = append(ref, best)
	}
	if !slices.Equal(order[:k], ref) {
		t.Fatalf("first %d picks %v, reference %v", k, order[:k], ref)
	}
	if first, copy := min(top, 7), max(top, 7); order[0] != first || slices.Index(order[:k], copy) >= 0 {
		t.Errorf("first pick %d, want %d (the top-1 by ω, lower index of it and its copy); the copy %d among the first %d: %v", order[0], first, copy, k, order)
	}
	for i := k + 1; i < m; i++ { // past the rank: decreasing ω
		if omega[order[i]] > omega[order[i-1]] {
			t.Errorf("beyond the rank, position %d has ω %v above position %d's %v", i, omega[order[i]], i-1, omega[order[i-1]])
		}
	}
}
