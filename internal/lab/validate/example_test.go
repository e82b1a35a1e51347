package validate_test

import (
	"fmt"

	"github.com/cairnhq/cairn/internal/lab/validate"
)

// A ranking whose scores are the true additive effects of the points has LDS 1: the
// prediction Σ_{i∈S} s_i orders the halves as the measured target does.
func ExampleScore() {
	scores := []float64{3, -1, 0.5, 2, -2, 1}
	halves := validate.Halves(1, len(scores), 8)
	pred := make([]float64, len(halves))
	validate.PredictTo(pred, scores, halves)
	target := make([]float64, len(halves))
	for j, h := range halves {
		for _, i := range h {
			target[j] += 10 * scores[i] // any increasing function of the true sum
		}
	}
	l := validate.Score([][]float64{pred}, [][]float64{target})
	fmt.Printf("LDS %.2f over %d query\n", l.Mean, l.Queries)
	// Output: LDS 1.00 over 1 query
}
