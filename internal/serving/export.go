package serving

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/weights"
)

// ExportedLandmark is one unmasked landmark of a model Version: its point id, its view
// ("A" or "B"), the exact input vector its kernel term uses (the augmented view) and ω_ℓ
// in raw kernel units.
type ExportedLandmark struct {
	ID    string    `json:"id"`
	View  string    `json:"view"`
	X     []float64 `json:"x"`
	Omega float64   `json:"omega"`
	// Coefficients is the landmark's row Ã_ℓ of the fitted encoder (fit's kernel units:
	// the latent is z(x) = bias + kernel_scale·Σ_ℓ k(x, x_ℓ)·Ã_ℓ), what a representer
	// answer needs besides x and the kernel.
	Coefficients []float64 `json:"coefficients,omitempty"`
}

// ModelExport is a model version as GET /model and `cairnctl model export` print it:
// enough for a third party to recompute every score of an answer on this version. Its
// JSON keys are a contract (the golden test in export_test.go).
type ModelExport struct {
	Model   uint64 `json:"model"`
	ModelID string `json:"model_id"`
	Arch    string `json:"arch"`
	// Weights names the backbone's parameters: "shipped:NAME" (embedded in the binary,
	// entk/weights), a file path, or "seeded:<seed>" for the untrained network;
	// WeightsSHA256 is the hex SHA-256 of the file's bytes, or for a seeded network of
	// its parameters as float64 little-endian.
	Weights       string             `json:"weights"`
	WeightsSHA256 string             `json:"weights_sha256"`
	KernelScale   float64            `json:"kernel_scale"`
	Score         string             `json:"score"`
	Landmarks     []ExportedLandmark `json:"landmarks"`
	// Bias is the encoder's b (see ExportedLandmark.Coefficients).
	Bias []float64 `json:"bias,omitempty"`
	// Coverage says which of the backbone's parameters the kernel is over: for an ONNX
	// backbone (arch "onnx:<SHA-256 of the file>") the tensors model.params selected,
	// for a built-in one every tensor (WithCoverage).
	Coverage *ExportCoverage `json:"coverage,omitempty"`
}

// ExportCoverage is the parameter coverage of an export's backbone (onnx.Coverage): the
// parameters in the kernel against the model's, their share, every float tensor of the
// model, and the loader's warnings about the export.
type ExportCoverage struct {
	ParamsInKernel int              `json:"params_in_kernel"`
	ParamsTotal    int              `json:"params_total"`
	Share          float64          `json:"share"`
	Tensors        []ExportedTensor `json:"tensors"`
	Warnings       []string         `json:"warnings,omitempty"`
}

// ExportedTensor is one float tensor of the backbone: its name (state_dict key or ONNX
// initializer), shape and size, whether it is a parameter (running statistics and
// constants are not), and whether it is in the kernel, with its offset in the kernel's
// parameter vector (else -1).
type ExportedTensor struct {
	Name      string `json:"name"`
	Shape     []int  `json:"shape"`
	Size      int    `json:"size"`
	Parameter bool   `json:"parameter"`
	InKernel  bool   `json:"in_kernel"`
	Offset    int    `json:"offset"`
}

// CoverageOf is the export form of c.
func CoverageOf(c *onnx.Coverage) *ExportCoverage {
	out := &ExportCoverage{ParamsInKernel: c.KernelParams, ParamsTotal: c.ModelParams, Share: c.Share(), Tensors: []ExportedTensor{}}
	for _, t := range c.Tensors {
		shape := append([]int{}, t.Shape...)
		out.Tensors = append(out.Tensors, ExportedTensor{Name: t.Name, Shape: shape, Size: t.Size, Parameter: t.Parameter, InKernel: t.InKernel, Offset: t.Offset})
	}
	for _, w := range c.Warnings {
		out.Warnings = append(out.Warnings, w.String())
	}
	return out
}

// WithCoverage adds the backbone's parameter coverage to e.
func (e *ModelExport) WithCoverage(c *onnx.Coverage) { e.Coverage = CoverageOf(c) }

