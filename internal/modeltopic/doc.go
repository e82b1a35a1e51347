// Package modeltopic puts the serving model on the models topic and reads it back: the
// leader's Publisher and a follower's Follower, over the messages of package
// internal/modelbus (which knows bytes, not Kafka). The daemon owns the serving model;
// this package sees it through the functions in its configs.
//
// # Publishing
//
// The leader publishes every model version it serves on kafka.topics.models
// (compacted, one partition): content pieces keyed by their SHA-256 (only those not
// live on the topic already), then the version's index, then tombstones for every key
// the version does not name (the embedded broker compacts at once, after deletions).
// A version whose mask grew is published again, with the deleted points' rows zeroed,
// so that compaction drops the copies that held them. Every change of the serving
// model's mask goes into the daemon's outbox as a mask record in the transaction of
// the deletion itself, and the daemon's outbox publisher writes the models topic's
// entries of each round, acknowledged, before the others (stream.PublisherConfig.First).
//
// # Points
//
// The leader also puts the points of its serving model's unmasked gradient rows on the
// topic (modelbus point records), diffed against the live keys every 0.5 s and on each
// kick, before any version: a version fitted after a deletion then follows the deleted
// point's tombstone. A follower hands each run of point records to FollowerConfig.Points
// before it applies the next record of another kind, and its fence passes them only
// once they are handed over.
//
// # Following
//
// A follower (a replica, or a standby and a primary with external brokers while they
// do not lead) assembles versions (modelbus.Assembler), installs each newer one with
// the masks that apply to it, and applies every new mask to the serving model at once.
// A leader reads the topic only for the Floor: the highest version on it, above which
// it numbers its next version, so that replicas (which install only newer ones)
// install it.
//
// # The deletion fence
//
// Let D be a deletion of a landmark and A its audit. D's mask record is committed with
// D, A later, so the broker acknowledges the mask before A is written. Before each
// batch of queries a replica calls Fence: it reads the topic's end offset from the
// broker and returns only after every record below it is applied. Hence every answer
// whose batch a replica began after A was acknowledged is computed on a model with D's
// mask and does not name D's point; an answer begun before may, as an answer of the
// primary committed before D may.
//
// # Contracts
//
// Publisher.Run and Follower.Run block until their context ends and retry failures
// (fault component "models"); they return nil then. Kick, EraseDue, Fence and the
// Floor's methods are safe for concurrent use. A Follower's Install and Mask are
// called on its reader goroutine, one at a time.
package modeltopic
