// Package knn is k-nearest-neighbour evaluation on embeddings under cosine similarity: the
// majority-vote accuracy that fit uses to select checkpoints and report results, and the
// 50-NN confidence that certify uses in the deletion audit (paper appendix
// "Identifiability", conf(S)).
//
// # Contracts
//
//   - Embeddings are compared by cosine similarity: New and Predict normalize rows to unit
//     length on private copies; the caller's matrices are never modified. A zero row stays
//     zero and has similarity 0 with everything.
//   - Neighbours are ranked by similarity, descending, ties by reference row index,
//     ascending, so results are a deterministic function of the inputs.
//   - Majority vote: the predicted class is the most frequent label among the k nearest
//     neighbours; a tie in counts goes to the tied class whose best-ranked neighbour is
//     nearest. Share is that class's count divided by k (the neighbour count actually used,
//     min(k, number of candidates)).
//   - A Classifier is immutable after New and safe for concurrent use. New, Predict and
//     LeaveOneOut run on GOMAXPROCS goroutines (the normalization and each query's
//     selection in chunks, internal/base/par), joined before they return; the results do not
//     depend on how many.
//   - Labels are non-negative ints; shape mismatches are programmer errors (panic),
//     negative labels and empty inputs are returned as errors.
package knn
