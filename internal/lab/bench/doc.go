// Package bench holds cairnctl's benchmarks of a running cairn: the report of cairnctl
// bench (Report) with the parts of it that need no daemon (CheckAnswers against an
// exact-kernel reference built from the exported model alone, the open-loop load's
// pairing of queries with answers, resident memory, the bare feature rate), and cairnctl
// bench-scale whole (Scale: cairnd processes on one embedded broker, replica
// throughput, a replica killed under load, a standby's takeover).
//
// # Contracts
//
//   - Absolute rates and latencies depend on the machine and what else runs on it; each
//     report says so and carries a ratio measured in the same run (bench's
//     ingest_vs_features_ratio, bench-scale's speedups) as the number to compare.
//   - CheckAnswers reads only the model export and full Jacobians (entk.JacobianTo),
//     none of the query path's code, and runs on all cores, joining its workers.
//   - Scale owns every process, broker and directory it starts: all are stopped or
//     removed before it returns (the directory is kept with ScaleOptions.Keep), and its
//     report holds what was measured up to an error. It reaches Kafka as a client of
//     package client would.
//   - Errors name the offending setting by its cairnctl flag.
package bench
