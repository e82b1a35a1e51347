// Package daemon wires cairn together (DESIGN.md section 2): it is the only package
// that sees Kafka (stream), bbolt (storage) and the mathematics (entk, dataset, coreset,
// fit, certify) at once. Daemon.Run is the service; its training path is package
// internal/ingest, which can be driven alone.
//
// # Run and its components
//
// Run opens the bbolt file (DataDir/cairn.db, checked first with check_on_start),
// binds HTTP (so /readyz answers while the rest starts), starts the embedded broker
// (DataDir/kafka) or waits for the external one, restores the ingest (pool, point cache,
// pending deletions) and the latest model, and runs, each on one goroutine it joins: the
// training reader (handleTrain → ingest.State.Apply), the query reader (handleQueries),
// the refit supervisor (runRefits), the lag poller, the outbox publisher and the HTTP
// server. On ctx's end it stops the readers, the supervisor and any refit
// (fit.RepeatContext stops within one minibatch), drains the outbox for at most
// shutdown_timeout, stops HTTP and closes the broker and the store. Faults never end it
// (faults.go: broker outages, failed commits, a broken ingest are retried with backoff
// and reported on /readyz); a component that fails otherwise (HTTP's listener) ends Run
// with its error, after the same shutdown.
//
// Guards at start (security.go): HTTP binds behind admin.Security built from http_tls
// and http_auth (a token file others may read, or a certificate that does not load,
// fails Run before anything else starts); with kafka.allow_plaintext_sasl a warning is
// logged at every start; and once the topics exist (every role, either broker),
// stream.CheckTopics judges the training, models, audits and erasures topics' settings:
// under kafka.topic_policy enforce a problem ends Run with every setting named, under
// warn each is logged and /readyz answers 503 with them until a restart finds them
// fixed. Topics cairnd creates get TopicConfigs, which pass.
//
// Locks: train.mu guards the ingest and the refit baselines (held by the train handler
// per batch, and by the supervisor while it syncs the pool and takes a snapshot, never
// during a fit); serve.mu serializes changes of the serving model, which readers load
// lock-free (an atomic pointer to an immutable serving value).
//
// # Roles (DESIGN.md section 6)
//
// config.Role (cairnd --role) chooses what Run does:
//
//   - primary (the default): everything above. With the embedded broker it leads from its
//     start. With external brokers it is a candidate of the leader election (leader.go,
//     stream.Election: the consumer group kafka.leader_group on the one-partition topic
//     kafka.topics.leader), preferred when nobody led before, and leads once elected.
//   - standby: the same ingest and refits as a primary, on its own data directory, and no
//     output at all while it does not lead: no publisher, no audits (deletions stay
//     pending), no status events, no model versions. It follows the models topic for the
//     serving model (runFollow) and the audit topic (adopt.go), appending each of the
//     leader's audit records to its own chain once the deletion it reports is applied here
//     (ingest.State.AdoptAudit, which refuses a record that does not extend the chain to
//     the published hash), so its chain is the published one. Determinism makes its
//     replayable state (ingest.StateHash) byte-identical to the leader's at the same
//     offsets; TestRoles checks it. A standby should hold the primary's audit.key (copy it),
//     so that the chain verifies under one pinned key after a takeover.
//   - replica: no store and no ingestion (replica.go). It installs every model version
//     and mask from the models topic and answers the query topic in the consumer group
//     kafka.group with the other replicas; Kafka spreads the partitions and moves a dead
//     replica's partitions to the others. A batch's answers are written to Kafka before the
//     batch's offsets are committed: at least once, a repeat carrying the same request id
//     (the key). A replica answers queries by input only (it has no stored points).
//
// Takeover (takeOver): an elected standby first adopts every audit on the topic, then
// masks every pending deletion in its serving model and enqueues that mask, then leads:
// publisher, model publisher, refits that audit, and (query.on_primary) the query reader.
// Its model versions are numbered above every version on the models topic. The leader
// steps down when a new generation of the election group does not confirm it within half
// the session timeout after the last ended, so two leaders overlap by less than the
// session timeout only when the old one is cut off from the broker and cannot publish.
// A deletion applied while nobody leads (an id that is not stored included) stays pending
// and is audited by the next leader. With query.on_primary (default true) the leader
// answers queries with offsets in its own store; a deployment with replicas sets it
// false, else every query is answered twice.
//
// # The models topic and the deletion fence
//
// The leader publishes every model version it serves on kafka.topics.models (compacted,
// one partition; internal/modelbus): chunks of at most 256 KiB, each with the version's
// SHA-256, then a manifest, then tombstones for every older version's keys (the
// embedded broker compacts at once). Every change of the serving model's mask goes into
// the outbox as a mask record in the transaction of the deletion itself (commitMask), and
// the publisher writes the models topic's entries of each round, acknowledged, before the
// others (stream.PublisherConfig.First).
//
// The fence, precisely: let D be a deletion of a landmark and A its audit. D's mask record
// is committed with D, A later, so the broker acknowledges the mask before A is written.
// A replica, before each batch, reads the models topic's end offset from the broker and
// answers only after applying every record below it (Daemon.fence). Hence every answer
// whose batch a replica began after A was acknowledged is computed on a model with D's
// mask and does not name D's point; an answer begun before may, as an answer of the
// primary committed before D may. A replica never answers with a model older than the
// newest mask it has applied: a mask of version V applies to every model of version ≤ V,
// and a newer version carries its own mask.
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
// removal of their pending records, and a signed checkpoint of the chain head on
// cairn.status. Every audit event carries the audit key's id and its Ed25519 signature
// of seq, prev_hash and hash (internal/auditsig; the key is DataDir/audit.key, published
// on GET /audit/key). A delete of an unknown id is audited at once
// (known: false, no refit). The deletion effect is appendix D's Δ(S) for S the point's
// landmark terms in the model it was deleted from, ranked against audit.random random
// landmark sets of the same size (percentile and permutation p-value); percentile is -1
// when it cannot be computed (the point was no landmark, or no labelled audit points),
// and the body's effect.reason says why. Raw inputs of deleted points are erased from
// their slot files (storage) before any later output is published, and with the
// embedded broker from its files too (tombstones and a compaction, ingest.Outbox).
// The audit states where the tombstone landed (tombstone.partition and offset), stored
// in the pending record in the transaction that acknowledges the tombstone, so a crash
// cannot lose it; an audit written before the broker acknowledged the tombstone (the
// broker was down, or the refit was quicker than the publisher) says so in
// tombstone.unknown instead (ingest.TombstoneNotAcked), and the outbox publishes the
// tombstone before that audit.
//
// The tombstone is one of cairnd's claims on the training topic (ingest doc.go,
// "Versions"): if an upsert of the id produced after the delete landed before it, the
// training reader finds the point stored when it reads the tombstone back and
// republishes it, so the broker's newest record of the id is again the stored value.
// The embedded broker is compacted (erasure, and the models topic's old versions) only
// once the training reader has read every record written before (compact): compaction
// keeps the newest record of each id, and an upsert not read yet would be erased before
// it was applied. While a compaction waits, the outbox does not back-pressure the reader
// (it waits for the publisher, which waits for the reader); a daemon that is stopping
// leaves a compaction it cannot finish, and the acknowledgement of the tombstones it
// erases, to its next start.
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
// of a stopped daemon) is masked by the rule a restart applies (serving.Restore: a
// landmark whose point is no longer stored, or holds another input than the one the
// model was fitted on, is left out), one function for both; a restarted daemon thus
// masks what the live one masked, which drops a landmark's terms as soon as its point
// is deleted or re-upserted with another input. ExportStored
// refuses a configuration whose feature fingerprint differs from the stored pool's.
//
// # UI
//
// /ui on the HTTP address serves internal/ui's pages over the daemon (ui.go: uiSource).
// The daemon records every committed answer in a ui.Recorder (at most ui.answers, by
// request id) and samples a ui.Reading every ui.sample_interval (runUISamples, a work
// component on primaries and standbys, a goroutine of runReplica on replicas): event
// counts, points, pool size, tr R per view, and view A's d_eff from the last sync
// (coreset.NystromDeff with λ = deffRidge·tr K̃/n, or the configured deff λ). A point is
// rendered only while it is stored: from the point cache, or on a replica from the
// serving model's unmasked landmarks.
//
// # Training path
//
// Package internal/ingest holds the training state (ingest.State: the stored points'
// cache, the two-view landmark pool, the pending deletions) and applies each batch of
// cairn.train in one transaction; its doc.go states the batch semantics, the restart,
// the point cache and the pool's storage. The daemon drives it from the training
// reader under train.mu, installs the hooks that mask a leaving landmark in the serving
// model and audit a deletion of an unknown id, rebuilds it from the store when a failed
// commit breaks it (ErrBroken), and snapshots it for refits and background syncs.
package daemon
