// Package featurizer is cairnd's featurizer role (config.Role "featurizer"): no store,
// no pool and no serving. A Featurizer joins the consumer group Group on the training
// topic with the other featurizers (Kafka spreads the partitions and moves a dead
// member's partitions to the others), computes the fit-draw features ψ of both views of
// every upsert with the deployment's pipeline (pipeline.NewFeatures on the same model
// and sketch settings as the primary's, so the same fingerprint), and writes each as a
// feature record (internal/featrec) to the features topic (featrec.Topic), keyed by the
// point's id, on the training event's own partition, acknowledged by all in-sync
// replicas. Events below the primary's applied offsets (featrec.AppliedGroup, read
// every readApplied) are skipped: the primary has them already. Deletions, tombstones
// and events that do not decode produce nothing: the
// primary dead-letters what it must, and a consumer of the records computes whatever
// has none itself. A primary with ingest.featurizers set reads them
// (internal/featsource), applies a record only when every field matches its own
// pipeline and event, and computes the rest itself (internal/ingest doc.go
// "Featurizers").
//
// # Bits
//
// A record's features are the primary's to the bit: BothViewsTo computes each row
// bit-identically whatever the batch (pipeline's contract), the record keeps the
// float32 bit patterns of fl32(ψ), and it names the pipeline's fingerprint, which the
// primary compares with its own. Non-finite features are written as computed: the
// primary rejects them as it would its own.
//
// # At least once
//
// A batch's records are acknowledged before the group reader commits the batch's
// offsets: every upsert gets at least one record, and a repeated record (a batch
// handled again after a rebalance or a crash) is identical bytes, since it is a
// function of the event's bytes and coordinates alone.
//
// # Contracts
//
// Run blocks until its context ends and owns the reader it runs; the daemon owns the
// writer (stream.WriterConfig.Partitioned) and runs Run beside its HTTP endpoint.
// Records is called from Run's goroutine only (it reuses its buffers).
package featurizer
