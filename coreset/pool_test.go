package coreset

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// refGreedy is the slow, obviously-correct batch reference: form K = G Gᵀ over the points
// in increasing id order, run the textbook Schur-complement pivoted Cholesky with an
// explicit n×k factor (argmax of the residual diagonal, first index wins ties), stop when
// the largest residual is ≤ tol·max K_jj, then top up by the smallest TopUpKey (ties by id).
// It returns the landmark ids, the number of greedy pivots and tr R after the greedy part.
func refGreedy(src map[string][]float64, m int, tol float64, topUp bool, seed uint64) ([]string, int, float64) {
	return refGreedyNormalize(src, m, tol, topUp, seed, false)
}

// refGreedyNormalize is refGreedy that, with normalize, pivots on argmax d_j/K_jj over
// the rows with d_j > tol·max K_jj (first index wins ties), stopping when there is none.
func refGreedyNormalize(src map[string][]float64, m int, tol float64, topUp bool, seed uint64, normalize bool) ([]string, int, float64) {
	return refGreedyRule(src, m, tol, topUp, seed, normalize, 0)
}

// refGreedyRule is refGreedyNormalize that, with tolerance τ > 0, takes among the rows
// above the threshold whose key is at least (1−τ) times the largest the one of smallest
// PivotKey (first index on ties).
func refGreedyRule(src map[string][]float64, m int, tol float64, topUp bool, seed uint64, normalize bool, tolerance float64) ([]string, int, float64) {
	ids := make([]string, 0, len(src))
	for id := range src {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	n := len(ids)
	K := make([][]float64, n)
	dmax := 0.0
	for i := range K {
		K[i] = make([]float64, n)
		for j := range K[i] {
			for k := range src[ids[i]] {
				K[i][j] += src[ids[i]][k] * src[ids[j]][k]
			}
		}
		dmax = math.Max(dmax, K[i][i])
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = K[i][i]
	}
	L := make([][]float64, n)
	for i := range L {
		L[i] = make([]float64, 0, m)
	}
	chosen := make([]bool, n)
	var piv []int
	for t := 0; t < m && t < n; t++ {
		p := -1
		key := func(j int) float64 {
			if normalize {
				return d[j] / K[j][j]
			}
			return d[j]
		}
		for j := 0; j < n; j++ {
			if !chosen[j] && d[j] > tol*dmax && (p < 0 || key(j) > key(p)) {
				p = j
			}
		}
		if p < 0 {
			break
		}
		if tolerance > 0 {
			c := (1 - tolerance) * key(p)
			for j := 0; j < n; j++ {
				if !chosen[j] && d[j] > tol*dmax && key(j) >= c && PivotKey(ids[j]) < PivotKey(ids[p]) {
					p = j
				}
			}
		}
		chosen[p] = true
		piv = append(piv, p)
		lpp := math.Sqrt(d[p])
		for j := 0; j < n; j++ {
			s := K[j][p]
			for i := 0; i < t; i++ {
				s -= L[j][i] * L[p][i]
			}
			L[j] = append(L[j], s/lpp)
		}
		for j := 0; j < n; j++ {
			if chosen[j] {
				d[j] = 0
			} else {
				d[j] -= L[j][t] * L[j][t]
			}
		}
	}
	var tr float64
	for _, v := range d {
		tr += math.Max(v, 0)
	}
	out := make([]string, len(piv))
	for i, p := range piv {
		out[i] = ids[p]
	}
	kg := len(out)
	if topUp {
		rest := []string{}
		for j, id := range ids {
			if !chosen[j] {
				rest = append(rest, id)
			}
		}
		sort.Slice(rest, func(a, b int) bool {
			ka, kb := TopUpKey(seed, rest[a]), TopUpKey(seed, rest[b])
			if ka != kb {
				return ka < kb
			}
			return rest[a] < rest[b]
		})
		for _, id := range rest {
			if len(out) == m {
				break
			}
			out = append(out, id)
		}
	}
	return out, kg, tr
}

// refResidual returns tr(K − K_nZ K_ZZ⁻¹ K_Zn) over the stored points for landmark ids z
// (whose Gram block must be nonsingular), by a dense Cholesky solve.
func refResidual(t *testing.T, src map[string][]float64, z []string) float64 {
	t.Helper()
	var tr float64
	k := len(z)
	if k == 0 {
		for _, f := range src {
			tr += dotRef(f, f)
		}
		return tr
	}
	kzz := mat.NewSymDense(k, nil)
	for a := range z {
		for b := range z {
			kzz.SetSym(a, b, dotRef(src[z[a]], src[z[b]]))
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(kzz) {
		t.Fatalf("refResidual: K_ZZ not positive definite for %v", z)
	}
	c := mat.NewVecDense(k, nil)
	var x mat.VecDense
	for _, f := range src {
		for a := range z {
			c.SetVec(a, dotRef(src[z[a]], f))
		}
		if err := ch.SolveVecTo(&x, c); err != nil {
			t.Fatal(err)
		}
		tr += dotRef(f, f) - mat.Dot(c, &x)
	}
	return tr
}

func dotRef(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// genPoint draws a feature vector: Gaussian in a random rank-r subspace of R^q when r < q
// (rank-deficient kernels), with occasional exact duplicates of an earlier point (ties).
type gen struct {
	r     *rand.Rand
	basis [][]float64
	q     int
}

func newGen(seed uint64, q, rank int) *gen {
	r := rand.New(rand.NewPCG(seed, 7))
	g := &gen{r: r, q: q}
	for i := 0; i < rank; i++ {
		b := make([]float64, q)
		for k := range b {
			b[k] = r.NormFloat64()
		}
		g.basis = append(g.basis, b)
	}
	return g
}

func (g *gen) point() []float64 {
	f := make([]float64, g.q)
	scale := math.Exp(g.r.NormFloat64()) // spread of norms
	for _, b := range g.basis {
		c := g.r.NormFloat64() * scale
		axpy(f, c, b)
	}
	return f
}

type poolCase struct {
	name      string
	q         int
	rank      int
	m         int
	topUp     bool
	events    int
	normalize bool
	tolerance float64
}

// TestPoolPropertyAgainstBatch: under random inserts (exact duplicates among them),
// deletions of landmarks, of holders of a step's max (under Tolerance) and of other
// points, and syncs, the pool keeps its contract
// against refGreedy: a certificate that bounds (and while Exact equals) the served tr R,
// landmarks equal to batch greedy whenever it reports neither stale nor inexact, and
// batch greedy after every Sync; pivoting on raw and on normalized residuals, by the
// exact argmax and tolerant (the default τ = 0.6, and τ = 0.1 where fewer rows qualify
// and the step's max decides more often).
func TestPoolPropertyAgainstBatch(t *testing.T) {
	var cases []poolCase
	for _, rule := range []struct {
		name      string
		normalize bool
		tolerance float64
	}{{"", false, 0}, {"normalize/", true, 0}, {"tolerance/", false, 0.6}, {"normalize-tolerance/", true, 0.6}, {"normalize-tolerance0.1/", true, 0.1}} {
		for _, c := range []poolCase{
			{"full-rank", 8, 8, 5, false, 300, false, 0},
			{"rank3-topup", 8, 3, 6, true, 300, false, 0},
			{"rank3-no-topup", 8, 3, 6, false, 200, false, 0},
			{"small-m", 5, 5, 2, true, 200, false, 0},
		} {
			c.name, c.normalize, c.tolerance = rule.name+c.name, rule.normalize, rule.tolerance
			cases = append(cases, c)
		}
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runPoolSequence(t, tc, uint64(ci%4+1))
		})
	}
}

func runPoolSequence(t *testing.T, tc poolCase, seed uint64) {
	g := newGen(seed, tc.q, tc.rank)
	cfg := Config{Dim: tc.q, Budget: LandmarkBudget{M: tc.m}, TopUp: tc.topUp, Seed: seed, Normalize: tc.normalize, Tolerance: tc.tolerance}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := MapSource{}
	next := 0
	var order []string
	for ev := 0; ev < tc.events; ev++ {
		u := g.r.Float64()
		switch {
		case u < 0.55 || len(src) < 3:
			id := fmt.Sprintf("p%03d", g.r.IntN(1000)) // ids not in arrival order
			for src[id] != nil {
				id = fmt.Sprintf("p%03d-%d", g.r.IntN(1000), next)
			}
			next++
			f := g.point()
			if len(order) > 0 && g.r.IntN(10) == 0 {
				f = append([]float64(nil), src[order[g.r.IntN(len(order))]]...) // exact tie
				if f == nil {
					f = g.point()
				}
			}
			if err := p.Insert(id, f); err != nil {
				t.Fatalf("event %d: Insert(%q): %v", ev, id, err)
			}
			src[id] = f
			order = append(order, id)
		case u < 0.85:
			var id string
			holders := []string{}
			if tc.tolerance > 0 {
				for _, h := range p.CoreState().StepMaxIDs {
					if h != "" {
						holders = append(holders, h)
					}
				}
			}
			if lm := p.Landmarks(); len(lm) > 0 && g.r.IntN(3) == 0 {
				id = lm[g.r.IntN(len(lm))] // landmark deletion
			} else if len(holders) > 0 && g.r.IntN(2) == 0 {
				id = holders[g.r.IntN(len(holders))] // a holder of a step's max
			} else {
				for id = range src {
					break
				}
			}
			if err := p.Delete(id); err != nil {
				t.Fatalf("event %d: Delete(%q): %v", ev, id, err)
			}
			delete(src, id)
		default:
			if err := p.Sync(src); err != nil {
				t.Fatalf("event %d: Sync: %v", ev, err)
			}
			checkSynced(t, ev, p, src, cfg)
		}
		checkInvariants(t, ev, p, src, cfg)
	}
	if err := p.Sync(src); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, -1, p, src, cfg)
}

// Tolerance: each computed residual carries rounding of order k·ε·K_jj (k ≤ 8 pivots,
// ε = 2.2e-16), so the certificate is within ~1e-14·tr K of exact; 1e-9 relative (the
// contract) plus 1e-12·tr K absolute for the near-zero residuals of rank-deficient data.
func closeCert(got, want, trK float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Abs(want)+1e-12*trK
}

func checkInvariants(t *testing.T, ev int, p *Pool, src map[string][]float64, cfg Config) {
	t.Helper()
	cert := p.Residual()
	lm := p.Landmarks()
	for _, id := range lm {
		if src[id] == nil {
			t.Fatalf("event %d: served landmark %q is not stored", ev, id)
		}
	}
	var trK float64
	for _, f := range src {
		trK += dotRef(f, f)
	}
	if math.Abs(cert.TraceK-trK) > 1e-9*trK+1e-12 {
		t.Fatalf("event %d: TraceK got %v, want %v", ev, cert.TraceK, trK)
	}
	served := refResidual(t, src, lm[:p.Greedy()])
	if cert.Trace < served-(1e-9*served+1e-12*trK) {
		t.Fatalf("event %d: certificate %v below served tr R %v (Exact=%v)", ev, cert.Trace, served, cert.Exact)
	}
	if cert.Exact && !closeCert(cert.Trace, served, trK) {
		t.Fatalf("event %d: Exact certificate got %v, want %v", ev, cert.Trace, served)
	}
	if !cert.Stale && cert.Exact {
		want, _, _ := refGreedyRule(src, p.M(), DefaultTol, cfg.TopUp, cfg.Seed, cfg.Normalize, cfg.Tolerance)
		if !reflect.DeepEqual(lm, want) && !(len(lm) == 0 && len(want) == 0) {
			t.Fatalf("event %d: pool not stale but landmarks got %v, want batch %v", ev, lm, want)
		}
	}
}

func checkSynced(t *testing.T, ev int, p *Pool, src map[string][]float64, cfg Config) {
	t.Helper()
	want, kg, trR := refGreedyRule(src, cfg.Budget.M, DefaultTol, cfg.TopUp, cfg.Seed, cfg.Normalize, cfg.Tolerance)
	got := p.Landmarks()
	if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("event %d: after Sync landmarks got %v, want %v", ev, got, want)
	}
	if p.Greedy() != kg {
		t.Fatalf("event %d: after Sync Greedy() got %d, want %d", ev, p.Greedy(), kg)
	}
	cert := p.Residual()
	var trK float64
	for _, f := range src {
		trK += dotRef(f, f)
	}
	if !cert.Exact || cert.Stale || !closeCert(cert.Trace, trR, trK) {
		t.Fatalf("event %d: after Sync certificate %+v, want exact %v", ev, cert, trR)
	}
	if p.NeedsSync() {
		t.Fatalf("event %d: NeedsSync after Sync", ev)
	}
}

