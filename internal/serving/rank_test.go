package serving

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// TestRankingsExact: on the exact path (full and factored rows) each ranking's scores
// match its definition over full Jacobians (entk.ExactKernel, the slow reference): the
// similarity k*(x_ℓ, x), the displacement k*·ω, and the representer k*·⟨Ã_ℓ, ẑ⟩
// (certify's representerRef formula written out here), each within its radius; a
// certified top-3 is the reference top-3; every answer names its ranking and the
// similarity's stability is 1 (fit-free).
func TestRankingsExact(t *testing.T) {
	for _, eb := range exactBudgets {
		t.Run(eb.name, func(t *testing.T) {
			s, b := testModel(t, 12, eb.bytes)
			if s.Exact.Factored() != eb.factored {
				t.Fatalf("factored rows %v, want %v", s.Exact.Factored(), eb.factored)
			}
			s = s.WithMask([]string{"p02"})
			pool := 0.9
			s.poolStab, s.stableJaccard = &pool, 0.8
			d := b.InDim()
			x := []float64{0.3, -1, 0.5, 2, -0.7, 0.1}
			ws := b.NewWorkspace()
			act := s.ActiveLandmarks()
			krow := make([]float64, len(act))
			for i, l := range act {
				krow[i] = entk.ExactKernel(b, s.LandmarkX[l*d:(l+1)*d], x, ws)
			}
			z := slices.Clone(s.enc.B)
			for i, l := range act {
				for j := range z {
					z[j] += s.Scale * krow[i] * s.enc.A.At(l, j)
				}
			}
			zn := math.Sqrt(mat.Dot(mat.NewVecDense(len(z), z), mat.NewVecDense(len(z), z)))
			for _, r := range certify.Rankings {
				if r.AllPoints() {
					continue // gradrows_test.go
				}
				ref := make([]float64, len(s.LandmarkIDs))
				for l := range ref {
					ref[l] = math.Inf(-1)
				}
				for i, l := range act {
					switch r {
					case certify.Similarity:
						ref[l] = krow[i]
					case certify.Displacement:
						ref[l] = krow[i] * s.Omega[l]
					case certify.Representer:
						var dot float64
						for j := range z {
							dot += s.enc.A.At(l, j) * z[j]
						}
						ref[l] = krow[i] * s.Scale * dot / zn
					}
				}
				c, err := s.AnswerRanked(new(Workspace), x, 3, 0.05, r)
				if err != nil {
					t.Fatal(err)
				}
				if c.Ranking != r {
					t.Errorf("%s: answer names ranking %q", r, c.Ranking)
				}
				for _, e := range c.TopK {
					if want := ref[e.Index]; math.Abs(e.Score-want) > e.Radius || e.Radius > 1e-5*math.Abs(want)+1e-9 {
						t.Errorf("%s: landmark %d score %v, exact %v, radius %v", r, e.Index, e.Score, want, e.Radius)
					}
				}
				if c.Verdict == certify.Certified || c.Verdict == certify.Unstable {
					top := make([]int, 3)
					certify.TopKTo(top, ref)
					got := []int{c.TopK[0].Index, c.TopK[1].Index, c.TopK[2].Index}
					slices.Sort(top)
					slices.Sort(got)
					if !slices.Equal(got, top) {
						t.Errorf("%s: separated top-3 %v, exact top-3 %v", r, got, top)
					}
				}
				switch {
				case r == certify.Similarity && (c.Stability == nil || *c.Stability != pool || !c.Stable):
					t.Errorf("similarity: stability %v stable %v, want the pool part %v and stable", c.Stability, c.Stable, pool)
				case r != certify.Similarity && c.Stability != nil:
					// one fit: no τ², so the refit stability of a fitted ranking is not known
					t.Errorf("%s with one fit: stability %v, want unknown", r, *c.Stability)
				case r != certify.Similarity && c.Verdict == certify.Certified:
					t.Errorf("%s: certified with unknown stability", r)
				}
			}
			// A pool part below the target makes every ranking unstable, and without a
			// measurement nothing is stable: separation alone never certifies.
			for _, p := range []*float64{new(float64), nil} {
				s.poolStab = p
				c, err := s.AnswerRanked(new(Workspace), x, 3, 0.05, certify.Similarity)
				if err != nil {
					t.Fatal(err)
				}
				if c.Stable || c.Verdict == certify.Certified || (p == nil) != (c.Stability == nil) {
					t.Errorf("pool part %v: stable %v verdict %s stability %v", p, c.Stable, c.Verdict, c.Stability)
				}
			}
		})
	}
}

