package coreset

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// StateVersion is the version of the State layout; Restore rejects any other.
const StateVersion = 1

// displaceSlack makes the per-insert displacement test conservative: an insert whose
// residual comes within this relative margin of a pivot value marks the pool stale, so a
// near-tie that rounding could resolve either way costs a sync instead of a silent
// mismatch with batch greedy.
const displaceSlack = 1e-9

// LandmarkBudget is the landmark budget of one pool: a fixed m, or the rule deff:λ
// (m = ⌈d_eff(λ)⌉ over the stored points, Lemma deff), re-evaluated at every Sync.
type LandmarkBudget struct {
	M      int     // fixed m (used when Lambda == 0)
	Lambda float64 // > 0 selects the rule deff:λ
}

// ParseLandmarkBudget parses "256" or "deff:0.001".
func ParseLandmarkBudget(s string) (LandmarkBudget, error) {
	if rest, ok := strings.CutPrefix(s, "deff:"); ok {
		l, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(l > 0) || math.IsInf(l, 0) {
			return LandmarkBudget{}, fmt.Errorf("%w: budget %q: λ must be a positive number", ErrBudget, s)
		}
		return LandmarkBudget{Lambda: l}, nil
	}
	m, err := strconv.Atoi(s)
	if err != nil || m < 1 {
		return LandmarkBudget{}, fmt.Errorf("%w: budget %q: want a positive integer or deff:λ", ErrBudget, s)
	}
	return LandmarkBudget{M: m}, nil
}

// String is the inverse of ParseLandmarkBudget.
func (b LandmarkBudget) String() string {
	if b.Lambda > 0 {
		return "deff:" + strconv.FormatFloat(b.Lambda, 'g', -1, 64)
	}
	return strconv.Itoa(b.M)
}

// Config configures a Pool.
type Config struct {
	Dim    int            // feature dimension q
	Budget LandmarkBudget // landmark budget
	Tol    float64        // relative pivot tolerance; 0 means DefaultTol
	TopUp  bool           // fill the budget past the numerical rank by the top-up rule (TopUpKey)
	Seed   uint64         // seed of the top-up keys and of the SLQ probes of the deff rule
	SLQ    SLQOptions
	// Normalize pivots on the normalized residual δ_j/K_jj (GreedyOptions.Normalize):
	// greedy on the normalized kernel as far as the choice of landmarks goes, so that
	// points of small kernel norm are covered; the certificate, the threshold and the
	// stored residuals stay those of the raw kernel.
	Normalize bool
	// Tolerance τ ∈ [0, 1) is tolerant pivoting (GreedyOptions.Tolerance): each step
	// takes, among the candidates whose key is within the factor 1−τ of the step's
	// largest, the one of smallest PivotKey of its id, so pools whose sketches differ
	// only in Seed choose alike. 0 is the exact argmax.
	Tolerance float64
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []string
	if c.Dim < 1 {
		errs = append(errs, fmt.Sprintf("Dim=%d must be ≥ 1", c.Dim))
	}
	if c.Budget.Lambda == 0 && c.Budget.M < 1 {
		errs = append(errs, fmt.Sprintf("Budget.M=%d must be ≥ 1", c.Budget.M))
	}
	if c.Budget.Lambda < 0 || math.IsNaN(c.Budget.Lambda) || math.IsInf(c.Budget.Lambda, 0) {
		errs = append(errs, fmt.Sprintf("Budget.Lambda=%v must be ≥ 0 and finite", c.Budget.Lambda))
	}
	if c.Tol < 0 || c.Tol >= 1 || math.IsNaN(c.Tol) {
		errs = append(errs, fmt.Sprintf("Tol=%v must be in [0, 1)", c.Tol))
	}
	if !(c.Tolerance >= 0 && c.Tolerance < 1) {
		errs = append(errs, fmt.Sprintf("Tolerance=%v must be in [0, 1)", c.Tolerance))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrBudget, strings.Join(errs, "; "))
	}
	return nil
}

// tol is the relative pivot tolerance in force: Tol, or DefaultTol when it is 0.
func (c Config) tol() float64 {
	if c.Tol == 0 {
		return DefaultTol
	}
	return c.Tol
}

// FeatureSource gives the feature vector ψ(x) of a stored point; the Pool asks for it only
// in Sync. The daemon recomputes features from the raw points it keeps in bbolt.
type FeatureSource interface {
	// FeaturesTo writes ψ of id into dst (len(dst) == Dim) and keeps no reference to dst.
	FeaturesTo(dst []float64, id string) error
}

// MapSource is a FeatureSource over an in-memory map (tests, offline tools).
type MapSource map[string][]float64

// FeaturesTo implements FeatureSource.
func (s MapSource) FeaturesTo(dst []float64, id string) error {
	f, ok := s[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownID, id)
	}
	if len(f) != len(dst) {
		return fmt.Errorf("%w: id %q has %d features, want %d", ErrDim, id, len(f), len(dst))
	}
	copy(dst, f)
	return nil
}

// ResidualCertificate is the published residual certificate of a pool.
type ResidualCertificate struct {
	// Trace is tr R of the served landmarks over the stored points. It is exact (to
	// rounding) when Exact, and otherwise an upper bound.
	Trace float64
	// TraceK is tr K over the stored points.
	TraceK float64
	// Exact is true when Trace is the exact residual trace of the served landmarks, i.e. no
	// landmark was deleted since the last Sync.
	Exact bool
	// Stale is true when the served landmarks may differ from batch greedy over the stored
	// points; StaleFrom is the earliest pivot position that may differ.
	Stale     bool
	StaleFrom int
}

// PointState is the persisted record of one stored point.
type PointState struct {
	ID string
	// Diag is K_jj = ||ψ_j||².
	Diag float64
	// Residual is the point's residual against the served greedy landmarks when it was
	// computed; after a landmark deletion it is a lower bound of the current residual.
	Residual float64
}

