package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// State applies batches of cairn.train messages to the store and the two-view landmark
// pool (docs/architecture.md, "Events" and "State and storage"). It owns the pool; see
// doc.go "Apply" for the batch semantics. A State is not safe for concurrent use: one
// goroutine (the stream.Reader's Run, through Handle) drives it.
type State struct {
	store *storage.Store
	feat  *pipeline.Features
	pool  *coreset.Pair
	pcfg  coreset.Config
	lim   stream.Limits
	dlq   string
	// dlqRaw keeps raw bytes in dead letters (kafka.dlq_keep_raw).
	dlqRaw bool
	stale  float64
	log    zerolog.Logger

	// cache holds every stored point's input and label, and the features computed at
	// ingest (see Points); hooks connect deletions to the serving model and audits.
	cache *Points
	hooks Hooks
	// subjects names data subjects (erasure.go); train is the training topic, where an
	// erasure's tombstones go, and erasures the topic of the subjects' requests, read
	// with the training topic. subj caches, per batch, what the store says of each
	// subject the batch names, updated as the batch goes.
	subjects *SubjectKey
	train    string
	erasures string
	subj     map[storage.SubjectHash]*subjectState
	// pending are the applied deletions of stored points whose audit is not emitted yet
	// (mirrored from the store's pending bucket), in seq order; pendSeq is the last seq.
	pending []*Deletion
	pendSeq uint64
	// version counts the batches that changed the stored points: a sync computed in the
	// background from a snapshot is adopted only if it is unchanged.
	version uint64

	// last mirrors the stored offsets: the last applied offset per topic partition, or
	// past it, the last claim read (claims.go); tombs collects one batch's claims.
	last  map[partition]int64
	tombs map[partition]int64
	// deleted mirrors the store's deleted bucket: the ids deleted here whose tombstone
	// was not read back yet, with the deletion's version (doc.go, "Versions").
	deleted map[string]int64
	// repub are the republications a batch enqueues (plan), claimWrites whether its
	// claims change anything stored.
	repub       []republication
	claimWrites bool
	// relabeled are a batch's stored ids whose label alone changes (Hooks.Relabeling).
	relabeled []string
	// broken is set when the in-memory pool may be ahead of the store.
	broken error
	stats  Stats
	// returned is when the last Apply returned (Phases.Between).
	returned time.Time
	// ahead holds the batches Ahead prepared, shared with Ahead's goroutine.
	ahead *aheadStore

	// Reused across batches so the steady state allocates little besides what the
	// store and the pool allocate.
	ops   []op
	ids   []string
	xs    []float64
	views []float64
	feats []float64
	cross [2][]float64 // per view: the upserts' products with the landmarks (applyView)

	// src gives features computed by featurizers, waiting srcWait per batch
	// (featuresource.go); the rest are its buffers, reused, and per batch the refused
	// records' dead letters and the count of rows taken from records.
	src           FeatureSource
	srcWait       time.Duration
	reqs          []FeatureRequest
	reqOps, lrows []int
	got           [][]stream.Message
	have          []bool
	lids          []string
	lxs, lfeats   []float64
	featDead      []stream.Message
	batchTaken    int
}

type partition struct {
	topic string
	part  int
}

type opKind uint8

const (
	opSkip    opKind = iota // offset already applied: nothing, not even the offset
	opDead                  // rejected: dead letter plus offset
	opUpsert                // store the point, insert into the pool
	opDelete                // remove from store and pool
	opClaim                 // a claim (claims.go) that changes no point
	opErase                 // a tombstone newer than the stored point: remove it, without an audit
	opErasure               // a subject's erasure request: remove its points, block it (erasure.go)
	opUnblock               // a subject's unblock request (erasure.go)
)

// Hooks let the owner of a State see deletions as they are applied (all optional).
// They are called on the goroutine that calls Apply.
type Hooks struct {
	// Removing is called, before the batch commits, with the stored ids that leave the
	// pool in it (deleted, or replaced by an upsert): the serving model drops their
	// landmark terms at once, so no answer committed after the deletion names them.
	Removing func(ids []string)
	// Relabeling is called like Removing with the stored ids whose upsert in the batch
	// keeps the input bit for bit but changes the label: their landmark terms stay exact,
	// their gradient rows (the gradient ranking's, which use the label) do not.
	Relabeling func(ids []string)
	// Describe fills in the deletion record what the serving model says about the id
	// (its version, whether the id is one of its unmasked landmarks).
	Describe func(rec *Deletion)
	// Unknown writes, inside the batch transaction, the audit of a deletion of an id
	// that is not stored (nothing to refit, so it is answered at once), and reports
	// whether it did: a daemon that does not lead leaves it (audited false), and the
	// deletion is then stored as pending like any other, for the leader's audit.
	Unknown func(tx *storage.Tx, rec *Deletion) (audited bool, err error)
	// Commit is called last inside every batch transaction that writes state, after
	// Removing: the owner enqueues what the batch's hooks prepared (the daemon: the
	// serving model's new deletion mask, in the transaction of the deletion itself).
	// An error aborts the batch.
	Commit func(tx *storage.Tx) error
}

type op struct {
	kind opKind
	msg  stream.Message
	ev   stream.TrainEvent
	row  int            // upsert: row in ids/xs and pair of rows in feats
	dead stream.Message // dead letter to enqueue
	rej  error          // why it was rejected
	had  bool           // delete: the pool held the id
	rec  *Deletion      // delete: the audit record
	// deferred: a delete of an unknown id whose audit the Unknown hook left to the
	// leader, stored as pending
	deferred bool
	// isClaim: the message is one of cairnd's claims (claims.go), cl what it claims. It
	// stores no offset; plan decides whether it is applied (opUpsert, opErase) or not
	// (opClaim).
	isClaim bool
	cl      claim
	void    bool // a republication that does not decode: it changes nothing
	// forget: the id's awaited deletion leaves the deleted bucket (an upsert applied,
	// or the deletion's tombstone read back).
	forget bool
	// subj is the subject an upsert names (nil: none) or an erasure request's; er the
	// request, recs its audit records (an erasure's points in chunks), audited whether
	// the Unknown hook audited the record at once (nothing erased, or an unblock).
	subj    *storage.SubjectHash
	er      stream.ErasureEvent
	recs    []*Deletion
	audited bool
	// scrub: a dead letter of an erased subject's upsert, whose bytes a tombstone erases
	// from the training topic (erasure.go, scrubClaim).
	scrub bool
}

// Stats are cumulative counts since the State was built.
type Stats struct {
	Batches     uint64 `json:"batches"`      // committed transactions
	Upserts     uint64 `json:"upserts"`      // applied upserts (including replacements and republications)
	Deletes     uint64 `json:"deletes"`      // applied deletes of stored points
	Erased      uint64 `json:"erased"`       // points removed by a newer tombstone (doc.go, "Versions")
	Missing     uint64 `json:"missing"`      // deletes of ids that were not stored (offset consumed, nothing else)
	DeadLetters uint64 `json:"dead_letters"` // rejected messages sent to the dead-letter outbox
	Skipped     uint64 `json:"skipped"`      // messages at or below the stored offset (re-deliveries), ignored
	Syncs       uint64 `json:"syncs"`        // pool syncs that changed the served pool
	// Data subjects' requests applied (erasure.go): erase requests, the points they
	// removed, and unblock requests.
	Erasures     uint64 `json:"erasures"`
	ErasedPoints uint64 `json:"erased_points"`
	Unblocks     uint64 `json:"unblocks"`
	// With a feature source (SetFeatureSource): the upserts whose features came from a
	// featurizer's record, and the records refused (dead-lettered, feature_mismatch).
	FeaturesTaken  uint64 `json:"features_taken"`
	FeatureRefused uint64 `json:"feature_refused"`
	// Phases is where the batches' wall time went.
	Phases Phases `json:"phase_seconds"`
}