// TestPoolRestoreRoundTrip checks that State → JSON → Restore gives a pool whose every
// later answer and state equal the original's under the same event sequence.
func TestPoolRestoreRoundTrip(t *testing.T) {
	g := newGen(11, 6, 6)
	cfg := Config{Dim: 6, Budget: LandmarkBudget{M: 4}, TopUp: true, Seed: 3}
	a, _ := New(cfg)
	src := MapSource{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("x%02d", (i*7)%31)
		src[id] = g.point()
		if err := a.Insert(id, src[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Sync(src); err != nil {
		t.Fatal(err)
	}
	// Leave it stale and inexact: a landmark deletion and some inserts.
	lm := a.Landmarks()
	_ = a.Delete(lm[1])
	delete(src, lm[1])
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("y%d", i)
		src[id] = g.point()
		_ = a.Insert(id, src[id])
	}
	raw, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	b, err := Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.State(), a.State(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\ngot  %+v\nwant %+v", got, want)
	}
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("z%d", i)
		f := g.point()
		src[id] = f
		if err1, err2 := a.Insert(id, f), b.Insert(id, f); err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if lm := a.Landmarks(); i%4 == 0 && len(lm) > 0 {
			d := lm[0]
			_ = a.Delete(d)
			_ = b.Delete(d)
			delete(src, d)
		}
		if a.Residual() != b.Residual() {
			t.Fatalf("step %d: certificates got %+v, want %+v", i, b.Residual(), a.Residual())
		}
	}
	_ = a.Sync(src)
	_ = b.Sync(src)
	if !reflect.DeepEqual(a.State(), b.State()) {
		t.Fatal("states differ after identical events and Sync")
	}
}

func TestRestoreRejectsBadState(t *testing.T) {
	cfg := Config{Dim: 2, Budget: LandmarkBudget{M: 2}}
	p, _ := New(cfg)
	_ = p.Insert("a", []float64{1, 0})
	_ = p.Insert("b", []float64{0, 1})
	_ = p.Sync(MapSource{"a": {1, 0}, "b": {0, 1}})
	good := p.State()
	tests := []struct {
		name string
		mod  func(s *State)
	}{
		{"version", func(s *State) { s.Version = 99 }},
		{"factor length", func(s *State) { s.Factor = s.Factor[:1] }},
		{"nan cert", func(s *State) { s.Cert = math.NaN() }},
		{"zero pivot", func(s *State) { s.Factor[0] = 0 }},
		{"landmark not stored", func(s *State) { s.Points = s.Points[1:] }},
		{"negative residual", func(s *State) { s.Points[0].Residual = -1 }},
		{"dim", func(s *State) { s.Config.Dim = 0 }},
		{"tolerance", func(s *State) { s.Config.Tolerance = 1 }},
		{"step max length", func(s *State) { s.StepMax = s.StepMax[:1] }},
		{"step max ids length", func(s *State) { s.StepMaxIDs = s.StepMaxIDs[:1] }},
		{"nan step max", func(s *State) { s.StepMax[1] = math.NaN() }},
		{"holder not stored", func(s *State) { s.StepMaxIDs[1] = "c" }},
		{"tolerance without step maxima", func(s *State) { s.Config.Tolerance, s.StepMax, s.StepMaxIDs = 0.5, nil, nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(good)
			var s State
			_ = json.Unmarshal(raw, &s)
			tc.mod(&s)
			if _, err := Restore(s); !errors.Is(err, ErrState) {
				t.Fatalf("Restore: got %v, want ErrState", err)
			}
		})
	}
	// A state of an older layout whose owner switched it to tolerant pivoting is stale
	// from 0 (the daemon's restore does this): nothing reads its step maxima before the
	// next Sync, and Restore takes the pivots' keys.
	s := good
	s.Config.Tolerance, s.StepMax, s.StepMaxIDs, s.Stale, s.StaleFrom = 0.5, nil, nil, true, 0
	q, err := Restore(s)
	if err != nil {
		t.Fatalf("Restore of a stale state without step maxima: %v", err)
	}
	if got := q.State(); !reflect.DeepEqual(got.StepMax, good.PivotValues) || !reflect.DeepEqual(got.StepMaxIDs, []string{"", ""}) {
		t.Errorf("StepMax %v, StepMaxIDs %q, want the pivot values %v and no holders", got.StepMax, got.StepMaxIDs, good.PivotValues)
	}
}

func TestPoolInputErrors(t *testing.T) {
	p, _ := New(Config{Dim: 2, Budget: LandmarkBudget{M: 1}})
	if err := p.Insert("", []float64{1, 2}); !errors.Is(err, ErrEmptyID) {
		t.Errorf("empty id: got %v", err)
	}
	if err := p.Insert("a", []float64{1}); !errors.Is(err, ErrDim) {
		t.Errorf("dim: got %v", err)
	}
	if err := p.Insert("a", []float64{1, math.Inf(1)}); !errors.Is(err, ErrNotFinite) {
		t.Errorf("inf: got %v", err)
	}
	_ = p.Insert("a", []float64{1, 2})
	if err := p.Insert("a", []float64{1, 2}); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("dup: got %v", err)
	}
	if err := p.Delete("b"); !errors.Is(err, ErrUnknownID) {
		t.Errorf("unknown: got %v", err)
	}
	if err := p.Sync(MapSource{}); !errors.Is(err, ErrUnknownID) {
		t.Errorf("sync missing source: got %v", err)
	}
	if _, err := New(Config{Dim: 0, Budget: LandmarkBudget{M: 0}}); !errors.Is(err, ErrBudget) {
		t.Errorf("config: got %v", err)
	}
}

