package serving

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// exactBudgets are the two exact representations of testModel's landmarks (m ≤ 20):
// full rows (ExactDim = 233 float32s per landmark fit 1 GiB) and factored rows (46 per
// landmark: 4 KiB holds 22 of them, full rows only 4).
var exactBudgets = []struct {
	name     string
	bytes    int64
	factored bool
}{{"full", 1 << 30, false}, {"factored", 4 << 10, true}}

// testModel is a served model of m landmarks of a seeded MLP with random coefficients.
func testModel(t *testing.T, m int, exactBytes int64) (*Model, entk.Backbone) {
	t.Helper()
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(testInput(b, m), Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", ExactMemoryBytes: exactBytes, Fits: 1, ExactRowsCap: 0})
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// testInput is a model of m landmarks with seeded random inputs for backbone b, ω and
// coefficients (two landmarks per point id, views A and B).
func testInput(b entk.Backbone, m int) Input {
	r := rand.New(rand.NewPCG(1, 1))
	d := b.InDim()
	in := Input{Version: 7, Points: 3 * m, Scale: 1, A: mat.NewDense(m, 3, nil), B: []float64{0.1, 0.2, 0.3}}
	in.LandmarkX = make([]float64, m*d)
	for i := range in.LandmarkX {
		in.LandmarkX[i] = r.NormFloat64()
	}
	for l := range m {
		in.LandmarkIDs = append(in.LandmarkIDs, fmt.Sprintf("p%02d", l/2))
		in.Views = append(in.Views, "AB"[l%2])
		in.Omega = append(in.Omega, 0.5+r.Float64())
		for c := range 3 {
			in.A.Set(l, c, r.NormFloat64())
		}
	}
	in.ID = ModelID(in.LandmarkIDs, in.Views, in.A, in.B)
	in.Grad, in.GradErr = NewGradRows(b, testGradPoints(b, 20), 1<<30, nil)
	return in
}

// testGradPoints are n seeded stored points for backbone b with labels 0, 1, 2 in turn.
func testGradPoints(b entk.Backbone, n int) []GradPoint {
	r := rand.New(rand.NewPCG(2, 2))
	pts := make([]GradPoint, n)
	for i := range pts {
		x := make([]float64, b.InDim())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		pts[i] = GradPoint{ID: fmt.Sprintf("g%02d", i), Version: 1, X: x, Label: i % 3}
	}
	return pts
}

// TestAnswerExact: on the exact path, with full rows and with factored rows, every
// reported score is k*(x_ℓ, x)·ω_ℓ from full Jacobians (entk.ExactKernel, the slow
// reference) within its radius, the radius is at rounding level (float32 rows: relative
// 1e-6), every entry's cosine (the runner-up's too) is the reference's k*/√(k*k*) within
// 1e-6, and a certified top-K is the reference top-K. A masked landmark never appears.
func TestAnswerExact(t *testing.T) {
	for _, eb := range exactBudgets {
		t.Run(eb.name, func(t *testing.T) {
			s, b := testModel(t, 12, eb.bytes)
			if s.Exact == nil || s.Draw != nil || s.Exact.Factored() != eb.factored {
				t.Fatalf("exact rows %v, draw %v: want %s exact rows and no draw", s.Exact != nil, s.Draw != nil, eb.name)
			}
			d := b.InDim()
			x := []float64{0.3, -1, 0.5, 2, -0.7, 0.1}
			ws := b.NewWorkspace()
			check := func(s *Model) certify.Certificate {
				t.Helper()
				c, err := s.Answer(new(Workspace), x, 3, 0.05)
				if err != nil {
					t.Fatal(err)
				}
				// Entry.Index is the landmark's model row; masked rows score -Inf here.
				ref := make([]float64, len(s.LandmarkIDs))
				for l := range ref {
					ref[l] = math.Inf(-1)
				}
				for _, l := range s.ActiveLandmarks() {
					ref[l] = entk.ExactKernel(b, s.LandmarkX[l*d:(l+1)*d], x, ws) * s.Omega[l]
				}
				ktt := entk.ExactDiag(b, x, ws)
				for _, e := range slices.Concat(c.TopK, []certify.Entry{c.RunnerUp}) {
					if want := ref[e.Index]; e.Index != c.RunnerUp.Index && (math.Abs(e.Score-want) > e.Radius || e.Radius > 1e-6*math.Abs(want)+1e-12) {
						t.Errorf("landmark %d: score %v, exact %v, radius %v", e.Index, e.Score, want, e.Radius)
					}
					// The cosine from the same slow reference, within the float32 rows' rounding.
					xl := s.LandmarkX[e.Index*d : (e.Index+1)*d]
					cos := entk.ExactKernel(b, xl, x, ws) / math.Sqrt(ktt*entk.ExactDiag(b, xl, ws))
					if math.Abs(e.Cosine-cos) > 1e-6 || math.Abs(e.Cosine) > 1 || e.Cosine == 0 {
						t.Errorf("landmark %d: cosine %v, exact %v", e.Index, e.Cosine, cos)
					}
				}
				if c.Verdict == certify.Certified {
					top := make([]int, 3)
					certify.TopKTo(top, ref)
					got := make([]int, 0, len(c.TopK))
					for _, e := range c.TopK {
						got = append(got, e.Index)
					}
					slices.Sort(top)
					slices.Sort(got)
					if !slices.Equal(got, top) {
						t.Errorf("certified top-3 %v, exact top-3 %v", got, top)
					}
				}
				return c
			}
			c := check(s)
			first := s.LandmarkIDs[c.TopK[0].Index]
			sm := s.WithMask([]string{first})
			if sm == s || sm.MaskedCount() != 2 || s.MaskedCount() != 0 {
				t.Fatalf("WithMask(%q): masked %d (original %d), want a new model with both views masked", first, sm.MaskedCount(), s.MaskedCount())
			}
			cm := check(sm)
			for _, e := range cm.TopK {
				if id := sm.LandmarkIDs[e.Index]; id == first || math.IsInf(e.Score, 0) {
					t.Errorf("masked id %q is in the answer", id)
				}
			}
			if s.WithMask([]string{"nope"}) != s {
				t.Errorf("WithMask of no landmark made a new model")
			}
		})
	}
}

// TestSketchedPath: without exact rows the model makes its named evaluation draw, splits
// δ over the landmarks, and the same name gives the same draw.
func TestSketchedPath(t *testing.T) {
	s, _ := testModel(t, 10, 0)
	if s.Exact != nil || s.Draw == nil {
		t.Fatalf("exact rows %v, draw %v: want a draw", s.Exact != nil, s.Draw != nil)
	}
	x := []float64{1, 0, -1, 0.5, 0.5, 0}
	c, err := s.Answer(new(Workspace), x, 2, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if c.VarianceModel != certify.VarianceConservative || c.Allocation.PerLandmark != 0.05/10 {
		t.Errorf("variance model %q, δ_ℓ %v; want conservative and δ/M", c.VarianceModel, c.Allocation.PerLandmark)
	}
	s2, _ := testModel(t, 10, 0)
	if s2.Draw.Seed != s.Draw.Seed || SeedHash(s.Draw.Seed) != SeedHash(s2.Draw.Seed) || len(SeedHash(1)) != 64 {
		t.Errorf("same draw name, seeds %d and %d", s.Draw.Seed, s2.Draw.Seed)
	}
	s.CountDraw()
	if s.Draw.Used.Load() != 1 {
		t.Errorf("CountDraw: used %d, want 1", s.Draw.Used.Load())
	}
}

// TestModelIDAndErrors: the model id is a function of the content, and a non-finite
// weight is refused with ErrModel.
func TestModelIDAndErrors(t *testing.T) {
	s, b := testModel(t, 4, 1<<30)
	a := mat.DenseCopyOf(s.enc.A)
	if got := ModelID(s.LandmarkIDs, s.Views, a, s.enc.B); got != s.ID {
		t.Errorf("ModelID of the same content: %s, want %s", got, s.ID)
	}
	a.Set(0, 0, math.Nextafter(a.At(0, 0), 1))
	if ModelID(s.LandmarkIDs, s.Views, a, s.enc.B) == s.ID {
		t.Errorf("ModelID did not change with Ã")
	}
	bad := Input{Version: 1, LandmarkIDs: []string{"a", "b"}, Views: []byte("AB"), LandmarkX: make([]float64, 12),
		A: mat.NewDense(2, 1, nil), B: []float64{0}, Scale: 1, Omega: []float64{1, math.NaN()}}
	if _, err := New(bad, Settings{Backbone: b, H: 2, S: 16, ExactMemoryBytes: 1 << 30}); !errors.Is(err, ErrModel) {
		t.Errorf("NaN ω: %v, want ErrModel", err)
	}
	if e := s.DeletionEffect("nope", "r1", 5, 1); e.Landmarks != 0 || e.Reason == "" {
		t.Errorf("effect of a non-landmark: %+v, want a reason and no landmarks", e)
	}
}

// TestAnswerBatch: AnswerBatch gives every query Answer's certificate, bit for bit (the
// same scores, radii, verdict and indices), on the exact path (rows read once for the
// batch, full and factored) and on the sketched one, with a masked landmark and
// per-query k and δ.
func TestAnswerBatch(t *testing.T) {
	for _, exact := range []int64{exactBudgets[0].bytes, exactBudgets[1].bytes, 0} {
		s, b := testModel(t, 13, exact)
		s = s.WithMask([]string{"p01"})
		r := rand.New(rand.NewPCG(4, 4))
		var (
			xs     [][]float64
			ks     []int
			deltas []float64
		)
		for i := range 7 {
			x := make([]float64, b.InDim())
			for j := range x {
				x[j] = r.NormFloat64()
			}
			xs, ks, deltas = append(xs, x), append(ks, 1+i%4), append(deltas, 0.01*float64(1+i))
		}
		out, errs := make([]certify.Certificate, len(xs)), make([]error, len(xs))
		rs := make([]certify.Ranking, len(xs))
		for i := range rs {
			rs[i] = certify.Rankings[i%len(certify.Rankings)]
		}
		var wb, w1 Workspace
		s.AnswerBatch(&wb, out, errs, xs, ks, deltas, rs)
		for i, x := range xs {
			want, werr := s.AnswerRanked(&w1, x, ks[i], deltas[i], rs[i])
			if (errs[i] == nil) != (werr == nil) {
				t.Fatalf("exact bytes %d query %d: batch error %v, single %v", exact, i, errs[i], werr)
			}
			gotJ, _ := json.Marshal(out[i])
			wantJ, _ := json.Marshal(want)
			if got, wantS := string(gotJ), string(wantJ); got != wantS {
				t.Fatalf("exact bytes %d query %d:\nbatch  %s\nsingle %s", exact, i, got, wantS)
			}
		}
	}
}
