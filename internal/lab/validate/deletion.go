package validate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/knn"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// Deletion is the per-query deletion test of a kernel encoder z(x) = K(x)·A + b (paper
// appendix D, eq. app-encoder): removing a set S of landmark rows drops their terms from
// every latent, reference and query alike, a rank-|S| update
//
//	Z_S = Z − K[:, S]·A[S, :]
//
// and the effect on query r is the drop of its correct-class confidence
// (CorrectConfidenceTo with k = knn.ConfidenceK) against the labelled reference latents.
type Deletion struct {
	enc                  certify.Encoder
	kRef, kQuery         *mat.Dense
	zRef, zQuery         *mat.Dense
	refLabels, qryLabels []int
	base                 []float64
}

// NewDeletion embeds the reference rows kRef (n×M) and query rows kQuery (nq×M), both in
// the encoder's kernel units, and measures every query's confidence with nothing removed.
// It keeps references to its arguments, which the caller must not change.
func NewDeletion(enc certify.Encoder, kRef *mat.Dense, refLabels []int, kQuery *mat.Dense, labels []int) (*Deletion, error) {
	d := &Deletion{enc: enc, kRef: kRef, kQuery: kQuery, refLabels: refLabels, qryLabels: labels}
	_, c := enc.A.Dims()
	n, _ := kRef.Dims()
	nq, _ := kQuery.Dims()
	d.zRef, d.zQuery = mat.NewDense(n, c, nil), mat.NewDense(nq, c, nil)
	enc.EmbedTo(d.zRef, kRef, nil)
	enc.EmbedTo(d.zQuery, kQuery, nil)
	d.base = make([]float64, nq)
	if err := CorrectConfidenceTo(d.base, d.zRef, refLabels, d.zQuery, labels, knn.ConfidenceK); err != nil {
		return nil, err
	}
	return d, nil
}

// Base returns query r's correct-class confidence with nothing removed.
func (d *Deletion) Base(r int) float64 { return d.base[r] }

// DropsTo writes, for each query qs[j], the drop base − confidence after removing the
// landmark rows of set (each row once; an empty set drops nothing) into dst[j].
func (d *Deletion) DropsTo(dst []float64, qs []int, set []int) error {
	if len(dst) != len(qs) {
		panic(fmt.Sprintf("validate: Deletion.DropsTo: dst %d for %d queries", len(dst), len(qs)))
	}
	_, c := d.zRef.Dims()
	zr := mat.DenseCopyOf(d.zRef)
	zq := mat.NewDense(len(qs), c, nil)
	labels := make([]int, len(qs))
	for j, r := range qs {
		zq.SetRow(j, d.zQuery.RawRowView(r))
		labels[j] = d.qryLabels[r]
	}
	for _, l := range set {
		a := d.enc.A.RawRowView(l)
		subtract(zr, d.kRef, l, a, nil)
		subtract(zq, d.kQuery, l, a, qs)
	}
	if err := CorrectConfidenceTo(dst, zr, d.refLabels, zq, labels, knn.ConfidenceK); err != nil {
		return err
	}
	for j, r := range qs {
		dst[j] = d.base[r] - dst[j]
	}
	return nil
}

// subtract removes landmark l's term from the latents z: z[j,:] −= k[rows[j], l]·a (rows
// nil: row j of k).
func subtract(z, k *mat.Dense, l int, a []float64, rows []int) {
	nr, _ := z.Dims()
	for j := range nr {
		r := j
		if rows != nil {
			r = rows[j]
		}
		kv := k.At(r, l)
		row := z.RawRowView(j)
		for c, v := range a {
			row[c] -= kv * v
		}
	}
}

// MidrankPercentile is the percentile of drop among random with ties counted half:
// (#{random < drop} + ½·#{random = drop})/N. It is certify.Percentile's π with a tie
// correction, so a ranking whose removals do no more than random ones scores ½ in
// expectation even when most drops are equal (a single landmark's removal often moves
// no neighbour of the query, and the confidence is a count over 50). It returns NaN for
// no random drops or a NaN drop.
func MidrankPercentile(drop float64, random []float64) float64 {
	if len(random) == 0 || math.IsNaN(drop) {
		return math.NaN()
	}
	var c float64
	for _, x := range random {
		switch {
		case x < drop:
			c++
		case x == drop:
			c += 0.5
		}
	}
	return c / float64(len(random))
}

// DeletionStream names the stream of the random deletion sets of size K:
// rng.Sub(DeletionStream, K) under the seed.
const DeletionStream = "lab/validate/deletion"

// RandomSets returns count sets of size distinct entries of candidates, each drawn
// uniformly without replacement (the first size entries of a permutation) from the
// stream rng.Sub(DeletionStream, size) of seed; the same sets serve every ranking and
// query (paper appendix D shares them). It returns an error wrapping ErrEmpty when there
// are fewer candidates than size.
func RandomSets(seed uint64, candidates []int, size, count int) ([][]int, error) {
	if size < 1 || count < 0 {
		panic(fmt.Sprintf("validate: RandomSets(size = %d, count = %d)", size, count))
	}
	if len(candidates) < size {
		return nil, fmt.Errorf("%w: %d candidates for sets of %d", ErrEmpty, len(candidates), size)
	}
	r := rng.New(seed, rng.Sub(DeletionStream, size))
	out := make([][]int, count)
	for t := range out {
		perm := r.Perm(len(candidates))
		s := make([]int, size)
		for i := range s {
			s[i] = candidates[perm[i]]
		}
		out[t] = s
	}
	return out, nil
}

// TopCandidates returns the k candidates of largest score (scores indexed by candidate
// value), highest first, ties to the earlier candidate (certify.TopKIndices' rule).
func TopCandidates(scores []float64, candidates []int, k int) []int {
	cs := make([]float64, len(candidates))
	for j, i := range candidates {
		cs[j] = scores[i]
	}
	top := certify.TopKIndices(cs, k)
	out := make([]int, len(top))
	for j, c := range top {
		out[j] = candidates[c]
	}
	return out
}
