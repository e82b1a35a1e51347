// Package ingest is cairn's training path: State holds the stored points' cache, the
// two-view landmark pool and the deletions awaiting their audit, and applies batches of
// cairn.train messages to them and to the store, one transaction per batch
// (docs/architecture.md, "Events" and "State and storage"). It sees bbolt (storage) and
// the event schema (stream) but no Kafka client: a stream.Reader drives it through
// Handle, and package daemon owns it.
//
// # Apply
//
// State applies batches of cairn.train messages (stream.Reader hands them to
// State.Handle). Apply does, for one batch:
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
//     BothViewsTo, parallel over GOMAXPROCS), or take them from featurizers' records
//     (see "Featurizers"), still outside any transaction, so the
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
//  5. The commit of a batch that deleted or replaced stored points erases their raw
//     inputs from their slot files before it returns (storage; it holds back every
//     later outbox entry until then, and New finishes an erasure a crash or a failure
//     interrupted, Store.ScrubPending), and each deletion enqueues a tombstone for its
//     id on its topic (a claim, see "Versions"). Deletions also write their pending
//     audit records in step 4 and call the hooks (Hooks; internal/refit's doc.go
//     "Deletions and audits").
//
// cairnd's own records on the training topic, its claims, are not inputs: they store
// no offset and are weighed in step 3 against what is stored ("Versions"). Removing
// (Hooks) is called for the stored ids whose input changes or that leave: an upsert
// that restates a point's input bit for bit keeps the serving model's landmark terms,
// which stay exact.
//
// Apply returns an error only for failures of the daemon (store, context, an internal
// inconsistency), never for bad input, and then the batch counts as not consumed. A
// failure after step 3 has begun leaves the in-memory pool ahead of the store: the
// State is then broken (ErrBroken on every later call) and its owner builds a new one
// with New, which restores the last committed state.
//
// # Restart
//
// New restores the pool from the stored pool state and per-point records
// (refusing one written for another model, sketch, seed or pool budget, see
// Features.Fingerprint, or whose records disagree with the stored points; see "Pool
// state") and State.Start is the reader's
// stream.StartFunc, reading the stored offsets: consumption resumes at the last
// applied offset + 1 of each partition.
//
// # Versions
//
// The training topic is compacted: the broker keeps only the newest record of each id.
// A deletion's tombstone, written when the outbox publishes it, can land after an upsert
// of the same id that was produced after the delete (the daemon lagged, or the broker
// was down): compaction would then erase the newest applied upsert of a stored point,
// and a standby, a replay or a rebuild would never see it. The rule that prevents it:
// after any record of an id that cairnd wrote itself, the newest record of the id on
// the topic restates what is stored. cairnd reads its own records back like every
// other, so it republishes what a record of its own would erase.
//
// Versions. Every record that states an id's value has a version, an offset on the
// id's partition: an input's is its own offset; a claim (a record cairnd writes)
// carries the version of the input whose effect it restates in the header
// VersionHeader ("cairn_version"). Claims are a deletion's tombstone (null value,
// version = the delete's offset; with the embedded broker, the erasure writes a second
// copy), an erasure's tombstone (null value, version = the offset of the upsert whose
// value it erases: a subject's erasure request is on another topic, whose offsets mean
// nothing here), and a republished upsert (the stored value, version = the offset of
// the upsert it came from; about a data subject, the subject's hash in SubjectHeader). Every stored point keeps its version (storage.Point.Version, Entry;
// -1 for points stored before versions existed), and each deletion of a stored point
// is remembered with its version (the store's deleted bucket, State.deleted) until its
// own tombstone is read back: a record with a null value is a tombstone whatever its
// headers (unversioned: -1); a record with a value is a republication only with a
// version header below its own offset; any other record is an input.
//
// Claims, in offset order, against the state left by everything before them:
//
//   - a tombstone of version v over a point stored at version w: v > w, or v = w ≥ 0
//     (an erasure's tombstone of that very value), erases the point (opErase: a deletion
//     or erasure this reader never read, compacted away under it or not read yet on the
//     erasures topic; no audit, it was audited where it was applied); otherwise the
//     point is newer and is republished. A delete's offset is never an upsert's, so the
//     equality can only mean an erasure. Over an id not stored, it ends the wait for the deletion of
//     version ≤ v, if any.
//   - a republication of version v: the same value as the stored one changes nothing;
//     over a point stored at version w < v, or an id not stored whose awaited deletion
//     (if any) is older than v, it is applied as an upsert at version v (this reader
//     missed the input: compaction removed it); over a point stored at version w ≥ v
//     (a newer input was applied since it was written) it is stale, ignored, and the
//     point is republished; over an id whose deletion is awaited at version ≥ v it is
//     stale and ignored: the deletion's tombstone follows it on the topic, as the
//     outbox publishes in commit order.
//
// An id is republished (one outbox entry after the batch, with the stored value and
// version) when the newest record of it in the batch is a claim that does not restate
// the stored point; an input or an applied claim after it in the batch cancels that.
//
// Placement. A claim goes to the partition where the id's record is (claims.go,
// placed): a deletion's tombstone to the delete's own partition, an erasure's tombstone
// and a republication to the partition stored with the point (storage.Point.Partition),
// a refused upsert's scrub to its own. Producers need not hash keys as cairn's writer
// does (librdkafka's default is CRC32, the Java client's murmur2): the claim follows the
// record it restates or erases. A point stored before format 8 has no partition; its
// claims go to the key's partition, as before.
//
// Exactly once. Claims store no offset, so stored offsets remain the input's, and a
// claim is idempotent: read again (a re-delivery after a crash) it finds the state it
// left (an applied republication has the stored version and value, an erased point is
// gone, a republished id is restated), at worst republishing a second copy, which is
// ignored in turn. A reader of the whole topic (this daemon, a standby, a replay)
// never applies a claim: each restates or is older than what it applied. Only a reader
// that missed inputs (the topic was compacted before it read them) applies them, which
// is what makes the compacted topic hold every stored point: its newest record of each
// id, read alone, gives the stored value (TestClaims). Versions compare offsets of one
// partition: the topic's partition count must not change, as order per id already
// requires.
//
// A reader of the whole topic may still apply an erasure's tombstone: the erasure
// request is on another topic, and the reader may read the tombstone first. It then
// erases the point without an audit, and the request, read later, erases what is left
// of the subject (the pending record lists fewer points; the leader's audit is
// adopted all the same).
//
// Compaction must not erase a record before the reader has read it: an upsert behind a
// claim of its id is safe once read (it is applied and the claim answered). The daemon
// compacts the embedded broker only once its reader has read every record written
// before (daemon.compact); an external broker must keep min.compaction.lag.ms above
// the reader's longest lag.
//
// # Data subjects
//
// An upsert may name the data subject its point is about (stream.TrainEvent.Subject).
// The ingest keeps the subject only as its keyed hash (SubjectKey.Hash, HMAC-SHA256
// under the deployment's key, SubjectKeyFile beside the state file, created at the
// first start): the point is filed under it in the upsert's own transaction
// (storage.Tx.SetSubject; an upsert without a subject clears it, a deletion removes
// it), and nothing the ingest writes, logs or publishes holds the subject itself.
//
// The training reader also reads the erasures topic (stream.DefaultErasuresTopic,
// keyed by subject), and Apply takes its requests in the same batches, in offset order
// with the training messages, each consuming its own offset in the batch's
// transaction (exactly once, like every input). An erase request (opErasure) removes
// every point stored about the subject at that moment of the batch: those the store
// files under it and those the batch upserted with it, less those the batch replaced or
// removed. It is a batch of deletions: the points leave the pool (the Removing hook
// masks their landmark terms), the store (their inputs leave their slot files) and,
// by a tombstone each (at the version of the value it erases, above), the training
// topic; their awaited tombstones are recorded as a deletion's are. Its record
// (Deletion with Kind KindErasure, ID and Subject the subject's hash, Points every
// point with its version, at most MaxErasurePoints per record) is pending like a
// deletion's, and its one audit (SubjectAuditBody: every point with where its
// tombstone landed, the models before and after) is written by the refit that follows,
// through AppendAudit like a deletion's; Outbox.WithTombstones states the tombstones.
// An erasure that finds no point is audited at once by the Unknown hook. The subject
// is then blocked (storage.Tx.Block, with the request and the time): a later upsert
// naming it is a dead letter, reason subject_erased, followed on its topic by an
// unversioned tombstone of its id (scrubClaim: it erases nothing stored, whose value is
// republished when it is read back) so that compaction drops the refused bytes too,
// until an unblock request
// (opUnblock, audited at once by the Unknown hook; a daemon that does not lead keeps
// it pending for the leader's audit) lifts the block. A tombstone on the erasures topic
// (an operator removing a request carried out, and the subject's id with it) is consumed
// and does nothing. An invalid request, or one
// whose key is not its subject, is a dead letter without key or bytes (the key is the
// subject), and a dead letter of a training message that may name a subject
// (stream.MayNameSubject) keeps no bytes whatever kafka.dlq_keep_raw says.
//
// # Featurizers
//
// With a FeatureSource (SetFeatureSource; the daemon's, internal/featsource, when
// ingest.featurizers is set), step 2 asks the source for the records of the batch's
// input upserts (not of claims, which are computed here) by their training topic,
// partition and offset, waiting until none has come for the configured timeout (and
// less when the source has heard nothing for that long). A record is applied only if it decodes
// (featrec.Parse, in place: format version, every field, CRC-32C) and its pipeline fingerprint
// (which hashes the backbone's parameters, the sketch, the seeds and the view shape:
// Features.Fingerprint), its topic, partition, offset and id, and its dimension are
// exactly those of the event and of this State's pipeline. Any other record is never
// applied: it is dead-lettered (stream.ReasonFeatureMismatch, without raw bytes, in
// the batch's transaction, not counted as a consumed input) and its upsert is
// featurized here, as is every upsert left without a valid record; a repeated valid
// record is ignored. The rows computed here are computed by BothViewsTo on those
// points alone.
//
// The result is the same bits whoever featurized: BothViewsTo computes each row
// bit-identically whatever the batch, a record keeps the float32 bit patterns of
// fl32(ψ), which is what this State stores (pipeline.Features "stored in single
// precision"), and a record is checked for the fingerprint of this very pipeline. So
// StateHash does not depend on which rows came from records, and a featurizer that
// dies only delays the batches that wait for its records. The source's own offsets are
// not stored: offsets, state and outputs stay in the one transaction of step 4, and
// exactly-once application is the training reader's, as without featurizers. A
// refused record's dead letter is written at most once (it is lost if the batch does
// not commit).
//
// # Pipeline
//
// Decoding and the features are pure functions of a message's bytes and of the
// pipeline, so they need not wait for the batch before. State.Ahead is the training
// reader's stream.ReaderConfig.Ahead: while Apply works on batch k (its pool update
// and its transaction's fsync, which leave cores idle), the reader's own goroutine
// collects batch k+1 and Ahead decodes every message and computes both views of every
// upsert (not with a FeatureSource, whose featurizers compute them), and files the
// result; the Apply of exactly those messages (same coordinates, key and value bytes)
// takes it and computes nothing twice, and any other Apply ignores it and computes what
// it needs. Everything else (classification, the pool, the one transaction) stays in
// Apply, in order, so offsets still commit with the state they describe and a crash
// loses only what was prepared. Ahead reads only what New fixed (the pipeline, the
// limits), keeps at most two prepared batches (aheadKept) and shares them with a
// successor (Succeed); BothViewsTo's rows do not depend on the batch they are computed
// in, so StateHash does not depend on whether, or how far ahead, a batch was prepared
// (TestAheadSameState). Stats.Phases says where the batches' wall time went.
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
// State.Sync re-selects both pools by batch greedy over all stored points (Select:
// coreset.GreedyRows32 on the cached float32 rows, read in place) and persists the result
// (the core and every point's record). Features missing from the cache are recomputed
// from the cached raw inputs (bit-identical) and kept. It is the only O(n) operation.
// The daemon does not call it: its supervisor runs the same Select in the background
// from a Snapshot and installs it with Adopt, unless points were applied since
// (ErrChanged). Between syncs the certificate is a valid bound; the served landmarks
// after a sync are batch greedy over the stored points, whatever the schedule was.
//
// # Point cache
//
// The State keeps every stored point's input and label in memory, and the features of
// both views computed at ingest (Points, up to cacheBudget bytes): syncs and refits
// need them for all points, and recomputing ψ is the expensive part. The features are
// kept in float32, which is exact: pipeline.Features returns fl32(ψ), the stored
// precision of the fit-draw features, on every path. FeatureRows hands out the cached
// rows themselves, so a sync or refit copies no features. After a restart the features
// are recomputed by the first sync and kept. Memory is 8·D + 4·2q bytes per point
// (39 KB for MNIST at h = 4, s = 1024).
//
// A pool stored under the previous feature algorithm (fingerprint v2, features in
// float64) holds the same points: New re-selects it on the current features
// (rebuildPool, O(n) backbone passes once) instead of refusing it.
//
// # Pool state
//
// The pool is persisted in two parts, so that an applied batch writes O(batch + m²) bytes
// whatever the number n of stored points (docs/architecture.md, "Invariants": per-event
// work must not grow with n outside scheduled sweeps):
//
//   - the core, storage.PoolState{Schema: PoolSchema (5), Data}: coreset.Pool.CoreState
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
// upserted point (putRecord; nothing for deletes), and State.Sync and the adoption of a
// background sync rewrite all n records in the same transaction as the core (the
// scheduled O(n) sweep, putAllRecords, in id order).
//
// The byte layouts of schemas 5, 4, 3, 2 and 1 are in storage/FORMAT.md "Pool state".
//
// Restore (New) reads the core and every record (O(n), once), refuses a store
// whose records do not match its points one to one (a count that differs, a record of
// an id that is not stored, records without a core) with ErrPoolState naming the
// counts or the id, and restores each view with State.Points built from the records.
// Schema 2, written before, held the records inside the blob (O(n) bytes and an
// O(n log n) sort per batch); it is still read, and New converts such a store at
// once (core and all records in one transaction), so a core of schema 3 or later is
// never stored without its records. Schema 3, the layout before
// coreset.Config.Normalize (pool.normalize) existed, is read with Normalize = false;
// schema 4, the layout before coreset.Config.Tolerance (pool.tolerance) and the step
// maxima, and schemas 3 and 2 are read with Tolerance = 0; New rewrites the core of
// either as schema 5 (the records are unchanged). A pool stored under another pivoting
// rule than the configured one (every schema 4, 3 or 2 pool under the default
// pool.tolerance = 0.95) keeps its landmarks and exact certificate, takes the configured
// rule and is stale from position 0, so the next sync re-selects (decodePool). Schema 1
// (which also held the landmark features) is refused.
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
// A State owns its pool and is driven from one goroutine (Reader.Run calls Handle
// on its own goroutine only); it starts no goroutines except entk's, which entk joins
// before returning. Ahead may run concurrently with Apply (on one other goroutine at a
// time, the reader's): it shares only the prepared batches with Apply, under a mutex. The *storage.Store is the caller's and must outlive the State;
// Start only reads it and may be called from any goroutine. Messages handed to Apply
// are not modified, and no reference to them is kept after Apply returns. Features is
// immutable and safe for concurrent use. Logs go to the zerolog.Logger given to
// New, with fields topic, partition, offset, reason.
package ingest
