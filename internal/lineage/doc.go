// Package lineage builds the OpenLineage (spec 2-0-2) RunEvents cairn writes to
// cairn.lineage for its two kinds of run: a refit, which reads the training topic and
// makes a model version, and an erasure, which reads a data subject's request from the
// erasures topic and removes the subject's points.
//
// # Events
//
// Each run has a START event and then a COMPLETE or a FAIL event (Producer's RefitStart,
// RefitComplete, RefitFail, ErasureStart, ErasureComplete, ErasureFail). Every event has
// the top-level producer (Producer.URI) and schemaURL (RunEventSchemaURL), the job
// (namespace and name, the caller's), the run id, and as input the topic the run read
// (namespace Producer.Kafka, name the topic, OpenLineage's naming for Kafka) with the
// offsets it applied as the input facet cairn_offsets. A COMPLETE event adds as outputs
// the models topic at the new model version (standard facet "version") and the audits
// topic, and the run facets cairn_model, cairn_certificate (the residual certificate
// per view), cairn_coverage and cairn_auditChain (the audit chain's head); an erasure's
// events carry cairn_erasure (request and the subject's keyed hash). A FAIL event
// carries the standard facet errorMessage. Every facet has _producer and _schemaURL:
// the standard ones OpenLineage's, cairn's the $defs of the lineage schema in package
// schemas (FacetSchemaURL). The tests validate every event against the official 2-0-2
// schema, each standard facet against its own, and each custom facet against its
// _schemaURL.
//
// # Run ids
//
// A run id is a UUID version 5 (RFC 9562, SHA-1 name-based) in Namespace of what the
// run is known by when it starts: for a refit the job, the training topic's applied
// offsets and the model version it replaces; for an erasure the job, the request, the
// subject's hash and the request's offset (Refit.RunID, Erasure.RunID). No clock or
// random draw enters, so a replay of the same inputs, a standby, or a daemon that
// re-sends events after a crash names the same run, and START and its COMPLETE or
// FAIL share the id without state between them. The event time is the caller's: pass
// the time recorded with the run's state, not the clock at publication, and a replay
// writes the same bytes (Encode is deterministic).
//
// # Recording
//
// A Recorder writes the events of a deployment (the producer of its build, Build, and
// its jobs) to the lineage topic, keyed by run id, in the transactions it is given
// (storage.Tx: the outbox), and keeps which erasures the training batch being applied
// plans, so that the batch's commit writes their START (Plan, CommitPlanned) unless
// their audit in that batch already did (AuditedAtOnce). A Recorder is used by one
// goroutine at a time; its fields are set before its first use.
//
// # Contracts
//
// The builders validate their arguments and return every problem at once, each
// wrapping ErrInvalid; they neither keep nor modify their arguments (offsets and
// residuals are copied). A Producer is a value and safe for concurrent use. The
// subject of an erasure is accepted only as its 64-digit hex hash: the builders have no
// field for the subject itself.
package lineage
