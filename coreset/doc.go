// Package coreset selects and maintains cairn's landmark pool by greedy pivoted Cholesky.
//
// The pool is greedy pivoted
// Cholesky on a feature map (paper section 3.3, Prop. greedy), its residual certificate
// tr R, incremental inserts and deletions, the effective dimension d_eff(λ) exact and by
// stochastic Lanczos quadrature (Lemma deff), the residual budget curve with a power-law fit
// (Cor. noknee), class coverage κ_C (Prop. coverage) and the comparison selectors of the
// paper's Table kappa.
//
// The kernel is always K(x, x') = <ψ(x), ψ(x')> for some feature map ψ: R^D → R^q (the
// sketched eNTK features of package entk, or any other). The package never sees data,
// storage or the network: it takes feature vectors and returns numbers and plain structs.
//
// # Batch selection
//
// Greedy runs pivoted Cholesky on the rows of an n×q matrix: pivot t+1 is the row with the
// largest residual δ^{(t)}_j, ties going to the lower row index. It stops early when the
// largest residual is at most Tol·max_j K_jj (relative tolerance, DefaultTol = 1e-10:
// ~500× the rounding noise of 1000 pivot updates), which bounds the positive pivots by the
// numerical rank (Prop. greedy iii). It never holds an n×m factor (Gram–Schmidt in feature
// space, O(m q + n) memory) unless asked for the Gram matrix the Pool needs. Residuals
// are updated lazily (a stale residual bounds the current one, so a step reads only the
// rows whose bound beats the current maximum) and a final blocked sweep on two cores
// gives every residual and trace: the same bits as updating all n rows at every step,
// without reading the n×q matrix m times. The row norms, the long refreshes and
// Gram–Schmidt passes, the factor and the Gram matrix run in fixed chunks on GOMAXPROCS
// goroutines (internal/base/par), every number with the serial loop's bits, so the
// selection does not depend on the number of cores. GreedyRows32 runs on float32 rows in place
// (the daemon's point cache), widened exactly, with GreedyContext's bits.
//
// Normalized pivoting (GreedyOptions.Normalize, Config.Normalize; the daemon's default,
// config pool.normalize). The raw rule picks the largest δ_j, and δ_j ≤ K_jj, so points
// of small kernel norm are starved: on MNIST (n = 2,000, m = 256 per view) thin-stroke
// digits have small eNTK norms and the pool held no digit 1 at all. With
// Normalize, pivot t+1 is the candidate of largest δ^{(t)}_j/K_jj, ties to the lower row
// index: greedy pivoted Cholesky on the normalized kernel K_ij/√(K_ii K_jj), which
// weighs every point's direction alike whatever its norm, as far as the choice of pivot
// goes. Everything else stays on the raw kernel: the residuals, ResidualTrace and tr R
// (so the certificate is exact for the served landmarks, and somewhat larger than the
// raw rule's, which minimizes it greedily), the factor, PivotValues (raw δ^{(t)}; the
// key is PivotValues[t]/K_pp) and the threshold: a row is a candidate while δ_j >
// Tol·max_j K_jj, so a zero row (K_jj = 0, where the ratio would be 0/0) never is, and
// the selection stops when no candidate is left. The lazy heap orders rows by the ratio,
// which a stale δ_j bounds as before since K_jj is fixed; a top that is current but at
// most the threshold leaves the heap for good. Before the first pivot every candidate's
// ratio is exactly 1, so pivot 1 is the candidate of lowest index (smallest id).
//
// Tolerant pivoting (GreedyOptions.Tolerance τ ∈ [0, 1), Config.Tolerance; config
// pool.tolerance, default 0.6 in the daemon). Late in a selection many candidates have
// nearly equal keys, and the exact argmax among them is decided by the sketch's noise:
// two pools whose sketches differ only in model.seed shared 0.61 (raw) and 0.50
// (normalized) of their points on MNIST (n = 2,000, m = 256 per view), 0.90 and 0.93
// with τ = 0.6 (config's pool.tolerance has the rest). With τ > 0, step t first finds M_t, the
// largest key of a candidate (the exact rule's pivot key), then takes, among the
// candidates whose key is at least (1−τ)·M_t, the one of smallest PivotKey(id), ties to
// the lower row index. PivotKey(id) = rng.Seed(0, "coreset/pivot/<id>") is a hash of
// the id that does not depend on model.seed (the top-up key does), so near-maximal
// candidates are ranked alike under every sketch, in an order that is a fixed uniform
// permutation of the ids, unrelated to how ids are assigned. The key, the candidates,
// the threshold and the stopping rule are the exact rule's; so are the certificate
// (ResidualTrace, Residual and tr R on the raw kernel, exact for the pivots chosen,
// possibly larger or smaller than the exact rule's) and the top-up. τ = 0 is the exact
// argmax, bit for bit. The lazy heap is kept: once its top is current (M_t), the rows
// whose stale key is at least (1−τ)·M_t (the heap positions reachable from the root
// through such keys; no other row can qualify) are taken in PivotKey order and brought
// up to date until one qualifies, which is the pivot; the refreshed positions are
// sifted down and the pivot is removed from wherever it sits. As most rows that were
// within the tolerance still are, a step refreshes a few rows and visits O(n) heap
// entries without reading them: on MNIST (q = 4096, m = 256, float32 rows) the
// selection took 1.0–1.4 s per view at τ = 0.6 against 1.3–1.7 s by the exact rule at
// n = 2,000, and 3.3–6.2 s against 4.0–6.4 s at n = 10,000 (two shared cores; the final
// sweep, the same for both, dominates). Greedy reports, per step, M_t (StepMax) and
// the lowest row holding it (StepMaxRow, none when the pivot's own key is M_t), which
// the Pool needs.
//
// Top-up rule (paper appendix F "Selectors": on Adult the surrogate kernel has rank 96 and
// the remaining landmarks come from a top-up rule the paper does not spell out). Ours:
// when the residual is exhausted before the budget, the remaining landmarks are the
// unselected points with the smallest TopUpKey(seed, id) = rng.Seed(seed,
// "coreset/topup/<id>"), ties by id. That is a seeded uniform sample without replacement
// that depends only on the set of ids, not on arrival order, so a pool stays reproducible
// under any interleaving of events; a new point's key is checked in O(1). Top-up landmarks
// lie in the span of the greedy pivots to within Tol, so they are kept out of the Cholesky
// factor and the residual curve is flat over them.
//
// # Pool contract
//
// A Pool holds the stored points of one view and serves a landmark sequence with its
// certificate; docs/architecture.md, "The landmark pool", states the same contract for the
// daemon:
//
//   - Served pool. The served landmarks change only in Sync and in landmark deletions
//     (which only remove). After Sync they equal batch greedy pivoted Cholesky (plus
//     top-up) over the stored points taken in increasing id order, with the budget in
//     force, and Residual().Trace equals the exact tr R to rounding (relative 1e-9).
//   - Insert(id, ψ) costs O(k q + k²) for k served landmarks, independent of the number n
//     of stored points (BenchmarkPoolInsertRatio: 10^5 vs 10^3 stored points). It adds
//     the new point's exact residual against the served pool to the certificate and, by
//     comparing the point's residual sequence r_t with the pivot values δ^{(t)} (exact:
//     other points' residuals do not depend on the new one until it is chosen), marks the
//     pool stale from the first step t it would take over; near-ties within 1e-9
//     relative count as take-overs, so rounding can cause an unneeded Sync, never a
//     missed one. When the pool reports Stale == false and Exact == true, the served
//     landmarks equal batch greedy over the stored points (a tested property, with and
//     without Normalize).
//   - With Normalize, Insert compares like with like: the point's r_t/K_xx with pivot
//     t's key δ^{(t)}/K_pp (from the stored raw PivotValues and the landmark's K_pp,
//     the bits batch greedy divides), and only while r_t clears the threshold. Before
//     the first pivot both keys are exactly 1 in either computation, so that tie is
//     decided exactly, by id as batch greedy decides it (counted as a near-tie it would
//     make every insert stale). The threshold Tol·max K_jj depends on the stored
//     points, and under Normalize a row at most the threshold may hold a larger ratio
//     than the pivot chosen: an insert that raises max K_jj marks the pool stale from
//     the first pivot whose raw δ^{(t)} no longer clears the new threshold, and a
//     deletion of a point that may have held max K_jj (Tol·K_jj at least the stored
//     threshold) marks it stale from 0, as nothing cheaper bounds where the lower
//     threshold lets a row in (about 1 deletion in n). Without Normalize or Tolerance
//     neither case arises: max K_jj is pivot 0's δ, and a point that raises it takes
//     over pivot 0.
//   - With Tolerance τ > 0, step t's choice is the qualifying candidate (key at least
//     (1−τ)·M_t) of smallest PivotKey, and the other points' keys at step t do not
//     depend on a new one, so Insert marks the pool stale from the first step t at which
//     the point is a candidate and either qualifies (against the stored M_t, StepMax)
//     with a PivotKey below pivot t's (ties by id), or raises the max so far that pivot
//     t's key falls below (1−τ) times the point's key; near-ties within 1e-9 relative
//     count, as above. The stored M_t is not raised by inserts between syncs: a later
//     insert then qualifies against a max that may be too low, which can only mark more.
//     A point that raises max K_jj raises the threshold also under Tolerance (see
//     above), and marks the pool stale too from the first step whose recorded max holder
//     (raw residual M_t, or M_t·K_hh under Normalize) no longer clears it. Deleting a
//     point that is not pivot t changes step t only if it holds M_t: the max then falls
//     and candidates of smaller PivotKey may qualify. StepMaxIDs records, per step, the
//     lowest id holding M_t (none where pivot t's own key is M_t: the max then stays
//     while the pivot is stored), and Delete marks the pool stale from the first step
//     whose max the point held, by a map from holder to step (O(1); forgetting the
//     holder costs O(k), once). Under Normalize every key before the first pivot is
//     exactly 1, so M_0 never rises and no insert is stale at step 0 for raising it.
//     Its O(k q) part is the k products with the landmarks (vec.Dot's bits); CrossTo
//     computes them for a whole batch in one blocked sweep and InsertCross takes them,
//     recomputing them if the landmarks changed since, with the same result as Insert.
//   - Delete(id) of a non-landmark subtracts its stored residual, O(1), and never changes
//     the greedy sequence, except (above) under Normalize or Tolerance. Delete of a landmark removes it from the served pool at once
//     (no served landmark ever names a deleted point), repairs the Cholesky factor by a
//     pivot deletion (Givens rotations, O(k²), no rebuild), adds to the certificate an
//     upper bound of the mass the landmark explained (from the k×k Gram matrix of the
//     stored points' pivot coordinates, see deletePivot), flags the certificate inexact
//     and marks the pool stale from the landmark's position; the next Sync re-selects.
//   - Between syncs Residual().Trace is an upper bound on the exact tr R of the served
//     landmarks over the stored points (equal to it while Exact), up to rounding. It is
//     not a bound on what the next Sync will report, which may select other landmarks.
//   - Sync(src) is the only operation whose cost grows with n: it asks src for the
//     features of every stored point (the Pool keeps features only of its landmarks) and
//     reruns batch greedy: O(n q m) time, O(n q + n m) transient memory (the daemon
//     uses Config.PlanRows32, GreedyRows32 and Pool.AdoptRows32 on its cached rows
//     instead: O(n m) transient memory). With a fixed
//     budget and nothing stale or inexact it returns at once. With the budget rule
//     deff:λ it re-estimates m = ⌈d_eff(λ)⌉ by SLQ (seeded by Config.Seed) whenever
//     points changed.
//   - Memory between syncs: per stored point its id, K_jj and residual (lower bound after a
//     landmark deletion); per landmark its features; the k×k factor and Gram matrix; per
//     greedy step its max and holder. No n×m factor is kept.
//   - State() is a deep copy of everything persisted; Restore(State) validates it (it may
//     come from disk) and returns a pool that behaves identically (round-trip test through
//     JSON). Float fields survive encoding/json exactly.
//   - Insert of an id already stored returns ErrDuplicateID: an upsert is Delete then
//     Insert. Feature vectors passed in are never modified or retained.
//
// Pair holds the default two pools of an augmented-view pair (paper Alg. cairn-stage1,
// M = 2m landmarks). A Pool or Pair is not safe for concurrent use; the daemon owns it
// from one goroutine.
//
// # Binary encoding
//
// State and the per-point records of a Pair have one binary encoding, owned here so that
// it changes with the types (the daemon stores it; storage/FORMAT.md "Pool state" is the
// file's view of the same layout). State.AppendBinary writes the core, every field but
// Points and LandmarkFeatures, in declaration order (Config's and its structs' fields in
// theirs), each in the internal/base/binenc encoding of its Go type: int as i64, uint64 as
// u64, float64 as f64, bool as a 0/1 byte, Landmarks as strings, the float slices as
// floats, TopUpKeys as u64s. DecodeState reads it back from the front of a byte slice
// and returns the bytes after it. Three earlier layouts, which nothing writes any more,
// are still read, all without Config.Tolerance (the last field of Config, an f64 at
// offset 82), StepMax and StepMaxIDs (after PivotValues), which they decode as 0 and
// nil: DecodeStateWithoutTolerance reads the core as it was before those fields,
// DecodeStateWithoutNormalize the one before, also without Config.Normalize (one byte
// at offset 81, decoded as false), DecodeStateWithPoints the one before that, which
// also held Points (after Config). Restore takes a missing StepMax from the pivots'
// keys (what it is under the exact argmax). A pool restored from them pivots by the
// exact argmax (and raw residuals, for the two oldest) until its owner changes that
// (the daemon takes its configured rule and marks the pool stale from 0, so the next
// Sync re-selects; Restore accepts a state under Tolerance without StepMax only when it
// is stale from 0). AppendPairRecord
// writes one point's record, a.Diag, a.Residual, b.Diag, b.Residual as f64
// (PairRecordLen = 32 bytes); DecodePairRecord reads it. Equal values give equal bytes
// and every accepted encoding is canonical (fuzzed). The decoders check the encoding
// only, never panic, and refuse malformed bytes with ErrState naming the field; Restore
// checks the values. A new State field is a new layout (TestStateFields fails until the
// encoding, its readers and the file format are updated).
//
// # Effective dimension
//
// DeffExact uses dense eigenvalues of the smaller Gram matrix (min(n, q) squared).
// DeffSLQ uses stochastic Lanczos quadrature (internal/base/lanczos) with Hutch++-style
// deflation of the top-k subspace and reports the standard error over probes. λ is
// absolute: d_eff(cλ; cK) = d_eff(λ; K) (Lemma deff iii), so scale λ with the kernel.
//
// # Selectors
//
// Select runs random, kmeans++ (input space), pc (RBF surrogate on inputs, median
// bandwidth), pc-ntk (default), dpp (projection DPP on the sketch) or kcenter (farthest
// point on the sketch), each from its own named stream, so equal inputs give equal
// output. Inputs are never modified.
package coreset
