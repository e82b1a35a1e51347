package serving

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// Model is one immutable model version as queries and audits read it: the fitted
// coefficients, the landmarks with their evaluation-draw features and exact diagonals,
// and the landmarks masked since the fit (deleted or replaced points, whose terms left
// the encoder at once, docs/architecture.md, "Exact unlearning"). A mask change makes a
// new value (WithMask); readers load the current one atomically and never see it change.
//
// The exported fields are the model's public description (what ModelExport and an
// answer name: version, id, landmarks, their views, inputs and ω, the kernel scale, the
// backbone, the evaluation draw, the exact rows); they are read only, shared by every
// value of the version. The encoder, the mask, ω̄, τ², the certificate and the audit
// blocks are reached through methods (Answer, DeletionEffect, IsLandmark, MaskedCount,
// Input, Export).
type Model struct {
	Version uint64
	ID      string // content hash of the model (modelID)
	Points  int    // stored points the model was fitted on

	// Landmarks in model row order: view A's pivots, then view B's.
	LandmarkIDs []string
	Views       []byte    // 'A' or 'B' per landmark
	LandmarkX   []float64 // M×D augmented inputs, for a new evaluation draw
	masked      []bool

	enc   certify.Encoder // Ã and b in the fit's kernel units
	Scale float64         // kernel_scale: raw-unit coefficients are scale·Ã
	// omega, omegaMean (ω̄) and tau2 (τ², nil with one fit) in raw kernel units.
	Omega, omegaMean, tau2 []float64
	residual               [2]certify.Residual // the pool's certificate at the fit

	Draw  *Draw        // nil with exact rows: exact answers use no draw
	audit *auditBlocks // nil without labelled audit points
	// Exact holds the landmarks' exact eNTK rows (full or factored, exactrows.go) when
	// they fit query.exact_memory_bytes, or query.exact_disk_bytes in a mapped file
	// (diskrows.go); answers then rank exact kernel rows (variance model exact_kernel).
	// Shared, read only, by every serving value of the same model version.
	Exact *ExactRows
	// ExactRowsErr is why rows that fit query.exact_disk_bytes are not served (ErrRowsDisk,
	// ErrRowsDamaged): the model answers on the sketched path. Nil otherwise.
	ExactRowsErr error
	Backbone     entk.Backbone
	fits         int // R, the fits behind ω̄ and τ²
	exactCap     int // query.exact_rows_cap: exact rows for crossing landmarks (sketched path)

	// Grad holds every labelled stored point's gradient row (gradrows.go) when they fit
	// query.gradient_memory_bytes; GradErr says why not (nil with rows). Shared, read
	// only; gactive are the rows no deletion has masked.
	Grad    *GradRows
	GradErr error
	gactive []int

	stableJaccard float64  // query.stable_jaccard
	poolStab      *float64 // the pool part of the stability (Input.PoolStability)

	// Active (unmasked) landmarks, compacted for the query path.
	active               []int
	aAct                 []float64     // len(active)×k rows of Ã, for the representer ranking
	gram                 []float64     // M×M Gram of the answer rows (explained.go), shared
	chol                 *mat.Cholesky // of gram's active block: the residual fraction
	ones                 []float64     // len(active) ones: the similarity ranking's weights
	lf                   []float64     // len(active)×q evaluation features
	diag, om, omMean, t2 []float64
	h, s, padded         int
}

// Draw is the evaluation sketch (paper Thm. topk: heads and SRHT drawn independently
// of the fit) with the landmarks' features under it. Queries that share a draw split δ
// (certify.UniformAllocation with Queries = cfg.Query.DrawQueries); used counts them.
type Draw struct {
	sketch *entk.Sketch
	Seed   uint64 // the sketch is entk.NewSketch(backbone, h, s, seed, "eval")
	lf     []float64
	diag   []float64
	Used   atomic.Int64
}

// SeedHash is the commitment to an evaluation draw's seed carried by sketched answers:
// hex SHA-256 of the seed's 8 big-endian bytes. The seed itself is published on the
// status topic when the draw is retired (Daemon.retire).
func SeedHash(seed uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h := sha256.Sum256(b[:])
	return hex.EncodeToString(h[:])
}

