// Package daemon wires cairn together (DESIGN.md section 2): it is the only package
// that sees Kafka (stream), bbolt (storage) and the mathematics (entk, dataset, coreset,
// fit, certify) at once. Daemon.Run is the service; Ingest is its training path and
// can be driven alone.
//
// # Run and its components
//
// Run opens the bbolt file (DataDir/cairn.db), starts the embedded broker
// (DataDir/kafka) unless external brokers are configured, restores the ingest (pool,
// point cache, pending deletions) and the latest model, binds HTTP, and runs, each on
// one goroutine it joins: the training reader (handleTrain → Ingest.Apply), the query
// reader (handleQueries), the refit supervisor (runRefits), the lag poller, the outbox
// publisher and the HTTP server. On ctx's end it stops the readers, the supervisor and
// any refit (fit.RepeatContext stops within one minibatch), drains the outbox for at
// most shutdown_timeout, stops HTTP and closes the broker and the store. A component
// that fails ends Run with its error (after the same shutdown); an Ingest broken by a
// failed transaction is rebuilt from the store instead.
//
// Locks: mu guards the ingest and the refit baselines (held by the train handler per
// batch, and by the supervisor while it syncs the pool and takes a snapshot, never
// during a fit); servMu serializes changes of the serving model, which readers load
// lock-free (an atomic pointer to an immutable serving value).
//
// # Queries
//
// A query (by input or by stored id) is answered on the serving model in one of two
// variance models, named in every answer (variance_model):
//
//   - exact_kernel, the default whenever the landmarks' exact rows fit
//     query.exact_memory_bytes: when a model is installed, every landmark's exact eNTK
//     feature row φ(x_ℓ) (entk.ExactTo: the body Jacobian rows and the final Linear's
//     input, so <φ(x), φ(y)> = k*(x, y)) is computed from its stored augmented input and
//     kept in memory as float32 (M·entk.ExactDim·4 bytes, 101 MB for the default convnet
//     at M = 512; nothing of it is stored in bbolt, see storage/FORMAT.md). A query computes
//     its own φ in float64 and the exact row k*(x_ℓ, x_t) as one float32×float64 product;
//     the radii are only the rounding bound entk.ExactRowError times ω_ℓ, and a certified
//     verdict holds with certainty (certify.CertifyBoundedTo; δ is not spent). Such a
//     model makes no evaluation draw at all.
//   - conservative, otherwise: the evaluation draw's heads and SRHT, named
//     "daemon/eval/<version>/<nonce>/<count>" of the model seed and drawn independently of
//     the fit draw; scores Î_ℓt = K^eval(x_ℓ, x_t)·ω_ℓ, radii from the conservative variance
//     bound with exact diagonals (eq. conservative-variance), δ split over the unmasked
//     landmarks only (δ_ℓ = δ/M, Thm. topk). Answers carry seed_hash, the SHA-256 of the
//     draw's seed, not the seed: a draw serves query.draw_queries answers and is then
//     retired, and its seed is published on cairn.status (kind eval_draw) once no answer
//     uses it, so nobody can pick queries against a known draw.
//
// `certified` means: for the served model version, with probability at least 1 − δ (with
// certainty under exact_kernel), the top-K set equals the top-K of k*(x_ℓ, x_t)·ω_ℓ over
// the unmasked landmarks. With R > 1 fits the repeated-fit floor (Thm. fit-floor) is a
// field of its own (fit_floor, plug_in unless κ is exact and R ≥ 30); it may turn an
// uncertified verdict into fit_limited, never a certified one. Answers and the batch's
// offsets commit in one transaction, which fails (and the batch is recomputed) if the
// serving model changed meanwhile: an answer committed after a deletion never names the
// deleted point. Queries wait for the first model; later, invalid queries and unknown ids
// go to the dead-letter topic.
//
// # Deletions and audits
//
// A delete of a stored id removes the point from the pool and the store, and in the
// same transaction writes a pending deletion record (storage pending bucket: request,
// id, whether it was a landmark of the serving model and of the pool, the serving model
// version, the pool's residual certificates before and after, timestamps). Before that
// transaction commits, the serving model masks the point's landmark terms (withMask),
// which is exact for the representation (a sum over landmarks). The refit supervisor
// starts a refit once no deletion arrived for refit.delete_debounce, so deletions close
// together share it; the refit's commit holds the new model, the audits of every
// deletion its snapshot reflects (hash-chained through storage.Tx.AppendAudit, emitted
// on cairn.audits keyed by request, with the canonical body the chain covers), and the
// removal of their pending records. A delete of an unknown id is audited at once
// (known: false, no refit). The deletion effect is appendix D's Δ(S) for S the point's
// landmark terms in the model it was deleted from, ranked against audit.random random
// landmark sets of the same size (percentile and permutation p-value); percentile is -1
// when it cannot be computed (the point was no landmark, or no labelled audit points),
// and the body's effect.reason says why. Raw inputs of deleted points are erased from
// the file (Store.Compact) before any later output is published.
//
// # Refits and model versions
//
// The supervisor refits when a trigger fires (refitReason: a debounced deletion, the
// first fit, refit.points_changed points changed, refit.pool_change_fraction of the
// landmarks replaced, a refit.residual_increase relative rise of tr R / tr K, or
// refit.idle without training events while the points differ from the model's, and the
// training topic is caught up). Under the ingest lock it takes a snapshot (sorted ids
// and immutable cache entries); everything else runs without the lock: batch greedy on
// both views (coreset Config.Plan + Greedy, installed in the pool with Pool.Adopt if no
// point was applied meanwhile), then the fit. Background syncs without a refit run the
// same way when the pool is inexact or stale and has doubled since the last sync
// (syncDue). A refit is a function of the snapshot and the configuration: landmarks are
// batch greedy over the snapshot (ties by id), the held-out points are
// chosen by a seeded id hash, minibatch order depends on ids, all seeds are named
// streams. So the model served at quiescence depends only on the stored points, which
// gives exact unlearning (a fresh daemon fed the surviving points serves a byte-identical
// model; TestEndToEnd) and replay (the kill -9 test compares StateHash). Versions are
// immutable storage.Model records; a model's id is the content hash of its landmarks,
// Ã and b.
//
// # Model export
//
// GET /model (Daemon.Export) and `cairnctl model export` print one model version as a
// ModelExport: version, model id, architecture, the weights' name and SHA-256, the
// kernel scale, the score formula in words, and every unmasked landmark with its id,
// view, augmented input x and ω in raw kernel units, so that a third party can recompute
// every score of an answer (k*(x_ℓ, x_t)·ω_ℓ, or the evaluation draw's kernel once its
// seed is published). The serving version is exported from the serving value with its
// current mask; a stored version (GET /model?model=V, or ExportStored on the bbolt file
// of a stopped daemon) is masked by the rule a restart applies (restoreModel: a landmark
// whose point is no longer stored is left out), one function for both. ExportStored
// refuses a configuration whose feature fingerprint differs from the stored pool's.
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
//     (a pure function of the bytes, so the batch is decoded on GOMAXPROCS goroutines
//     joined before classification goes on in order) under Limits (InputDim = the backbone's input length, MaxBytes =
//     limits.max_message_bytes, MaxIDBytes = limits.max_id_bytes); a rejection
//     becomes a dead letter (stream.DeadLetterMessage to kafka.topics.dlq, keyed by
//     the source coordinates).
//  2. Compute the fit-draw features ψ of both views of every upsert (Features.
//     BothViewsTo, parallel over GOMAXPROCS), still outside any transaction, so the
//     bbolt write lock is never held while computing. An upsert whose features are
//     not finite or whose squared norm exceeds maxFeatureNorm2 (finite inputs too
//     large for the backbone) is dead-lettered too, with reason non_finite.
//  3. Update the two-view pool (coreset.Pair) in offset order, one goroutine per view:
//     an upsert of a stored id is Delete then Insert (its features changed), a delete
//     of a stored id is Delete, a delete of an unknown id changes nothing (counted as
//     Missing). The inserts' products with the landmarks come from one blocked sweep
//     per view and batch (coreset.Pool.CrossTo, then InsertCross, which recomputes
//     them if a landmark deletion earlier in the batch changed the landmarks), with
//     the bits Insert would compute, so the pool does not depend on batching.
//  4. Commit one storage transaction holding, for the whole batch: the points
//     (PutPoint; the label when given), the deletions (DeletePoint), the dead letters
//     (Enqueue), the offset of every consumed message (SetOffset, valid or not), and
//     when the pool changed its core (PutPoolState) and each upserted point's record
//     (PutPoolPoint; see "Pool state"). Offsets therefore never
//     advance without the state they describe, and a crash before the commit leaves
//     the batch unconsumed; batches amortize the commit's fsync.
//  5. After a commit that deleted stored points, Store.Compact erases their raw bytes
//     (storage holds back every later outbox entry until then; on start, NewIngest
//     compacts a deletion committed just before a crash). Deletions also write their
//     pending audit records in step 4 and call the hooks (see "Deletions and audits").
//
// Apply returns an error only for failures of the daemon (store, context, an internal
// inconsistency), never for bad input, and then the batch counts as not consumed. A
// failure after step 3 has begun leaves the in-memory pool ahead of the store: the
// Ingest is then broken (ErrBroken on every later call) and its owner builds a new one
// with NewIngest, which restores the last committed state.
//
// # Restart
//
// NewIngest restores the pool from the stored pool state and per-point records
// (refusing one written for another model, sketch, seed or pool budget, see
// Features.Fingerprint, or whose records disagree with the stored points; see "Pool
// state") and Ingest.Start is the reader's
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
// called, not of how the sequence was cut into batches (core and per-point records
// tested byte for byte with batch sizes 1, 7, 64 and all). Messages of different partitions interleave in
// arrival order, which Kafka does not fix; the served landmarks after a Sync do not
// depend on it (batch greedy over the stored points in id order), the certificate's
// running sums between syncs may differ in the last bits.
//
// # Sync
//
// Ingest.Sync re-selects both pools by batch greedy over all stored points
// (coreset.Pool.Sync) and persists the result (the core and every point's record). Its coreset.FeatureSource (cacheSource)
// serves the features cached at ingest and recomputes the others from the cached raw
// inputs (bit-identical). It is the only O(n) operation. The daemon does not call it:
// its supervisor computes the same sync in the background and adopts it (see "Refits
// and model versions"). Between syncs the certificate is a valid bound; the served
// landmarks after a sync are batch greedy over the stored points, whatever the schedule
// was.
//
// # Point cache
//
// The Ingest keeps every stored point's input and label in memory, and the features of
// both views computed at ingest (pointCache, up to cacheBudget bytes): syncs and refits
// need them for all points, and recomputing ψ is the expensive part. After a restart the
// features are recomputed lazily. Memory is 8·(D + 2q) bytes per point.
//
// # Pool state
//
// The pool is persisted in two parts, so that an applied batch writes O(batch + m²)
// bytes whatever the number n of stored points (DESIGN.md section 4: per-event work
// must not grow with n outside scheduled sweeps):
//
//   - the core, storage.PoolState{Schema: PoolSchema (3), Data}: coreset.Pool.CoreState
//     of both views, rewritten by every batch that changed the pool (O(m q + m²) time,
//     O(m²) bytes);
//   - one record per stored point in the store's poolpoints bucket (Tx.PutPoolPoint,
//     keyed by the point id, removed with the point by Tx.DeletePoint), written only
//     when it changes.
//
// Which records change (documented by coreset.Pool.Generation, checked by coreset's
// TestRecordChangesAreLocal): Insert creates only the inserted point's record; Delete
// drops only the deleted point's (deleting a landmark leaves the other points' stored
// residuals as they were, lower bounds until the next sync); an Adopt, or a Sync that
// does work, rewrites every point's residual. So Apply writes the record of each
// upserted point (putRecord; nothing for deletes), and Ingest.Sync and the adoption of a
// background sync rewrite all n records in the same transaction as the core (the
// scheduled O(n) sweep, putAllRecords, in id order).
//
// The byte layouts of schemas 3, 2 and 1 are in storage/FORMAT.md "Pool state".
//
// Restore (NewIngest) reads the core and every record (O(n), once), refuses a store
// whose records do not match its points one to one (a count that differs, a record of
// an id that is not stored, records without a core) with ErrPoolState naming the
// counts or the id, and restores each view with State.Points built from the records.
// Schema 2, written before, held the records inside the blob (O(n) bytes and an
// O(n log n) sort per batch); it is still read, and NewIngest converts such a store at
// once (core and all records in one transaction), so a schema 3 core is never stored
// without its records. Schema 1 (which also held the landmark features) is refused.
//
// Measured (BenchmarkPoolPersist, q = 32, m = 8, batches of 256 upserts, no fsync,
// medians of 3 runs; bytes are what bbolt hands to write(2) per commit, pages
// included): with fresh increasing ids, schema 3 writes 97 KB per batch at n ≈ 2,000 to
// 4,600 and 104 KB at n ≈ 20,000 to 22,800, against 267 KB and 1.29 MB for schema 2
// (2.7× and 12×), and persists in 4.4× and 12× less time. Upserts of random stored ids
// are the worst case for page locality: each record then dirties its own 4 KiB page of
// the poolpoints bucket, as each point does in the points bucket, so schema 3 writes
// about as much as schema 2 at n = 2,000 (487 KB against 464 KB) and less from there
// on (1.71 MB against 2.10 MB at 20,000; schema 3's bytes are bounded by the pages of
// 2·batch keys, schema 2's grow with n), in 2.0× and 4.1× less time. Keeping the record
// inside the point value (storage.Point.Cert) would save those pages for upserts (the
// benchmark's B_base: 352 KB and 976 KB), but a resync would then rewrite every
// point's raw input (8·D bytes each, 6 KB for MNIST) instead of a 32-byte record.
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
