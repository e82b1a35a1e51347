// Package daemon wires cairnd (docs/architecture.md): it is the only package that sees
// Kafka (stream), bbolt (storage) and the mathematics at once, and it builds and runs
// the components that live in packages of their own. Daemon.Run is the service.
//
// # Components
//
// Run opens the bbolt file (DataDir/cairn.db, checked first with check_on_start) and the
// audit key (DataDir/audit.key), binds HTTP behind its guard (internal/admin, so that
// /readyz answers while the rest starts), connects to Kafka (internal/cluster: the
// embedded broker or the external one, the topics and their check), restores the
// ingest (internal/ingest) and the latest model (internal/refit), and runs, each on one
// goroutine it joins: the training reader, the refit supervisor, the lag poller, the
// UI's samples, the topic watch, and the components of its role. On ctx's end it stops
// them (a refit stops within one minibatch), drains the outbox of a leader for at most
// shutdown_timeout, stops HTTP and closes the broker and the store. Faults never end it
// (internal/fault: broker outages, failed commits, a broken ingest are retried with
// backoff and reported on /readyz); a component that fails otherwise (HTTP's listener)
// ends Run with its error, after the same shutdown.
//
// # Roles
//
// config.Role (cairnd --role) chooses the role. A primary with the embedded broker
// leads from its start: the outbox's publisher, the models topic's publisher
// (internal/modeltopic), refits that audit deletions, and with query.on_primary the
// query reader (internal/query). With external brokers the primary and its standbys
// are candidates of the leader election and follow the models and audit topics until
// elected (internal/role/standby). A replica has no store and no ingestion: it follows
// the models topic and answers queries in the replicas' consumer group
// (internal/role/replica). A featurizer has no store either: it computes the training
// upserts' features in the featurizers' consumer group and writes them as feature
// records (internal/featrec) to cairn.features (internal/role/featurizer). A primary or
// standby with ingest.featurizers reads them (useFeaturizers, internal/featsource) and
// applies a record only when it matches the event and its own pipeline; it featurizes
// itself the upserts whose records are missing, invalid or late (a batch waits
// ingest.featurizer_timeout for its next record).
//
// # What the daemon itself does
//
// It holds the serving model (an atomic pointer to an immutable serving.Model, changed
// under serve.mu) and installs new versions with the deletions since their snapshot
// masked; it masks a leaving landmark in the serving model before the deletion's batch
// commits and enqueues the mask on the models topic in that transaction (commitMask),
// so that the mask is acknowledged before the deletion's audit (the deletion fence,
// internal/modeltopic). It commits a refit (the model, its fit statistics, the audits
// of the deletions its snapshot reflects, hash-chained and signed, a checkpoint and the
// status event, in one transaction), audits a deletion of an unknown id at once, and
// compacts the embedded broker once the training reader has read what compaction
// would erase (compact). It drives the ingest from the training reader, installs its
// hooks (mask a leaving landmark, audit a deletion of an unknown id, enqueue the mask),
// rebuilds it from the store when a failed commit breaks it (ErrBroken), and snapshots
// it for refits and background syncs. train.mu guards the ingest and the refit
// baselines (held by the train handler per batch, and by the supervisor while it syncs
// the pool and takes a snapshot, never during a fit).
//
// /ui serves internal/ui's pages over the daemon (uiSource): every committed answer is
// recorded (ui.Recorder) and a ui.Reading sampled every ui.sample_interval; a point is
// rendered only while it is stored, from the point cache or, on a replica, from the
// serving model's unmasked landmarks.
//
// Model export (GET /model, Export, ExportStored) prints a model version so that a
// third party can recompute every score of an answer (serving.ModelExport); a stored
// version is masked by the rule a restart applies (serving.Restore).
//
// The backbone is a built-in architecture or an ONNX export (model.file, opened by
// internal/pipeline). New logs it and each of the ONNX loader's warnings with its fix;
// every answer states the kernel's parameter coverage, and /status (status.Backbone),
// GET /model (per tensor) and the UI show it (backbone.go). An ONNX model's embedding
// inputs are validated by the decoders (stream.Limits.Indices, reason bad_index).
package daemon
