package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
)

// landmarkModel is a served model of a seeded MLP with 4 landmarks and no gradient rows
// (a version as a replica installs it).
func landmarkModel(t *testing.T, b entk.Backbone) *serving.Model {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	in := serving.Input{Version: 3, Points: 12, Scale: 1, A: mat.NewDense(4, 2, nil), B: []float64{0.1, 0.2}}
	in.LandmarkX = make([]float64, 4*b.InDim())
	for i := range in.LandmarkX {
		in.LandmarkX[i] = r.NormFloat64()
	}
	for l := range 4 {
		in.LandmarkIDs, in.Views, in.Omega = append(in.LandmarkIDs, fmt.Sprintf("l%d", l)), append(in.Views, 'A'), append(in.Omega, 1)
		in.A.Set(l, 0, r.NormFloat64())
		in.A.Set(l, 1, r.NormFloat64())
	}
	in.ID = serving.ModelID(in.LandmarkIDs, in.Views, in.A, in.B)
	s, err := serving.New(in, serving.Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", ExactMemoryBytes: 1 << 30, Fits: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameAnswers checks that rep answers the gradient rankings of each query as primary
// does: the same top-5 ids, scores and radii, bit for bit, and the same verdict.
func sameAnswers(t *testing.T, name string, primary, rep *serving.Model, queries [][]float64) {
	t.Helper()
	for q, x := range queries {
		for _, rank := range []certify.Ranking{certify.GradientCosine, certify.Gradient} {
			var w1, w2 serving.Workspace
			want, err1 := primary.AnswerRanked(&w1, x, 5, 0.05, rank)
			got, err2 := rep.AnswerRanked(&w2, x, 5, 0.05, rank)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range want.TopK {
				wid, _ := primary.EntryID(rank, want.TopK[i])
				gid, _ := rep.EntryID(rank, got.TopK[i])
				if wid != gid || want.TopK[i].Score != got.TopK[i].Score || want.TopK[i].Radius != got.TopK[i].Radius {
					t.Errorf("%s, query %d, %s, #%d: %s %v±%v, the primary's %s %v±%v", name, q, rank, i+1,
						gid, got.TopK[i].Score, got.TopK[i].Radius, wid, want.TopK[i].Score, want.TopK[i].Radius)
				}
			}
			if got.Verdict != want.Verdict {
				t.Errorf("%s, query %d, %s: verdict %s, the primary's %s", name, q, rank, got.Verdict, want.Verdict)
			}
		}
	}
}

// gradPoints are n labelled points pNN of 6 seeded inputs, point i at version i with
// label i mod classes.
func gradPoints(r *rand.Rand, n, classes int) []serving.GradPoint {
	pts := make([]serving.GradPoint, n)
	for i := range pts {
		x := make([]float64, 6)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		pts[i] = serving.GradPoint{ID: fmt.Sprintf("p%02d", i), Version: int64(i), X: x, Label: i % classes}
	}
	return pts
}

// records are the point records the primary's publisher writes for s's rows.
func records(s *serving.Model) []modelbus.Point {
	var out []modelbus.Point
	for _, p := range s.GradPoints() {
		out = append(out, modelbus.Point{ID: p.ID, Version: p.Version, Label: p.Label, X: p.X})
	}
	return out
}

// TestPointsAnswerAsThePrimary: a replica's model built from the primary's point
// records (at once, or run by run as they arrive, with a deletion's tombstone and a
// re-upsert's new version) answers the gradient rankings with the primary's top-K and
// scores, bit for bit, also when the only point of a class was deleted: the class
// count comes from the primary's record, not from the points left.
func TestPointsAnswerAsThePrimary(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	pts := gradPoints(r, 40, 3)
	pts[17].Label = 3 // the only point of class 3
	base := landmarkModel(t, b)
	const budget = 1 << 30
	g, err := serving.NewGradRows(b, pts[:30], budget, nil)
	if err != nil {
		t.Fatal(err)
	}
	primary := base.WithGrad(g, nil)
	// Since the refit: ten more points, p17 (class 3) deleted, p05 stored again with
	// another input.
	primary = primary.WithGradPoints(pts[30:], budget).WithMask([]string{"p17"})
	again := pts[5]
	again.Version, again.X = 99, slices.Clone(pts[6].X)
	primary = primary.WithGradPoints([]serving.GradPoint{again}, budget)

	var whole Points
	whole.Backbone, whole.Budget = b, budget
	replicaWhole := whole.Apply(base, records(primary), primary.Grad.Classes())

	var runs Points
	runs.Backbone, runs.Budget = b, budget
	first := records(base.WithGrad(g, nil)) // the refit's rows, then the changes as records
	s := runs.Apply(base, first, g.Classes())
	var later []modelbus.Point
	for _, p := range pts[30:] {
		later = append(later, modelbus.Point{ID: p.ID, Version: p.Version, Label: p.Label, X: p.X})
	}
	s = runs.Apply(s, later, 0)
	s = runs.Apply(s, []modelbus.Point{{ID: "p17"}}, primary.Grad.Classes())
	s = runs.Apply(s, []modelbus.Point{{ID: "p05", Version: 99, Label: again.Label, X: again.X}}, 0)

	// Queries: five stored points' inputs and three inputs whose largest output is the
	// fourth, the class no stored point holds any more (where the class count decides
	// the predicted class).
	queries := [][]float64{pts[0].X, pts[7].X, pts[14].X, pts[21].X, pts[28].X}
	ws, out := b.NewWorkspace(), make([]float64, b.OutDim())
	for len(queries) < 8 {
		x := make([]float64, 6)
		for j := range x {
			x[j] = 3 * r.NormFloat64()
		}
		if b.Forward(out, x, ws); slices.Index(out, slices.Max(out)) == 3 {
			queries = append(queries, x)
		}
	}
	for name, rep := range map[string]*serving.Model{"all at once": replicaWhole, "run by run": s} {
		if n, _ := rep.GradientRows(); n != 39 {
			t.Fatalf("%s: %d rows, want 39", name, n)
		}
		sameAnswers(t, name, primary, rep, queries)
	}
	// Without the class count the replica's rows would count 3 classes, not 4.
	var blind Points
	blind.Backbone, blind.Budget = b, budget
	if c := blind.Apply(base, records(primary), 0).Grad.Classes(); c != 3 || primary.Grad.Classes() != 4 {
		t.Errorf("classes without the record %d, the primary's %d: want 3 and 4 (the test would not see the record's use)", c, primary.Grad.Classes())
	}
}

// TestMaskKeepsAStoredAgainRow: a landmark deleted and stored again under its id before
// the next refit. The primary masks its landmark term and the old value's row, and
// ranks the new value's row. A replica that reads the mask, then the point records (a
// tombstone and the new value, or the new value alone: the publisher may see only the
// new one), and then the mask again (every later mask of the version repeats the id),
// answers as the primary: the landmark masked, the new row ranked. Masking every row of
// a mask's ids, as replicas did before, keeps the new row masked until the next refit.
func TestMaskKeepsAStoredAgainRow(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	pts := gradPoints(rand.New(rand.NewPCG(9, 9)), 12, 4)
	for i := range 4 {
		pts[i].ID = fmt.Sprintf("l%d", i) // the landmarks' ids (landmarkModel)
	}
	const budget = 1 << 30
	base := landmarkModel(t, b)
	g, err := serving.NewGradRows(b, pts, budget, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := base.WithGrad(g, nil)
	again := pts[1]
	again.Version, again.X = 50, slices.Clone(pts[7].X)
	primary := before.WithMask([]string{"l1"}).WithGradPoints([]serving.GradPoint{again}, budget)
	if v, _, ok := primary.GradRowOf("l1"); !ok || v != 50 || primary.IsLandmark("l1") {
		t.Fatalf("primary: l1's row at version %d (%v), landmark %v: want the new row and no landmark", v, ok, primary.IsLandmark("l1"))
	}
	newValue := modelbus.Point{ID: "l1", Version: 50, Label: again.Label, X: again.X}
	for _, tombstone := range []bool{true, false} {
		var rp Points
		rp.Backbone, rp.Budget = b, budget
		mask := func(s *serving.Model) *serving.Model { return rp.Mask(s, []string{"l1"}) }
		s := mask(rp.Apply(base, records(before), g.Classes()))
		if _, _, ok := s.GradRowOf("l1"); ok || s.IsLandmark("l1") {
			t.Fatalf("tombstone %v: the mask left l1's row (%v) or landmark (%v)", tombstone, ok, s.IsLandmark("l1"))
		}
		if tombstone {
			s = mask(rp.Apply(s, []modelbus.Point{{ID: "l1"}}, 0))
		}
		s = mask(mask(rp.Apply(s, []modelbus.Point{newValue}, 0)))
		if v, _, ok := s.GradRowOf("l1"); !ok || v != 50 || s.IsLandmark("l1") {
			t.Errorf("tombstone %v: l1's row at version %d (%v), landmark %v: want the new row and no landmark", tombstone, v, ok, s.IsLandmark("l1"))
		}
		var queries [][]float64
		for q := range 6 {
			queries = append(queries, pts[q*2].X)
		}
		sameAnswers(t, fmt.Sprintf("tombstone %v", tombstone), primary, s, queries)
		if _, _, ok := s.WithMask([]string{"l1"}).GradRowOf("l1"); ok {
			t.Errorf("tombstone %v: masking every row of l1 left its row (the test would not see the split)", tombstone)
		}
	}
}