// WithEncoder adds the fitted encoder to e: each listed landmark's row of a (M×k, model
// row order, masked rows skipped as NewExport skips them) and the bias b, so that a
// representer answer is recomputable from the export. The rows are copied.
func (e *ModelExport) WithEncoder(a *mat.Dense, b []float64, masked []bool) {
	j := 0
	for l, m := range masked {
		if m {
			continue
		}
		e.Landmarks[j].Coefficients = append([]float64(nil), a.RawRowView(l)...)
		j++
	}
	e.Bias = append([]float64(nil), b...)
}

// scoreFormula says in words how an answer's scores follow from the export (serving.go
// answer and refineCrossing; refit.Fitter.Fit for ω and kernel_scale).
const scoreFormula = "an answer's score names its ranking: entk: score(ℓ, t) = k(x_ℓ, x_t); " +
	"displacement: score(ℓ, t) = k(x_ℓ, x_t) · omega_ℓ; representer: score(ℓ, t) = k(x_ℓ, x_t) · " +
	"kernel_scale · <coefficients_ℓ, z/|z|>, z = bias + kernel_scale · Σ_ℓ k(x_ℓ, x_t) · coefficients_ℓ. " +
	"Over the landmarks listed, x_ℓ being the " +
	"landmark's x and x_t the query's input (a query by id uses the stored point's raw input). " +
	"k is the kernel named by the answer's variance_model: exact_kernel: the exact empirical NTK " +
	"k*(x, y) = tr(J_x J_yᵀ)/d of the backbone (arch, weights; J_x the d×P Jacobian of the d outputs " +
	"with respect to the P parameters in the kernel: every parameter, or those coverage lists in_kernel, in its order), evaluated in float32 rows, so a score is within its radius " +
	"(the rounding bound) of the float64 value; conservative: the evaluation draw's sketched kernel " +
	"K(x, y) = <ψ(x), ψ(y)>, ψ the features of entk.NewSketch(backbone, h, s, seed, \"eval\") with h, s " +
	"from the answer's budget and seed the one whose SHA-256 (8 big-endian bytes) is the answer's " +
	"seed_hash, published on cairn.status (kind eval_draw) when the draw retires; when such an answer " +
	"is not certified, up to query.exact_rows_cap landmarks whose intervals cross the cut use k* " +
	"instead, with the rounding bound as radius. omega_ℓ = kernel_scale · ‖Ã_ℓ − Ã_{0,ℓ}‖₂, the " +
	"displacement of the landmark's coefficient row from its initialization, in raw kernel units " +
	"(the fit saw every kernel block multiplied by kernel_scale). The top-K are the K largest scores; " +
	"masked landmarks (points deleted since the fit) are not listed and never scored."

// NewExport builds the export of one model version from its landmarks in model row order
// (ids, views, M×D inputs xs, ω in raw kernel units), leaving out the masked ones. It is
// the one constructor behind GET /model and cairnctl model export, for the serving model
// and for stored versions alike. The inputs are copied.
func NewExport(version uint64, id, arch string, src weights.Source, scale float64,
	ids []string, views []byte, xs []float64, masked []bool, omega []float64) (ModelExport, error) {
	e := ModelExport{Model: version, ModelID: id, Arch: arch, Weights: src.Weights, WeightsSHA256: src.SHA256,
		KernelScale: scale, Score: scoreFormula, Landmarks: []ExportedLandmark{}}
	if len(ids) == 0 {
		return e, fmt.Errorf("%w: model %d has no landmarks", ErrNoModelExport, version)
	}
	in := len(xs) / len(ids)
	for l, lid := range ids {
		if masked[l] {
			continue
		}
		e.Landmarks = append(e.Landmarks, ExportedLandmark{ID: lid, View: string(views[l]),
			X: append([]float64(nil), xs[l*in:(l+1)*in]...), Omega: omega[l]})
	}
	if len(e.Landmarks) == 0 {
		return e, fmt.Errorf("%w: every landmark of model %d is masked", ErrNoModelExport, version)
	}
	return e, nil
}