// State is everything a Pool persists. Restore(State) gives a pool that behaves exactly
// as the one State came from. Matrices are row-major.
type State struct {
	Version int
	Config  Config
	// Points are sorted by ID.
	Points []PointState
	// Landmarks are ids in pivot order: Greedy factor pivots, then top-up landmarks.
	Landmarks []string
	// LandmarkFeatures is len(Landmarks)×Dim.
	LandmarkFeatures []float64
	// Greedy is the number of landmarks in the factor.
	Greedy int
	// PivotValues[t] = δ^{(t)} of greedy pivot t when it was selected (length Greedy):
	// the raw residual, with Config.Normalize too (whose pivot key is PivotValues[t]
	// divided by the landmark's Diag).
	PivotValues []float64
	// StepMax[t] is the largest pivot key of a candidate at greedy step t when it was
	// selected (GreedyResult.StepMax; length Greedy). Under Config.Tolerance an insert
	// compares its key with it; without, it is pivot t's own key. Empty in a state of an
	// older layout (Restore then takes the pivots' keys, see Restore).
	StepMax []float64
	// StepMaxIDs[t] is the stored point that held StepMax[t] (GreedyResult.StepMaxRow),
	// "" when none is recorded: without Config.Tolerance, when pivot t's own key is the
	// max, or once that point was deleted (length Greedy, or empty with StepMax).
	StepMaxIDs []string
	// Factor is the Greedy×Greedy lower Cholesky factor of K_ZZ in pivot order.
	Factor []float64
	// Gram is Σ_j y_j y_jᵀ over stored points (Greedy×Greedy), an upper bound in the
	// Loewner order after non-landmark deletions.
	Gram []float64
	// TopUpKeys are the keys of the top-up landmarks (length len(Landmarks)−Greedy).
	TopUpKeys []uint64
	// M is the budget in force (fixed, or ⌈d_eff⌉ of the last Sync).
	M int
	// Threshold is Tol·max K_jj at the last Sync.
	Threshold float64
	// Cert, CertComp, TraceK, TraceKComp are the Neumaier running sums and compensations.
	Cert, CertComp, TraceK, TraceKComp float64
	// Exact, Stale, StaleFrom: see ResidualCertificate.
	Exact     bool
	Stale     bool
	StaleFrom int
	// Changed is true when points were inserted or deleted since the last Sync.
	Changed bool
}

type point struct{ diag, res float64 }

// Pool is an incrementally maintained greedy pivoted-Cholesky landmark pool with its
// residual certificate. See the package documentation for the contract. A Pool is not safe
// for concurrent use.
type Pool struct {
	cfg    Config
	points map[string]point

	ids    []string  // landmarks in pivot order
	feats  []float64 // len(ids)×q
	kg     int       // greedy landmarks (factor size)
	piv    []float64 // kg
	pkey   []float64 // kg: piv[t]/K_jj of landmark t, its key under Normalize (not persisted)
	smax   []float64 // kg: the step maxima (State.StepMax)
	smaxID []string  // kg: who held them (State.StepMaxIDs)
	// Not persisted, derived from smaxID and ids under Tolerance: holds maps a point to
	// the first step whose max it holds, lkey[t] is PivotKey(ids[t]).
	holds  map[string]int
	lkey   []uint64
	l      []float64 // kg×kg lower factor
	gram   []float64 // kg×kg
	topKey []uint64  // len(ids)−kg
	m      int
	thr    float64

	cert, certC     float64
	traceK, traceKC float64
	exact           bool
	stale           bool
	staleFrom       int
	changed         bool   // points changed since the last Sync
	gen             uint64 // Adopts since New or Restore (Generation)
	lmGen           uint64 // changes of the greedy landmarks' features (CrossTo tokens)

	c, y []float64 // workspaces of length kg
}

// New returns an empty pool.
func New(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, points: make(map[string]point), exact: true, m: cfg.Budget.M}
	if cfg.Budget.Lambda > 0 {
		p.m = 0 // decided at the first Sync
	}
	return p, nil
}

// Len returns the number of stored points.
func (p *Pool) Len() int { return len(p.points) }

// Config returns the pool's configuration.
func (p *Pool) Config() Config { return p.cfg }

// M returns the budget in force.
func (p *Pool) M() int { return p.m }

// Landmarks returns the served landmark ids in pivot order (a copy).
func (p *Pool) Landmarks() []string { return append([]string(nil), p.ids...) }

// Greedy returns how many leading landmarks are positive-residual pivots; the rest were
// added by the top-up rule.
func (p *Pool) Greedy() int { return p.kg }

// LandmarkFeaturesTo copies the landmark feature vectors (len(Landmarks())×Dim, pivot
// order) into dst and returns it, growing dst when needed.
func (p *Pool) LandmarkFeaturesTo(dst []float64) []float64 {
	return append(dst[:0], p.feats...)
}

// Has reports whether id is stored.
func (p *Pool) Has(id string) bool { _, ok := p.points[id]; return ok }

// Residual returns the current residual certificate.
func (p *Pool) Residual() ResidualCertificate {
	return ResidualCertificate{
		Trace:     math.Max(0, p.cert+p.certC),
		TraceK:    p.traceK + p.traceKC,
		Exact:     p.exact,
		Stale:     p.stale,
		StaleFrom: p.staleFrom,
	}
}

// NeedsSync reports whether a Sync would change the served pool or the certificate's
// exactness.
func (p *Pool) NeedsSync() bool {
	return p.stale || !p.exact || p.cfg.Budget.Lambda > 0 && (p.m == 0 || p.changed)
}

func (p *Pool) markStale(t int) {
	if !p.stale || t < p.staleFrom {
		p.stale, p.staleFrom = true, t
	}
}

// neumaier adds x to the compensated sum (s, c).
func neumaier(s, c *float64, x float64) {
	t := *s + x
	if math.Abs(*s) >= math.Abs(x) {
		*c += (*s - t) + x
	} else {
		*c += (x - t) + *s
	}
	*s = t
}

