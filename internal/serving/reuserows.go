package serving

import (
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// Known are exact rows of a backbone with the landmark inputs they are of (M×D,
// row-major, in the rows' order): rows NewExactRowsReusing may take instead of
// computing them.
type Known struct {
	Rows *ExactRows
	X    []float64
}

// NewExactRowsReusing is NewExactRows (the same representation for m and budget, the
// same bits) that takes each row whose landmark input equals, bit for bit, an input of
// known rows held in memory in that representation, and computes only the others: a
// row is a function of its input alone (entk.ExactBatch32To, entk.Factored.Batch32To).
// When known rows are of xs itself, in that representation, they are returned as they
// are, their Gram matrix included. known must hold rows of b.
func NewExactRowsReusing(b entk.Backbone, xs []float64, m int, budget int64, known ...Known) *ExactRows {
	l, ok := layoutOf(b, m, budget)
	if !ok {
		return nil
	}
	in := b.InDim()
	src := map[string][]rowRef{}
	for _, k := range known {
		if !l.holds(k.Rows) || len(k.X) != len(k.Rows.diag)*in {
			continue
		}
		if len(k.X) == len(xs) && vec.SameBits(k.X, xs) {
			return k.Rows
		}
		for j := range k.Rows.diag {
			h := InputHash(k.X[j*in : (j+1)*in])
			src[h] = append(src[h], rowRef{k: k, j: j})
		}
	}
	r := l.alloc(m)
	var miss []int
	for i := range m {
		x := xs[i*in : (i+1)*in]
		ref, ok := findRow(src[InputHash(x)], x, in)
		if !ok {
			miss = append(miss, i)
			continue
		}
		copy(r.lf[i*r.dim:(i+1)*r.dim], ref.k.Rows.lf[ref.j*r.dim:(ref.j+1)*r.dim])
		r.diag[i] = ref.k.Rows.diag[ref.j]
	}
	if len(miss) == m {
		r.computeTo(r.lf, r.diag, b, xs, m)
		return r
	}
	mx := make([]float64, len(miss)*in)
	for t, i := range miss {
		copy(mx[t*in:(t+1)*in], xs[i*in:(i+1)*in])
	}
	lf, diag := make([]float32, len(miss)*r.dim), make([]float64, len(miss))
	r.computeTo(lf, diag, b, mx, len(miss))
	for t, i := range miss {
		copy(r.lf[i*r.dim:(i+1)*r.dim], lf[t*r.dim:(t+1)*r.dim])
		r.diag[i] = diag[t]
	}
	return r
}

// rowRef is row j of known rows.
type rowRef struct {
	k Known
	j int
}

// findRow returns the candidate whose input is x, bit for bit.
func findRow(cands []rowRef, x []float64, in int) (rowRef, bool) {
	for _, c := range cands {
		if vec.SameBits(c.k.X[c.j*in:(c.j+1)*in], x) {
			return c, true
		}
	}
	return rowRef{}, false
}
