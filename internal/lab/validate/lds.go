package validate

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// HalfStream names the stream of half j: rng.Sub(HalfStream, j) under the seed.
const HalfStream = "lab/validate/half"

// Halves returns count subsets of {0, …, n−1} of n/2 indices each (n/2 rounded down), in
// increasing order: half j is the first n/2 entries of a permutation drawn from the stream
// rng.Sub(HalfStream, j) of seed, so it depends on (seed, n, j) only.
func Halves(seed uint64, n, count int) [][]int {
	if n < 0 || count < 0 {
		panic(fmt.Sprintf("validate: Halves(n = %d, count = %d)", n, count))
	}
	out := make([][]int, count)
	for j := range out {
		h := rng.New(seed, rng.Sub(HalfStream, j)).Perm(n)[:n/2]
		slices.Sort(h)
		out[j] = h
	}
	return out
}

// PredictTo writes the linear datamodel's predictions dst[j] = Σ_{i∈halves[j]} scores[i]
// (len(dst) = len(halves)). Indices out of range panic.
func PredictTo(dst, scores []float64, halves [][]int) {
	if len(dst) != len(halves) {
		panic(fmt.Sprintf("validate: PredictTo: %d predictions for %d halves", len(dst), len(halves)))
	}
	for j, h := range halves {
		var s float64
		for _, i := range h {
			s += scores[i]
		}
		dst[j] = s
	}
}

// Spearman returns the Spearman rank correlation of x and y: the Pearson correlation of
// their ranks, tied values sharing their average rank (RanksTo). It is NaN when len < 2 or
// when either has a single distinct value (no ranking to correlate). Lengths must match.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) {
		panic(fmt.Sprintf("validate: Spearman: lengths %d and %d", len(x), len(y)))
	}
	if len(x) < 2 {
		return math.NaN()
	}
	rx, ry := make([]float64, len(x)), make([]float64, len(y))
	RanksTo(rx, x)
	RanksTo(ry, y)
	return pearson(rx, ry)
}

// RanksTo writes the rank of each x[i] among x into dst, from 1, ties given the mean of
// the ranks they span ("fractional ranking"). x must hold no NaN.
func RanksTo(dst, x []float64) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("validate: RanksTo: dst %d for %d values", len(dst), len(x)))
	}
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(x[a], x[b]) })
	for lo := 0; lo < len(idx); {
		hi := lo + 1
		for hi < len(idx) && x[idx[hi]] == x[idx[lo]] {
			hi++
		}
		r := float64(lo+hi+1) / 2 // mean of the ranks lo+1 … hi
		for _, i := range idx[lo:hi] {
			dst[i] = r
		}
		lo = hi
	}
}

// pearson is the Pearson correlation of x and y, NaN when either has zero variance.
func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// LDS is a ranking's linear datamodeling score over queries.
type LDS struct {
	// Mean is the mean over the defined queries of the per-query Spearman correlation,
	// SE its standard error (sample standard deviation / √queries; NaN with fewer than
	// two). Both are NaN when no query is defined.
	Mean, SE float64
	// Queries is the number of queries whose correlation is defined; Undefined those left
	// out (a constant prediction or target across the halves).
	Queries, Undefined int
	// PerQuery is each query's correlation (NaN where undefined).
	PerQuery []float64
}

// Score is the LDS of predictions pred[t][j] against targets target[t][j] (query t, half
// j): LDS(t) = Spearman(pred[t], target[t]), averaged over the queries where it is
// defined.
func Score(pred, target [][]float64) LDS {
	if len(pred) != len(target) {
		panic(fmt.Sprintf("validate: Score: %d prediction rows for %d target rows", len(pred), len(target)))
	}
	l := LDS{PerQuery: make([]float64, len(pred))}
	var def []float64
	for t := range pred {
		r := Spearman(pred[t], target[t])
		l.PerQuery[t] = r
		if math.IsNaN(r) {
			l.Undefined++
			continue
		}
		def = append(def, r)
	}
	l.Queries = len(def)
	l.Mean, l.SE = MeanSE(def)
	return l
}

// MeanSE returns the mean of x and its standard error s/√n (s the sample standard
// deviation): NaN, NaN for no values and mean, NaN for one.
func MeanSE(x []float64) (mean, se float64) {
	n := float64(len(x))
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, v := range x {
		mean += v
	}
	mean /= n
	if len(x) < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss/(n-1)) / math.Sqrt(n)
}

// Median returns the median of x (the mean of the two middle values for an even count),
// NaN for none. x is not modified.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