// TestResidualFraction: with full and with factored rows, the answer's residual fraction
// equals the dense computation 1 − k_tZ K_ZZ⁻¹ k_Zt / k_tt from full Jacobians (within
// 1e-6: float32 rows and the jitter), is in [0, 1], and is ~0 for a query equal to an
// active landmark's input.
func TestResidualFraction(t *testing.T) {
	for _, eb := range exactBudgets {
		t.Run(eb.name, func(t *testing.T) {
			s, b := testModel(t, 10, eb.bytes)
			if s.Exact.Factored() != eb.factored {
				t.Fatalf("factored rows %v, want %v", s.Exact.Factored(), eb.factored)
			}
			d := b.InDim()
			ws := b.NewWorkspace()
			act := s.ActiveLandmarks()
			n := len(act)
			kzz := mat.NewSymDense(n, nil)
			for i, li := range act {
				for j := i; j < n; j++ {
					kzz.SetSym(i, j, entk.ExactKernel(b, s.LandmarkX[li*d:(li+1)*d], s.LandmarkX[act[j]*d:(act[j]+1)*d], ws))
				}
			}
			for qi, x := range [][]float64{{0.3, -1, 0.5, 2, -0.7, 0.1}, {1, 1, 1, 1, 1, 1}, s.LandmarkX[act[3]*d : (act[3]+1)*d]} {
				kt := mat.NewVecDense(n, nil)
				for i, l := range act {
					kt.SetVec(i, entk.ExactKernel(b, s.LandmarkX[l*d:(l+1)*d], x, ws))
				}
				var sol mat.VecDense
				if err := sol.SolveVec(kzz, kt); err != nil {
					t.Fatal(err)
				}
				ktt := entk.ExactKernel(b, x, x, ws)
				want := 1 - mat.Dot(kt, &sol)/ktt
				c, err := s.AnswerRanked(new(Workspace), x, 3, 0.05, certify.Similarity)
				if err != nil {
					t.Fatal(err)
				}
				if c.ResidualFraction == nil {
					t.Fatalf("query %d: no residual fraction", qi)
				}
				got := *c.ResidualFraction
				if got < 0 || got > 1 || math.Abs(got-max(want, 0)) > 1e-6 {
					t.Errorf("query %d: residual fraction %v, dense %v", qi, got, want)
				}
				if qi == 2 && got > 1e-6 {
					t.Errorf("a landmark's own input leaves %v of itself unexplained", got)
				}
			}
		})
	}
}

// TestReseedJaccard: a pool against itself gives 1; against another pool the mean top-k
// id Jaccard equals a slow reference from full Jacobians (entk.ExactKernel, an id scoring
// its best view), with full rows, factored rows and one pool of each; too few distinct
// ids, no queries or rows over budget are not measured.
func TestReseedJaccard(t *testing.T) {
	s, b := testModel(t, 16, 1<<30)
	d := b.InDim()
	a := Landmarks{IDs: s.LandmarkIDs, X: s.LandmarkX}
	// c: the last 6 landmarks replaced by new inputs under new ids.
	c := Landmarks{IDs: slices.Clone(s.LandmarkIDs), X: slices.Clone(s.LandmarkX)}
	for l := 10; l < 16; l++ {
		c.IDs[l] = "n" + c.IDs[l]
		for j := range d {
			c.X[l*d+j] = math.Sin(float64(7*l + j))
		}
	}
	var qs [][]float64
	for i := range 5 {
		x := make([]float64, d)
		for j := range x {
			x[j] = math.Cos(float64(3*i + j))
		}
		qs = append(qs, x)
	}
	if j, ok := ReseedJaccard(b, a, a, qs, 3, 1<<30); !ok || j != 1 {
		t.Errorf("a pool against itself: %v %v, want 1", j, ok)
	}
	ws := b.NewWorkspace()
	ref := func(p Landmarks, x []float64) map[string]bool {
		best := map[string]float64{}
		for l, id := range p.IDs {
			k := entk.ExactKernel(b, p.X[l*d:(l+1)*d], x, ws)
			if v, ok := best[id]; !ok || k > v {
				best[id] = k
			}
		}
		ids := make([]string, 0, len(best))
		for id := range best {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(x, y string) int {
			if best[x] > best[y] {
				return -1
			}
			return 1
		})
		top := map[string]bool{}
		for _, id := range ids[:3] {
			top[id] = true
		}
		return top
	}
	jaccard := func(a, c Landmarks) float64 {
		var want float64
		for _, x := range qs {
			ta, tc := ref(a, x), ref(c, x)
			in := 0
			for id := range ta {
				if tc[id] {
					in++
				}
			}
			want += float64(in) / float64(6-in)
		}
		return want / float64(len(qs))
	}
	// c12: c's first 12 landmarks, whose full rows fit 12 KiB where a's 16 do not, so
	// that budget measures a factored pool against a full one.
	c12 := Landmarks{IDs: c.IDs[:12], X: c.X[:12*d]}
	for _, m := range []struct {
		name   string
		c      Landmarks
		budget int64
	}{{"full", c, exactBudgets[0].bytes}, {"factored", c, exactBudgets[1].bytes}, {"factored against full", c12, 12 << 10}} {
		want := jaccard(a, m.c)
		if j, ok := ReseedJaccard(b, a, m.c, qs, 3, m.budget); !ok || math.Abs(j-want) > 1e-12 {
			t.Errorf("%s: ReseedJaccard %v %v, reference %v", m.name, j, ok, want)
		}
	}
	if ra, rc := NewExactRows(b, a.X, 16, 12<<10), NewExactRows(b, c12.X, 12, 12<<10); !ra.Factored() || rc.Factored() {
		t.Errorf("at 12 KiB: 16 landmarks factored %v, 12 factored %v; want true, false", ra.Factored(), rc.Factored())
	}
	for name, ok := range map[string]bool{
		"no queries":  second(ReseedJaccard(b, a, c, nil, 3, 1<<30)),
		"k too large": second(ReseedJaccard(b, a, c, qs, 8, 1<<30)),
		"over budget": second(ReseedJaccard(b, a, c, qs, 3, 10)),
	} {
		if ok {
			t.Errorf("%s: measured", name)
		}
	}
}

func second(_ float64, ok bool) bool { return ok }
