package serving

import (
	"sync"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// answerGradientBatch answers the queries idx of a batch, all on a gradient ranking,
// as answerGradient answers each, bit for bit, but reads the gradient rows once for
// the batch instead of once per query: vec.Dots32BatchTo over each block of full rows
// (bit for bit Dots32To's), or factored rows query by query. The residual fractions
// read the landmarks' exact rows once too (batchResiduals), beside the scores.
func (s *Model) answerGradientBatch(w *Workspace, out []certify.Certificate, errs []error, xs [][]float64, ks []int, deltas []float64, rs []certify.Ranking, idx []int) {
	g := s.Grad
	m := len(s.gactive)
	if g == nil || m < 2 || len(idx) < 2 {
		for _, i := range idx {
			out[i], errs[i] = s.answerGradient(w, xs[i], ks[i], deltas[i], rs[i])
		}
		return
	}
	// The residuals read none of the scores' scratch (as in answerGradient): they run
	// beside them.
	var rf []*float64
	var wg sync.WaitGroup
	wg.Go(func() { rf = s.batchResiduals(w, xs, idx) })
	defer wg.Wait()
	n := len(g.IDs)
	vs, vns := make([][]float64, len(idx)), make([]float64, len(idx))
	for q, i := range idx {
		vns[q] = g.queryTo(w, xs[i])
		vs[q] = append([]float64(nil), w.gv...)
	}
	galls := make([]float64, len(idx)*n)
	g.batchScoresTo(galls, vs, w)
	wg.Wait()
	for q, i := range idx {
		c, err := s.gradCertify(w, galls[q*n:(q+1)*n], vns[q], min(ks[i], m-1), deltas[i], rs[i])
		if err == nil {
			c.ResidualFraction = rf[q]
		}
		out[i], errs[i] = c, err
	}
}

// batchScoresTo writes dst[q·n+i] = ⟨vs[q], r_i⟩ for every row i of g (n rows) and
// query row vs[q], bit for bit scoresTo's: full rows block by block on every core, each
// block read once for all of vs; factored rows query by query (w.gv is restored).
func (g *GradRows) batchScoresTo(dst []float64, vs [][]float64, w *Workspace) {
	n := len(g.IDs)
	if g.fac != nil {
		saved := w.gv
		for q, v := range vs {
			w.gv = v
			g.scoresTo(dst[q*n:(q+1)*n], w)
		}
		w.gv = saved
		return
	}
	nb := (n + gradBlock - 1) / gradBlock
	par.For(nb, 1, par.Workers(nb, 1), func(_, lo, hi int) {
		var lanes []float64
		tmp := make([]float64, len(vs)*gradBlock)
		for b := lo; b < hi; b++ {
			r0 := b * gradBlock
			nz := min(gradBlock, n-r0)
			lanes = vec.Dots32BatchTo(tmp, vs, g.blocks[b][:nz*g.dim], g.dim, g.dim, nz, lanes)
			for q := range vs {
				copy(dst[q*n+r0:q*n+r0+nz], tmp[q*nz:(q+1)*nz])
			}
		}
	})
}

// batchResiduals is landmarkResidual's fraction for each query idx of xs, bit for bit,
// with the exact rows read once for all of them (ExactRows.kernelRowsTo, as the exact
// path's batch); nil entries where an answer reports none.
func (s *Model) batchResiduals(w *Workspace, xs [][]float64, idx []int) []*float64 {
	out := make([]*float64, len(idx))
	if len(s.active) == 0 {
		return out
	}
	if s.Exact == nil {
		for q, i := range idx {
			var c certify.Certificate
			s.landmarkResidual(w, &c, xs[i])
			out[q] = c.ResidualFraction
		}
		return out
	}
	mm := s.exactRowsBatch(w, len(idx), func(q int) []float64 { return xs[idx[q]] })
	w.row = grow(w.row, len(s.active))
	for q := range idx {
		for j, l := range s.active {
			w.row[j] = w.fulls[q*mm+l]
		}
		var c certify.Certificate
		s.residualFraction(w, &c, w.ktts[q])
		out[q] = c.ResidualFraction
	}
	return out
}
