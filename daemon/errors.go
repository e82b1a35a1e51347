package daemon

import (
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
)

// Sentinel errors. Returned errors wrap them with the offending field and value, so
// callers classify failures with errors.Is.
var (
	// ErrConfig reports a configuration the daemon cannot run with (an architecture that
	// does not parse, a sketch or pool budget out of range, limits beyond what storage
	// accepts). It is pipeline.ErrConfig, so feature and fit settings match it too.
	ErrConfig = pipeline.ErrConfig
	// ErrPoolState, ErrBroken and ErrSyncSource are the ingest's (package
	// internal/ingest): a stored pool state that cannot be restored, an ingest that must
	// be rebuilt from the store, a sync that asked for a point that is not stored.
	ErrPoolState  = ingest.ErrPoolState
	ErrBroken     = ingest.ErrBroken
	ErrSyncSource = ingest.ErrSyncSource
)

// ErrNoModel is returned by queries before the first model version exists.
var ErrNoModel = serving.ErrNoModel

// ErrNoModelExport is returned by Export and ExportStored when there is no model to
// export (before the first model, or every landmark masked); GET /model answers 503.
var ErrNoModelExport = serving.ErrNoModelExport

// ErrUnknownModel is returned by Export and ExportStored for a model version that is
// not stored; GET /model?model=V answers 404.
var ErrUnknownModel = refit.ErrUnknownModel