// Phases are the cumulative wall seconds of Apply's steps (doc.go "Apply") over the
// batches applied, for the benchmarks' phase tables. For a batch prepared ahead
// (doc.go "Pipeline"), Decode and Features are only what Apply still does (classify,
// copy the prepared rows) and Between includes the wait for Ahead.
type Phases struct {
	// Between: from the return of one Apply to the call of the next (the reader's
	// fetch, the owner's work between batches).
	Between float64 `json:"between"`
	// Decode: classifying and decoding (step 1); Features: computing or waiting for
	// the features (step 2); Pools: planning and updating both views' pools and
	// encoding the core (step 3); Commit: the transaction with its fsync and
	// erasures, and mirroring it in the cache (steps 4 and 5).
	Decode   float64 `json:"decode"`
	Features float64 `json:"features"`
	Pools    float64 `json:"pools"`
	Commit   float64 `json:"commit"`
	// Ahead: the wall time Ahead took on the reader's goroutine to prepare the batches
	// applied (decoding and features), overlapping the Applies before them.
	Ahead float64 `json:"ahead"`
}

// lap adds the time since *t to *sec and moves *t to now.
func lap(sec *float64, t *time.Time) {
	now := time.Now()
	*sec += now.Sub(*t).Seconds()
	*t = now
}

// BatchResult counts what one Apply did.
type BatchResult struct {
	Upserts, Deletes, Missing, DeadLetters, Skipped int
	// Erased counts the points a tombstone newer than them removed (no audit: the
	// deletion it restates was audited where it was applied).
	Erased int
	// Reasons has the reason of every dead letter (a refused feature record's included:
	// feature_mismatch); Deleted the record of every delete
	// (Known false for ids that were not stored); Subjects the records of the subjects'
	// erasure and unblock requests (Kind set), and Erasures the points the erasures
	// removed.
	Reasons  []stream.Reason
	Deleted  []*Deletion
	Subjects []*Deletion
	Erasures int
	// Stored are the ids the batch's upserts stored, in offset order (an id upserted
	// twice appears twice; Points has its latest value).
	Stored []string
}

// PoolConfig is the landmark pool configuration the daemon derives from cfg for
// features of dimension dim: budget from pool.m or pool.budget, the default tolerance,
// the top-up rule on (the pool fills its budget past the numerical rank, seeded by
// model.seed, so M = 2m landmarks are served as the paper's Alg. cairn-stage1),
// pivoting on normalized residuals by pool.normalize and tolerant pivoting by
// pool.tolerance.
func PoolConfig(cfg config.Config, dim int) (coreset.Config, error) {
	b := coreset.LandmarkBudget{M: cfg.Pool.M}
	if cfg.Pool.Budget != "" {
		var err error
		if b, err = coreset.ParseLandmarkBudget(cfg.Pool.Budget); err != nil {
			return coreset.Config{}, fmt.Errorf("%w: pool.budget %q: %w", ErrConfig, cfg.Pool.Budget, err)
		}
	}
	c := coreset.Config{Dim: dim, Budget: b, TopUp: true, Seed: cfg.Model.Seed, Normalize: cfg.Pool.Normalize, Tolerance: cfg.Pool.Tolerance}
	if err := c.Validate(); err != nil {
		return coreset.Config{}, fmt.Errorf("%w: pool: %w", ErrConfig, err)
	}
	return c, nil
}

// TrainLimits are the validation limits of training events under cfg for a backbone of
// input length inputDim.
func TrainLimits(cfg config.Config, inputDim int) (stream.Limits, error) {
	lim := stream.Limits{
		InputDim:   inputDim,
		MaxBytes:   cfg.Limits.MaxMessageBytes,
		MaxIDBytes: cfg.Limits.MaxIDBytes,
		MaxK:       cfg.Limits.MaxK,
	}
	if err := lim.Validate(); err != nil {
		return lim, fmt.Errorf("%w: limits: %w", ErrConfig, err)
	}
	if lim.MaxIDBytes > storage.MaxIDLen {
		return lim, fmt.Errorf("%w: limits.max_id_bytes %d exceeds the store's id limit %d", ErrConfig, lim.MaxIDBytes, storage.MaxIDLen)
	}
	return lim, nil
}

// New builds the feature pipeline from cfg and restores the pool from st: the
// stored pool state when there is one (checked against the configured model and pool,
// and against the number of stored points), else an empty pool, which requires an
// empty store. A deletion committed before a crash but not yet erased is erased now
// (Store.ScrubPending), so held outbox entries flow again. cfg is assumed validated
// (config.Validate); what only the daemon can check is checked here. st stays owned
// by the caller and must outlive the State.
func New(cfg config.Config, st *storage.Store, log zerolog.Logger) (*State, error) {
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return nil, err
	}
	pcfg, err := PoolConfig(cfg, feat.Dim())
	if err != nil {
		return nil, err
	}
	lim, err := TrainLimits(cfg, feat.InputDim())
	if err != nil {
		return nil, err
	}
	lim.Indices = IndexLimits(feat)
	if cfg.Kafka.Topics.DLQ == "" {
		return nil, fmt.Errorf("%w: kafka.topics.dlq is empty", ErrConfig)
	}
	in := &State{
		store: st, feat: feat, pcfg: pcfg, lim: lim, dlq: cfg.Kafka.Topics.DLQ,
		stale: cfg.Pool.SyncStaleFraction, log: log, dlqRaw: cfg.Kafka.DLQKeepRaw, last: map[partition]int64{}, tombs: map[partition]int64{},
		deleted: map[string]int64{}, train: cfg.Kafka.Topics.Train, erasures: stream.DefaultErasuresTopic,
		subj: map[storage.SubjectHash]*subjectState{}, ahead: &aheadStore{},
	}
	if in.subjects, err = loadSubjectKey(st, log); err != nil {
		return nil, err
	}
	if erased, err := st.ScrubPending(); err != nil {
		return nil, fmt.Errorf("ingest: erase deletions committed before: %w", err)
	} else if erased {
		log.Info().Msg("erased deletions committed before the last failure or stop")
	}
	var (
		ps     storage.PoolState
		havePS bool
		recs   []storedRecord
		count  int
		offs   []storage.Offset
	)
	in.cache = newPoints()
	err = st.View(func(tx *storage.ReadTx) error {
		var err error
		if ps, havePS, recs, err = readPool(tx); err != nil {
			return err
		}
		if count, err = tx.PointCount(); err != nil {
			return err
		}
		if offs, err = tx.Offsets(); err != nil {
			return err
		}
		return in.readStored(tx)
	})
	if err != nil {
		return nil, err
	}
	if err := checkRecords(havePS, ps, recs, count, in.cache); err != nil {
		return nil, err
	}
	rebuilt := false
	if havePS {
		if fp, ferr := Fingerprint(ps); ferr == nil && fp == feat.PreviousFingerprint() {
			if in.pool, err = in.rebuildPool(); err != nil {
				return nil, fmt.Errorf("ingest: re-select the pool on the current features: %w", err)
			}
			rebuilt = true
			log.Info().Int("points", count).Msg("the stored pool was selected on float64 features (feature algorithm v2); re-selected it on the stored float32 features (v3)")
		} else if in.pool, err = decodePool(ps, recs, feat.Fingerprint(), pcfg, [2]coreset.FeatureSource{newCacheSource(feat, in.cache, 0), newCacheSource(feat, in.cache, 1)}); err != nil {
			return nil, err
		}
	} else {
		if in.pool, err = coreset.NewPair(pcfg); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if in.pool.A.Len() != count {
		return nil, fmt.Errorf("%w: the pool holds %d points, the store %d", ErrPoolState, in.pool.A.Len(), count)
	}
	if rebuilt {
		if err := in.persistPool(true); err != nil {
			return nil, fmt.Errorf("ingest: persist the re-selected pool: %w", err)
		}
	} else if havePS && ps.Schema != PoolSchema {
		// An older schema: 4 and 3 (no Tolerance, and for 3 no Normalize, in the states)
		// need only the blob rewritten; 2 (the records inside the blob) moves the records
		// into the store's poolpoints bucket now, in the same transaction, so that a
		// stored blob of schema 3 or later always comes with every point's record. O(n),
		// once.
		if err := in.persistPool(ps.Schema == poolSchema2); err != nil {
			return nil, fmt.Errorf("ingest: convert the stored pool from schema %d to %d: %w", ps.Schema, PoolSchema, err)
		}
		log.Info().Int("points", count).Uint32("from", ps.Schema).Int("to", PoolSchema).Msg("converted the stored pool state")
	}
	for _, o := range offs {
		in.last[partition{o.Topic, int(o.Partition)}] = o.Offset
	}
	log.Info().Int("points", count).Int("offsets", len(offs)).Bool("restored_pool", havePS).
		Str("features", feat.Fingerprint()).Msg("ingest restored")
	return in, nil
}

