// Package internal holds cairn's implementation behind its public packages, in two
// layers and a laboratory.
//
// The public packages are entk, coreset, fit, certify, storage, stream, dataset,
// config, daemon and client. Below them:
//
//   - internal/base/...: the numeric and encoding base (vec, gemm, rng, lanczos, knn,
//     linsvm, binenc, gcpace). No I/O, no configuration, no Kafka: functions of their
//     inputs, deterministic, shared by the public numeric packages and the service.
//   - internal/...: the service layer the daemon wires: ingest (training and erasure
//     events into the store and the pool), pipeline (the feature pipeline), serving
//     and query (certified answers), refit (the fit in phases), modelbus and
//     modeltopic (the models topic), role/replica, role/standby and role/featurizer,
//     featrec (the featurizers' records), cluster (the
//     Kafka side: topics, their settings, the embedded broker), fault (retries and
//     readiness), admin (the guarded HTTP surface), ui, metrics, auditsig (signed
//     audits), lineage (OpenLineage events) and cli (the commands' shared flags).
//     Service packages may import base, never the reverse.
//   - internal/lab/...: the laboratory: the paper's reproduction tables, verification
//     studies, benchmarks, validation against retraining, and the offline commands'
//     code, importable by cmd/cairnctl and by their own tests. Nothing in the service
//     imports it.
//   - internal/lint: the repository's own rules, as tests.
//
// docs/architecture.md describes how these parts work together.
package internal