func TestParseBudget(t *testing.T) {
	tests := []struct {
		in   string
		want LandmarkBudget
		ok   bool
	}{
		{"256", LandmarkBudget{M: 256}, true},
		{"deff:0.001", LandmarkBudget{Lambda: 0.001}, true},
		{"0", LandmarkBudget{}, false},
		{"deff:-1", LandmarkBudget{}, false},
		{"deff:x", LandmarkBudget{}, false},
		{"abc", LandmarkBudget{}, false},
	}
	for _, tc := range tests {
		got, err := ParseLandmarkBudget(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLandmarkBudget(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

// TestPoolDeffBudget checks the deff:λ rule: after Sync, m = ⌈SLQ d_eff⌉ with the pool's
// seed and the landmarks equal batch greedy with that m.
func TestPoolDeffBudget(t *testing.T) {
	g := newGen(5, 10, 10)
	cfg := Config{Dim: 10, Budget: LandmarkBudget{Lambda: 1}, Seed: 9}
	p, _ := New(cfg)
	src := MapSource{}
	ids := []string{}
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("d%02d", i)
		src[id] = g.point()
		ids = append(ids, id)
		_ = p.Insert(id, src[id])
	}
	if !p.NeedsSync() {
		t.Fatal("deff pool does not ask for its first Sync")
	}
	if err := p.Sync(src); err != nil {
		t.Fatal(err)
	}
	sort.Strings(ids)
	gm := make([]float64, 0, 400)
	for _, id := range ids {
		gm = append(gm, src[id]...)
	}
	est, _ := DeffSLQ(gm, 40, 10, 1, 9, "coreset/pool/deff", SLQOptions{})
	wantM := int(math.Ceil(est.Value))
	if p.M() != wantM {
		t.Fatalf("M got %d, want %d", p.M(), wantM)
	}
	want, _, _ := refGreedy(src, wantM, DefaultTol, false, 9)
	if got := p.Landmarks(); !reflect.DeepEqual(got, want) {
		t.Fatalf("landmarks got %v, want %v", got, want)
	}
}

// FuzzRestore feeds arbitrary JSON to Restore (State may come from disk): it must return
// an error or a pool on which every operation works without panicking.
func FuzzRestore(f *testing.F) {
	p, _ := New(Config{Dim: 2, Budget: LandmarkBudget{M: 2}, TopUp: true})
	_ = p.Insert("a", []float64{1, 0})
	_ = p.Insert("b", []float64{1, 1})
	_ = p.Insert("c", []float64{0, 0})
	_ = p.Sync(MapSource{"a": {1, 0}, "b": {1, 1}, "c": {0, 0}})
	good, _ := json.Marshal(p.State())
	f.Add(good)
	f.Add([]byte(`{"Version":1}`))
	f.Add([]byte(`{"Version":1,"Config":{"Dim":1,"Budget":{"M":1}},"Greedy":1,"Landmarks":["x"],"LandmarkFeatures":[1],"PivotValues":[1],"Factor":[1],"Gram":[1],"M":1,"Points":[{"ID":"x","Diag":1,"Residual":0}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var st State
		if json.Unmarshal(raw, &st) != nil {
			return
		}
		if st.Config.Dim > 64 || len(st.Points) > 64 { // keep each run small
			return
		}
		q, err := Restore(st)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("Restore error %v does not wrap ErrState", err)
			}
			return
		}
		_ = q.Residual()
		_ = q.Insert("fuzz-new", make([]float64, st.Config.Dim))
		for _, id := range q.Landmarks() {
			_ = q.Delete(id)
		}
		_ = q.State()
	})
}

// TestPair checks that a Pair is exactly two independent pools fed with their own view.
func TestPair(t *testing.T) {
	g := newGen(2, 4, 4)
	cfg := Config{Dim: 4, Budget: LandmarkBudget{M: 3}, TopUp: true, Seed: 1}
	pr, _ := NewPair(cfg)
	a, _ := New(cfg)
	b, _ := New(cfg)
	srcA, srcB := MapSource{}, MapSource{}
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("v%02d", (i*5)%13)
		fa, fb := g.point(), g.point()
		srcA[id], srcB[id] = fa, fb
		if err := pr.Insert(id, fa, fb); err != nil {
			t.Fatal(err)
		}
		_ = a.Insert(id, fa)
		_ = b.Insert(id, fb)
	}
	if err := pr.Insert("v00", make([]float64, 4), make([]float64, 4)); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("duplicate: got %v", err)
	}
	if err := pr.Insert("w", make([]float64, 4), make([]float64, 3)); !errors.Is(err, ErrDim) || pr.A.Has("w") {
		t.Fatalf("bad view B: got %v, A has it: %v", err, pr.A.Has("w"))
	}
	_ = pr.Sync(srcA, srcB)
	_ = a.Sync(srcA)
	_ = b.Sync(srcB)
	want := append(a.Landmarks(), b.Landmarks()...)
	if got := pr.Landmarks(); !reflect.DeepEqual(got, want) || len(got) != 6 {
		t.Fatalf("landmarks got %v, want %v", got, want)
	}
	d := pr.A.Landmarks()[0]
	_ = pr.Delete(d)
	_ = a.Delete(d)
	_ = b.Delete(d)
	if pr.A.Residual() != a.Residual() || pr.B.Residual() != b.Residual() {
		t.Fatal("certificates differ after delete")
	}
	if err := pr.Delete("nope"); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("unknown: got %v", err)
	}
}

// TestCoreStatePlusPoints checks the incremental persistence path: a caller that keeps
// each point's PointState itself (updating only the inserted point's record after an
// Insert, every record after a Sync, dropping it on Delete) plus the per-batch CoreState
// reassembles exactly State(), and a pool restored from it continues identically.
func TestCoreStatePlusPoints(t *testing.T) {
	g := newGen(12, 6, 6)
	cfg := Config{Dim: 6, Budget: LandmarkBudget{M: 4}, TopUp: true, Seed: 5}
	a, _ := New(cfg)
	src := MapSource{}
	records := map[string]PointState{} // what the caller persists next to each point
	insert := func(id string) {
		src[id] = g.point()
		if err := a.Insert(id, src[id]); err != nil {
			t.Fatal(err)
		}
		ps, ok := a.PointState(id)
		if !ok {
			t.Fatalf("PointState(%s) missing after Insert", id)
		}
		records[id] = ps
	}
	for i := 0; i < 25; i++ {
		insert(fmt.Sprintf("p%02d", i))
	}
	if err := a.Sync(src); err != nil {
		t.Fatal(err)
	}
	for id := range records {
		records[id], _ = a.PointState(id)
	}
	lm := a.Landmarks()
	_ = a.Delete(lm[0])
	delete(src, lm[0])
	delete(records, lm[0])
	_ = a.Delete("p03")
	delete(src, "p03")
	delete(records, "p03")
	for i := 0; i < 4; i++ {
		insert(fmt.Sprintf("q%d", i))
	}
	if _, ok := a.PointState("p03"); ok {
		t.Fatal("PointState of a deleted point reported present")
	}

	core := a.CoreState()
	if core.Points != nil || core.LandmarkFeatures != nil {
		t.Fatalf("CoreState carries %d points and %d features", len(core.Points), len(core.LandmarkFeatures))
	}
	core.LandmarkFeatures = a.LandmarkFeaturesTo(nil)
	for _, ps := range records {
		core.Points = append(core.Points, ps)
	}
	sort.Slice(core.Points, func(i, j int) bool { return core.Points[i].ID < core.Points[j].ID })
	full := a.State()
	if !reflect.DeepEqual(core, full) {
		t.Fatalf("CoreState + caller's records differ from State()")
	}
	b, err := Restore(core)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Pool{a, b} {
		if err := p.Sync(src); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(a.State(), b.State()) {
		t.Fatal("restored pool diverged after Sync")
	}
}

// TestPoolNormalizeThreshold: under Normalize a candidate must clear the threshold
// Tol·max K_jj, which depends on the stored points, so the pool marks itself stale where
// a change of max K_jj changes batch greedy: an insert that raises it above a pivot's raw
// residual, and a deletion of the point that held it. Tol = 0.01 makes the threshold
// visible; m = 2, no top-up. Without Normalize the same events leave the pool as batch
// greedy has it (checkInvariants).
func TestPoolNormalizeThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		start     MapSource
		insert    string
		f         []float64
		del       string
		staleFrom int
	}{
		// Batch greedy takes a (every key is 1 before the first pivot: lowest id), then b
		// (δ = 0.04 > 0.01). c raises the threshold to 0.0909: b is no candidate now,
		// and c's own key after a, 0.09/9.09, loses to b's 1.
		{"insert raises", MapSource{"a": {1, 0, 0}, "b": {0, 0.2, 0}}, "c", []float64{3, 0, 0.3}, "", 1},
		// z holds max K = 25.01, so b (δ = 0.04 < 0.2501) is no candidate and batch
		// greedy stops after a; without z the threshold is 0.01 and b is a pivot.
		{"delete lowers", MapSource{"a": {1, 0, 0}, "b": {0, 0.2, 0}, "z": {5, 0, 0.1}}, "", nil, "z", 0},
	} {
		for _, norm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/normalize=%v", tc.name, norm), func(t *testing.T) {
				cfg := Config{Dim: 3, Budget: LandmarkBudget{M: 2}, Tol: 0.01, Normalize: norm}
				p, _ := New(cfg)
				src := MapSource{}
				for id, f := range tc.start {
					src[id] = f
					if err := p.Insert(id, f); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Sync(src); err != nil {
					t.Fatal(err)
				}
				before := p.Landmarks()
				if want, _, _ := refGreedyNormalize(src, 2, cfg.Tol, false, 0, norm); !reflect.DeepEqual(before, want) {
					t.Fatalf("after Sync landmarks %v, want %v", before, want)
				}
				if tc.insert != "" {
					src[tc.insert] = tc.f
					if err := p.Insert(tc.insert, tc.f); err != nil {
						t.Fatal(err)
					}
				} else {
					delete(src, tc.del)
					if err := p.Delete(tc.del); err != nil {
						t.Fatal(err)
					}
				}
				want, _, _ := refGreedyNormalize(src, 2, cfg.Tol, false, 0, norm)
				c := p.Residual()
				if norm {
					if reflect.DeepEqual(before, want) {
						t.Fatalf("the case does not change batch greedy: %v", want)
					}
					if !c.Stale || c.StaleFrom != tc.staleFrom {
						t.Errorf("stale %v from %d, want stale from %d", c.Stale, c.StaleFrom, tc.staleFrom)
					}
				} else if !c.Stale && !reflect.DeepEqual(before, want) {
					t.Errorf("not stale, landmarks %v, batch %v", before, want)
				}
				if err := p.Sync(src); err != nil {
					t.Fatal(err)
				}
				if got := p.Landmarks(); !reflect.DeepEqual(got, want) {
					t.Errorf("after Sync landmarks %v, want %v", got, want)
				}
			})
		}
	}
}

// TestPoolNormalizeFirstPivotTie: under Normalize every candidate's key before the first
// pivot is exactly 1, and batch greedy gives that tie to the smallest id. An insert with
// a larger id leaves pivot 0 alone (the pool stays fresh when nothing else changes), one
// with a smaller id takes it over.
func TestPoolNormalizeFirstPivotTie(t *testing.T) {
	cfg := Config{Dim: 2, Budget: LandmarkBudget{M: 1}, Normalize: true}
	for _, tc := range []struct {
		id    string
		stale bool
	}{{"c", false}, {"a", true}} {
		p, _ := New(cfg)
		src := MapSource{"b": {1, 0}, "d": {0, 3}}
		for id, f := range src {
			_ = p.Insert(id, f)
		}
		if err := p.Sync(src); err != nil {
			t.Fatal(err)
		}
		if got := p.Landmarks(); !reflect.DeepEqual(got, []string{"b"}) {
			t.Fatalf("landmarks %v, want [b]", got)
		}
		f := []float64{5, 5}
		src[tc.id] = f
		if err := p.Insert(tc.id, f); err != nil {
			t.Fatal(err)
		}
		if c := p.Residual(); c.Stale != tc.stale || tc.stale && c.StaleFrom != 0 {
			t.Errorf("insert %q: stale %v from %d, want stale %v", tc.id, c.Stale, c.StaleFrom, tc.stale)
		}
		want, _, _ := refGreedyNormalize(src, 1, DefaultTol, false, 0, true)
		if err := p.Sync(src); err != nil {
			t.Fatal(err)
		}
		if got := p.Landmarks(); !reflect.DeepEqual(got, want) {
			t.Errorf("insert %q: after Sync landmarks %v, want %v", tc.id, got, want)
		}
	}
}

// TestPoolToleranceStepMax: under Tolerance a point that is not pivot t changes step t
// by holding its max: without it the max falls, and a candidate of smaller PivotKey
// qualifies. a takes pivot 0 (the largest K_jj raw; the smallest PivotKey on the
// normalized tie); after it h's key is 1, b's 0.64 and x's 0.36, so with τ = 0.5 h and
// b qualify and b, of smaller PivotKey, is pivot 1 while h holds the max. Deleting h
// (a non-landmark) lowers the max to 0.64 and x (0.36 ≥ 0.32, smallest PivotKey) takes
// pivot 1. Under Normalize with Tol = 0.005 (threshold 0.02) a small h (K = 0.04, key
// still 1) does the same when an insert raises the threshold past h's residual.
func TestPoolToleranceStepMax(t *testing.T) {
	ids := []string{"p0", "p1", "p2", "p3", "p4"}
	sort.Slice(ids, func(i, j int) bool { return PivotKey(ids[i]) < PivotKey(ids[j]) })
	a, x, b, h, y := ids[0], ids[1], ids[2], ids[3], ids[4]
	for _, tc := range []struct {
		name      string
		normalize bool
		tol, hy   float64
		insert    bool
	}{
		{"delete holder/raw", false, 0, 1, false},
		{"delete holder/normalize", true, 0, 1, false},
		{"threshold drops holder/normalize", true, 0.005, 0.2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Dim: 3, Budget: LandmarkBudget{M: 2}, Tol: tc.tol, Normalize: tc.normalize, Tolerance: 0.5}
			p, _ := New(cfg)
			src := MapSource{a: {2, 0, 0}, h: {0, tc.hy, 0}, b: {0.6, 0, 0.8}, x: {0.8, 0, 0.6}}
			for id, f := range src {
				if err := p.Insert(id, f); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Sync(src); err != nil {
				t.Fatal(err)
			}
			if got, want := p.Landmarks(), []string{a, b}; !reflect.DeepEqual(got, want) {
				t.Fatalf("after Sync landmarks %v, want %v", got, want)
			}
			if got := p.CoreState().StepMaxIDs; got[1] != h {
				t.Fatalf("StepMaxIDs %q, want %q at step 1", got, h)
			}
			if tc.insert {
				src[y] = []float64{5, 0, 0}
				if err := p.Insert(y, src[y]); err != nil {
					t.Fatal(err)
				}
			} else {
				delete(src, h)
				if err := p.Delete(h); err != nil {
					t.Fatal(err)
				}
			}
			if c := p.Residual(); !c.Stale || c.StaleFrom != 1 {
				t.Errorf("stale %v from %d, want stale from 1", c.Stale, c.StaleFrom)
			}
			want, _, _ := refGreedyRule(src, 2, cfg.Tol, false, 0, tc.normalize, cfg.Tolerance)
			if !reflect.DeepEqual(want, []string{a, x}) {
				t.Fatalf("batch greedy %v, want %v: the case does not exercise the max", want, []string{a, x})
			}
			if err := p.Sync(src); err != nil {
				t.Fatal(err)
			}
			if got := p.Landmarks(); !reflect.DeepEqual(got, want) {
				t.Errorf("after Sync landmarks %v, want %v", got, want)
			}
		})
	}
}
