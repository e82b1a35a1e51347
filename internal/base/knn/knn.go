package knn

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/par"
)

// ConfidenceK is the neighbour count of the deletion audit's confidence (paper appendix
// "Identifiability": the 50 cosine nearest neighbours).
const ConfidenceK = 50

// chunk is the number of queries whose similarities are computed in one matrix product; it
// bounds the similarity workspace at chunk×(reference rows) floats.
const chunk = 256

// Classifier holds a normalized reference set with its labels.
type Classifier struct {
	ref     *mat.Dense // unit rows
	labels  []int
	classes int
}

// Predictions is the outcome of a k-NN pass over queries.
type Predictions struct {
	// Label is the majority-vote class of each query.
	Label []int
	// Share is the fraction of the query's neighbours that carry Label: its confidence.
	Share []float64
}

// New returns a classifier over the rows of ref with the given labels. ref is copied.
func New(ref mat.Matrix, labels []int) (*Classifier, error) {
	r, c := ref.Dims()
	if len(labels) != r {
		panic(fmt.Sprintf("knn: %d labels for %d reference rows", len(labels), r))
	}
	if r == 0 || c == 0 {
		return nil, fmt.Errorf("%w: reference is %d×%d", ErrEmpty, r, c)
	}
	classes := 0
	for i, l := range labels {
		if l < 0 {
			return nil, fmt.Errorf("%w: labels[%d] = %d", ErrLabel, i, l)
		}
		classes = max(classes, l+1)
	}
	u := mat.NewDense(r, c, nil)
	NormalizeRowsTo(u, ref)
	return &Classifier{ref: u, labels: append([]int(nil), labels...), classes: classes}, nil
}

// Len returns the number of reference rows.
func (c *Classifier) Len() int { return len(c.labels) }

// NormalizeRowsTo writes src with each row scaled to unit Euclidean norm into dst. Rows of
// zero norm are written as zero. dst and src may be the same matrix. Chunks of rows run
// side by side (internal/base/par), each row as the loop below.
//
//	for i: dst[i,:] = src[i,:] / ||src[i,:]||₂
func NormalizeRowsTo(dst *mat.Dense, src mat.Matrix) {
	r, c := src.Dims()
	if dr, dc := dst.Dims(); dr != r || dc != c {
		panic(fmt.Sprintf("knn: dst is %d×%d, src is %d×%d", dr, dc, r, c))
	}
	sd, ok := src.(*mat.Dense)
	if !ok { // another kind of matrix: copied first, then normalized in place
		dst.Copy(src)
		sd = dst
	}
	par.For(r, normRows, par.Workers(r, normRows), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			in, out := sd.RawRowView(i), dst.RawRowView(i)
			var ss float64
			for _, v := range in {
				ss += v * v
			}
			if ss == 0 {
				copy(out, in)
				continue
			}
			inv := 1 / math.Sqrt(ss)
			for j, v := range in {
				out[j] = v * inv
			}
		}
	})
}

// normRows is the row count of one chunk of NormalizeRowsTo.
const normRows = 64

// Predict classifies each row of query by majority vote over its k nearest reference rows.
func (c *Classifier) Predict(query mat.Matrix, k int) (Predictions, error) {
	q, d := query.Dims()
	if _, rc := c.ref.Dims(); d != rc {
		panic(fmt.Sprintf("knn: query has %d columns, reference %d", d, rc))
	}
	if k < 1 {
		return Predictions{}, fmt.Errorf("%w: k = %d", ErrK, k)
	}
	u := mat.NewDense(max(q, 1), d, nil)
	if q > 0 {
		NormalizeRowsTo(u, query)
	}
	return c.vote(u, q, k, false), nil
}

// LeaveOneOut classifies every reference row by its k nearest other reference rows (the
// row itself is excluded): validation accuracy without a second labelled set.
func (c *Classifier) LeaveOneOut(k int) (Predictions, error) {
	if k < 1 {
		return Predictions{}, fmt.Errorf("%w: k = %d", ErrK, k)
	}
	return c.vote(c.ref, len(c.labels), k, true), nil
}

// vote runs the chunked similarity products and the per-query selection. When self is
// true, query row i is reference row i and is skipped. The queries of a chunk are
// selected side by side in chunks of voteRows (internal/base/par), each with its own
// workspace; every query's outcome depends on its row alone.
func (c *Classifier) vote(u *mat.Dense, q, k int, self bool) Predictions {
	n := len(c.labels)
	kk := min(k, n)
	if self {
		kk = min(k, n-1)
	}
	p := Predictions{Label: make([]int, q), Share: make([]float64, q)}
	if q == 0 {
		return p
	}
	sims := mat.NewDense(min(chunk, q), n, nil)
	ws := make([]voter, par.Workers(min(chunk, q), voteRows))
	for w := range ws {
		ws[w] = voter{best: make([]int, 0, kk+1), counts: make([]int, c.classes), first: make([]int, c.classes)}
	}
	for lo := 0; lo < q; lo += chunk {
		hi := min(lo+chunk, q)
		s := sims.Slice(0, hi-lo, 0, n).(*mat.Dense)
		s.Mul(u.Slice(lo, hi, 0, u.RawMatrix().Cols), c.ref.T())
		par.For(hi-lo, voteRows, len(ws), func(w, a, b int) {
			for i := lo + a; i < lo+b; i++ {
				p.Label[i], p.Share[i] = ws[w].vote(c.labels, s.RawRowView(i-lo), i, kk, self)
			}
		})
	}
	return p
}

