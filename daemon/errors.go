package daemon

import (
	"errors"

	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
)

// Sentinel errors. Returned errors wrap them with the offending field and value, so
// callers classify failures with errors.Is.
var (
	// ErrConfig reports a configuration the daemon cannot run with (an architecture that
	// does not parse, a sketch or pool budget out of range, limits beyond what storage
	// accepts). It is pipeline.ErrConfig, so feature and fit settings match it too.
	ErrConfig = pipeline.ErrConfig
	// ErrPoolState reports a stored pool state that cannot be restored: unknown schema,
	// malformed blob, a pool built for another model or budget, or a pool whose points
	// disagree with the stored points.
	ErrPoolState = errors.New("daemon: unusable stored pool state")
	// ErrBroken is returned by every Ingest method after an internal failure left the
	// in-memory pool ahead of the store (a failed transaction or pool update). The
	// owner discards the Ingest and builds a new one, which restores from the store.
	ErrBroken = errors.New("daemon: ingest must be rebuilt from the store")
	// ErrSyncSource reports a Sync that asked for a point the store does not hold.
	ErrSyncSource = errors.New("daemon: sync asked for a point that is not stored")
)

// ErrNoModel is returned by queries before the first model version exists.
var ErrNoModel = serving.ErrNoModel

// ErrNoModelExport is returned by Export and ExportStored when there is no model to
// export (before the first model, or every landmark masked); GET /model answers 503.
var ErrNoModelExport = serving.ErrNoModelExport

// ErrUnknownModel is returned by Export and ExportStored for a model version that is
// not stored; GET /model?model=V answers 404.
var ErrUnknownModel = errors.New("daemon: no such model version")
