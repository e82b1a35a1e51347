package daemon

import (
	"fmt"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
)

// ExportedLandmark is one unmasked landmark of a model version: its point id, its view
// ("A" or "B"), the exact input vector its kernel term uses (the augmented view) and ω_ℓ
// in raw kernel units.
type ExportedLandmark struct {
	ID    string    `json:"id"`
	View  string    `json:"view"`
	X     []float64 `json:"x"`
	Omega float64   `json:"omega"`
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
}

// scoreFormula says in words how an answer's scores follow from the export (serving.go
// answer and refineCrossing; refit.go fitSnapshot for ω and kernel_scale).
const scoreFormula = "score(ℓ, t) = k(x_ℓ, x_t) · omega_ℓ over the landmarks listed, x_ℓ being the " +
	"landmark's x and x_t the query's input (a query by id uses the stored point's raw input). " +
	"k is the kernel named by the answer's variance_model: exact_kernel: the exact empirical NTK " +
	"k*(x, y) = tr(J_x J_yᵀ)/d of the backbone (arch, weights; J_x the d×P Jacobian of the d outputs " +
	"with respect to all P parameters), evaluated in float32 rows, so a score is within its radius " +
	"(the rounding bound) of the float64 value; conservative: the evaluation draw's sketched kernel " +
	"K(x, y) = <ψ(x), ψ(y)>, ψ the features of entk.NewSketch(backbone, h, s, seed, \"eval\") with h, s " +
	"from the answer's budget and seed the one whose SHA-256 (8 big-endian bytes) is the answer's " +
	"seed_hash, published on cairn.status (kind eval_draw) when the draw retires; when such an answer " +
	"is not certified, up to query.exact_rows_cap landmarks whose intervals cross the cut use k* " +
	"instead, with the rounding bound as radius. omega_ℓ = kernel_scale · ‖Ã_ℓ − Ã_{0,ℓ}‖₂, the " +
	"displacement of the landmark's coefficient row from its initialization, in raw kernel units " +
	"(the fit saw every kernel block multiplied by kernel_scale). The top-K are the K largest scores; " +
	"masked landmarks (points deleted since the fit) are not listed and never scored."

// exportOf builds the export of one model version from its landmarks in model row order
// (ids, views, M×D inputs xs, ω in raw kernel units), leaving out the masked ones. It is
// the one constructor behind GET /model and cairnctl model export, for the serving model
// and for stored versions alike. The inputs are copied.
func exportOf(version uint64, id, arch string, src weights.Source, scale float64,
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

// Export returns model version (0: the serving one) as GET /model prints it. The
// serving version comes from the serving value, with its current mask; another version
// is read from the store and masked as a restart would mask it (ExportStored). Errors:
// ErrNoModelExport before the first model, ErrUnknownModel for a version not stored.
func (d *Daemon) Export(version uint64) (ModelExport, error) {
	s := d.serving.Load()
	if s == nil {
		return ModelExport{}, ErrNoModelExport
	}
	if version == 0 || version == s.version {
		return exportOf(s.version, s.id, s.backbone.Arch(), d.feat.Source(), s.scale,
			s.landmarkIDs, s.views, s.landmarkX, s.masked, s.omega)
	}
	return exportStored(d.feat, d.store, version)
}

// ExportStored returns model version (0: the newest) of the store st, written by a
// daemon running the configuration cfg (cairnctl model export --data-dir: the daemon is
// stopped, st opened by the caller). The backbone, its weights and the augmentation are
// cfg's; the store's pool carries the fingerprint of the daemon's feature pipeline
// (Features.Fingerprint: architecture, parameters, sketch, seed), and a cfg that does
// not match it is refused with ErrConfig instead of exporting weights the daemon did not
// use. Landmarks whose points are no longer stored are left out (restoreModel).
func ExportStored(cfg config.Config, st *storage.Store, version uint64) (ModelExport, error) {
	f, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return ModelExport{}, err
	}
	var ps storage.PoolState
	var ok bool
	if err := st.View(func(tx *storage.ReadTx) error {
		ps, ok, err = tx.PoolState()
		return err
	}); err != nil {
		return ModelExport{}, err
	}
	if !ok {
		return ModelExport{}, fmt.Errorf("%w: the store holds no pool state", ErrNoModelExport)
	}
	fp, _, _, err := parsePool(ps)
	if err != nil {
		return ModelExport{}, err
	}
	if fp != f.Fingerprint() {
		return ModelExport{}, fmt.Errorf("%w: the store was written with features fingerprint %s, the configuration "+
			"(model %s, weights %q, sketch h=%d s=%d, seed %d) has %s: pass the daemon's configuration",
			ErrConfig, fp, cfg.Model.Arch, f.Source().Weights, cfg.Sketch.H, cfg.Sketch.S, cfg.Model.Seed, f.Fingerprint())
	}
	return exportStored(f, st, version)
}

// exportStored exports stored model version (0: the newest) under the pipeline f, with
// the mask rebuilt from the points stored now.
func exportStored(f *pipeline.Features, st *storage.Store, version uint64) (ModelExport, error) {
	var (
		m      storage.Model
		rm     *restoredModel
		ok     bool
		stored = map[string][]float64{}
	)
	err := st.View(func(tx *storage.ReadTx) error {
		var err error
		if version == 0 {
			m, ok, err = tx.LatestModel()
		} else {
			m, ok, err = tx.Model(version)
		}
		if err != nil || !ok {
			return err
		}
		for _, id := range m.Landmarks {
			p, ok, err := tx.Point(id)
			if err != nil {
				return err
			}
			if ok {
				stored[id] = p.X
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return ModelExport{}, err
	case !ok && version == 0:
		return ModelExport{}, ErrNoModelExport
	case !ok:
		return ModelExport{}, fmt.Errorf("%w: %d", ErrUnknownModel, version)
	}
	rm, err = restoreModel(f, m, func(id string) ([]float64, bool) {
		x, ok := stored[id]
		return x, ok
	})
	if err != nil {
		return ModelExport{}, err
	}
	return exportOf(m.Version, rm.meta.ID, f.Backbone().Arch(), f.Source(), rm.meta.KernelScale,
		m.Landmarks, rm.views, rm.xs, rm.missing, rm.omega)
}
