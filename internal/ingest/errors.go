package ingest

import (
	"errors"

	"github.com/cairnhq/cairn/internal/pipeline"
)

// Sentinel errors. Returned errors wrap them with the offending field and value, so
// callers classify failures with errors.Is.
var (
	// ErrConfig reports a configuration the ingest cannot run with (a pool budget out of
	// range, limits beyond what storage accepts, no dead-letter topic). It is
	// pipeline.ErrConfig, so feature and fit settings match it too.
	ErrConfig = pipeline.ErrConfig
	// ErrPoolState reports a stored pool state that cannot be restored: unknown schema,
	// malformed blob, a pool built for another model or budget, or a pool whose points
	// disagree with the stored points.
	ErrPoolState = errors.New("ingest: unusable stored pool state")
	// ErrBroken is returned by every State method after an internal failure left the
	// in-memory pool ahead of the store (a failed transaction or pool update). The
	// owner discards the State and builds a new one with New, which restores from the
	// store.
	ErrBroken = errors.New("ingest: the state must be rebuilt from the store")
	// ErrSyncSource reports a Sync that asked for a point the store does not hold.
	ErrSyncSource = errors.New("ingest: sync asked for a point that is not stored")
	// ErrChanged is returned by Adopt for a background sync whose snapshot is older than the stored
	// points.
	ErrChanged = errors.New("ingest: the points changed since the sync's snapshot")
)

// ErrAuditDiverged is returned by AdoptAudit when the leader's audit record does not
// extend this store's chain to the same hash: the two chains differ.
var ErrAuditDiverged = errors.New("ingest: audit chain diverged from the leader's")