// auditBlocks are the deletion audit's embeddings (appendix D): fit-draw kernel rows of
// labelled reference and test points against the landmarks, and their embeddings under
// the unmasked model.
type auditBlocks struct {
	KRef, KTest *mat.Dense
	zRef, zTest *mat.Dense
	RefLabels   []int
}

// newDraw draws the evaluation sketch named by (seed, name) and computes the
// landmarks' features and exact diagonals from their augmented inputs xs (M×D), on all
// cores.
func newDraw(b entk.Backbone, h, s int, seed uint64, name string, xs []float64, m int) (*Draw, error) {
	es := rng.Seed(seed, name)
	sk, err := entk.NewSketch(b, h, s, es, "eval")
	if err != nil {
		return nil, err
	}
	d := &Draw{sketch: sk, Seed: es, lf: make([]float64, m*sk.Dim()), diag: make([]float64, m)}
	sk.FeaturesBatchTo(d.lf, xs, m)
	exactDiagsTo(d.diag, b, xs, m)
	return d, nil
}

// WithMask returns a copy of s with the landmarks and gradient rows of the given ids
// masked too, or s itself when none of them is an unmasked landmark or gradient row.
func (s *Model) WithMask(ids []string) *Model { return s.withMask(ids, true, true) }

// WithLandmarkMask returns a copy of s with the landmark terms of the given ids masked
// and their gradient rows left as they are (a replica's mask of a point stored again
// since: the new value's row stays, as on the primary), or s itself when none of them
// is an unmasked landmark.
func (s *Model) WithLandmarkMask(ids []string) *Model { return s.withMask(ids, true, false) }

// WithGradMask returns a copy of s with the gradient rows of the given ids masked (a
// label changed, the input did not: the landmark terms stay), or s itself when none of
// them is an unmasked gradient row.
func (s *Model) WithGradMask(ids []string) *Model { return s.withMask(ids, false, true) }

// Removal is an id whose serving terms were masked since a snapshot: its landmark terms
// and gradient row, or with GradOnly its gradient row alone (a label changed, the input
// did not).
type Removal struct {
	ID       string
	GradOnly bool
}

// AppendRemovals appends a Removal of each id, with gradOnly, to rs.
func AppendRemovals(rs []Removal, ids []string, gradOnly bool) []Removal {
	for _, id := range ids {
		rs = append(rs, Removal{ID: id, GradOnly: gradOnly})
	}
	return rs
}

// WithRemovals is s with every removal of rs masked (WithMask, or WithGradMask for a
// GradOnly one).
func (s *Model) WithRemovals(rs []Removal) *Model {
	var lm, grad []string
	for _, r := range rs {
		if r.GradOnly {
			grad = append(grad, r.ID)
		} else {
			lm = append(lm, r.ID)
		}
	}
	return s.WithMask(lm).WithGradMask(grad)
}

// withMask masks, of ids, the landmark terms with landmarks and the gradient rows with
// grad.
func (s *Model) withMask(ids []string, landmarks, grad bool) *Model {
	if len(ids) == 0 {
		return s
	}
	in := contains
	if len(ids) > 8 {
		set := make(map[string]bool, len(ids))
		for _, id := range ids {
			set[id] = true
		}
		in = func(_ []string, id string) bool { return set[id] }
	}
	hit := false
	for l := 0; landmarks && l < len(s.LandmarkIDs) && !hit; l++ {
		hit = !s.masked[l] && in(ids, s.LandmarkIDs[l])
	}
	gact := s.gactive
	if grad && s.Grad != nil {
		gact = slices.DeleteFunc(slices.Clone(s.gactive), func(i int) bool { return in(ids, s.Grad.IDs[i]) })
		hit = hit || len(gact) < len(s.gactive)
	}
	if !hit {
		return s
	}
	c := *s
	c.gactive = gact
	if !landmarks {
		return &c
	}
	c.masked = append([]bool(nil), s.masked...)
	for l, id := range s.LandmarkIDs {
		c.masked[l] = c.masked[l] || in(ids, id)
	}
	c.compact()
	return &c
}

