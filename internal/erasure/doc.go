// Package erasure keeps what cairnd shows of the data subjects' requests (internal/ingest,
// "Data subjects"): the requests applied whose audit is not published yet, the last
// erasure whose audit the broker acknowledged, and the request metrics
// (cairn_erasure_seconds and the request counters). It never names a subject other than
// by its keyed hash.
//
// # Contracts
//
// A Tracker is safe for concurrent use, with one exception: Publish is called by one
// goroutine at a time (the daemon calls it under its training lock). Publish neither
// keeps nor modifies the ingest state it reads; the slice Status returns as Pending is
// shared and not to be modified.
package erasure
