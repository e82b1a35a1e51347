// Package daemon wires cairn together (DESIGN.md section 2): it is the only package
// that sees Kafka (stream), bbolt (storage) and the mathematics (entk, dataset,
// coreset) at once. So far it holds the ingest path of issue 7; queries, deletion
// audits, refits, HTTP and the Run loop come later.
//
// # Ingest
//
// Ingest applies batches of cairn.train messages (stream.Reader hands them to
// Ingest.Handle). Apply does, for one batch:
//
//  1. Classify each message, outside any transaction. A message at or below the last
//     applied offset of its partition (kept in memory, mirrored from the store) is
//     skipped entirely: it was applied before, so it is not applied twice even if a
//     reader re-delivers it. Every other message is decoded with stream.DecodeTrain
//     under Limits (InputDim = the backbone's input length, MaxBytes =
//     limits.max_message_bytes, MaxIDBytes = limits.max_id_bytes); a rejection
//     becomes a dead letter (stream.DeadLetterMessage to kafka.topics.dlq, keyed by
//     the source coordinates).
//  2. Compute the fit-draw features ψ of both views of every upsert (Features.
//     BothViewsTo, parallel over GOMAXPROCS), still outside any transaction, so the
//     bbolt write lock is never held while computing. An upsert whose features are
//     not finite or whose squared norm exceeds maxFeatureNorm2 (finite inputs too
//     large for the backbone) is dead-lettered too, with reason non_finite.
//  3. Update the two-view pool (coreset.Pair) in offset order: an upsert of a stored
//     id is Delete then Insert (its features changed), a delete of a stored id is
//     Delete, a delete of an unknown id changes nothing (counted as Missing).
//  4. Commit one storage transaction holding, for the whole batch: the points
//     (PutPoint; the label when given), the deletions (DeletePoint), the dead letters
//     (Enqueue), the offset of every consumed message (SetOffset, valid or not), and
//     the pool state (PutPoolState) when the pool changed. Offsets therefore never
//     advance without the state they describe, and a crash before the commit leaves
//     the batch unconsumed; batches amortize the commit's fsync.
//  5. After a commit that deleted stored points, Store.Compact erases their raw bytes
//     (storage holds back every later outbox entry until then; on start, NewIngest
//     compacts a deletion committed just before a crash). The deletion's audit event,
//     the immediate removal of the landmark's term from the served encoder and the
//     refit it triggers are not implemented yet: for now a delete records nothing else.
//
// Apply returns an error only for failures of the daemon (store, context, an internal
// inconsistency), never for bad input, and then the batch counts as not consumed. A
// failure after step 3 has begun leaves the in-memory pool ahead of the store: the
// Ingest is then broken (ErrBroken on every later call) and its owner builds a new one
// with NewIngest, which restores the last committed state.
//
// # Restart
//
// NewIngest restores the pool from the stored pool state (refusing one written for
// another model, sketch, seed or pool budget, see Features.Fingerprint, or one whose
// point count disagrees with the stored points) and Ingest.Start is the reader's
// stream.StartFunc, reading the stored offsets: consumption resumes at the last
// applied offset + 1 of each partition.
//
// # Determinism
//
// A point's features depend only on (configured seed, model, id, x): the views come
// from the augmenter streams "dataset/view/<id>/<v>", the sketch from
// "entk/heads/fit" and "entk/srht/fit", and a batch row is bit-identical to a
// sequential computation. The pool is updated per message in apply order, so the
// stored pool state is a function of the message sequence and of where Sync was
// called, not of how the sequence was cut into batches (tested byte for byte with
// batch sizes 1, 7, 64 and all). Messages of different partitions interleave in
// arrival order, which Kafka does not fix; the served landmarks after a Sync do not
// depend on it (batch greedy over the stored points in id order), the certificate's
// running sums between syncs may differ in the last bits.
//
// # Sync
//
// Ingest.Sync re-selects both pools by batch greedy over all stored points
// (coreset.Pool.Sync) and persists the result. Its coreset.FeatureSource recomputes ψ
// from the raw points in the store: one read transaction loads the points (n×D), and
// features are computed syncChunk points at a time in parallel, in the id order Sync
// asks in. It is the only O(n) operation; scheduling it (SyncDue reports
// pool.sync_stale_fraction or a landmark deletion) is the caller's, and for replay
// determinism the schedule must depend on the message sequence only.
//
// # Pool state
//
// storage.PoolState{Schema: PoolSchema (1), Data} with Data, all integers
// little-endian, float64 as IEEE-754 bits:
//
//	fingerprint [32]byte   SHA-256 of the feature pipeline (Features.Fingerprint)
//	state a, state b       coreset.State of view 0 and view 1, each:
//	  i64 Version
//	  i64 Dim, i64 Budget.M, f64 Budget.Lambda, f64 Tol, u8 TopUp, u64 Seed,
//	  i64 SLQ.Probes, i64 SLQ.Steps, i64 SLQ.Deflate, i64 SLQ.Power
//	  u32 n, n × (u32 len, id bytes, f64 Diag, f64 Residual)      Points, sorted by id
//	  u32 k, k × (u32 len, id bytes)                              Landmarks
//	  floats LandmarkFeatures, i64 Greedy, floats PivotValues, floats Factor, floats Gram
//	  u32 t, t × u64                                              TopUpKeys
//	  i64 M, f64 Threshold, f64 Cert, f64 CertComp, f64 TraceK, f64 TraceKComp,
//	  u8 Exact, u8 Stale, i64 StaleFrom, u8 Changed
//
// where floats is u32 count then count × f64, and u8 booleans are 0 or 1. The decoder
// checks every count against the bytes left before allocating, rejects trailing bytes
// and is fuzzed; equal pools encode to equal bytes. Binary rather than JSON because
// the blob is rewritten with every batch: it holds one record per stored point (that
// is what coreset.State exposes), so each batch costs O(n) in the number of stored
// points (see BenchmarkIngest). Storing the per-point records in storage.Point.Cert
// instead would make it O(m q + m²), but needs a per-point accessor in coreset.
//
// # Ownership and concurrency
//
// An Ingest owns its pool and is driven from one goroutine (Reader.Run calls Handle
// on its own goroutine only); it starts no goroutines except entk's, which entk joins
// before returning. The *storage.Store is the caller's and must outlive the Ingest;
// Start only reads it and may be called from any goroutine. Messages handed to Apply
// are not modified, and no reference to them is kept after Apply returns. Features is
// immutable and safe for concurrent use. Logs go to the zerolog.Logger given to
// NewIngest, with fields topic, partition, offset, reason.
package daemon
