// Package bench runs cairnctl's benchmarks of a running cairn. Run is cairnctl bench: a
// daemon started in this process (internal/lab/inproc) is fed and queried through
// package client, its answers are checked against an exact-kernel reference built from
// the exported model alone (CheckAnswers), and its ingest rate, query latencies,
// open-loop loads, refit and deletion-to-audit times are reported (Report). Scale is
// cairnctl bench-scale: cairnd processes on one embedded broker, replica throughput, a
// replica killed under load and a standby's takeover (ScaleReport). Phases times a
// refit's phases on n points at chosen GOMAXPROCS values, back to back, in process
// (BenchmarkRefitPhases prints its table for docs/performance.md, "Cores").
//
// # Contracts
//
//   - Absolute rates and latencies depend on the machine and what else runs on it; each
//     report says so and carries a ratio measured in the same run (bench's
//     ingest_vs_features_ratio, bench-scale's speedups) as the number to compare. Run
//     also reports that ratio load-corrected (schedstat.go: each rate over the share of
//     a core the machine's other work left it) and where the ingest's time went by
//     phase (ingest.Phases).
//   - CheckAnswers reads only the model export and full Jacobians (entk.JacobianTo),
//     none of the query path's code, and runs on all cores, joining its workers.
//   - Run and Scale own every daemon, process, broker, goroutine and directory they
//     start: all are stopped, joined or removed before they return (Scale keeps its
//     directory with ScaleOptions.Keep), and their reports hold what was measured up to
//     an error. They reach Kafka and HTTP as any client of package client does.
//   - Errors name the offending setting by its cairnctl flag.
//   - Phases sets GOMAXPROCS for each run and restores it before returning, so nothing
//     else should run in the process meanwhile; it fails if two runs fit different
//     models. Its load correction (schedstat.go) reads Linux's per-thread scheduler
//     statistics and is NaN elsewhere.
package bench
