// Package offline runs cairnctl's offline numeric commands (select, fit, explain, train,
// entk kernel) and the model fits that audit, validate, reproduce and verify certificate
// build on, with the code the daemon runs: the feature pipeline and fit recipe of
// internal/pipeline, the selectors of coreset, the fits of fit and the certificates of
// certify. cairnctl parses the flags into the option structs here and prints what the
// functions return as JSON; nothing here reads flags or writes output.
//
// # Pipeline
//
// Pipeline holds the settings shared by the commands that featurize a data set (--data,
// --arch, --weights, --h, --s, --m, --n, --seed, --normalize, --tolerance).
// Load opens the first N rows of the training split and makes both augmented views of
// every point; Prepare also computes their fit-draw features ψ as float32 rows, exactly
// the values the daemon keeps (the pipeline rounds ψ to float32). SelectViews selects the
// two-view landmark pool (paper Alg. cairn-stage1); Blocks builds the kernel blocks of
// paper Alg. cairn-stage2 after the seeded validation split (ValSplit); FitModel fits
// them with the daemon's recipe.
//
// # Contracts
//
//   - Every random draw is a named stream of internal/base/rng under the Pipeline's seed, so
//     a command's output is a function of its settings (timings aside): the validation
//     split hashes the ids under "cairnctl/fit/val", explain's evaluation draw is
//     "cairnctl/explain/eval", select's SLQ probes "cairnctl/select/slq/<view>".
//   - Errors name the offending setting by its cairnctl flag ("--m: 0 must be ≥ 1"):
//     these functions exist to run cairnctl's commands, and their errors reach its users
//     as they are.
//   - A Prepared owns its slices. SubsetPrepared copies inputs and views but shares the
//     feature rows with its source; neither is modified afterwards except by Featurize
//     and by Blocks, which drops the loaded rows' views once the training rows are split
//     off. The fit recipe scales a Model's kernel blocks in place (pipeline.Recipe.Start):
//     a Model's Prob holds the scaled blocks and Scale the factor.
//   - A BlockCache holds one data set's split at a time and is not safe for concurrent
//     use; everything else keeps no state between calls. The fits and selections use all
//     cores and join their goroutines before returning; FitModel and SelectViews stop
//     early when their context ends.
package offline
