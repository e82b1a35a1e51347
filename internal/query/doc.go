// Package query answers cairnd's queries: it decodes a batch of the query topic
// (Limits), certifies every valid query on the serving model in one batch, builds the
// attribution events and the dead letters, and accounts what was committed (the query
// count, the metrics, the UI's recent answers). Where the outputs go is the caller's: a
// primary commits them with the batch's offsets in one transaction through its outbox,
// a replica writes them straight to Kafka (package internal/role/replica).
//
// # Answers
//
// A query (by input or by stored id) is answered on the serving model in one of two
// variance models, named in every answer (variance_model):
//
//   - exact_kernel, the default whenever the landmarks' exact rows fit
//     query.exact_memory_bytes: when a model is installed, every landmark's exact eNTK
//     feature row φ(x_ℓ) (entk.ExactTo: the body Jacobian rows and the final Linear's
//     input, so <φ(x), φ(y)> = k*(x, y)) is computed from its stored augmented input and
//     kept in memory as float32 (M·entk.ExactDim·4 bytes, 101 MB for the default convnet
//     at M = 512; nothing of it is stored in bbolt, see storage/FORMAT.md). A query
//     computes its own φ in float64 and the exact row k*(x_ℓ, x_t) as one
//     float32×float64 product; the radii are only the rounding bound
//     entk.ExactRowError times ω_ℓ, and a certified verdict holds with certainty
//     (certify.CertifyBoundedTo; δ is not spent). Such a model makes no evaluation draw.
//     Rows past query.exact_memory_bytes that fit query.exact_disk_bytes are read from a
//     mapped file instead, with the same answers bit for bit; exact_rows says which
//     ("memory" or "disk", serving.ExactRows.Where).
//   - conservative, otherwise: the evaluation draw's heads and SRHT, named
//     "daemon/eval/<version>/<nonce>/<count>" of the model seed and drawn independently
//     of the fit draw; scores Î_ℓt = K^eval(x_ℓ, x_t)·ω_ℓ, radii from the conservative
//     variance bound with exact diagonals (eq. conservative-variance), δ split over the
//     unmasked landmarks only (δ_ℓ = δ/M, Thm. topk). Answers carry seed_hash, the
//     SHA-256 of the draw's seed, not the seed: a draw serves query.draw_queries answers
//     and is then retired, and its seed is published on cairn.status (kind eval_draw)
//     once no answer uses it, so nobody can pick queries against a known draw.
//
// `certified` means: for the served model version, with probability at least 1 − δ
// (with certainty under exact_kernel), the top-K set equals the top-K of
// k*(x_ℓ, x_t)·ω_ℓ over the unmasked landmarks. With R > 1 fits the repeated-fit floor
// (Thm. fit-floor) is a field of its own (fit_floor, plug_in unless κ is exact and
// R ≥ 30); it may turn an uncertified verdict into fit_limited, never a certified one.
// A replica stores no points: it answers a query by id from the input of an unmasked
// gradient point it holds (the labelled stored points the leader publishes on the
// models topic, serving.Model.GradInput, internal/role/replica). Invalid queries,
// unknown ids (unknown_id), on a replica an id it holds no gradient point of
// (unavailable), and queries before any model can exist go to the dead-letter topic
// with the reason.
//
// # Contracts
//
// An Answerer is safe for concurrent use; the serving.Workspace given to Batch belongs
// to the caller for the call. Batch counts nothing: Account counts a batch once its
// outputs are committed, so an answer recomputed after a failed commit counts once.
// The serving model is never modified, except its evaluation draw's use count.
package query