// readStored fills the point cache (with each point's subject), the awaited deletions
// and the pending records from tx, at New.
func (in *State) readStored(tx *storage.ReadTx) error {
	err := tx.ForEachPoint(func(p storage.Point) error {
		if len(p.X) != in.feat.InputDim() {
			return fmt.Errorf("%w: stored point %q has %d inputs, want %d", ErrPoolState, p.ID, len(p.X), in.feat.InputDim())
		}
		e := &Entry{X: p.X, Label: p.Label, HasLabel: p.HasLabel, Version: p.Version, Partition: p.Partition}
		if h, ok, err := tx.Subject(p.ID); err != nil {
			return err
		} else if ok {
			e.Subject = &h
		}
		in.cache.put(p.ID, e)
		return nil
	})
	if err != nil {
		return err
	}
	if err := tx.ForEachDeleted(func(id string, v int64) error { in.deleted[id] = v; return nil }); err != nil {
		return err
	}
	return tx.ForEachPending(func(seq uint64, body []byte) error {
		rec, err := decodeDeletion(body)
		if err != nil {
			return fmt.Errorf("%w: pending deletion %d: %w", ErrPoolState, seq, err)
		}
		rec.Seq = seq
		in.pending = append(in.pending, rec)
		in.pendSeq = max(in.pendSeq, seq)
		return nil
	})
}

// Start is the stream.StartFunc of the training reader: the last applied offset of a
// partition as committed in the store.
func (in *State) Start(topic string, part int) (int64, bool, error) {
	var (
		off int64
		ok  bool
	)
	err := in.store.View(func(tx *storage.ReadTx) error {
		var err error
		off, ok, err = tx.Offset(topic, int32(part))
		return err
	})
	return off, ok, err
}

// Handle is the stream.Handler of the training reader: Apply, keeping only the error.
func (in *State) Handle(ctx context.Context, batch []stream.Message) error {
	_, err := in.Apply(ctx, batch)
	return err
}

// SetHooks installs the owner's hooks; call it before the first Apply.
func (in *State) SetHooks(h Hooks) { in.hooks = h }

// Succeed makes in the successor of old, a State discarded after ErrBroken: it takes
// old's hooks, feature source and batches prepared ahead (Ahead), and a version past old's, so no background sync computed from a
// snapshot of old is adopted by in.
func (in *State) Succeed(old *State) {
	in.hooks = old.hooks
	in.version = old.version + 1
	in.src, in.srcWait = old.src, old.srcWait
	in.ahead = old.ahead // the reader's Ahead may be bound to old
}

// Points returns the stored points' cache. It is safe for concurrent use and may be
// read after the State is discarded (its entries are immutable).
func (in *State) Points() *Points { return in.cache }

// Broken returns why the State must be rebuilt (ErrBroken), or nil.
func (in *State) Broken() error { return in.broken }

// PendingCount is the number of applied deletions whose audit is not emitted yet.
func (in *State) PendingCount() int { return len(in.pending) }

// LastPending returns the newest applied deletion whose audit is not emitted yet, or
// nil.
func (in *State) LastPending() *Deletion {
	if len(in.pending) == 0 {
		return nil
	}
	return in.pending[len(in.pending)-1]
}

// PendingIDs are the ids of the deletions applied and not yet audited, in order: a
// deletion's id, an erasure's points (an unblock has none).
func (in *State) PendingIDs() []string {
	ids := make([]string, 0, len(in.pending))
	for _, r := range in.pending {
		switch r.Kind {
		case "":
			ids = append(ids, r.ID)
		case KindErasure:
			for _, p := range r.Points {
				ids = append(ids, p.ID)
			}
		}
	}
	return ids
}

// Applied returns the last applied offset of a topic partition, as committed.
func (in *State) Applied(topic string, part int) (int64, bool) {
	off, ok := in.last[partition{topic, part}]
	return off, ok
}

// Limits returns the validation limits of training events.
func (in *State) Limits() stream.Limits { return in.lim }

// Features returns the fit-draw feature pipeline.
func (in *State) Features() *pipeline.Features { return in.feat }

// Stats returns the cumulative counts.
func (in *State) Stats() Stats { return in.stats }

// Len is the number of points in the pool (equal to the stored points between calls).
func (in *State) Len() int { return in.pool.A.Len() }

// Landmarks returns the served landmarks, view A then view B (coreset.Pair.Landmarks).
func (in *State) Landmarks() []string { return in.pool.Landmarks() }

// Certificates returns the residual certificates of the two views.
func (in *State) Certificates() (a, b coreset.ResidualCertificate) {
	return in.pool.A.Residual(), in.pool.B.Residual()
}

// PoolStates returns deep copies of the two pools' states.
func (in *State) PoolStates() (a, b coreset.State) { return in.pool.A.State(), in.pool.B.State() }

// SyncDue reports whether a view's pool is inexact (a landmark was deleted) or stale
// over at least pool.sync_stale_fraction of its budget. When to sync is the caller's
// decision (see doc.go: syncing at different points gives different certificates in
// between, so the scheduler must be a function of the event sequence for replay
// determinism).
func (in *State) SyncDue() bool {
	for _, p := range []*coreset.Pool{in.pool.A, in.pool.B} {
		c := p.Residual()
		if !c.Exact {
			return true
		}
		if c.Stale && float64(p.M()-c.StaleFrom) >= in.stale*float64(p.M()) {
			return true
		}
	}
	return false
}