func contains(ids []string, id string) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// compact rebuilds the active arrays from masked (the evaluation features and diagonals
// only with a Draw: the exact path reads its rows through active).
func (s *Model) compact() {
	n := 0
	for _, m := range s.masked {
		if !m {
			n++
		}
	}
	s.active = make([]int, 0, n)
	s.om, s.omMean = make([]float64, 0, n), make([]float64, 0, n)
	s.lf, s.diag, s.t2 = nil, nil, nil
	defer func() { s.chol = factorActive(s.gram, len(s.masked), s.active) }()
	s.aAct, s.ones = nil, make([]float64, n)
	for i := range s.ones {
		s.ones[i] = 1
	}
	q := 0
	if s.Draw != nil {
		// Sized once: the landmark features are m·q floats (16 MiB at the defaults), and
		// growing them by appends copied them about twice, on the deletion's path.
		q = s.Draw.sketch.Dim()
		s.lf, s.diag = make([]float64, 0, n*q), make([]float64, 0, n)
	}
	if s.tau2 != nil {
		s.t2 = make([]float64, 0, n)
	}
	for l, m := range s.masked {
		if m {
			continue
		}
		s.active = append(s.active, l)
		if s.Draw != nil {
			s.lf = append(s.lf, s.Draw.lf[l*q:(l+1)*q]...)
			s.diag = append(s.diag, s.Draw.diag[l])
		}
		s.om = append(s.om, s.Omega[l])
		s.omMean = append(s.omMean, s.omegaMean[l])
		if s.enc.A != nil {
			s.aAct = append(s.aAct, s.enc.A.RawRowView(l)...)
		}
		if s.tau2 != nil {
			s.t2 = append(s.t2, s.tau2[l])
		}
	}
}

// MaskedCount is the number of masked landmarks.
func (s *Model) MaskedCount() int { return len(s.masked) - len(s.active) }

// LandmarkInput returns the augmented input of the first unmasked landmark term of id
// (a row of LandmarkX, shared: do not modify), or false when id is not an unmasked
// landmark: a masked (deleted) landmark is never handed out.
func (s *Model) LandmarkInput(id string) ([]float64, bool) {
	d := s.Backbone.InDim()
	for l, lid := range s.LandmarkIDs {
		if lid == id && !s.masked[l] {
			return s.LandmarkX[l*d : (l+1)*d], true
		}
	}
	return nil, false
}

