// Package replica is cairnd's replica role (config.Role "replica"): no store and no
// ingestion. The daemon follows the models topic (internal/modeltopic), which installs
// every model version and mask, and a Replica answers the query topic in the consumer
// group kafka.group with the other replicas; Kafka spreads the partitions and moves a
// dead replica's partitions to the others.
//
// # At least once, behind the fence
//
// A batch's answers and dead letters are written to Kafka (acknowledged) before the
// group reader commits the batch's offsets: answers are at least once, and a repeated
// answer carries the same request id (the key). Before each batch the replica reads
// the models topic's end offset from the broker and answers only after applying every
// record below it (the deletion fence, internal/modelbus): every answer whose batch a
// replica began after a deletion's audit was acknowledged is computed on a model with
// that deletion's mask and does not name the deleted point. A replica never answers
// with a model older than the newest mask it has applied: a mask of version V applies
// to every model of version ≤ V, and a newer version carries its own mask.
//
// A replica keeps the primary's gradient points (Points, from the models topic's point
// records), builds the same gradient rows from them and so answers the gradient
// rankings as the primary does. It answers queries by input, or by the id of a point it
// holds; any other id is a dead letter that says so (internal/query). Its evaluation
// draws are named apart from every other replica's by its data directory.
//
// # Contracts
//
// Run blocks until its context ends and owns the reader it runs; the daemon owns the
// writer, the models-topic follower and the HTTP endpoint, and runs Run beside them.
package replica
