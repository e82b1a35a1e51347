// Package internal holds cairn's implementation behind its public packages, in two
// layers and a laboratory.
//
// The public packages are entk (with entk/onnx, entk/onnx/onnxpb and entk/weights),
// coreset, fit, certify, storage, stream, schemas (with schemas/schematest), dataset,
// config, daemon and client; the commands cmd/cairnd and cmd/cairnctl are built on
// them. Below them:
//
//   - internal/base/...: the numeric and encoding base (vec, gemm, rng, lanczos, knn,
//     linsvm, binenc, gcpace, par). No I/O, no configuration, no Kafka: functions of
//     their inputs, deterministic, shared by the public numeric packages and the
//     service.
//   - internal/...: the service layer the daemon wires: ingest (training and erasure
//     events into the store and the pool), pipeline (the feature pipeline), serving
//     and query (certified answers; serving/gradref the gradient ranking's slow
//     reference), refit (the fit in phases), modelbus and modeltopic (the models
//     topic), role/replica, role/standby and role/featurizer, featrec and featsource
//     (the features topic: its record, and the primary's reader of it), cluster (the
//     Kafka side: topics, their settings, the embedded broker), fault (retries and
//     readiness), admin (the guarded HTTP surface), ui, status (what /status reports),
//     metrics, lag (consumer lag), auditsig (signed audits), erasure (the data
//     subjects' requests as /status and /metrics show them), receipt (the erasure
//     receipt), lineage (OpenLineage events) and cli (the commands' shared flags).
//     Service packages may import base, never the reverse.
//   - internal/onnxtest: small ONNX models built in Go, for tests.
//   - internal/lab/...: the laboratory, the offline commands' code, importable by
//     cmd/cairnctl and by their own tests: reproduce (the paper's reproduction
//     tables), verify (verification studies), identify (the identifiability table),
//     validate and validate/study (validation against retraining), bench
//     (benchmarks), offline (the offline numeric commands), demo, inproc (a daemon in
//     process) and produce (a data set streamed as upserts). Nothing in the service
//     imports it.
//   - internal/lint: the repository's own rules, as tests.
//
// Each layer's list names every package of the layer (internal/lint, TestLayerDocs).
// docs/architecture.md describes how these parts work together.
package internal
