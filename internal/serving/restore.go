package serving

import (
	"encoding/json"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
)

// Restored is a stored model version decoded for serving: its fit metadata, Ã, and
// per landmark in model row order its view ('A' or 'B'), its augmented input (xs, M×D)
// and ω in raw kernel units. A landmark whose point is no longer stored is Missing: its
// row of xs stays zero and it is masked from the start.
type Restored struct {
	Meta    Meta
	A       *mat.Dense
	Omega   []float64
	Views   []byte
	Xs      []float64
	Missing []bool
}

// View is landmark l's view index (0 for 'A', 1 for 'B').
func (r *Restored) View(l int) int {
	if r.Views[l] == 'B' {
		return 1
	}
	return 0
}

// Restore decodes the stored model m and rebuilds its landmarks from the points
// stored now (point returns a stored point's raw input): the first meta.ViewA rows are
// view A's pivots, the rest view B's; a landmark's input is the augmented view of its
// stored point; ω_ℓ = kernel_scale·‖Ã_ℓ − Ã_{0,ℓ}‖₂. A landmark whose id point does not
// know is missing, and so is one whose stored input is not the one it was fitted on
// (meta.Inputs, when the model records them: the point was replaced since). This is
// the one rule for masks rebuilt from storage, used by a restart
// (refit.Fitter.Restore) and by exports of stored versions (ExportStored): a deletion
// removes the point from the points bucket in the same transaction that writes its
// pending deletion record, so "not stored" covers deletions audited and pending alike.
func Restore(f *pipeline.Features, m storage.Model, point func(id string) ([]float64, bool)) (*Restored, error) {
	var meta Meta
	if err := json.Unmarshal(m.Meta, &meta); err != nil {
		return nil, fmt.Errorf("%w: model %d Meta: %w", ErrModel, m.Version, err)
	}
	mm := len(m.Landmarks)
	if m.A.Rows != mm || m.A0.Rows != mm || m.A0.Cols != m.A.Cols || m.B.Rows != 1 || m.B.Cols != m.A.Cols ||
		meta.ViewA < 0 || meta.ViewA > mm || !(meta.KernelScale > 0) {
		return nil, fmt.Errorf("%w: model %d has inconsistent shapes", ErrModel, m.Version)
	}
	a := mat.NewDense(m.A.Rows, m.A.Cols, m.A.Data)
	a0 := mat.NewDense(m.A0.Rows, m.A0.Cols, m.A0.Data)
	dim := f.InputDim()
	r := &Restored{Meta: meta, A: a, Omega: Scaled(fit.Omega(a, a0), meta.KernelScale),
		Views: make([]byte, mm), Xs: make([]float64, mm*dim), Missing: make([]bool, mm)}
	for l, id := range m.Landmarks {
		v := 0
		r.Views[l] = 'A'
		if l >= meta.ViewA {
			v, r.Views[l] = 1, 'B'
		}
		x, ok := point(id)
		if !ok || (len(meta.Inputs) == mm && InputHash(x) != meta.Inputs[l]) {
			r.Missing[l] = true
			continue
		}
		if len(x) != dim {
			return nil, fmt.Errorf("%w: model %d landmark %q has %d inputs, want %d", ErrModel, m.Version, id, len(x), dim)
		}
		f.ViewTo(r.Xs[l*dim:(l+1)*dim], x, id, v)
	}
	return r, nil
}
