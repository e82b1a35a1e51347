// Package fault is how cairnd's components ride out faults instead of exiting: a
// broker outage, a failed commit (a full disk, an I/O error, a failed fsync) or a
// failed erasure pauses the part of the work it hits, which retries with a doubling
// wait (Backoff, RetryMin to RetryMax) until the fault clears or shutdown is asked for.
// Nothing is lost or applied twice meanwhile: every input is applied by a transaction
// that also records its offset, every output waits in the outbox, and an ingest a
// failure left ahead of the store is rebuilt from it.
//
// # Contracts
//
// A Tracker records what fails now, per component, for /readyz (Tracker.Err) and the
// logs (each fault logged at its first report and then at most once per LogEvery, its
// end logged once); it is safe for concurrent use. Broker says whether the broker
// answers, from polls reported to it; it is safe for concurrent use. A Backoff belongs
// to one goroutine. KeepReading owns the reader it runs and returns only when its
// context ends.
package fault
