// Package standby is the candidates' side of cairnd's roles with external brokers: a
// standby (config.Role "standby") and a primary both take part in the leader election
// (Candidate, over stream.Election: the consumer group kafka.leader_group on the
// one-partition topic kafka.topics.leader; the primary is preferred when nobody led
// before), and while they do not lead they adopt the leader's audits (Adopter).
//
// # Standby
//
// A standby runs the same ingest and refits as a primary, on its own data directory,
// and no output at all while it does not lead: no publisher, no audits (deletions stay
// pending), no status events, no model versions. It follows the models topic for the
// serving model (internal/modeltopic) and the audit topic (Adopter), appending each of
// the leader's audit records to its own chain once the deletion it reports is applied
// here (ingest.State.AdoptAudit, which refuses a record that does not extend the chain
// to the published hash), so its chain is the published one. Of several records offered
// for one seq (a forged one may share it), the first that extends the chain is the
// leader's; the others are logged and dropped. Determinism makes its replayable state
// (ingest.StateHash) byte-identical to the leader's at the same offsets (the daemon's
// TestRoles checks it). A standby should hold the primary's audit.key (copy it), so
// that the chain verifies under one pinned key after a takeover; a record under this
// daemon's key id must verify under it.
//
// # Takeover
//
// An elected candidate first adopts every audit on the topic (Adopter.All), then hands
// over (CandidateConfig.Handover: the daemon masks every pending deletion in its
// serving model and enqueues that mask), then leads (CandidateConfig.Lead: publisher,
// model publisher, refits that audit, and with query.on_primary the query reader). A
// failed takeover is retried with a doubling wait, never abandoned, or nobody would
// lead. Its model versions are numbered above every version on the models topic. The
// leader steps down when a new generation of the election group does not confirm it
// within half the session timeout after the last ended, so two leaders overlap by less
// than the session timeout only when the old one is cut off from the broker and cannot
// publish. A deletion applied while nobody leads (an id that is not stored included)
// stays pending and is audited by the next leader. With query.on_primary (default
// true) the leader answers queries with offsets in its own store; a deployment with
// replicas sets it false, else every query is answered twice.
//
// # Contracts
//
// Adopter.Run and Candidate.Run block until their context ends and own every
// goroutine they start (the election's lead goroutine included: Run returns after
// Lead has returned). An Adopter is safe for concurrent use (Handle from Run's reader,
// All from the takeover); its records are adopted one at a time. Election errors are
// logged, not reported as faults: a rebalance, which a replica joining causes,
// reports one.
package standby
