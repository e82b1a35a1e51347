// Package identify is cairnctl audit's identifiability table (paper appendix D): for
// each ranking of a fitted model's landmarks (displacement, contribution, leave-one-out,
// Latent-Space Reselection) the deletion effect of its top-K against random K-sets, as
// a percentile and a permutation p-value, per fit seed; and its per-query form
// (Top1Study, cairnctl audit --top1): each test query's top-1 landmark under the exact
// similarity and its variations, deleted alone, against every other landmark's removal.
//
// # Contracts
//
//   - Table reads the model's problem and fits and does not modify them, except that
//     it adds the "audit" timing to the model's Seconds map, which the report shares.
//   - Top1Study reads the model and does not modify it; it draws nothing (every landmark's
//     single-removal effect is computed), so its report is a function of the model.
//   - The random sets are drawn from rng stream "cairnctl/audit/random" under the given
//     seed, the same sets for every ranking and every fit, so a table is reproduced bit
//     for bit from the same model and seed.
package identify