// Insert stores a point with features f (len Dim; not retained). It adds the point's exact
// residual against the served landmarks to the certificate and marks the pool stale from
// the first pivot position the point would displace in batch greedy. Cost O(k q + k²)
// for k served landmarks, independent of the number of stored points; it allocates only
// the map entry.
func (p *Pool) Insert(id string, f []float64) error { return p.insert(id, f, nil) }

// insert is Insert, with the products of f with the greedy landmarks taken from cross
// when it is not nil (len kg, computed by CrossTo for the current landmarks).
func (p *Pool) insert(id string, f, cross []float64) error {
	if id == "" {
		return ErrEmptyID
	}
	if len(f) != p.cfg.Dim {
		return fmt.Errorf("%w: id %q has %d features, want %d", ErrDim, id, len(f), p.cfg.Dim)
	}
	if _, ok := p.points[id]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateID, id)
	}
	diag := dot(f, f)
	if math.IsNaN(diag) || math.IsInf(diag, 0) {
		return fmt.Errorf("%w: id %q has squared norm %v", ErrNotFinite, id, diag)
	}
	q, k := p.cfg.Dim, p.kg
	c, y := p.c[:k], p.y[:k]
	if cross != nil {
		copy(c, cross)
	} else {
		vec.DotsTo(c, 1, f, q, 1, p.feats, q, k, q) // c[i] = dot(landmark i, f)
	}
	if p.cfg.Normalize || p.cfg.Tolerance > 0 {
		p.raiseThreshold(diag)
	}
	// Forward solve L y = c; r_t = K_xx − Σ_{i<t} y_i² is the point's residual after t
	// pivots. Batch greedy would take the point at step t exactly when r_t beats δ^{(t)}
	// (r_t/K_xx beats δ^{(t)}/K_pp under Normalize; under Tolerance, see takesOver).
	r := diag
	limit := k
	if p.stale && p.staleFrom < limit {
		limit = p.staleFrom
	}
	displaced := false
	var xk uint64 // the point's PivotKey, under Tolerance
	if p.cfg.Tolerance > 0 && limit > 0 {
		xk = PivotKey(id)
	}
	for t := 0; t < k; t++ {
		if t < limit && !displaced && p.takesOver(t, id, xk, r, diag) {
			p.markStale(t)
			displaced = true
		}
		s := c[t]
		row := p.l[t*k : t*k+t]
		for i, lv := range row {
			s -= lv * y[i]
		}
		y[t] = s / p.l[t*k+t]
		r -= y[t] * y[t]
	}
	if r < 0 {
		r = 0
	}
	if !displaced {
		switch {
		case p.cfg.Budget.Lambda > 0 && p.m == 0:
			p.markStale(0) // budget not decided before the first Sync
		case k < p.m && r > p.thr*(1-displaceSlack):
			p.markStale(k) // the greedy phase would continue with this point
		case k < p.m && p.cfg.TopUp:
			// Filled top-up: the point enters only with a smaller key. Unfilled (fewer
			// points than m): it always enters, at its key position.
			if pos := p.topUpPosition(id); pos < len(p.ids) || len(p.ids) < p.m {
				p.markStale(pos)
			}
		}
	}
	for a := 0; a < k; a++ {
		ya := y[a]
		row := p.gram[a*k : a*k+k]
		for b := range row {
			row[b] += ya * y[b]
		}
	}
	neumaier(&p.cert, &p.certC, r)
	neumaier(&p.traceK, &p.traceKC, diag)
	p.points[id] = point{diag: diag, res: r}
	p.changed = true
	return nil
}

// takesOver reports whether a point id with K_xx = diag and residual r after t pivots
// may take greedy pivot t's place in batch greedy; near-ties within displaceSlack count
// as take-overs (the residuals here come from a forward solve, batch greedy's from its
// own recursion, so they agree only to rounding).
//
// Under Normalize the point must also be a candidate (r above the threshold) and the
// keys compared are r/K_xx and δ^{(t)}/K_pp. Before the first pivot every candidate's key
// is K_jj/K_jj = 1 exactly, here as in batch greedy, so that tie is decided exactly, by
// id as batch greedy decides it: were it counted as a near-tie, every insert would mark
// the pool stale. Under Tolerance (xk is the point's PivotKey) see changesStep.
func (p *Pool) takesOver(t int, id string, xk uint64, r, diag float64) bool {
	if p.cfg.Tolerance > 0 {
		return p.changesStep(t, id, xk, r, diag)
	}
	if !p.cfg.Normalize {
		return r >= p.piv[t]*(1-displaceSlack)
	}
	if !(r > p.thr*(1-displaceSlack)) {
		return false
	}
	key := r / diag
	if t == 0 && key == p.pkey[0] {
		return id < p.ids[0]
	}
	return key >= p.pkey[t]*(1-displaceSlack)
}

// changesStep reports whether a point id of PivotKey xk with K_xx = diag and residual r
// after t pivots may change batch greedy's choice at step t under Tolerance; near-ties within
// displaceSlack count as changes. Other points' keys at step t do not depend on the new
// one, so the step's qualifying set (the candidates of key at least (1−τ)·M_t) changes
// only through it, in two ways: it qualifies and precedes pivot t in the seed-free order
// (PivotKey, then id), or its key raises the step's max M_t so far that pivot t's key
// falls below (1−τ) of it. A point that is no candidate (r at most the threshold)
// changes nothing. The comparison is with M_t as batch greedy found it over the points
// of the last sync (StepMax), which earlier inserts may since have raised: a point that
// qualifies against it may not against the true max, so this can only mark more, never
// less (a deleted holder of the max marks the pool itself, see Delete). Under Normalize
// every candidate's key before the first pivot is exactly 1, so M_0 cannot rise.
func (p *Pool) changesStep(t int, id string, xk uint64, r, diag float64) bool {
	if !(r > p.thr*(1-displaceSlack)) {
		return false
	}
	key, pk := r, p.piv[t]
	if p.cfg.Normalize {
		key, pk = r/diag, p.pkey[t]
	}
	keep := 1 - p.cfg.Tolerance
	if !(p.cfg.Normalize && t == 0) && key >= p.smax[t]*(1-displaceSlack) && keep*key >= pk*(1-displaceSlack) {
		return true // the pivot no longer qualifies
	}
	if key < keep*p.smax[t]*(1-displaceSlack) {
		return false // the point does not qualify
	}
	return xk < p.lkey[t] || xk == p.lkey[t] && id < p.ids[t]
}

