// Package demo is cairnctl demo, the README's first command: Run starts the daemon in
// process (inproc.Start), feeds it rows of a data set through Kafka, waits for the
// model fitted on them, asks queries through Kafka, deletes the top-1 point of the
// first answer (a stored point under the default gradient ranking, a landmark under the
// others), asks the first query again to show that the deleted id is gone, and
// shuts the daemon down.
//
// # Contracts
//
//   - Run writes one JSON object per line (NDJSON) to its writer as each step happens:
//     Line, with Event "status", "attribution", "audit" or "summary"; attribution and
//     audit lines carry the event exactly as the daemon wrote it under "data", the last
//     line's data is a Summary. These names are the output contract of cairnctl demo.
//   - Run fails if any step fails or if the deleted id is named again after its audit;
//     the summary is written before that last check, so it reports the violation.
//   - Without Options.DataDir the daemon's state lives in a fresh temporary directory
//     (prefix cairn-demo-) that Run removes before the summary; a given directory is
//     kept. Run returns only after the daemon's goroutine has exited.
//   - Options.Config is copied, not modified; progress and waiting lines go to
//     Options.Stderr.
package demo