// Apply applies one batch of training messages in one storage transaction. See doc.go
// "Apply" for the semantics. It returns an error only for failures of the daemon
// itself (store, context, an internal inconsistency), never for bad input; after such
// an error the batch counts as not consumed, and if the pool had already been updated
// the State is broken (ErrBroken) and must be rebuilt with New.
func (in *State) Apply(ctx context.Context, batch []stream.Message) (res BatchResult, err error) {
	if in.broken != nil {
		return res, fmt.Errorf("%w: %w", ErrBroken, in.broken)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	in.ops, in.ids, in.xs = in.ops[:0], in.ids[:0], in.xs[:0]
	t, ph := time.Now(), &in.stats.Phases
	if !in.returned.IsZero() {
		ph.Between += t.Sub(in.returned).Seconds()
	}
	defer func() {
		clear(in.ops)
		clear(in.ids) // drop references to the batch's bytes
		in.returned = time.Now()
	}()
	// The batch decoded and featurized ahead (Ahead), if it was.
	pre := in.ahead.take(batch)
	defer in.ahead.recycle(pre)
	if pre != nil {
		ph.Ahead += pre.secs
	}
	// 1. Decode and classify, outside any transaction.
	seen, fresh, claims := in.fresh(batch)
	if err := in.decode(batch, fresh, claims, pre); err != nil {
		return res, err
	}
	lap(&ph.Decode, &t)
	// 2. Features of both views of every upsert, before the write lock is taken.
	if err := in.featurize(ctx, pre); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	lap(&ph.Features, &t)
	// 3. The pool, in offset order. From here on a failure leaves the pool ahead of the
	// store, so it breaks the State.
	leaving, poolChanged := in.plan(time.Now().UTC())
	ps, err := in.updatePools(poolChanged)
	if err != nil {
		return res, in.breakWith(err)
	}
	lap(&ph.Pools, &t)
	if len(seen) == 0 && !poolChanged && !in.claimWrites { // re-deliveries and claims that change nothing
		res.Skipped = len(in.ops)
		in.stats.Skipped += uint64(res.Skipped)
		in.passTombstones()
		return res, nil
	}
	// The serving model drops the leaving landmarks before the deletion commits, so no
	// answer committed after it can name them (an answer committed before it may).
	if len(leaving) > 0 && in.hooks.Removing != nil {
		in.hooks.Removing(leaving)
	}
	if len(in.relabeled) > 0 && in.hooks.Relabeling != nil {
		in.hooks.Relabeling(in.relabeled)
	}
	// 4. One transaction: points, dead letters, deletion records, offsets, pool state.
	if err := in.commit(ps, poolChanged); err != nil {
		if poolChanged {
			return res, in.breakWith(fmt.Errorf("apply batch: %w", err))
		}
		return res, fmt.Errorf("ingest: apply batch: %w", err)
	}
	in.cacheCommitted()
	// 5. Committed: mirror the offsets and count.
	for k, off := range seen {
		in.last[k] = off
	}
	in.passTombstones()
	lap(&ph.Commit, &t)
	res = in.count(len(batch))
	return res, nil
}

// passTombstones advances the in-memory applied offsets past the batch's claims
// (fresh collected them), so that the consumer lag counts only what is left to read.
func (in *State) passTombstones() {
	for k, off := range in.tombs {
		in.last[k] = max(in.last[k], off)
	}
}

// fresh marks the messages above the applied offset of their partition (the others are
// re-deliveries, skipped) and returns the highest fresh offset of an input per
// partition, and the claim of every fresh claim (nil for the other messages).
func (in *State) fresh(batch []stream.Message) (map[partition]int64, []bool, []*claim) {
	seen := map[partition]int64{}
	skipped := 0
	fresh := make([]bool, len(batch))
	claims := make([]*claim, len(batch))
	clear(in.tombs)
	for i, m := range batch {
		key := partition{m.Topic, m.Partition}
		prev, ok := seen[key]
		if !ok {
			prev, ok = in.last[key]
		}
		if c, isClaim := claimOf(m); isClaim && m.Topic != in.erasures {
			// One of cairnd's claims (a tombstone, or a republished upsert): plan weighs
			// it against what is stored, and it stores no offset, so that stored offsets
			// are those of the input alone. One read before in this process is skipped.
			in.tombs[key] = max(in.tombs[key], m.Offset)
			if last, read := in.last[key]; !read || m.Offset > last {
				claims[i], fresh[i] = &c, !c.tomb // a republication's value is decoded
			}
			continue
		}
		if ok && m.Offset <= prev {
			if skipped == 0 { // one line per batch, not per message
				in.log.Warn().Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
					Int64("applied", prev).Msg("skipping re-delivered messages at or below the applied offset")
			}
			skipped++
			continue
		}
		seen[key] = m.Offset
		fresh[i] = true
	}
	return seen, fresh, claims
}

// decode turns the batch into in.ops, one per message: skips, dead letters (with their
// DLQ entry made), upserts (their ids and inputs appended to in.ids and in.xs),
// deletes, and claims (a republication decoded as an upsert; one that does not decode
// changes nothing). The decoding is pre's when the batch was prepared ahead.
func (in *State) decode(batch []stream.Message, fresh []bool, claims []*claim, pre *prepared) error {
	var decoded []decoded
	if pre != nil {
		decoded = pre.dec // every message decoded; those not fresh are not looked at
	} else {
		decoded = decodeAll(batch, fresh, in.lim, in.erasures)
	}
	clear(in.subj)
	for i, m := range batch {
		o := op{msg: m}
		if c := claims[i]; c != nil {
			o.kind, o.isClaim, o.cl = opClaim, true, *c
			if ev, derr := decoded[i].ev, decoded[i].err; !c.tomb && derr == nil && ev.Op == stream.OpUpsert && ev.Subject == "" {
				o.kind, o.ev, o.row, o.subj = opUpsert, ev, len(in.ids), c.subject
				in.ids = append(in.ids, ev.ID)
				in.xs = append(in.xs, ev.X...)
			} else if !c.tomb {
				o.void = true
				in.log.Warn().Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
					Err(derr).Msg("ignoring a republished upsert that does not decode")
			}
			in.ops = append(in.ops, o)
			continue
		}
		if !fresh[i] {
			o.kind = opSkip
			in.ops = append(in.ops, o)
			continue
		}
		ev, derr := decoded[i].ev, decoded[i].err
		if m.Topic == in.erasures {
			if err := in.decodeRequest(&o, decoded[i]); err != nil {
				return err
			}
			in.ops = append(in.ops, o)
			continue
		}
		if derr == nil && ev.Subject != "" {
			var err error
			if o.subj, err = in.upsertSubject(ev); errors.Is(err, stream.ErrRejected) {
				derr, o.scrub = err, true
			} else if err != nil {
				return err
			}
		}
		switch {
		case derr != nil:
			if err := in.deadLetter(&o, derr); err != nil {
				return err
			}
		case ev.Op == stream.OpUpsert:
			ev.Subject = "" // named by o.subj from here on: the id itself is never kept
			o.kind, o.ev, o.row = opUpsert, ev, len(in.ids)
			in.ids = append(in.ids, ev.ID)
			in.xs = append(in.xs, ev.X...)
		case ev.Op == stream.OpDelete:
			o.kind, o.ev = opDelete, ev
		default: // DecodeTrain accepts only the two ops; keep the daemon safe if that grows.
			if err := in.deadLetter(&o, &stream.RejectError{Reason: stream.ReasonUnknownOp, Field: "op",
				Msg: fmt.Sprintf("op %q is not handled by this daemon", ev.Op)}); err != nil {
				return err
			}
		}
		in.ops = append(in.ops, o)
	}
	return nil
}

// featurize computes both views' features of every upsert into in.feats (row 2·row and
// 2·row+1), or takes them from the feature source's valid records (featuresFrom) or
// from pre (computed ahead, computing only what it lacks), and dead-letters an upsert
// whose features are not usable.
func (in *State) featurize(ctx context.Context, pre *prepared) error {
	n, q := len(in.ids), in.feat.Dim()
	in.feats = grow(in.feats, 2*n*q)
	clear(in.featDead)
	in.featDead, in.batchTaken = in.featDead[:0], 0
	switch {
	case in.src != nil:
		if err := in.featuresFrom(ctx); err != nil {
			return err
		}
	case pre != nil && pre.rows != nil:
		if in.fromAhead(pre, q) > 0 {
			in.featurizeMissing(n, q)
		}
	default:
		in.views = grow(in.views, 2*n*in.feat.InputDim())
		in.feat.BothViewsTo(in.feats, in.views, in.xs, in.ids)
	}
	for i := range in.ops {
		o := &in.ops[i]
		if o.kind != opUpsert {
			continue
		}
		if why := badFeatures(in.feats[2*o.row*q : (2*o.row+2)*q]); why != "" && o.isClaim {
			o.kind, o.void = opClaim, true // a claim is not dead-lettered: it is no input
		} else if why != "" {
			// The input is finite but so large that the network overflows: the
			// point cannot enter the kernel, so it is rejected like any bad input.
			if err := in.deadLetter(o, &stream.RejectError{Reason: stream.ReasonNonFinite, Field: "x",
				Msg: fmt.Sprintf("features of id %q %s: inputs too large for the backbone", o.ev.ID, why)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// plan decides, in offset order, what each upsert, delete and claim does to the stored
// set (both views hold the same points): whether its id was stored before it (op.had),
// for deletes the deletion record, for claims whether they apply (doc.go, "Versions"),
// and which ids the batch republishes (in.repub). It returns the ids whose landmark
// terms leave the serving model (deleted, or replaced by another input) and whether
// the pool changes at all.
func (in *State) plan(now time.Time) (leaving []string, poolChanged bool) {
	keys := map[string]*key{} // each touched id as the batch goes
	in.repub, in.claimWrites, in.relabeled = in.repub[:0], false, in.relabeled[:0]
	var order []touched // each id in the order the batch first touched it, for the republications
	touch := func(o *op, id string) *key {
		if _, ok := keys[id]; !ok {
			topic := o.msg.Topic
			if topic == in.erasures {
				topic = in.train
			}
			order = append(order, touched{topic, id})
		}
		return in.keyOf(keys, id)
	}
	for i := range in.ops {
		o := &in.ops[i]
		switch o.kind {
		case opUpsert:
			k := touch(o, o.ev.ID)
			version := o.msg.Offset
			if o.isClaim {
				if !in.claimApplies(k, o) {
					o.kind = opClaim
					continue
				}
				version = o.cl.version
			}
			if o.had = k.stored; o.had && !vec.SameBits(o.ev.X, k.x) {
				leaving = append(leaving, o.ev.ID) // an unchanged input keeps its landmark terms exact
			} else if o.had && k.relabeledBy(o.ev.Label) {
				in.relabeled = append(in.relabeled, o.ev.ID) // but not its gradient row
			}
			o.forget = k.deleted >= 0
			*k = key{stored: true, version: version, x: o.ev.X, hasLabel: o.ev.Label != nil, deleted: -1, subject: o.subj,
				partition: int32(o.msg.Partition)}
			if k.hasLabel {
				k.label = *o.ev.Label
			}
			poolChanged = true
		case opDelete:
			k := touch(o, o.ev.ID)
			rec := &Deletion{
				Request: o.ev.Request, ID: o.ev.ID, Requested: o.msg.Time.UTC(), Applied: now,
				Source: string(stream.DeadLetterKey(o.msg.Topic, o.msg.Partition, o.msg.Offset)),
			}
			if in.hooks.Describe != nil {
				in.hooks.Describe(rec)
			}
			if o.had = k.stored; o.had {
				rec.Known = true
				leaving = append(leaving, o.ev.ID)
				poolChanged = true
				// Its tombstone is awaited: a republication older than the deletion, read
				// before it, must not bring the point back.
				k.deleted = o.msg.Offset
			}
			k.stored, k.republish = false, false
			o.rec = rec
		case opClaim:
			if !o.cl.tomb || o.void {
				continue
			}
			k := touch(o, string(o.msg.Key))
			switch {
			case k.stored && o.cl.erases(k.version):
				// A deletion newer than the stored point that this daemon never read (the
				// topic was compacted under it): the point goes, without an audit.
				o.kind, o.had = opErase, true
				leaving = append(leaving, string(o.msg.Key))
				k.stored, k.republish = false, false
				poolChanged = true
			case k.stored:
				k.republish = true // the tombstone would erase a newer upsert
			case k.deleted >= 0 && o.cl.version >= k.deleted:
				o.forget, k.deleted = true, -1 // the awaited tombstone
				in.claimWrites = true
			}
		case opErasure:
			erased := in.planErasure(o, keys, touch, now)
			leaving = append(leaving, erased...)
			poolChanged = poolChanged || len(erased) > 0
		case opUnblock:
			o.recs = []*Deletion{in.subjectRecord(o, KindUnblock, now)}
		}
	}
	for _, t := range order {
		if k := keys[t.id]; k.republish && k.stored {
			ev := stream.TrainEvent{Op: stream.OpUpsert, ID: t.id, X: k.x}
			if k.hasLabel {
				ev.Label = &k.label
			}
			in.repub = append(in.repub, republication{topic: t.topic, id: t.id, version: k.version, subject: k.subject, ev: ev,
				partition: k.partition})
			in.claimWrites = true
		}
	}
	return leaving, poolChanged
}

// touched is an id the batch touched and the topic of the op that touched it first
// (the training topic for an erasure's points).
type touched struct{ topic, id string }

// claimApplies decides a republication o of k's id (doc.go, "Versions"): it applies
// when it restates a newer input than what is stored, or when the id is not stored and
// no deletion this daemon applied is newer. Either way the id's newest record is then
// o itself, which restates it: nothing to republish. A stale one marks the id for
// republication when it is stored with another value.
func (in *State) claimApplies(k *key, o *op) bool {
	switch {
	case k.stored && k.sameValue(o.ev, o.subj):
		k.republish = false
		return false
	case k.stored && o.cl.version > k.version:
	case k.stored:
		k.republish = true
		return false
	case k.deleted >= 0 && o.cl.version <= k.deleted:
		return false
	}
	k.republish = false
	return true
}

// updatePools applies the planned ops to the two views' pools on two goroutines (they
// are independent, and the O(k q) insert is the largest cost after the features), and
// encodes the changed pool's core for the transaction.
func (in *State) updatePools(poolChanged bool) (storage.PoolState, error) {
	q := in.feat.Dim()
	var errs [2]error
	var wg sync.WaitGroup
	for v, pool := range []*coreset.Pool{in.pool.A, in.pool.B} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[v] = in.applyView(pool, v, q)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return storage.PoolState{}, err
	}
	for i := range in.ops {
		if r := in.ops[i].rec; r != nil {
			r.PoolLandmark = r.poolLandmark[0] || r.poolLandmark[1]
		}
		for _, r := range in.ops[i].recs {
			for j := range r.Points {
				p := &r.Points[j]
				p.PoolLandmark = p.poolLandmark[0] || p.poolLandmark[1]
				r.PoolLandmark = r.PoolLandmark || p.PoolLandmark
			}
		}
	}
	if !poolChanged {
		return storage.PoolState{}, nil
	}
	return encodePool(in.feat.Fingerprint(), in.pool)
}

// commit writes the batch in one transaction: every op (commitOp), then the pool's
// core when it changed. in.pendSeq advances only when the transaction commits.
func (in *State) commit(ps storage.PoolState, poolChanged bool) error {
	seq := in.pendSeq
	var rec []byte
	err := in.store.Apply(func(tx *storage.Tx) error {
		for i := range in.ops {
			o := &in.ops[i]
			if o.kind == opSkip {
				continue
			}
			if err := in.commitOp(tx, o, &seq, &rec); err != nil {
				return err
			}
			if o.isClaim {
				continue // claims store no offset
			}
			if err := tx.SetOffset(o.msg.Topic, int32(o.msg.Partition), o.msg.Offset); err != nil {
				return err
			}
		}
		for _, m := range in.featDead {
			if _, err := tx.Enqueue(m.Topic, m.Key, m.Value); err != nil {
				return err
			}
		}
		for _, r := range in.repub {
			v, err := stream.EncodeTrain(r.ev, in.lim)
			if err != nil {
				return fmt.Errorf("ingest: republish %q: %w", r.id, err)
			}
			if _, err := tx.Enqueue(r.topic, []byte(r.id), placed(r.partition, encodeClaim(r.version, r.subject, v))); err != nil {
				return err
			}
		}
		if in.hooks.Commit != nil {
			if err := in.hooks.Commit(tx); err != nil {
				return err
			}
		}
		if poolChanged {
			return tx.PutPoolState(ps)
		}
		return nil
	})
	if err == nil {
		in.pendSeq = seq
	}
	return err
}

// commitOp writes one op's state change in tx: a dead letter's DLQ entry; an upsert's
// point and pool record (nothing else changed a record, see putRecord); a delete's
// removal and its pending deletion record (numbered from *seq), or the audit of an
// unknown id. rec is the record buffer, reused.
func (in *State) commitOp(tx *storage.Tx, o *op, seq *uint64, rec *[]byte) error {
	switch o.kind {
	case opDead:
		_, err := tx.Enqueue(o.dead.Topic, o.dead.Key, o.dead.Value)
		if err == nil && o.scrub {
			_, err = tx.Enqueue(o.msg.Topic, o.msg.Key, placed(int32(o.msg.Partition), scrubClaim()))
		}
		return err
	case opUpsert:
		p := storage.Point{ID: o.ev.ID, X: o.ev.X, Version: o.version(), Partition: int32(o.msg.Partition)}
		if o.ev.Label != nil {
			p.HasLabel, p.Label = true, *o.ev.Label
		}
		if err := tx.PutPoint(p); err != nil {
			return err
		}
		if err := tx.SetSubject(o.ev.ID, o.subj); err != nil {
			return err
		}
		var err error
		if *rec, err = putRecord(tx, in.pool, *rec, o.ev.ID); err != nil {
			return err
		}
		if o.forget {
			_, err = tx.DropDeleted(o.ev.ID)
		}
		return err
	case opClaim:
		if o.forget {
			_, err := tx.DropDeleted(string(o.msg.Key))
			return err
		}
		return nil
	case opErase:
		existed, err := tx.DeletePoint(string(o.msg.Key))
		if err == nil && !existed {
			err = fmt.Errorf("ingest: erase %q: the pool had it, the store not", o.msg.Key)
		}
		return err
	case opDelete:
		existed, err := tx.DeletePoint(o.ev.ID)
		if err != nil {
			return err
		}
		if existed != o.had {
			return fmt.Errorf("ingest: delete %q: store had it %v, pool had it %v", o.ev.ID, existed, o.had)
		}
		if !o.had {
			o.deferred = false
			if in.hooks.Unknown == nil {
				return nil
			}
			audited, err := in.hooks.Unknown(tx, o.rec)
			if err != nil || audited {
				return err
			}
			o.deferred = true
		}
		*seq++
		o.rec.Seq = *seq
		body, err := o.rec.encode()
		if err != nil {
			return err
		}
		if err := tx.PutPending(*seq, body); err != nil {
			return err
		}
		if o.deferred {
			return nil // nothing stored under the id: nothing to erase
		}
		// A tombstone for the id on its own topic (a claim of this deletion's version,
		// published with a null value), so that log compaction erases its upserts; the
		// deletion waits for it in the deleted bucket (doc.go, "Versions").
		if err := tx.PutDeleted(o.ev.ID, o.msg.Offset); err != nil {
			return err
		}
		// On the deletion's own partition: where the producer put the id, and what the
		// version (an offset of that partition) is about.
		_, err = tx.Enqueue(o.msg.Topic, []byte(o.ev.ID), placed(int32(o.msg.Partition), encodeClaim(o.msg.Offset, nil, nil)))
		return err
	case opErasure, opUnblock:
		return in.commitRequest(tx, o, seq)
	}
	return nil
}

// cacheCommitted mirrors a committed batch in the point cache, the pending list and
// the awaited deletions.
func (in *State) cacheCommitted() {
	q := in.feat.Dim()
	for i := range in.ops {
		o := &in.ops[i]
		switch o.kind {
		case opUpsert:
			e := &Entry{X: o.ev.X, fa: to32(in.feats[2*o.row*q : (2*o.row+1)*q]),
				fb: to32(in.feats[(2*o.row+1)*q : (2*o.row+2)*q]), Version: o.version(), Subject: o.subj,
				Partition: int32(o.msg.Partition)}
			if o.ev.Label != nil {
				e.Label, e.HasLabel = *o.ev.Label, true
			}
			in.cache.put(o.ev.ID, e)
			if o.forget {
				delete(in.deleted, o.ev.ID)
			}
		case opDelete:
			if o.had {
				in.cache.del(o.ev.ID)
				in.deleted[o.ev.ID] = o.msg.Offset
			}
			if o.had || o.deferred {
				in.pending = append(in.pending, o.rec)
			}
		case opErase:
			in.cache.del(string(o.msg.Key))
		case opClaim:
			if o.forget {
				delete(in.deleted, string(o.msg.Key))
			}
		case opErasure, opUnblock:
			in.requestCommitted(o)
		}
	}
}

// version is the version an applied upsert stores: its offset, or the version a
// republication restates.
func (o *op) version() int64 {
	if o.isClaim {
		return o.cl.version
	}
	return o.msg.Offset
}

// count is the result of a committed batch of messages, added to in.stats and logged.
func (in *State) count(messages int) (res BatchResult) {
	for i := range in.ops {
		switch o := &in.ops[i]; o.kind {
		case opSkip, opClaim:
			res.Skipped++
		case opErase:
			res.Erased++
			in.log.Info().Str("topic", o.msg.Topic).Int("partition", o.msg.Partition).Int64("offset", o.msg.Offset).
				Int64("version", o.cl.version).Msg("a tombstone newer than the stored point erased it (its deletion was compacted away before this daemon read it)")
		case opDead:
			res.DeadLetters++
			res.Reasons = append(res.Reasons, stream.ReasonOf(o.rej))
			in.log.Warn().Str("topic", o.msg.Topic).Int("partition", o.msg.Partition).Int64("offset", o.msg.Offset).
				Str("reason", string(stream.ReasonOf(o.rej))).Err(o.rej).Msg("dead-lettered a training message")
		case opUpsert:
			res.Upserts++
			res.Stored = append(res.Stored, o.ev.ID)
		case opDelete:
			res.Deleted = append(res.Deleted, o.rec)
			if o.had {
				res.Deletes++
			} else {
				res.Missing++
			}
		case opErasure, opUnblock:
			res.Subjects = append(res.Subjects, o.recs...)
			for _, r := range o.recs {
				res.Erasures += len(r.Points)
			}
			if o.kind == opErasure {
				in.stats.Erasures++
			} else {
				in.stats.Unblocks++
			}
			in.logRequest(o)
		}
	}
	if res.Upserts+res.Deletes+res.Erased+res.Erasures > 0 {
		in.version++
	}
	in.stats.Batches++
	in.stats.Upserts += uint64(res.Upserts)
	in.stats.Deletes += uint64(res.Deletes)
	in.stats.Erased += uint64(res.Erased)
	in.stats.ErasedPoints += uint64(res.Erasures)
	in.stats.Missing += uint64(res.Missing)
	in.stats.DeadLetters += uint64(res.DeadLetters)
	in.stats.Skipped += uint64(res.Skipped)
	in.stats.FeaturesTaken += uint64(in.batchTaken)
	in.stats.FeatureRefused += uint64(len(in.featDead))
	for range in.featDead {
		res.Reasons = append(res.Reasons, stream.ReasonFeatureMismatch)
	}
	in.log.Debug().Int("messages", messages).Int("upserts", res.Upserts).Int("deletes", res.Deletes).
		Int("dead_letters", res.DeadLetters).Int("skipped", res.Skipped).Int("points", in.pool.A.Len()).
		Msg("applied training batch")
	return res
}

// decoded is one message's stream.DecodeTrain result, or for the erasures topic its
// stream.DecodeErasure result.
type decoded struct {
	ev  stream.TrainEvent
	er  stream.ErasureEvent
	err error
}

// decodeAll decodes the messages marked fresh (the others' entries stay zero), spread
// over up to GOMAXPROCS goroutines joined before it returns: DecodeTrain is a pure
// function of the bytes, and parsing the numbers of an image (784 of them for MNIST) is,
// after the features, the costliest per-event step, which a single goroutine would run
// while the other cores wait.
func decodeAll(batch []stream.Message, fresh []bool, lim stream.Limits, erasures string) []decoded {
	out := make([]decoded, len(batch))
	dec := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if fresh[i] {
				// CloudEvents headers, when an input has any, must be a valid event
				// (else a dead letter, bad_header), checked before the value; cairnd's
				// claims carry none.
				if _, _, err := stream.ParseCloudEvent(batch[i], lim); err != nil {
					out[i].err = err
					continue
				}
			}
			if fresh[i] && batch[i].Topic == erasures {
				out[i].er, out[i].err = stream.DecodeErasure(batch[i].Value, lim)
				if out[i].err == nil {
					out[i].err = stream.CheckErasureKey(batch[i].Key, out[i].er)
				}
			} else if fresh[i] {
				out[i].ev, out[i].err = stream.DecodeTrain(batch[i].Value, lim)
				if out[i].err == nil {
					out[i].err = stream.CheckTrainKey(batch[i].Key, out[i].ev)
				}
			}
		}
	}
	w := min(runtime.GOMAXPROCS(0), len(batch)/16)
	if w < 2 {
		dec(0, len(batch))
		return out
	}
	var wg sync.WaitGroup
	for k := 1; k < w; k++ {
		wg.Go(func() { dec(k*len(batch)/w, (k+1)*len(batch)/w) })
	}
	dec(0, len(batch)/w)
	wg.Wait()
	return out
}

// applyView applies the batch's pool changes to view v's pool (the ops were classified
// by Apply), recording each deletion's certificate before and after in its record.
// Apply runs the two views on two goroutines; each touches only its own pool and the
// v-th fields of the records.
func (in *State) applyView(pool *coreset.Pool, v, q int) error {
	// The products of every upsert's features with the landmarks, in one blocked sweep
	// over the landmark matrix instead of one per insert (the bulk of an insert's cost);
	// InsertCross recomputes an insert's own if a landmark deletion earlier in the batch
	// made them stale, and the result is Insert's bit for bit either way.
	n, k := len(in.ids), pool.Greedy()
	in.cross[v] = grow(in.cross[v], n*k)
	var tok coreset.CrossToken
	if n > 0 {
		tok = pool.CrossTo(in.cross[v], in.feats[v*q:], 2*q, n)
	}
	for i := range in.ops {
		o := &in.ops[i]
		switch o.kind {
		case opUpsert:
			if o.had {
				if err := pool.Delete(o.ev.ID); err != nil {
					return fmt.Errorf("pool view %d: replace %q: %w", v, o.ev.ID, err)
				}
			}
			f, cross := in.feats[(2*o.row+v)*q:(2*o.row+v+1)*q], in.cross[v][o.row*k:(o.row+1)*k]
			if err := pool.InsertCross(o.ev.ID, f, cross, tok); err != nil {
				return fmt.Errorf("pool view %d: insert %q: %w", v, o.ev.ID, err)
			}
		case opErase:
			if err := pool.Delete(string(o.msg.Key)); err != nil {
				return fmt.Errorf("pool view %d: erase %q: %w", v, o.msg.Key, err)
			}
		case opDelete:
			o.rec.ResidualBefore[v] = pool.Residual()
			if o.had {
				o.rec.poolLandmark[v] = slices.Contains(pool.Landmarks(), o.ev.ID)
				if err := pool.Delete(o.ev.ID); err != nil {
					return fmt.Errorf("pool view %d: delete %q: %w", v, o.ev.ID, err)
				}
			}
			o.rec.ResidualAfter[v] = pool.Residual()
		case opErasure:
			if err := eraseView(pool, v, o.recs); err != nil {
				return err
			}
		}
	}
	return nil
}

// residuals returns the pool's residual certificates of both views.
func (in *State) Residuals() [2]coreset.ResidualCertificate {
	return [2]coreset.ResidualCertificate{in.pool.A.Residual(), in.pool.B.Residual()}
}

// deadLetter turns o into a dead letter for rejection rej. Building the message can
// fail only if the dead-letter event itself does not encode, a daemon bug.
func (in *State) deadLetter(o *op, rej error) error {
	src, keep := o.msg, in.dlqRaw && !stream.MayNameSubject(o.msg.Value)
	if src.Topic == in.erasures {
		src.Key, keep = nil, false // keyed by the subject itself
	}
	dm, err := stream.DeadLetterMessage(in.dlq, src, rej, keep)
	if err != nil {
		return fmt.Errorf("ingest: dead letter for %s/%d/%d: %w", o.msg.Topic, o.msg.Partition, o.msg.Offset, err)
	}
	o.kind, o.dead, o.rej = opDead, dm, rej
	return nil
}

// breakWith marks the State broken (the pool may be ahead of the store) and returns
// the error wrapped in ErrBroken.
func (in *State) breakWith(err error) error {
	in.broken = err
	in.log.Error().Err(err).Msg("ingest broken: the pool is ahead of the store; rebuild from the store")
	return fmt.Errorf("%w: %w", ErrBroken, err)
}

// maxFeatureNorm2 bounds ||ψ(view)||² of an accepted point. The pool forms dot
// products of two feature vectors and sums them over all points; with every squared
// norm ≤ 1e150, each product is ≤ 1e150 by Cauchy–Schwarz and a sum over any feasible
// number of points (< 1e150) stays far below the float64 maximum 1.8e308, so no
// certificate or Gram entry can overflow. Real inputs (normalized pixels, standardized
// columns) give norms many orders of magnitude below it.
const maxFeatureNorm2 = 1e150

// badFeatures says why the two views' features (2q values) cannot enter the pool, or ""
// if they can: a NaN or ±Inf, or a view whose squared norm exceeds maxFeatureNorm2. A
// NaN or an infinity makes the squared norm NaN or infinite, so an accepted view costs one
// vec.Dot; only a rejected one is scanned for the value to name.
func badFeatures(f []float64) string {
	q := len(f) / 2
	for v := range 2 {
		x := f[v*q : (v+1)*q]
		s := vec.Dot(x, x)
		if s <= maxFeatureNorm2 {
			continue
		}
		for j, x := range x {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Sprintf("view %d feature %d is %v", v, j, x)
			}
		}
		return fmt.Sprintf("view %d has squared norm %v > %g", v, s, maxFeatureNorm2)
	}
	return ""
}

// persistPool writes the pool's core blob in its own transaction, and with all every
// stored point's record too (after an Adopt, which changes every residual; the O(n)
// part of a sync).
func (in *State) persistPool(all bool) error {
	ps, err := encodePool(in.feat.Fingerprint(), in.pool)
	if err != nil {
		return err
	}
	var ids []string
	if all {
		ids = in.cache.IDs() // the stored points, sorted
	}
	return in.store.Apply(func(tx *storage.Tx) error {
		if err := tx.PutPoolState(ps); err != nil {
			return err
		}
		if !all {
			return nil
		}
		return putAllRecords(tx, in.pool, ids)
	})
}

// checkRecords checks the stored per-point pool records against the stored points
// before the pool is restored from them: a pool of schema 3 or later needs exactly one
// record per stored point (every record names a stored point, and there are as many), a
// schema 2 pool holds its records in the blob and none in the store, and no pool state
// means no records.
func checkRecords(havePS bool, ps storage.PoolState, recs []storedRecord, count int, cache *Points) error {
	switch {
	case !havePS && len(recs) > 0:
		return fmt.Errorf("%w: %d per-point pool records but no pool state", ErrPoolState, len(recs))
	case !havePS || ps.Schema != PoolSchema && ps.Schema != poolSchema3:
		return nil // schema 2 (or unknown, refused by decodePool with its number)
	case len(recs) != count:
		return fmt.Errorf("%w: the store holds %d points but %d per-point pool records", ErrPoolState, count, len(recs))
	}
	for _, r := range recs {
		if cache.Get(r.id) == nil {
			return fmt.Errorf("%w: per-point pool record of %q, which is not a stored point", ErrPoolState, r.id)
		}
	}
	return nil
}

// rebuildPool makes the pool anew over the stored points, for a pool stored under a
// superseded feature algorithm (pipeline.Features.PreviousFingerprint): every point's
// features computed on all cores and kept in the cache, every point inserted, then one
// batch greedy selection per view over all of them, which is what the pool equals at
// quiescence (docs/architecture.md, "The landmark pool"). O(n) backbone passes, once per
// data directory.
func (in *State) rebuildPool() (*coreset.Pair, error) {
	pr, err := coreset.NewPair(in.pcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	snap := SnapshotOf(in.cache)
	ids, q := snap.IDs, in.feat.Dim()
	sel, err := Select(context.Background(), in.feat, in.pcfg, ids, snap.Entries, in.cache)
	if err != nil {
		return nil, err
	}
	g := sel.G
	fa, fb := make([]float64, q), make([]float64, q)
	for i, id := range ids {
		for j := range q {
			fa[j], fb[j] = float64(g[0][i][j]), float64(g[1][i][j])
		}
		if err := pr.Insert(id, fa, fb); err != nil {
			return nil, fmt.Errorf("%w: point %q: %w", ErrPoolState, id, err)
		}
	}
	for v, p := range []*coreset.Pool{pr.A, pr.B} {
		if err := p.AdoptRows32(ids, g[v], sel.M[v], sel.Res[v]); err != nil {
			return nil, err
		}
	}
	return pr, nil
}

// Adopt installs a sync computed in the background (Select over the points ids, taken
// at ingest version) and persists the
// pool, or returns ErrChanged when points were applied since. A failure after view A
// was adopted breaks the State.
func (in *State) Adopt(version uint64, ids []string, sel *Selection) error {
	if in.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, in.broken)
	}
	if version != in.version {
		return ErrChanged
	}
	if err := in.pool.A.AdoptRows32(ids, sel.G[0], sel.M[0], sel.Res[0]); err != nil {
		return fmt.Errorf("ingest: adopt view A: %w", err)
	}
	if err := in.pool.B.AdoptRows32(ids, sel.G[1], sel.M[1], sel.Res[1]); err != nil {
		return in.breakWith(fmt.Errorf("adopt view B: %w", err))
	}
	if err := in.persistPool(true); err != nil {
		return in.breakWith(fmt.Errorf("persist synced pool: %w", err))
	}
	in.stats.Syncs++
	return nil
}

// Sync re-selects both pools by batch greedy over the stored points (coreset.Pool.Sync)
// with features recomputed from the raw points in the store, and persists the new pool
// state in its own transaction. It reads the store in one read transaction (the raw
// points, n×D) and computes features chunk by chunk in parallel; it is the only O(n)
// operation and the caller schedules it (see SyncDue). Without anything stale or
// inexact it returns at once.
func (in *State) Sync(ctx context.Context) error {
	if in.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, in.broken)
	}
	if !in.pool.A.NeedsSync() && !in.pool.B.NeedsSync() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := in.cache.Len()
	if n != in.pool.A.Len() {
		return in.breakWith(fmt.Errorf("%w: the store holds %d points, the pool %d", ErrPoolState, n, in.pool.A.Len()))
	}
	// Adopting may fail in view B after view A was re-selected; the in-memory pair
	// then matches no persisted state, so a failure breaks the State.
	gen := in.pool.A.Generation() + in.pool.B.Generation()
	snap := SnapshotOf(in.cache)
	sel, err := Select(ctx, in.feat, in.pcfg, snap.IDs, snap.Entries, in.cache)
	if err != nil {
		return err
	}
	for v, p := range []*coreset.Pool{in.pool.A, in.pool.B} {
		if err := p.AdoptRows32(snap.IDs, sel.G[v], sel.M[v], sel.Res[v]); err != nil {
			return in.breakWith(fmt.Errorf("sync: view %s: %w", "AB"[v:v+1], err))
		}
	}
	if err := in.persistPool(in.pool.A.Generation()+in.pool.B.Generation() != gen); err != nil {
		return in.breakWith(fmt.Errorf("persist synced pool: %w", err))
	}
	in.stats.Syncs++
	a, b := in.Certificates()
	in.log.Info().Int("points", n).Float64("trace_r_a", a.Trace).Float64("trace_r_b", b.Trace).
		Float64("trace_k_a", a.TraceK).Float64("trace_k_b", b.TraceK).Msg("pool synced")
	return nil
}
