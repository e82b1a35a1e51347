package daemon

import (
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
)

// Export returns model version (0: the serving one) as GET /model prints it. The
// serving version comes from the serving value, with its current mask; another version
// is read from the store and masked as a restart would mask it (ExportStored). Errors:
// ErrNoModelExport before the first model, ErrUnknownModel for a version not stored.
func (d *Daemon) Export(version uint64) (serving.ModelExport, error) {
	s := d.serve.model.Load()
	if s == nil {
		return serving.ModelExport{}, ErrNoModelExport
	}
	if version == 0 || version == s.Version {
		return s.Export(d.feat.Source())
	}
	return refit.Export(d.feat, d.store, version)
}

// ExportStored returns model version (0: the newest) of the store st, written by a
// daemon running the configuration cfg (cairnctl model export --data-dir: the daemon is
// stopped, st opened by the caller). The backbone, its weights and the augmentation are
// cfg's; a store whose pool carries another features fingerprint is refused with
// ErrConfig; landmarks whose points are no longer stored, or hold another input than
// the model was fitted on, are left out (refit.ExportStored).
func ExportStored(cfg config.Config, st *storage.Store, version uint64) (serving.ModelExport, error) {
	return refit.ExportStored(cfg, st, version)
}

// ModelExport is the exported form of a model version (serving.ModelExport).
type ModelExport = serving.ModelExport

// ExportedLandmark is one landmark of a ModelExport (serving.ExportedLandmark).
type ExportedLandmark = serving.ExportedLandmark
