package validate

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/knn"
)

// slowCorrect is the correct-class confidence from the definition: cosine similarity to
// every reference row, neighbours by similarity descending and row ascending, the share
// of the min(k, n) nearest whose label is the query's.
func slowCorrect(ref *mat.Dense, refLabels []int, x []float64, y, k int) float64 {
	n, _ := ref.Dims()
	norm := func(v []float64) float64 {
		var s float64
		for _, a := range v {
			s += a * a
		}
		return math.Sqrt(s)
	}
	sims := make([]float64, n)
	for i := range n {
		row := ref.RawRowView(i)
		var d float64
		for j := range row {
			d += row[j] * x[j]
		}
		if nr, nx := norm(row), norm(x); nr > 0 && nx > 0 {
			sims[i] = d / (nr * nx)
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(sims[b], sims[a]) })
	kk := min(k, n)
	hit := 0
	for _, i := range idx[:kk] {
		if refLabels[i] == y {
			hit++
		}
	}
	return float64(hit) / float64(kk)
}

// randomProblem is a reference set with duplicated rows (exact similarity ties) and
// queries near it, c dimensions, 4 classes.
func randomProblem(r *rand.Rand, n, nq, c int) (*mat.Dense, []int, *mat.Dense, []int) {
	ref := mat.NewDense(n, c, nil)
	labels := make([]int, n)
	for i := range n {
		if i%7 == 6 {
			ref.SetRow(i, ref.RawRowView(i-3))
		} else {
			for j := range c {
				ref.Set(i, j, r.NormFloat64())
			}
		}
		labels[i] = r.IntN(4)
	}
	qs := mat.NewDense(nq, c, nil)
	ql := make([]int, nq)
	for i := range nq {
		src := ref.RawRowView(r.IntN(n))
		for j := range c {
			qs.Set(i, j, src[j]+0.8*r.NormFloat64())
		}
		ql[i] = r.IntN(4)
	}
	return ref, labels, qs, ql
}

// TestCorrectConfidenceAgainstReference: the per-class knn pass gives, for every query,
// the share of its nearest rows that carry its label, exactly (a count over kk), with
// k below, at and above the reference size.
func TestCorrectConfidenceAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	ref, labels, qs, ql := randomProblem(r, 70, 25, 6)
	for _, k := range []int{1, 10, 50, 70, 100} {
		got := make([]float64, 25)
		if err := CorrectConfidenceTo(got, ref, labels, qs, ql, k); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if want := slowCorrect(ref, labels, qs.RawRowView(i), ql[i], k); got[i] != want {
				t.Errorf("k=%d query %d: got %v, want %v", k, i, got[i], want)
			}
		}
	}
	if err := CorrectConfidenceTo(make([]float64, 1), mat.NewDense(1, 2, nil).Slice(0, 0, 0, 2).(*mat.Dense), nil, mat.NewDense(1, 2, nil), []int{0}, 5); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty reference: %v, want ErrEmpty", err)
	}
}

// TestDeletionAgainstReference: a removal's drop equals base − confidence of latents
// embedded from scratch without the removed landmarks (certify.Encoder.EmbedTo with
// removed), for the queries asked, sets of one and several rows.
func TestDeletionAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	const n, nq, m, c = 90, 12, 9, 5
	kRef, kQ := mat.NewDense(n, m, nil), mat.NewDense(nq, m, nil)
	for _, k := range []*mat.Dense{kRef, kQ} {
		rows, _ := k.Dims()
		for i := range rows {
			for l := range m {
				k.Set(i, l, math.Abs(r.NormFloat64()))
			}
		}
	}
	a := mat.NewDense(m, c, nil)
	for l := range m {
		for j := range c {
			a.Set(l, j, r.NormFloat64())
		}
	}
	enc := certify.Encoder{A: a, B: []float64{0.1, -0.2, 0, 0.3, 0}}
	labels, ql := make([]int, n), make([]int, nq)
	for i := range labels {
		labels[i] = r.IntN(3)
	}
	for i := range ql {
		ql[i] = r.IntN(3)
	}
	d, err := NewDeletion(enc, kRef, labels, kQ, ql)
	if err != nil {
		t.Fatal(err)
	}
	embed := func(k *mat.Dense, removed []int) *mat.Dense {
		rows, _ := k.Dims()
		z := mat.NewDense(rows, c, nil)
		enc.EmbedTo(z, k, removed)
		return z
	}
	zr0, zq0 := embed(kRef, nil), embed(kQ, nil)
	for _, set := range [][]int{{}, {3}, {0, 8}, {1, 2, 4, 5}} {
		zr, zq := embed(kRef, set), embed(kQ, set)
		qs := []int{0, 5, 11}
		got := make([]float64, len(qs))
		if err := d.DropsTo(got, qs, set); err != nil {
			t.Fatal(err)
		}
		for j, q := range qs {
			base := slowCorrect(zr0, labels, zq0.RawRowView(q), ql[q], knn.ConfidenceK)
			want := base - slowCorrect(zr, labels, zq.RawRowView(q), ql[q], knn.ConfidenceK)
			// The rank-|S| update and the fresh product differ by rounding only; a
			// neighbour order could flip only at a near-tie, which these data do not have.
			if math.Abs(got[j]-want) > 1e-12 || d.Base(q) != base {
				t.Errorf("set %v query %d: drop %v (base %v), want %v (base %v)", set, q, got[j], d.Base(q), want, base)
			}
		}
	}
}

// TestRandomSetsAndTop: sets are reproducible, of distinct candidates, shared across
// calls; too few candidates is ErrEmpty; TopCandidates ranks by score with ties to the
// earlier candidate.
func TestRandomSetsAndTop(t *testing.T) {
	cands := []int{2, 3, 5, 7, 11, 13}
	a, err := RandomSets(1, cands, 3, 20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomSets(1, cands, 3, 20)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Error("random sets are not reproducible")
	}
	for _, s := range a {
		if len(s) != 3 || len(slices.Compact(slices.Sorted(slices.Values(s)))) != 3 {
			t.Fatalf("set %v", s)
		}
		for _, x := range s {
			if !slices.Contains(cands, x) {
				t.Fatalf("set %v has a non-candidate", s)
			}
		}
	}
	if _, err := RandomSets(1, cands, 7, 1); !errors.Is(err, ErrEmpty) {
		t.Errorf("7 of 6 candidates: %v, want ErrEmpty", err)
	}
	scores := make([]float64, 14)
	scores[3], scores[7], scores[13], scores[0] = 5, 5, 9, 100 // 0 is no candidate
	if got := TopCandidates(scores, cands, 3); !slices.Equal(got, []int{13, 3, 7}) {
		t.Errorf("TopCandidates: %v, want [13 3 7]", got)
	}
}

func TestMidrankPercentile(t *testing.T) {
	random := []float64{0, 0, 0, 1, -1, 0.5}
	// below 0: one; equal to 0: three → (1 + 1.5)/6.
	if got := MidrankPercentile(0, random); got != 2.5/6 {
		t.Errorf("got %v, want %v", got, 2.5/6)
	}
	strict, _ := certify.Percentile(0, random)
	if strict != 1.0/6 {
		t.Errorf("certify.Percentile %v, want 1/6", strict)
	}
	if got := MidrankPercentile(2, random); got != 1 {
		t.Errorf("above all: %v", got)
	}
	if !math.IsNaN(MidrankPercentile(0, nil)) || !math.IsNaN(MidrankPercentile(math.NaN(), random)) {
		t.Error("no random drops or a NaN drop is not NaN")
	}
}
