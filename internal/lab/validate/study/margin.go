package study

import (
	"fmt"
	"math"
	"sync"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/serving"
	"gonum.org/v1/gonum/mat"
)

// marginScores adds the linearized-margin study rows (validate.MarginRows) to sc: on the
// landmark points (their views' inputs, fm.Info.LandmarkX, summed per point) and on every
// stored point's plain input; and the served gradient ranking (validate.Gradient, the
// same scores as graddot_all), whose top-K it checks against model's answers.
func (v *validation) marginScores(b entk.Backbone, fm *offline.Model, model *serving.Model, sc *scores) error {
	nq, n, dim := v.qs.N, v.all.Set.N, v.all.Set.D
	qx := make([][]float64, nq)
	for t := range qx {
		qx[t] = v.qs.Row(t)
	}
	vt := marginGradients(b, qx, v.all.Set.Classes)
	lab := v.all.Set.Labels
	lx := make([][]float64, len(sc.point))
	ly := make([]int, len(sc.point))
	for l, i := range sc.point {
		lx[l], ly[l] = fm.Info.LandmarkX[l*dim:(l+1)*dim], lab[i]
	}
	px := make([][]float64, n)
	for i := range px {
		px[i] = v.all.Set.Row(i)
	}
	lm, _ := pointMarginScores(b, vt, lx, ly, nil)
	rows := mat.NewDense(n, b.NumParams(), nil)
	all, norms := pointMarginScores(b, vt, px, lab, rows)
	for g, r := range [][2]string{{validate.GradDot, validate.GradDotAll}, {validate.LabelNTK, validate.LabelNTKAll}} {
		sc.points[r[0]] = make([][]float64, nq)
		for t := range nq {
			sc.points[r[0]][t] = make([]float64, n)
			validate.PointSumTo(sc.points[r[0]][t], lm[g][t], sc.point)
		}
		sc.points[r[1]] = all[g]
	}
	cos := make([][]float64, nq)
	for t := range cos {
		cos[t] = make([]float64, n)
		for i, x := range all[0][t] {
			if norms[i] > 0 {
				cos[t][i] = x / norms[i]
			}
		}
	}
	sc.points[validate.GradDotAllCosine] = cos
	if err := influenceScores(sc, rows, all[0]); err != nil {
		return err
	}
	// The served gradient rankings are graddot_all and graddot_all_cosine: scored and
	// checked like every served ranking (their rows are the served model's, in
	// stored-point order).
	sc.points[validate.Gradient] = all[0]
	sc.points[validate.GradientCosine] = cos
	if model.Grad == nil {
		return fmt.Errorf("served model has no gradient rows: %w", model.GradErr)
	}
	k := min(TopK, n-1)
	var w serving.Workspace
	for _, name := range []string{validate.Gradient, validate.GradientCosine} {
		agree := 0
		for t := range nq {
			ok, err := sameTopK(model, &w, qx[t], sc.points[name][t], k, name)
			if err != nil {
				return fmt.Errorf("query %d: %w", t, err)
			}
			if ok {
				agree++
			}
		}
		sc.agreement[name] = float64(agree) / float64(nq)
	}
	return nil
}

// marginGradients returns J_tᵀ u_t for each query input x[t], u_t its predicted-class
// margin's cotangent (validate.MarginCotangentTo over the first classes outputs).
func marginGradients(b entk.Backbone, x [][]float64, classes int) [][]float64 {
	d := b.OutDim()
	classes = min(classes, d)
	ws := b.NewWorkspace()
	out, u := make([]float64, d), make([]float64, d)
	vt := make([][]float64, len(x))
	for t, xt := range x {
		b.Forward(out, xt, ws)
		validate.MarginCotangentTo(u, out, classes)
		vt[t] = make([]float64, b.NumParams())
		b.Backward(vt[t], u, ws)
	}
	return vt
}

// influenceScores adds the influence rows (validate.GradDotAllIF, GradDotAllIFDamped) to sc
// from the gradient rows and their scores a[t][i].
func influenceScores(sc *scores, rows *mat.Dense, a [][]float64) error {
	f := validate.NewInfluence(rows)
	for _, r := range []struct {
		name string
		rel  float64
	}{{validate.GradDotAllIF, validate.InfluenceRidge}, {validate.GradDotAllIFDamped, validate.InfluenceRidgeDamped}} {
		dst := make([][]float64, len(a))
		for t := range dst {
			dst[t] = make([]float64, len(a[t]))
		}
		if err := f.ScoresTo(dst, a, r.rel); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		sc.points[r.name] = dst
	}
	return nil
}

// pointMarginScores returns s[g][t][i] = ⟨vt[t], J_iᵀ g_i⟩ for the points x[i] of labels
// y[i], with g_i their cotangents (validate.PointCotangentTo) with grad (g = 0) and
// without (g = 1), and each point's ‖J_iᵀ g_i‖ with grad (its row J_iᵀ g_i in row i of
// rows unless rows is nil): one forward and two backward
// passes a point, on two goroutines (the points split by parity; each score is one
// point's own, so the split changes no bit).
func pointMarginScores(b entk.Backbone, vt, x [][]float64, y []int, rows *mat.Dense) ([2][][]float64, []float64) {
	if len(x) != len(y) {
		panic(fmt.Sprintf("study: pointMarginScores: %d points, %d labels", len(x), len(y)))
	}
	var s [2][][]float64
	for g := range s {
		s[g] = make([][]float64, len(vt))
		for t := range s[g] {
			s[g][t] = make([]float64, len(x))
		}
	}
	norms := make([]float64, len(x))
	const workers = 2
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := b.OutDim()
			ws := b.NewWorkspace()
			out, cot, w := make([]float64, d), make([]float64, d), make([]float64, b.NumParams())
			for i := wk; i < len(x); i += workers {
				b.Forward(out, x[i], ws)
				for g, grad := range []bool{true, false} {
					validate.PointCotangentTo(cot, out, y[i], grad)
					b.Backward(w, cot, ws)
					if grad {
						norms[i] = math.Sqrt(vec.Dot(w, w))
						if rows != nil {
							rows.SetRow(i, w)
						}
					}
					for t, v := range vt {
						s[g][t][i] = vec.Dot(v, w)
					}
				}
			}
		}()
	}
	wg.Wait()
	return s, norms
}
