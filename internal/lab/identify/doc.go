// Package identify is cairnctl audit's identifiability table (paper appendix D): for
// each ranking of a fitted model's landmarks (displacement, contribution, leave-one-out,
// Latent-Space Reselection) the deletion effect of its top-K against random K-sets, as
// a percentile and a permutation p-value, per fit seed.
//
// # Contracts
//
//   - Table reads the model's problem and fits and does not modify them, except that
//     it adds the "audit" timing to the model's Seconds map, which the report shares.
//   - The random sets are drawn from rng stream "cairnctl/audit/random" under the given
//     seed, the same sets for every ranking and every fit, so a table is reproduced bit
//     for bit from the same model and seed.
package identify
