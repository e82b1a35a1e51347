// Package refit is what a refit of cairnd computes, apart from the locks, the store's
// transaction and the serving model's installation, which the daemon does: the drift
// triggers that start one (Reason, SyncDue), the fit of a snapshot (Fitter.Fit), the
// deletion effects its audits report (Effects), its status event, and the serving model
// a restart rebuilds from the store (Fitter.Restore), and the export of a stored
// version (Export, ExportStored).
//
// # Triggers
//
// The daemon's supervisor refits when a trigger fires (Reason): a debounced deletion
// (the leader's only: it audits them), the first fit, refit.points_changed points
// changed, refit.pool_change_fraction of the landmarks replaced, a
// refit.residual_increase relative rise of tr R / tr K over the last fit (Baseline), or
// refit.idle without training events while the points differ from the model's and the
// training topic is caught up. The drift refits among them (points, pool, residual)
// wait while the training topic is a reader batch or more behind, for at most
// refit.backlog_wait (Hold). Background syncs without a refit run when the pool is
// inexact or stale and has doubled since the last sync (SyncDue).
//
// # A refit is a function of the snapshot
//
// Under the ingest lock the daemon takes a snapshot (sorted ids and immutable cache
// entries); everything else runs without the lock: batch greedy on both views
// (ingest.Select, installed in the pool with ingest.State.Adopt if no point was applied
// meanwhile), then Fit. Fit depends only on the snapshot, the selection, the
// configuration and the version number: landmarks are batch greedy over the snapshot
// (ties by id), the held-out points are chosen by a seeded id hash, minibatch order
// depends on ids, and all seeds are named streams. So the model served at quiescence
// depends only on the stored points, which gives exact unlearning (a fresh daemon fed
// the surviving points serves a byte-identical model; the daemon's TestEndToEnd) and
// replay (the kill -9 test compares ingest.StateHash). Versions are immutable
// storage.Model records; a model's id is the content hash of its landmarks, Ã and b.
//
// A Fitter keeps what its last refit computed of single points and landmarks: the
// gradient rows (serving.NewGradRows), the reseed measurement's features of every point
// and the served pool's exact rows (ingest.MeasureReseed). The next refit takes them
// only for the same id and input, bit for bit, so Fit stays a function of the snapshot
// (TestFitReusesReseedFeatures: byte for byte a new Fitter's model). They hold the
// inputs of the last snapshot's points until a later refit computes its own in their place;
// a deletion's refit is that refit, and its audit follows it.
//
// The seeded names keep the prefix "daemon/" ("daemon/val/<id>",
// "daemon/audit/<role>/<id>") from when this code lived in package daemon: stored
// models depend on them.
//
// # Deletions and audits
//
// A delete of a stored id removes the point from the pool and the store, and in the
// same transaction writes a pending deletion record (storage pending bucket: request,
// id, whether it was a landmark of the serving model and of the pool, the serving
// model version, the pool's residual certificates before and after, timestamps).
// Before that transaction commits, the daemon's serving model masks the point's
// landmark terms, which is exact for the representation (a sum over landmarks). The
// leader refits once no deletion arrived for refit.delete_debounce, so deletions close
// together share a refit; the refit's commit (the daemon's) holds the new model, the
// audits of every deletion its snapshot reflects (hash-chained through
// storage.Tx.AppendAudit, emitted on cairn.audits keyed by request, with the canonical
// body the chain covers), the removal of their pending records, and a signed checkpoint
// of the chain head on cairn.status. Every audit event carries the audit key's id and
// its Ed25519 signature of seq, prev_hash and hash (internal/auditsig; the key is
// DataDir/audit.key, published on GET /audit/key). A delete of an unknown id is
// audited at once (known: false, no refit).
//
// The deletion effect (Effects) is appendix D's Δ(S) for S the point's landmark terms
// in the model it was deleted from, ranked against audit.random random landmark sets of
// the same size (percentile and permutation p-value); percentile is -1 when it cannot
// be computed (the point was no landmark, or no labelled audit points), and the body's
// effect.reason says why. Raw inputs of deleted points are erased from their slot
// files (storage) before any later output is published, and with the embedded broker
// from its files too (tombstones and a compaction, ingest.Outbox). The audit states
// where the tombstone landed (tombstone.partition and offset), stored in the pending
// record in the transaction that acknowledges the tombstone, so a crash cannot lose
// it; an audit written before the broker acknowledged the tombstone says so in
// tombstone.unknown instead (ingest.TombstoneNotAcked), and the outbox publishes the
// tombstone before that audit. With fewer stored points than refit.min_points the
// audits say model_after 0 and the serving model is withdrawn.
//
// # Contracts
//
// A Fitter's fields are set before its first use; Fit and Restore are then safe for
// concurrent use. Fit uses GOMAXPROCS cores in every phase (the kernel blocks side by
// side, the initializer's and the fits' row loops in fixed chunks, internal/base/par; sums
// across chunks in index order), and what it returns does not depend on how many:
// the model, its id, the statistics and the serving form's answers are byte-identical
// at any GOMAXPROCS (TestFitCores). Fit modifies neither the snapshot nor the selection (the kernel
// blocks it scales are its own); it stops with ctx's error within one minibatch.
// Effects sets the Effect of the deletions it is given, and nothing else. Reason and
// SyncDue read the pool under the caller's lock and call Drift.CaughtUp (which asks the
// broker) only when a trigger needs it.
package refit
