// Package study runs cairnctl validate end to end: cairn's rankings against retraining,
// the study the default ranking is picked by (docs/validate/README.md). Package validate
// holds its arithmetic (halves, LDS, TRAK, the deletion test, the report); this package
// trains the networks, fits and serves the models (internal/lab/offline,
// internal/serving) and feeds them to it.
//
// # The steps
//
//  1. The stored points are the first --n rows of the training split. A backbone of the
//     data set's default arch is trained on them from its seeded initialization with
//     cairnctl train's trainer (offline.Train: entk.Train, Workers 2, --train-epochs,
//     --train-batch, --train-lr; defaults those of cairnctl train) and written as a
//     safetensors file, the weights the served model is built on.
//  2. The served model is built as cairnctl fit and explain build theirs
//     (offline.FitModel: fit-draw features of both views, the two-view PC-NTK pool on
//     the training rows after the --val-frac split, the daemon's fit recipe with one
//     fit), then served (serving.New with the daemon's default query settings: exact
//     eNTK rows when they fit query.exact_memory_bytes).
//  3. Every query (the first --queries rows of the test split) gets a score per stored
//     point from each ranking (validate.DisplacementTo, RepresenterTo, the eNTK row; on the
//     model's exact rows when it has them, else on the fit draw's kernel; every ranking's
//     top-K is checked against serving.Model.AnswerRanked) and each baseline (random; TRAK
//     on the fit draw's ψ of the plain, unaugmented inputs, ridge --trak-ridge times the
//     mean ‖ψ‖²; class, 1 for the points of the query's class: what the class composition
//     of a half alone predicts). As a diagnostic, each ranking is also scored signed by
//     the class the served backbone predicts for the query (validate.SignedTo), reported
//     under "signed". The linearized-margin study rows (validate.MarginRows) take the
//     served backbone's exact gradients: J_tᵀ u_t of each query's predicted-class margin
//     and J_iᵀ g_i of each point, on the landmarks' view inputs and on every stored
//     point's plain input (marginScores): one backward pass per query, one forward and two
//     backward passes per point.
//  4. --halves seeded halves of the stored points (validate.Halves). On each, --retrains
//     networks are trained again with the same options, the first from the served
//     backbone's seeded initialization (so with one retrain the halves differ only in
//     their data), and cairn's encoder is refitted (selection and fit, as in 2, on the
//     frozen served backbone). The network's target is the query's correct-class margin
//     (correct logit minus the largest other one), averaged over the half's networks; the
//     encoder's is the query's correct-class 50-NN cosine confidence against the half's
//     stored points, all embedded from their plain inputs (validate.CorrectConfidenceTo).
//     LDS is the Spearman correlation, across halves, of Σ_{i∈half} score_i with the
//     target, averaged over queries (validate.Score).
//  5. Deletion: for each query the top-1 (and top-10) landmark points of a ranking lose
//     their terms in the served encoder; the drop of the query's correct-class confidence
//     against the stored points' plain-input latents is ranked among the drops of --random
//     random landmark-point sets of the same size (shared by every ranking and query),
//     strictly (certify.Percentile, the paper's π) and with ties counted half
//     (validate.MidrankPercentile); the medians over queries are reported.
//  6. Deletion against retraining (retrainDeletion), for the rankings of
//     --retrain-deletion-rankings: for each of the first --retrain-deletion-queries
//     queries, the ranking's top --retrain-deletion-k stored points are left out of the
//     served backbone's training (entk.TrainOptions.Leave: its seed, every other point in
//     the minibatches and steps it had) and the drop of the query's correct-class margin
//     is ranked among the drops of --retrain-deletion-random random sets of as many points
//     left out the same way, strictly and mid-rank; the medians over queries are
//     reported. A set that several queries or rankings share is trained once.
//
// # Contracts
//
//   - Every draw is named: the served backbone's initialization and shuffling come from
//     --seed, retrained network r > 0 of a half from stream cairnctl/validate/retrain/<r>,
//     the halves, random scores and random deletion sets from package validate's
//     streams, the retraining deletion test's random sets from RetrainDeletionStream,
//     the served model's evaluation draw from cairnctl/validate/eval. A report is a
//     function of its Options, timings aside.
//   - Run writes the served backbone to a temporary directory it removes before
//     returning, reports progress lines on the writer it is given, and modifies nothing
//     it is passed. It runs the fits and trainings on all cores and joins their workers
//     before returning.
//   - Errors name the offending setting by its cairnctl flag; Check reports every
//     invalid setting at once.
package study
