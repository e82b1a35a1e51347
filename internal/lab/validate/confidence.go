package validate

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/knn"
)

// CorrectConfidenceTo writes into dst[r] the fraction of query r's k cosine nearest
// reference rows that carry the query's own label labels[r] (its correct-class k-NN
// confidence; with k = knn.ConfidenceK the per-query, correct-class form of the deletion
// audit's conf(·), paper appendix D). Neighbours are internal/base/knn's, with its tie rule: for
// each class c of the queries, knn ranks the reference rows under the binary labels
// [refLabels[i] = c], and the count of 1s among the min(k, rows) nearest is the count of
// class c. queries is nq×c (row r query r), ref n×c; neither is modified. It returns an
// error wrapping ErrEmpty for an empty reference set.
func CorrectConfidenceTo(dst []float64, ref *mat.Dense, refLabels []int, queries *mat.Dense, labels []int, k int) error {
	nq, c := queries.Dims()
	n, rc := ref.Dims()
	if len(dst) != nq || len(labels) != nq || len(refLabels) != n || rc != c {
		panic(fmt.Sprintf("validate: CorrectConfidenceTo: dst %d, labels %d for %d×%d queries; ref %d×%d with %d labels",
			len(dst), len(labels), nq, c, n, rc, len(refLabels)))
	}
	if n == 0 {
		return fmt.Errorf("%w: no reference rows", ErrEmpty)
	}
	kk := min(k, n)
	classes := slices.Clone(labels)
	slices.Sort(classes)
	classes = slices.Compact(classes)
	bin := make([]int, n)
	for _, cl := range classes {
		for i, l := range refLabels {
			bin[i] = 0
			if l == cl {
				bin[i] = 1
			}
		}
		var rows []int
		for r, l := range labels {
			if l == cl {
				rows = append(rows, r)
			}
		}
		sub := mat.NewDense(len(rows), c, nil)
		for j, r := range rows {
			sub.SetRow(j, queries.RawRowView(r))
		}
		cf, err := knn.New(ref, bin)
		if err != nil {
			return err
		}
		p, err := cf.Predict(sub, kk)
		if err != nil {
			return err
		}
		for j, r := range rows {
			// Share is count(Label)/kk; recover the count exactly before dividing.
			cnt := math.Round(p.Share[j] * float64(kk))
			if p.Label[j] != 1 {
				cnt = float64(kk) - cnt
			}
			dst[r] = cnt / float64(kk)
		}
	}
	return nil
}