// voteRows is the query count of one chunk of the selection (a 64th of a product chunk).
const voteRows = 4

// voter is one goroutine's selection workspace: the best neighbours so far and the
// per-class counts and best ranks.
type voter struct {
	best, counts, first []int
}

// vote selects the kk most similar reference rows of query i (row: its similarities,
// skipping reference row i when self) and returns the majority class and its share.
func (v *voter) vote(labels []int, row []float64, i, kk int, self bool) (int, float64) {
	best := v.best[:0]
	// Once best is full, a candidate must beat its last value (insertTop's own test,
	// kept in thr so most candidates cost one comparison).
	full, thr := false, 0.0
	for j, x := range row {
		if (full && x <= thr) || (self && j == i) {
			continue
		}
		best = insertTop(best, row, j, x, kk)
		if len(best) == kk && kk > 0 {
			full, thr = true, row[best[kk-1]]
		}
	}
	v.best = best
	counts, first := v.counts, v.first
	for cl := range counts {
		counts[cl] = 0
		first[cl] = -1
	}
	for rank, j := range best {
		l := labels[j]
		counts[l]++
		if first[l] < 0 {
			first[l] = rank
		}
	}
	lab := -1
	for cl, cnt := range counts {
		if cnt == 0 {
			continue
		}
		if lab < 0 || cnt > counts[lab] || (cnt == counts[lab] && first[cl] < first[lab]) {
			lab = cl
		}
	}
	if len(best) == 0 {
		return lab, 0
	}
	return lab, float64(counts[lab]) / float64(len(best))
}

// insertTop keeps best as the indices of the (at most kk) largest values of row seen so
// far, sorted by value descending and index ascending; j is the new candidate with value v.
// Candidates arrive in increasing j, so an equal value never displaces an earlier one.
func insertTop(best []int, row []float64, j int, v float64, kk int) []int {
	if kk == 0 {
		return best
	}
	if len(best) == kk {
		if v <= row[best[kk-1]] {
			return best
		}
		best = best[:kk-1]
	}
	pos := len(best)
	for pos > 0 && row[best[pos-1]] < v {
		pos--
	}
	best = append(best, 0)
	copy(best[pos+1:], best[pos:])
	best[pos] = j
	return best
}

// Accuracy returns the fraction of pred equal to truth.
func Accuracy(pred, truth []int) float64 {
	if len(pred) != len(truth) {
		panic(fmt.Sprintf("knn: %d predictions for %d labels", len(pred), len(truth)))
	}
	if len(pred) == 0 {
		return math.NaN()
	}
	hit := 0
	for i := range pred {
		if pred[i] == truth[i] {
			hit++
		}
	}
	return float64(hit) / float64(len(pred))
}

// BalancedAccuracy returns the mean over the classes present in truth of the per-class
// recall: the accuracy of a classifier that weights every class equally, which is what a
// majority-class guess cannot inflate on unbalanced data such as Adult.
func BalancedAccuracy(pred, truth []int) float64 {
	if len(pred) != len(truth) {
		panic(fmt.Sprintf("knn: %d predictions for %d labels", len(pred), len(truth)))
	}
	hit := map[int]int{}
	tot := map[int]int{}
	for i, t := range truth {
		tot[t]++
		if pred[i] == t {
			hit[t]++
		}
	}
	if len(tot) == 0 {
		return math.NaN()
	}
	// Sum in class order: map iteration order is random, and a float sum in a varying
	// order changes in the last bits from run to run (fits must be reproducible).
	classes := make([]int, 0, len(tot))
	for cl := range tot {
		classes = append(classes, cl)
	}
	slices.Sort(classes)
	var sum float64
	for _, cl := range classes {
		sum += float64(hit[cl]) / float64(tot[cl])
	}
	return sum / float64(len(tot))
}

// Confidence returns the mean of p.Share: the k-NN confidence conf(·) of the deletion audit
// (paper appendix "Identifiability") when p came from Predict with k = ConfidenceK.
func Confidence(p Predictions) float64 {
	if len(p.Share) == 0 {
		return math.NaN()
	}
	var s float64
	for _, v := range p.Share {
		s += v
	}
	return s / float64(len(p.Share))
}