// raiseThreshold marks the pool stale where a new point of K_xx = diag changes batch
// greedy through its threshold (Normalize or Tolerance). The threshold is Tol·max K_jj
// over the stored points; a larger K_xx raises it, and a greedy pivot whose raw δ^{(t)}
// no longer clears it drops out of batch greedy's candidates (with neither rule such a
// point takes over pivot 0, whose δ is max K_jj). Under Tolerance so does a recorded
// holder of step t's max whose raw residual there (M_t, or M_t·K_hh under Normalize)
// no longer clears it, which lowers the max. Other candidates do not matter, nor does
// the end of the greedy phase (no candidate was left; fewer are now).
func (p *Pool) raiseThreshold(diag float64) {
	thr := p.cfg.tol() * diag
	if !(thr > p.thr) {
		return
	}
	lim := thr * (1 + displaceSlack)
	for t, v := range p.piv {
		if v <= lim {
			p.markStale(t)
			return
		}
		if h := p.smaxID[t]; p.cfg.Tolerance > 0 && h != "" {
			d := p.smax[t]
			if p.cfg.Normalize {
				d *= p.points[h].diag
			}
			if d <= lim {
				p.markStale(t)
				return
			}
		}
	}
}

// topUpPosition returns the top-up position the point id would take (len(ids) if after
// every current top-up landmark).
func (p *Pool) topUpPosition(id string) int {
	key := TopUpKey(p.cfg.Seed, id)
	for i, k2 := range p.topKey {
		if key < k2 || key == k2 && id < p.ids[p.kg+i] {
			return p.kg + i
		}
	}
	return len(p.ids)
}

// Delete removes a stored point. Deleting a non-landmark subtracts its stored residual
// from the certificate, O(1). Deleting a landmark drops it from the served pool at once
// (no served landmark ever names a deleted point): the Cholesky factor is repaired by a
// pivot deletion (Givens rotations, O(k²)), the certificate grows by a bound on the
// residual mass the landmark explained and is flagged inexact, and the pool is marked
// stale from the landmark's position so the next Sync re-selects.
func (p *Pool) Delete(id string) error {
	pt, ok := p.points[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownID, id)
	}
	delete(p.points, id)
	p.changed = true
	neumaier(&p.traceK, &p.traceKC, -pt.diag)
	if (p.cfg.Normalize || p.cfg.Tolerance > 0) && pt.diag > 0 && p.cfg.tol()*pt.diag >= p.thr*(1-displaceSlack) {
		// The point may have held max K_jj: the threshold Tol·max K_jj may fall, and
		// rows that were no candidates (δ_j at most the threshold, however large their
		// key) may be at any step. With neither rule max K_jj is pivot 0's δ, and a
		// point that holds it is pivot 0 or ties with it.
		p.markStale(0)
	}
	if t, ok := p.holds[id]; ok {
		// Under Tolerance the point held step t's max (and maybe later ones'): without
		// it the max falls and candidates of smaller PivotKey may qualify. Holding a
		// max is the only way a point that is not pivot t changes step t.
		p.markStale(t)
		p.dropHolder(id)
	}
	pos := -1
	for i, lid := range p.ids {
		if lid == id {
			pos = i
			break
		}
	}
	if pos < 0 {
		neumaier(&p.cert, &p.certC, -pt.res)
		return nil
	}
	neumaier(&p.cert, &p.certC, -pt.res)
	q := p.cfg.Dim
	p.lmGen++
	if pos >= p.kg { // a top-up landmark: outside the factor
		p.ids = append(p.ids[:pos], p.ids[pos+1:]...)
		p.feats = append(p.feats[:pos*q], p.feats[(pos+1)*q:]...)
		j := pos - p.kg
		p.topKey = append(p.topKey[:j], p.topKey[j+1:]...)
		p.markStale(pos)
		return nil
	}
	p.deletePivot(pos)
	p.ids = append(p.ids[:pos], p.ids[pos+1:]...)
	p.feats = append(p.feats[:pos*q], p.feats[(pos+1)*q:]...)
	p.exact = false
	p.markStale(pos)
	return nil
}