// modelID names a fitted encoder by content: "sha256:" and the first 16 hex digits of
// the hash of the landmark ids and views, Ã and b (float64 bits, little-endian), so the
// same fit on the same points always has the same id, whatever its version number.
func ModelID(ids []string, views []byte, a *mat.Dense, b []float64) string {
	h := sha256.New()
	var buf [8]byte
	u := func(v uint64) { binary.LittleEndian.PutUint64(buf[:], v); h.Write(buf[:]) }
	u(uint64(len(ids)))
	for i, id := range ids {
		u(uint64(len(id)))
		h.Write([]byte(id))
		h.Write([]byte{views[i]})
	}
	r, c := a.Dims()
	u(uint64(r))
	u(uint64(c))
	for i := range r {
		for _, v := range a.RawRowView(i) {
			u(math.Float64bits(v))
		}
	}
	for _, v := range b {
		u(math.Float64bits(v))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Workspace is one goroutine's workspace for answers: the evaluation sketch's Query
// (one forward, the Jacobian rows, ψ and the exact diagonal, on two goroutines) and the
// buffers of the kernel row and the variance bounds.
type Workspace struct {
	sk   *entk.Sketch
	q    *entk.Query
	qf   []float64
	row  []float64
	vbar []float64
	rk   certify.Ranker

	// Exact path (ExactRows.ready): for the backbone eb, the exact-only Query (full rows)
	// or the FactoredQuery (factored rows), the query's row under the model's ExactRows,
	// the full kernel row over every landmark of the model and the rows' error bounds.
	eb   entk.Backbone
	eq   *entk.Query
	fq   *entk.FactoredQuery
	phi  []float64
	phiQ []float64 // the query's φ (sketched path's crossing landmarks: full rows always)
	phiL []float64 // a landmark's φ (likewise)
	// refineCrossing's scratch: which entries are in the top-K, and the crossing ones.
	inTop []bool
	cands []crossing
	full  []float64
	kerr  []float64
	// AnswerBatch's: the queries' φ, exact diagonals, full rows and lane scratch.
	phis        [][]float64
	ktts, fulls []float64
	lanes       []float64
	// The representer ranking's scores, radii and latent; the top-K for stability.
	sc, rad, z []float64
	top        []int
	sol        *mat.VecDense // the residual fraction's solution
	// The gradient ranking's (gradrows.go): the backbone gb and its workspace, the
	// query's outputs, margin cotangent and J_tᵀu_t, and its scores against every row.
	gb                       entk.Backbone
	gws                      *entk.Workspace
	gfq                      *entk.FactoredQuery // factored gradient rows
	gout, gu, gv, gall, gphi []float64
}

// Answer is AnswerRanked with the paper's displacement ranking.
func (s *Model) Answer(w *Workspace, x []float64, k int, delta float64) (certify.Certificate, error) {
	return s.AnswerRanked(w, x, k, delta, certify.Displacement)
}

// AnswerRanked certifies the top-k landmarks for x under ranking r (certify's doc
// "Rankings"). With exact rows (s.Exact) the kernel row is the exact eNTK k*(x_ℓ, x) up
// to rounding and the certificate is deterministic (entk.ExactRowError bounds the row,
// or entk.Factored.RowError with factored rows);
// otherwise it is Thm. topk on this serving's evaluation draw with the conservative
// variance bound from exact diagonals (eq. conservative-variance), δ split over the
// active landmarks only (δ_ℓ = δ/M). The displacement ranking attaches the fit floor of
// Thm. fit-floor when the model has τ² (it never changes a certified verdict); every
// ranking attaches its refit stability (stability). k is clamped to the active
// landmarks minus one.
func (s *Model) AnswerRanked(w *Workspace, x []float64, k int, delta float64, r certify.Ranking) (certify.Certificate, error) {
	if r.AllPoints() {
		return s.answerGradient(w, x, k, delta, r)
	}
	if s.Exact != nil {
		ktt := s.exactRowTo(w, x)
		return s.answerExact(w, w.full, ktt, k, delta, r)
	}
	var c certify.Certificate
	m, k, alloc, err := s.start(w, k, delta)
	if err != nil {
		return c, err
	}
	kqq := s.drawRowTo(w, x)
	certify.ConservativeRowTo(w.vbar, s.diag, kqq, s.h, s.s, s.padded)
	s.residualFraction(w, &c, vec.Dot(w.qf, w.qf))
	if r == certify.Representer {
		// Each kernel entry is within sqrt(V̄/δ_ℓ) of its mean with probability 1 − δ_ℓ,
		// all of them together with 1 − δ (the union bound of Thm. topk).
		w.kerr = grow(w.kerr, m)
		inv := 1 / math.Sqrt(alloc.PerLandmark)
		for i, v := range w.vbar {
			w.kerr[i] = math.Sqrt(v) * inv
		}
		if err := s.representer(w, &c, k); err != nil {
			return c, err
		}
		c.Allocation = alloc
	} else {
		wt := s.weights(r)
		if err := w.rk.CertifyTo(&c, w.row, wt, w.vbar, k, alloc); err != nil {
			return c, err
		}
		if c.Verdict != certify.Certified && s.exactCap > 0 {
			if err := s.refineCrossing(w, &c, x, k, alloc, wt); err != nil {
				return c, err
			}
		}
	}
	c.VarianceModel = certify.VarianceConservative
	c.Budget = certify.Budget{H: s.h, S: s.s, M: m, Pool: len(s.LandmarkIDs), PaddedP: s.padded}
	c.EvalSeed = s.Draw.Seed
	c.EvalDraw = "eval"
	// κ from the evaluation draw is a plug-in estimate.
	return c, s.finish(w, &c, k, alloc, true, r)
}

// exactRowTo writes x's full exact kernel row (every landmark, masked ones included)
// into w.full and returns k*(x, x); s has exact rows.
func (s *Model) exactRowTo(w *Workspace, x []float64) float64 {
	ex := s.Exact
	ex.ready(w, s.Backbone)
	ktt := ex.queryTo(w, w.phi, x)
	w.full = grow(w.full, len(s.LandmarkIDs))
	ex.kernelRowTo(w, w.full, w.phi)
	return ktt
}

// drawRowTo writes x's kernel row over the active landmarks on the evaluation draw into
// w.row (sized by the caller) and its features into w.qf, and returns the query's
// exact diagonal; s has a draw.
func (s *Model) drawRowTo(w *Workspace, x []float64) float64 {
	sk := s.Draw.sketch
	if w.sk != sk {
		w.sk, w.q, w.qf = sk, sk.NewQuery(), make([]float64, sk.Dim())
	}
	kqq := w.q.FeaturesDiagTo(w.qf, x)
	entk.KernelRowTo(w.row, s.lf, w.qf)
	return kqq
}

// stability attaches the ranking's stability to c (indices still into the active row):
// the expected top-K Jaccard under a refit with another seed, the product of its two
// parts. The pool part is the model's measured ReseedJaccard (Input.PoolStability: the
// pool another model.seed selects); the fit part is 1 for a fit-free ranking and
// certify.FitStability from ω̄ and τ² for the displacement. Either part unknown (no
// measurement, one fit, or the representer, whose per-fit coefficients are not kept)
// leaves the stability unknown (nil). A separating certificate whose stability is
// unknown or below query.stable_jaccard becomes unstable: the arithmetic holds for the
// served model, another seed's model would answer otherwise.
func (s *Model) stability(w *Workspace, c *certify.Certificate) {
	var j *float64
	switch {
	case s.poolStab == nil:
	case c.Ranking.FitFree():
		j = new(float64)
		*j = *s.poolStab
	case c.Ranking == certify.Displacement && s.t2 != nil:
		w.top = w.top[:0]
		for _, e := range c.TopK {
			w.top = append(w.top, e.Index)
		}
		j = new(float64)
		*j = *s.poolStab * certify.FitStability(w.row, s.omMean, s.t2, w.top)
	}
	c.Stability = j
	c.Stable = j != nil && *j >= s.stableJaccard
	if c.Verdict == certify.Certified && !c.Stable {
		c.Verdict = certify.Unstable
	}
}

// residualFraction sets c.ResidualFraction from w.row (the answer's kernel row over the
// active landmarks, before any exact refinement) and the query's diagonal in the same
// kernel: explained.go. Rank and certificate code reset nothing it sets.
func (s *Model) residualFraction(w *Workspace, c *certify.Certificate, ktt float64) {
	c.ResidualFraction = nil
	if s.chol == nil {
		return
	}
	if w.sol == nil || w.sol.Len() != len(w.row) {
		w.sol = mat.NewVecDense(len(w.row), nil)
	}
	if f, ok := fractionTo(w.sol, s.chol, w.row, ktt); ok {
		c.ResidualFraction = &f
	}
}

// weights are the per-landmark factors of a kernel-times-weight ranking: ω for the
// displacement, ones for the similarity.
func (s *Model) weights(r certify.Ranking) []float64 {
	if r == certify.Similarity {
		return s.ones
	}
	return s.om
}

// representer fills c with the representer ranking of w.row (errors w.kerr) over the
// active landmarks.
func (s *Model) representer(w *Workspace, c *certify.Certificate, k int) error {
	m := len(s.active)
	w.sc, w.rad = grow(w.sc, m), grow(w.rad, m)
	w.z = grow(w.z, len(s.enc.B))
	certify.RepresenterTo(w.sc, w.rad, w.z, w.row, w.kerr, s.aAct, s.enc.B, s.Scale)
	return w.rk.CertifyIntervalsTo(c, w.sc, w.rad, k)
}

// start checks that two landmarks or more are unmasked, clamps k to their number minus
// one, sizes w's rows and splits δ over them.
func (s *Model) start(w *Workspace, k int, delta float64) (m, kk int, alloc certify.Allocation, err error) {
	m = len(s.active)
	if m < 2 {
		return m, k, alloc, fmt.Errorf("%w: %d unmasked landmarks", ErrNoModel, m)
	}
	w.row = grow(w.row, m)
	w.vbar = grow(w.vbar, m)
	alloc, err = certify.UniformAllocation(delta, m, 1)
	return m, min(k, m-1), alloc, err
}

// answerExact certifies the top-k on the exact path from the query's full exact row
// (every landmark, masked ones included) and its exact diagonal ktt.
func (s *Model) answerExact(w *Workspace, full []float64, ktt float64, k int, delta float64, r certify.Ranking) (certify.Certificate, error) {
	var c certify.Certificate
	m, k, alloc, err := s.start(w, k, delta)
	if err != nil {
		return c, err
	}
	w.kerr = grow(w.kerr, m)
	for i, l := range s.active {
		w.row[i] = full[l]
		w.kerr[i] = s.Exact.rowError(l, ktt)
	}
	s.residualFraction(w, &c, ktt)
	if r == certify.Representer {
		if err := s.representer(w, &c, k); err != nil {
			return c, err
		}
		c.Allocation = certify.Allocation{Delta: delta, Queries: 1, Landmarks: m, Scheme: "deterministic"}
	} else if err := w.rk.CertifyBoundedTo(&c, w.row, s.weights(r), w.kerr, k, delta); err != nil {
		return c, err
	}
	clear(w.vbar) // the floor's kernel variance: none
	c.VarianceModel = certify.VarianceExactKernel
	c.Budget = certify.Budget{M: m, Pool: len(s.LandmarkIDs)}
	if err := s.finish(w, &c, k, alloc, false, r); err != nil {
		return c, err
	}
	for i := range c.TopK {
		c.TopK[i].Cosine = s.Exact.cosine(full, c.TopK[i].Index, ktt)
	}
	c.RunnerUp.Cosine = s.Exact.cosine(full, c.RunnerUp.Index, ktt)
	return c, nil
}

// finish attaches the fit floor and maps the certificate's indices from active
// landmarks to model rows.
func (s *Model) finish(w *Workspace, c *certify.Certificate, k int, alloc certify.Allocation, plugIn bool, r certify.Ranking) error {
	c.Ranking = r
	if s.t2 != nil && r == certify.Displacement {
		// Thm. fit-floor: κ is the exact row on the exact path and the evaluation draw's
		// plug-in otherwise; ω̄ and τ² come from R fits, so the floor is diagnostic either way
		// unless R is large (plug_in marks it).
		fl, err := certify.FitFloor(w.row, w.vbar, s.omMean, s.t2, k, alloc, plugIn || s.fits < floorExactFits)
		if err != nil {
			return err
		}
		c.ApplyFloor(fl)
	}
	s.stability(w, c)
	for i := range c.TopK {
		c.TopK[i].Index = s.active[c.TopK[i].Index]
	}
	c.RunnerUp.Index = s.active[c.RunnerUp.Index]
	c.ModelVersion = s.Version
	return nil
}

// AnswerBatch answers every query of a batch, out[i] and errs[i] being what
// Answer(w, xs[i], ks[i], deltas[i]) returns, bit for bit. On the exact path the
// landmarks' exact rows are read once for the whole batch instead of once per query
// (vec.Dots32BatchTo over full rows, or over each segment of factored rows), which is
// what bounds a query's cost by memory bandwidth; the sketched path answers one query
// after the other. The gradient rankings' queries likewise read the gradient rows once
// for the batch (answerGradientBatch). out and errs have len(xs) entries.
func (s *Model) AnswerBatch(w *Workspace, out []certify.Certificate, errs []error, xs [][]float64, ks []int, deltas []float64, rs []certify.Ranking) {
	if len(xs) >= 2 && slices.ContainsFunc(rs, certify.Ranking.AllPoints) {
		// The gradient rankings' queries read the gradient rows once for all of them
		// (answerGradientBatch; without rows, each gets answerGradient's error); the
		// others are batched apart.
		var grad, rest []int
		for i, r := range rs {
			if r.AllPoints() {
				grad = append(grad, i)
			} else {
				rest = append(rest, i)
			}
		}
		s.answerGradientBatch(w, out, errs, xs, ks, deltas, rs, grad)
		if len(rest) > 0 {
			s.batchSubset(w, out, errs, xs, ks, deltas, rs, rest)
		}
		return
	}
	if s.Exact == nil || len(xs) < 2 {
		for i, x := range xs {
			out[i], errs[i] = s.AnswerRanked(w, x, ks[i], deltas[i], rs[i])
		}
		return
	}
	mm := s.exactRowsBatch(w, len(xs), func(i int) []float64 { return xs[i] })
	for i := range xs {
		out[i], errs[i] = s.answerExact(w, w.fulls[i*mm:(i+1)*mm], w.ktts[i], ks[i], deltas[i], rs[i])
	}
}

// exactRowsBatch writes, for the n queries x(i), their exact kernel rows against every
// landmark into w.fulls (row i at i·mm) and their k*(x, x) into w.ktts, reading the
// landmarks' exact rows once for all of them (ExactRows.kernelRowsTo); it returns mm,
// the landmarks. s.Exact is not nil.
func (s *Model) exactRowsBatch(w *Workspace, n int, x func(i int) []float64) (mm int) {
	ex := s.Exact
	ex.ready(w, s.Backbone)
	mm = len(s.LandmarkIDs)
	for len(w.phis) < n {
		w.phis = append(w.phis, nil)
	}
	w.ktts = grow(w.ktts, n)
	for i := range n {
		w.phis[i] = grow(w.phis[i], ex.dim)
		w.ktts[i] = ex.queryTo(w, w.phis[i], x(i))
	}
	w.fulls = grow(w.fulls, n*mm)
	ex.kernelRowsTo(w, w.fulls, w.phis[:n], mm)
	return mm
}

// batchSubset is AnswerBatch on the queries of the given indices.
func (s *Model) batchSubset(w *Workspace, out []certify.Certificate, errs []error, xs [][]float64, ks []int, deltas []float64, rs []certify.Ranking, idx []int) {
	n := len(idx)
	o, e := make([]certify.Certificate, n), make([]error, n)
	sx, sk, sd, sr := make([][]float64, n), make([]int, n), make([]float64, n), make([]certify.Ranking, n)
	for j, i := range idx {
		sx[j], sk[j], sd[j], sr[j] = xs[i], ks[i], deltas[i], rs[i]
	}
	s.AnswerBatch(w, o, e, sx, sk, sd, sr)
	for j, i := range idx {
		out[i], errs[i] = o[j], e[j]
	}
}

// refineCrossing is the sketched path's second pass: the landmarks whose intervals cross
// the cut (in the top-K with Î−ε ≤ max below the cut of Î+ε, or below it with Î+ε ≥ min
// over the top-K of Î−ε), at most exactCap of them, widest radius first, get their exact
// kernel k*(x_ℓ, x) (entk.ExactTo of both inputs) with the rounding bound as radius, and
// the row is certified again. The union bound of Thm. topk still holds: an exact entry's
// interval holds the truth with certainty, the others each with 1 − δ_ℓ, whichever entries
// were chosen. w.row and w.vbar are changed in place.
func (s *Model) refineCrossing(w *Workspace, c *certify.Certificate, x []float64, k int, alloc certify.Allocation, wt []float64) error {
	cs := w.cands[:0]
	w.inTop = slices.Grow(w.inTop[:0], len(w.row))[:len(w.row)]
	clear(w.inTop)
	for _, e := range c.TopK {
		w.inTop[e.Index] = true
		if e.Score-e.Radius <= c.UpperRest {
			cs = append(cs, crossing{e.Index, e.Radius})
		}
	}
	inv := 1 / math.Sqrt(alloc.PerLandmark)
	for i, kl := range w.row {
		if w.inTop[i] {
			continue
		}
		sc := kl * wt[i]
		r := wt[i] * math.Sqrt(w.vbar[i]) * inv
		if sc+r >= c.LowerTop {
			cs = append(cs, crossing{i, r})
		}
	}
	w.cands = cs
	if len(cs) == 0 {
		return nil
	}
	slices.SortFunc(cs, func(a, b crossing) int { return cmp.Compare(b.r, a.r) })
	cs = cs[:min(len(cs), s.exactCap)]
	if w.eb != s.Backbone {
		w.eb, w.eq, w.fq = s.Backbone, nil, nil
	}
	if w.eq == nil {
		w.eq = entk.NewExactQuery(s.Backbone)
	}
	dim := entk.ExactDim(s.Backbone)
	w.phiQ, w.phiL = grow(w.phiQ, dim), grow(w.phiL, dim)
	ktt := w.eq.ExactTo(w.phiQ, x)
	in := s.Backbone.InDim()
	for _, cd := range cs {
		l := s.active[cd.i]
		kll := w.eq.ExactTo(w.phiL, s.LandmarkX[l*in:(l+1)*in])
		w.row[cd.i] = vec.Dot(w.phiL, w.phiQ)
		// CertifyTo's radius is ω·sqrt(V/δ_ℓ); V = err²·δ_ℓ makes it ω·err.
		e := entk.ExactRowError(kll, ktt, len(w.phiQ))
		w.vbar[cd.i] = e * e * alloc.PerLandmark
	}
	return w.rk.CertifyTo(c, w.row, wt, w.vbar, k, alloc)
}

// crossing is a landmark (index into the active row) whose interval crosses the cut, with
// its radius.
type crossing struct {
	i int
	r float64
}

// floorExactFits is the number of refits below which ω̄ and τ² count as plug-in
// estimates in the fit floor (their sampling error is then not negligible).
const floorExactFits = 30

// exactDiagsTo writes dst[i] = k*(x_i, x_i) (entk.ExactDiag) for the m rows of xs, on
// GOMAXPROCS goroutines with one workspace each, all joined before it returns.
func exactDiagsTo(dst []float64, b entk.Backbone, xs []float64, m int) {
	d := b.InDim()
	workers := min(runtime.GOMAXPROCS(0), max(m, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := b.NewWorkspace()
			for i := w; i < m; i += workers {
				dst[i] = entk.ExactDiag(b, xs[i*d:(i+1)*d], ws)
			}
		}()
	}
	wg.Wait()
}

// CountDraw counts one answer against the evaluation draw's budget (none on the exact
// path, which uses no draw).
func (s *Model) CountDraw() {
	if s.Draw != nil {
		s.Draw.Used.Add(1)
	}
}

// ResidualOf is the published form of a pool view's residual certificate.
func ResidualOf(c coreset.ResidualCertificate) certify.Residual {
	return certify.Residual{TraceR: c.Trace, TraceK: c.TraceK, Exact: c.Exact}
}

// grow returns s resized to n, reusing its array when large enough.
func grow(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}

// ActiveLandmarks returns the model rows of the unmasked landmarks, in the order the
// scores of an answer's kernel row are computed (certify indices refer to it).
func (s *Model) ActiveLandmarks() []int { return slices.Clone(s.active) }

// Sketched returns a copy of s that answers on the sketched path: no exact rows, a fresh
// evaluation draw under (seed, name), and exact rows for at most exactCap landmarks whose
// intervals cross the cut. It is the comparison of the exact path against the sketch.
func (s *Model) Sketched(seed uint64, name string, exactCap int) (*Model, error) {
	dr, err := newDraw(s.Backbone, s.h, s.s, seed, name, s.LandmarkX, len(s.LandmarkIDs))
	if err != nil {
		return nil, err
	}
	c := *s
	c.Exact, c.exactCap = nil, exactCap
	c.Draw, c.padded = dr, dr.sketch.PaddedP()
	c.gram = gramDense(dr.lf, len(s.LandmarkIDs), dr.sketch.Dim())
	c.compact()
	return &c, nil
}

// Input is what rebuilds s with New: the same model, its current mask (the masked
// landmarks count as missing), its exact rows, its audit blocks. A new evaluation draw
// of the same model is New(s.Input(), settings with another draw name).
func (s *Model) Input() Input {
	in := Input{Version: s.Version, ID: s.ID, Points: s.Points, LandmarkIDs: s.LandmarkIDs, Views: s.Views,
		LandmarkX: s.LandmarkX, Missing: s.masked, A: s.enc.A, B: s.enc.B, Scale: s.Scale, Omega: s.Omega,
		OmegaMean: s.omegaMean, Tau2: s.tau2, Residual: s.residual, Exact: s.Exact, PoolStability: s.poolStab}
	if s.audit != nil {
		in.KRef, in.KTest, in.RefLabels = s.audit.KRef, s.audit.KTest, s.audit.RefLabels
	}
	return in
}

// Export is the export of the serving model with its current mask (NewExport), its
// weights named by src and its backbone's parameter coverage (WithCoverage).
func (s *Model) Export(src weights.Source) (ModelExport, error) {
	e, err := NewExport(s.Version, s.ID, s.Backbone.Arch(), src, s.Scale, s.LandmarkIDs, s.Views, s.LandmarkX, s.masked, s.Omega)
	if err == nil && s.enc.A != nil {
		e.WithEncoder(s.enc.A, s.enc.B, s.masked)
	}
	if err == nil {
		e.WithCoverage(entk.Coverage(s.Backbone))
	}
	return e, err
}

// MaskedIDs returns the ids of s's masked landmarks, in model row order (an id that is
// a landmark of both views appears twice).
func (s *Model) MaskedIDs() []string {
	var ids []string
	for l, id := range s.LandmarkIDs {
		if s.masked[l] {
			ids = append(ids, id)
		}
	}
	return ids
}

// IsLandmark reports whether id is an unmasked landmark of s (either view).
func (s *Model) IsLandmark(id string) bool {
	for l, lid := range s.LandmarkIDs {
		if lid == id && !s.masked[l] {
			return true
		}
	}
	return false
}
