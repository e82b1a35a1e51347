package daemon

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/certify"
)

// ExportedLandmark is one unmasked landmark of the served model: its point id, its view
// ("A" or "B"), the exact input vector its kernel term uses (the augmented view) and ω_ℓ
// in raw kernel units.
type ExportedLandmark struct {
	ID    string    `json:"id"`
	View  string    `json:"view"`
	X     []float64 `json:"x"`
	Omega float64   `json:"omega"`
}

// ModelExport is the served model as GET /model prints it: enough for a third party to
// recompute every score of an answer on this model version.
type ModelExport struct {
	Model         uint64             `json:"model"`
	ModelID       string             `json:"model_id"`
	Arch          string             `json:"arch"`
	Weights       string             `json:"weights"`
	WeightsSHA256 string             `json:"weights_sha256"`
	KernelScale   float64            `json:"kernel_scale"`
	VarianceModel string             `json:"variance_model"`
	Score         string             `json:"score"`
	Landmarks     []ExportedLandmark `json:"landmarks"`
}

// scoreFormula says in words how an answer's scores follow from the export.
const scoreFormula = "score(ℓ, t) = k(x_ℓ, x_t) · omega_ℓ, where k is the exact empirical NTK " +
	"k*(x, y) = tr(J_x J_yᵀ)/d of the backbone (arch, weights; J the Jacobian of the d outputs " +
	"with respect to all parameters) when variance_model is exact_kernel, and the evaluation " +
	"draw's sketched kernel K_{h,s} (entk.NewSketch(backbone, h, s, seed, \"eval\"), seed " +
	"revealed on cairn.status when the draw retires) otherwise; x_ℓ is the landmark's x " +
	"below; omega_ℓ = ‖Ã_ℓ − Ã_{0,ℓ}‖₂ in raw kernel units (kernel_scale · the fit's units). " +
	"The top-K are the K largest scores over the landmarks listed (deleted points are never listed)."

// ErrNoModelExport is returned by Export before the first model.
var ErrNoModelExport = errors.New("daemon: no model to export")

// Export returns the served model (masked landmarks left out) as GET /model prints it.
func (d *Daemon) Export() (ModelExport, error) {
	s := d.serving.Load()
	if s == nil {
		return ModelExport{}, ErrNoModelExport
	}
	src := d.feat.Source()
	e := ModelExport{Model: s.version, ModelID: s.id, Arch: s.backbone.Arch(), Weights: src.Weights,
		WeightsSHA256: src.SHA256, KernelScale: s.scale, Score: scoreFormula,
		VarianceModel: certify.VarianceConservative, Landmarks: make([]ExportedLandmark, 0, len(s.active))}
	if s.exact != nil {
		e.VarianceModel = certify.VarianceExactKernel
	}
	in := s.backbone.InDim()
	for _, l := range s.active {
		e.Landmarks = append(e.Landmarks, ExportedLandmark{ID: s.landmarkIDs[l], View: string(s.views[l]),
			X: append([]float64(nil), s.landmarkX[l*in:(l+1)*in]...), Omega: s.omega[l]})
	}
	if len(e.Landmarks) == 0 {
		return e, fmt.Errorf("%w: every landmark is masked", ErrNoModelExport)
	}
	return e, nil
}