// deletePivot removes greedy pivot t from the factor and the Gram matrix and adds the
// certificate increase.
//
// Coordinates: y_j = L⁻¹ K_{Z j} are the coordinates of ψ_j in the orthonormal pivot
// basis; pivot s has coordinates L_{s,:}. Removing row t leaves (k−1)×k rows; Givens
// rotations G on column pairs (i, i+1), i = t..k−2, restore lower-triangular form,
// L_{−t} Gᵀ = [L' 0]. The last row of G is the unit vector ŵ orthogonal to every
// remaining pivot, i.e. the direction of span(Z) lost with the landmark, so the residual
// of each surviving point grows by (ŵ·y_j)² and tr R grows by (G S Gᵀ)_{k−1,k−1} with
// S = Σ_j y_j y_jᵀ over surviving points (minus the deleted landmark's own y = L_{t,:}).
// The stored S over-counts points deleted earlier (their terms are never subtracted, which
// would need their features), so the increase is an upper bound.
func (p *Pool) deletePivot(t int) {
	k := p.kg
	l, s := p.l, p.gram
	// S −= y_z y_zᵀ with y_z = L_{t,0..t}.
	for a := 0; a <= t; a++ {
		for b := 0; b <= t; b++ {
			s[a*k+b] -= l[t*k+a] * l[t*k+b]
		}
	}
	// Drop row t of L (rows below move up), still k columns.
	for r := t; r < k-1; r++ {
		copy(l[r*k:(r+1)*k], l[(r+1)*k:(r+2)*k])
	}
	// Givens on columns (i, i+1) to zero L[i][i+1] for i = t..k−2.
	for i := t; i < k-1; i++ {
		a, b := l[i*k+i], l[i*k+i+1]
		rr := math.Hypot(a, b)
		cs, sn := 1.0, 0.0
		if rr > 0 {
			cs, sn = a/rr, b/rr
		}
		for r := i; r < k-1; r++ {
			x, z := l[r*k+i], l[r*k+i+1]
			l[r*k+i], l[r*k+i+1] = cs*x+sn*z, -sn*x+cs*z
		}
		// S ← G_i S G_iᵀ on rows/columns (i, i+1).
		for c := 0; c < k; c++ {
			x, z := s[i*k+c], s[(i+1)*k+c]
			s[i*k+c], s[(i+1)*k+c] = cs*x+sn*z, -sn*x+cs*z
		}
		for r := 0; r < k; r++ {
			x, z := s[r*k+i], s[r*k+i+1]
			s[r*k+i], s[r*k+i+1] = cs*x+sn*z, -sn*x+cs*z
		}
	}
	inc := s[(k-1)*k+k-1]
	if inc > 0 {
		neumaier(&p.cert, &p.certC, inc)
	}
	// Positive diagonal: flip column i (and coordinate i of S) where needed.
	for i := 0; i < k-1; i++ {
		if l[i*k+i] < 0 {
			for r := i; r < k-1; r++ {
				l[r*k+i] = -l[r*k+i]
			}
			for c := 0; c < k; c++ {
				s[i*k+c] = -s[i*k+c]
			}
			for r := 0; r < k; r++ {
				s[r*k+i] = -s[r*k+i]
			}
		}
	}
	// Compact to (k−1)×(k−1).
	n := k - 1
	nl := make([]float64, n*n)
	ns := make([]float64, n*n)
	for r := 0; r < n; r++ {
		copy(nl[r*n:r*n+r+1], l[r*k:r*k+r+1])
		copy(ns[r*n:(r+1)*n], s[r*k:r*k+n])
	}
	p.l, p.gram, p.kg = nl, ns, n
	p.piv = append(p.piv[:t], p.piv[t+1:]...)
	p.pkey = append(p.pkey[:t], p.pkey[t+1:]...)
	p.smax = append(p.smax[:t], p.smax[t+1:]...)
	p.smaxID = append(p.smaxID[:t], p.smaxID[t+1:]...)
	if p.lkey != nil {
		p.lkey = append(p.lkey[:t], p.lkey[t+1:]...)
	}
	p.setHolders()
	p.c, p.y = p.c[:n], p.y[:n]
}

// Sync recomputes the served pool as batch greedy pivoted Cholesky over all stored points
// in increasing id order (so ties go to the smaller id), with the features from src, and
// resets the certificate to the exact residual trace. This is the only operation whose
// cost grows with the number of stored points: O(n q m) time, O(n q + n m) transient
// memory. With a fixed budget and nothing stale it returns at once.
//
// Sync is Config.Plan, Greedy and Adopt in a row; a caller that must not hold the pool
// while the O(n q m) greedy runs (the daemon syncs in the background while ingestion
// continues) runs the three itself, Greedy on its own copy of the features.
func (p *Pool) Sync(src FeatureSource) error {
	if !p.NeedsSync() {
		return nil
	}
	ids := make([]string, 0, len(p.points))
	for id := range p.points {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	n, q := len(ids), p.cfg.Dim
	g := make([]float64, n*q)
	for i, id := range ids {
		if err := src.FeaturesTo(g[i*q:(i+1)*q], id); err != nil {
			return fmt.Errorf("coreset: sync: features of %q: %w", id, err)
		}
	}
	m, opt, err := p.cfg.Plan(ids, g)
	if err != nil {
		return err
	}
	res, err := Greedy(g, n, q, m, opt)
	if err != nil {
		return err
	}
	return p.Adopt(ids, g, m, res)
}

// Plan returns the budget m and the Greedy options of a sync over the points ids
// (sorted, distinct) with features g (len(ids)×Dim, row i of point ids[i]): m is the
// fixed budget or ⌈d_eff⌉ of g under the deff rule (SLQ with the configured seed), the
// options carry Tol, the top-up keys of the ids and KeepGram. It reads only c, so it is
// safe to call without the pool. It refuses non-finite features.
func (c Config) Plan(ids []string, g []float64) (int, GreedyOptions, error) {
	n, q := len(ids), c.Dim
	if len(g) != n*q {
		panic(fmt.Sprintf("coreset: Plan: len(g)=%d for %d ids of dim %d", len(g), n, q))
	}
	for i, v := range g {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, GreedyOptions{}, fmt.Errorf("%w: features of %q contain %v", ErrNotFinite, ids[i/q], v)
		}
	}
	return c.plan(ids, func() []float64 { return g })
}

// PlanRows32 is Plan for features stored in float32, one row per id (the input of
// GreedyRows32). Under the deff rule the SLQ estimate needs the rows as one float64
// matrix, which it builds for the call (n×q); the fixed budget reads nothing but the
// rows' finiteness.
func (c Config) PlanRows32(ids []string, g [][]float32) (int, GreedyOptions, error) {
	if len(g) != len(ids) {
		panic(fmt.Sprintf("coreset: PlanRows32: %d rows for %d ids", len(g), len(ids)))
	}
	for i, r := range g {
		if len(r) != c.Dim {
			panic(fmt.Sprintf("coreset: PlanRows32: row %d has length %d, want %d", i, len(r), c.Dim))
		}
		for _, v := range r {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, GreedyOptions{}, fmt.Errorf("%w: features of %q contain %v", ErrNotFinite, ids[i], v)
			}
		}
	}
	return c.plan(ids, func() []float64 {
		a := rows{n: len(g), q: c.Dim, f32: g}
		return a.block(make([]float64, len(g)*c.Dim), 0, len(g))
	})
}

