package refit

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
)

// ErrUnknownModel is returned by ExportStored and Export for a model version that is
// not stored (the daemon's ErrUnknownModel; GET /model?model=V answers 404 with it).
var ErrUnknownModel = errors.New("daemon: no such model version")

// ExportStored returns model version (0: the newest) of the store st, written by a
// daemon running the configuration cfg (cairnctl model export --data-dir: the daemon is
// stopped, st opened by the caller). The backbone, its weights and the augmentation are
// cfg's; the store's pool carries the fingerprint of the daemon's feature pipeline
// (Features.Fingerprint: architecture, parameters, sketch, seed), and a cfg that does
// not match it is refused with pipeline.ErrConfig instead of exporting weights the daemon did not
// use. Landmarks whose points are no longer stored, or hold another input than the
// model was fitted on, are left out (serving.Restore).
func ExportStored(cfg config.Config, st *storage.Store, version uint64) (serving.ModelExport, error) {
	f, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return serving.ModelExport{}, err
	}
	var ps storage.PoolState
	var ok bool
	if err := st.View(func(tx *storage.ReadTx) error {
		ps, ok, err = tx.PoolState()
		return err
	}); err != nil {
		return serving.ModelExport{}, err
	}
	if !ok {
		return serving.ModelExport{}, fmt.Errorf("%w: the store holds no pool state", serving.ErrNoModelExport)
	}
	fp, err := ingest.Fingerprint(ps)
	if err != nil {
		return serving.ModelExport{}, err
	}
	if fp != f.Fingerprint() {
		return serving.ModelExport{}, fmt.Errorf("%w: the store was written with features fingerprint %s, the configuration "+
			"(model %s, weights %q, sketch h=%d s=%d, seed %d) has %s: pass the daemon's configuration",
			pipeline.ErrConfig, fp, cfg.Model.Arch, f.Source().Weights, cfg.Sketch.H, cfg.Sketch.S, cfg.Model.Seed, f.Fingerprint())
	}
	return Export(f, st, version)
}

// Export exports stored model version (0: the newest) under the pipeline f, with
// the mask rebuilt from the points stored now.
func Export(f *pipeline.Features, st *storage.Store, version uint64) (serving.ModelExport, error) {
	var (
		m      storage.Model
		rm     *serving.Restored
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
		return serving.ModelExport{}, err
	case !ok && version == 0:
		return serving.ModelExport{}, serving.ErrNoModelExport
	case !ok:
		return serving.ModelExport{}, fmt.Errorf("%w: %d", ErrUnknownModel, version)
	}
	rm, err = serving.Restore(f, m, func(id string) ([]float64, bool) {
		x, ok := stored[id]
		return x, ok
	})
	if err != nil {
		return serving.ModelExport{}, err
	}
	e, err := serving.NewExport(m.Version, rm.Meta.ID, f.Backbone().Arch(), f.Source(), rm.Meta.KernelScale,
		m.Landmarks, rm.Views, rm.Xs, rm.Missing, rm.Omega)
	if err == nil {
		e.WithEncoder(rm.A, m.B.Data, rm.Missing)
		e.WithCoverage(f.Coverage())
	}
	return e, err
}