// plan is Plan after the features were checked; dense gives them as one n×q matrix,
// asked for only under the deff rule.
func (c Config) plan(ids []string, dense func() []float64) (int, GreedyOptions, error) {
	n, q := len(ids), c.Dim
	m := c.Budget.M
	if c.Budget.Lambda > 0 {
		est, err := DeffSLQ(dense(), n, q, c.Budget.Lambda, c.Seed, "coreset/pool/deff", c.SLQ)
		if err != nil {
			return 0, GreedyOptions{}, err
		}
		m = max(int(math.Ceil(est.Value)), 1)
	}
	opt := GreedyOptions{Tol: c.Tol, KeepGram: true, Normalize: c.Normalize, Tolerance: c.Tolerance}
	if c.Tolerance > 0 {
		opt.Keys = make([]uint64, n)
		for i, id := range ids {
			opt.Keys[i] = PivotKey(id)
		}
	}
	if c.TopUp {
		opt.TopUpKeys = make([]uint64, n)
		for i, id := range ids {
			opt.TopUpKeys[i] = TopUpKey(c.Seed, id)
		}
	}
	return m, opt, nil
}

// Adopt installs a sync computed elsewhere: res must be Greedy(g, len(ids), Dim, m, opt)
// with (m, opt) from Config.Plan(ids, g), and ids exactly the stored points in
// increasing order. The pool then equals what Sync would have made of it. It refuses
// ids that are not the stored points (the pool changed since the features were taken)
// with ErrUnknownID, leaving the pool as it was. g is not retained.
func (p *Pool) Adopt(ids []string, g []float64, m int, res *GreedyResult) error {
	n, q := len(ids), p.cfg.Dim
	if len(g) != n*q || len(res.Residual) != n {
		panic(fmt.Sprintf("coreset: Adopt: len(g)=%d, %d residuals for %d ids of dim %d", len(g), len(res.Residual), n, q))
	}
	return p.adopt(ids, rows{n: n, q: q, f64: g}, m, res)
}

// AdoptRows32 is Adopt for a sync over float32 rows (GreedyRows32 with PlanRows32):
// row i is the features of ids[i]. The rows are not retained.
func (p *Pool) AdoptRows32(ids []string, g [][]float32, m int, res *GreedyResult) error {
	n, q := len(ids), p.cfg.Dim
	if len(g) != n || len(res.Residual) != n {
		panic(fmt.Sprintf("coreset: AdoptRows32: %d rows, %d residuals for %d ids", len(g), len(res.Residual), n))
	}
	for i, r := range g {
		if len(r) != q {
			panic(fmt.Sprintf("coreset: AdoptRows32: row %d has length %d, want %d", i, len(r), q))
		}
	}
	return p.adopt(ids, rows{n: n, q: q, f32: g}, m, res)
}

func (p *Pool) adopt(ids []string, g rows, m int, res *GreedyResult) error {
	n, q := len(ids), p.cfg.Dim
	if n != len(p.points) {
		return fmt.Errorf("%w: adopt a sync over %d points, the pool holds %d", ErrUnknownID, n, len(p.points))
	}
	for i, id := range ids {
		if _, ok := p.points[id]; !ok || i > 0 && ids[i-1] >= id {
			return fmt.Errorf("%w: adopt: %q is not the next stored point", ErrUnknownID, id)
		}
	}
	var topUp []uint64
	if p.cfg.TopUp && len(res.Pivots) > res.Greedy {
		topUp = make([]uint64, 0, len(res.Pivots)-res.Greedy)
	}
	p.m = m
	p.kg = res.Greedy
	p.ids = make([]string, len(res.Pivots))
	p.feats = make([]float64, len(res.Pivots)*q)
	for i, r := range res.Pivots {
		p.ids[i] = ids[r]
		copy(p.feats[i*q:(i+1)*q], g.row(p.feats[i*q:(i+1)*q], r))
		if i >= res.Greedy {
			topUp = append(topUp, TopUpKey(p.cfg.Seed, ids[r]))
		}
	}
	p.topKey = append(p.topKey[:0], topUp...)
	p.piv, p.l, p.gram = res.PivotValues, res.Factor, res.Gram
	p.smax = res.StepMax
	p.smaxID = make([]string, p.kg)
	for t, r := range res.StepMaxRow {
		if r >= 0 {
			p.smaxID[t] = ids[r]
		}
	}
	p.thr = res.Threshold
	p.cert, p.certC, p.traceK, p.traceKC = 0, 0, 0, 0
	buf := make([]float64, q)
	for i, id := range ids {
		row := g.row(buf, i)
		pt := point{diag: dot(row, row), res: res.Residual[i]}
		p.points[id] = pt
		neumaier(&p.cert, &p.certC, pt.res)
		neumaier(&p.traceK, &p.traceKC, pt.diag)
	}
	p.setPivotKeys()
	p.exact, p.stale, p.staleFrom, p.changed = true, false, 0, false
	p.c, p.y = make([]float64, p.kg), make([]float64, p.kg)
	p.gen++
	p.lmGen++
	return nil
}

// setPivotKeys sets pkey from piv and the greedy landmarks' K_jj: the same division of
// the same bits as batch greedy's key of its pivot; under Tolerance lkey, the
// landmarks' PivotKey, and holds (setHolders).
func (p *Pool) setPivotKeys() {
	p.pkey = make([]float64, p.kg)
	for t := range p.pkey {
		p.pkey[t] = p.piv[t] / p.points[p.ids[t]].diag
	}
	p.lkey = nil
	if p.cfg.Tolerance > 0 {
		p.lkey = make([]uint64, p.kg)
		for t := range p.lkey {
			p.lkey[t] = PivotKey(p.ids[t])
		}
	}
	p.setHolders()
}

// setHolders rebuilds holds from smaxID under Tolerance: each recorded holder's first
// step (without Tolerance no holder changes a step, and holds stays empty).
func (p *Pool) setHolders() {
	p.holds = make(map[string]int)
	if p.cfg.Tolerance == 0 {
		return
	}
	for t := len(p.smaxID) - 1; t >= 0; t-- {
		if h := p.smaxID[t]; h != "" {
			p.holds[h] = t
		}
	}
}

// dropHolder forgets the steps whose max id held (it was deleted).
func (p *Pool) dropHolder(id string) {
	for t, h := range p.smaxID {
		if h == id {
			p.smaxID[t] = ""
		}
	}
	delete(p.holds, id)
}

// Generation counts the Adopts since New or Restore (a Sync that does work adopts; one
// that returns at once does not). It tells a caller that persists each point's
// PointState (see CoreState) which records to rewrite: Insert creates only the inserted
// point's record, Delete drops only the deleted point's record (a landmark deletion too:
// the other points' stored residuals are left as they were and become lower bounds, see
// PointState.Residual), and nothing else changes a record except an Adopt, which rewrites
// every point's and advances Generation. It is not persisted (Restore starts at 0), so
// compare values of one pool only.
func (p *Pool) Generation() uint64 { return p.gen }

// State returns a deep copy of everything the pool persists.
func (p *Pool) State() State {
	st := p.CoreState()
	st.LandmarkFeatures = append([]float64(nil), p.feats...)
	st.Points = make([]PointState, 0, len(p.points))
	for id, pt := range p.points {
		st.Points = append(st.Points, PointState{ID: id, Diag: pt.diag, Residual: pt.res})
	}
	sort.Slice(st.Points, func(i, j int) bool { return st.Points[i].ID < st.Points[j].ID })
	return st
}

// CoreState is State without the per-point records and without the landmarks' features
// (Points and LandmarkFeatures are nil): O(m² + m) whatever the number of stored points
// and the feature dimension, so a caller that keeps each point's PointState itself (next
// to the point's raw input, updated when PointState says it changed) and can recompute a
// landmark's features from its stored input (LandmarkFeaturesTo gives them too) can
// persist the pool per batch without per-event work growing with n, and without copying
// the m·q features. Restore takes the core with Points and LandmarkFeatures filled in.
func (p *Pool) CoreState() State {
	return State{
		Version:     StateVersion,
		Config:      p.cfg,
		Landmarks:   append([]string(nil), p.ids...),
		Greedy:      p.kg,
		PivotValues: append([]float64(nil), p.piv...),
		StepMax:     append([]float64(nil), p.smax...),
		StepMaxIDs:  append([]string(nil), p.smaxID...),
		Factor:      append([]float64(nil), p.l...),
		Gram:        append([]float64(nil), p.gram...),
		TopUpKeys:   append([]uint64(nil), p.topKey...),
		M:           p.m,
		Threshold:   p.thr,
		Cert:        p.cert, CertComp: p.certC, TraceK: p.traceK, TraceKComp: p.traceKC,
		Exact: p.exact, Stale: p.stale, StaleFrom: p.staleFrom, Changed: p.changed,
	}
}

// PointState returns the persisted record of stored point id, and false when id is not
// stored. An Adopt (or a Sync that does work) rewrites every point's record; Insert
// writes the inserted point's; see Generation.
func (p *Pool) PointState(id string) (PointState, bool) {
	pt, ok := p.points[id]
	if !ok {
		return PointState{}, false
	}
	return PointState{ID: id, Diag: pt.diag, Residual: pt.res}, true
}

// Restore rebuilds a pool from a State, checking its shapes and values (State may come
// from disk). The pool keeps copies; st is not retained.
func Restore(st State) (*Pool, error) {
	if st.Version != StateVersion {
		return nil, fmt.Errorf("%w: Version=%d, want %d", ErrState, st.Version, StateVersion)
	}
	if err := st.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: Config: %v", ErrState, err)
	}
	q, k, nl := st.Config.Dim, st.Greedy, len(st.Landmarks)
	switch {
	case k < 0 || k > nl:
		return nil, fmt.Errorf("%w: Greedy=%d with %d landmarks", ErrState, k, nl)
	case len(st.LandmarkFeatures) != nl*q:
		return nil, fmt.Errorf("%w: len(LandmarkFeatures)=%d, want %d", ErrState, len(st.LandmarkFeatures), nl*q)
	case len(st.PivotValues) != k:
		return nil, fmt.Errorf("%w: len(PivotValues)=%d, want %d", ErrState, len(st.PivotValues), k)
	case len(st.StepMax) != len(st.StepMaxIDs) || len(st.StepMax) != k && len(st.StepMax) != 0:
		return nil, fmt.Errorf("%w: len(StepMax)=%d, len(StepMaxIDs)=%d, want %d (or both 0)", ErrState, len(st.StepMax), len(st.StepMaxIDs), k)
	case len(st.StepMax) == 0 && k > 0 && st.Config.Tolerance > 0 && !(st.Stale && st.StaleFrom == 0):
		return nil, fmt.Errorf("%w: no StepMax for %d pivots under Tolerance=%v, and not stale from 0", ErrState, k, st.Config.Tolerance)
	case len(st.Factor) != k*k:
		return nil, fmt.Errorf("%w: len(Factor)=%d, want %d", ErrState, len(st.Factor), k*k)
	case len(st.Gram) != k*k:
		return nil, fmt.Errorf("%w: len(Gram)=%d, want %d", ErrState, len(st.Gram), k*k)
	case len(st.TopUpKeys) != nl-k:
		return nil, fmt.Errorf("%w: len(TopUpKeys)=%d, want %d", ErrState, len(st.TopUpKeys), nl-k)
	case st.M < 0 || nl > st.M && st.M > 0:
		return nil, fmt.Errorf("%w: M=%d with %d landmarks", ErrState, st.M, nl)
	case st.StaleFrom < 0:
		return nil, fmt.Errorf("%w: StaleFrom=%d", ErrState, st.StaleFrom)
	}
	for _, v := range [][]float64{st.LandmarkFeatures, st.PivotValues, st.StepMax, st.Factor, st.Gram,
		{st.Threshold, st.Cert, st.CertComp, st.TraceK, st.TraceKComp}} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: %w: %v", ErrState, ErrNotFinite, x)
			}
		}
	}
	for i := 0; i < k; i++ {
		if !(st.Factor[i*k+i] > 0) {
			return nil, fmt.Errorf("%w: Factor[%d][%d]=%v is not positive", ErrState, i, i, st.Factor[i*k+i])
		}
	}
	p := &Pool{
		cfg: st.Config, points: make(map[string]point, len(st.Points)),
		ids: append([]string(nil), st.Landmarks...), feats: append([]float64(nil), st.LandmarkFeatures...),
		kg: k, piv: append([]float64(nil), st.PivotValues...), l: append([]float64(nil), st.Factor...),
		smax: append([]float64(nil), st.StepMax...), smaxID: append([]string(nil), st.StepMaxIDs...),
		gram: append([]float64(nil), st.Gram...), topKey: append([]uint64(nil), st.TopUpKeys...),
		m: st.M, thr: st.Threshold, cert: st.Cert, certC: st.CertComp, traceK: st.TraceK, traceKC: st.TraceKComp,
		exact: st.Exact, stale: st.Stale, staleFrom: st.StaleFrom, changed: st.Changed,
		c: make([]float64, k), y: make([]float64, k),
	}
	for _, ps := range st.Points {
		if ps.ID == "" {
			return nil, fmt.Errorf("%w: %w", ErrState, ErrEmptyID)
		}
		if _, dup := p.points[ps.ID]; dup {
			return nil, fmt.Errorf("%w: %w: %q", ErrState, ErrDuplicateID, ps.ID)
		}
		if !(ps.Diag >= 0) || math.IsInf(ps.Diag, 0) || !(ps.Residual >= 0) || math.IsInf(ps.Residual, 0) {
			return nil, fmt.Errorf("%w: point %q: Diag=%v Residual=%v", ErrState, ps.ID, ps.Diag, ps.Residual)
		}
		p.points[ps.ID] = point{diag: ps.Diag, res: ps.Residual}
	}
	for i, id := range p.ids {
		pt, ok := p.points[id]
		if !ok {
			return nil, fmt.Errorf("%w: landmark %q is not a stored point", ErrState, id)
		}
		if i < k && !(pt.diag > 0) {
			return nil, fmt.Errorf("%w: greedy landmark %q has Diag=%v", ErrState, id, pt.diag)
		}
	}
	for t, h := range p.smaxID {
		if _, ok := p.points[h]; h != "" && !ok {
			return nil, fmt.Errorf("%w: StepMaxIDs[%d]=%q is not a stored point", ErrState, t, h)
		}
	}
	if len(p.smax) == 0 && k > 0 {
		// An older layout, written before StepMax: the exact argmax's step maxima are
		// its pivots' keys. Under Tolerance the state is stale from 0 (checked above),
		// so nothing reads them before the next Sync replaces them.
		p.smax, p.smaxID = make([]float64, k), make([]string, k)
		for t := range p.smax {
			p.smax[t] = p.piv[t]
			if st.Config.Normalize {
				p.smax[t] = p.piv[t] / p.points[p.ids[t]].diag
			}
		}
	}
	p.setPivotKeys()
	return p, nil
}

// Pair is the default two-view arrangement (paper Alg. cairn-stage1): one pool per
// augmented view, each with budget m, served landmarks the union (M = 2m). A point is
// inserted into both with its view-A and view-B features.
type Pair struct{ A, B *Pool }

// NewPair returns two empty pools with the same configuration.
func NewPair(cfg Config) (*Pair, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	b, _ := New(cfg)
	return &Pair{A: a, B: b}, nil
}

// Insert inserts id with its view-A features fa and view-B features fb. On error neither
// pool is changed.
func (pr *Pair) Insert(id string, fa, fb []float64) error {
	if len(fb) != pr.B.cfg.Dim {
		return fmt.Errorf("%w: id %q view B has %d features, want %d", ErrDim, id, len(fb), pr.B.cfg.Dim)
	}
	if pr.B.Has(id) {
		return fmt.Errorf("%w: %q", ErrDuplicateID, id)
	}
	if err := pr.A.Insert(id, fa); err != nil {
		return err
	}
	if err := pr.B.Insert(id, fb); err != nil {
		_ = pr.A.Delete(id)
		return err
	}
	return nil
}

// Delete deletes id from both pools.
func (pr *Pair) Delete(id string) error {
	if !pr.A.Has(id) || !pr.B.Has(id) {
		return fmt.Errorf("%w: %q", ErrUnknownID, id)
	}
	if err := pr.A.Delete(id); err != nil {
		return err
	}
	return pr.B.Delete(id)
}

// Sync syncs both pools with their view's feature source.
func (pr *Pair) Sync(srcA, srcB FeatureSource) error {
	if err := pr.A.Sync(srcA); err != nil {
		return fmt.Errorf("view A: %w", err)
	}
	if err := pr.B.Sync(srcB); err != nil {
		return fmt.Errorf("view B: %w", err)
	}
	return nil
}

// Landmarks returns the view-A landmarks followed by the view-B landmarks (a point chosen
// by both views appears twice, once per view, as in the paper's M = 2m pool).
func (pr *Pair) Landmarks() []string { return append(pr.A.Landmarks(), pr.B.ids...) }
