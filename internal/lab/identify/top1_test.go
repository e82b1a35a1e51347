package identify

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// TestTop1Row: on four landmarks with hand-set effects, each query's top-1 and its
// percentile among the other three effects are known by hand.
func TestTop1Row(t *testing.T) {
	effects := []float64{0.1, 0.4, -0.2, 0.3}
	queries := mat.NewDense(3, 4, []float64{
		1, 5, 2, 0, // top-1 landmark 1: 0.4 beats 0.1, −0.2, 0.3 → 1
		0, 0, 3, 1, // landmark 2: −0.2 beats none → 0
		2, 1, 1, 1, // landmark 0: 0.1 beats −0.2 → 1/3
	})
	qlab, llab := []int{1, 0, 1}, []int{1, 1, 1, 0}
	entk := top1Ranking{"entk", true, func(r []float64, _, l int) float64 { return r[l] }}
	row, err := top1Row(entk, effects, queries, qlab, llab)
	if err != nil {
		t.Fatal(err)
	}
	want := Top1Row{Ranking: "entk", FitFree: true, Median: 1.0 / 3, Mean: 4.0 / 9, Q25: 0, Q75: 1.0 / 3,
		SameClass: 2.0 / 3, Distinct: 3} // query 1 (label 0) takes landmark 2 (label 1)
	if !close(row, want) {
		t.Errorf("entk row %+v, want %+v", row, want)
	}
	// Restricted to the query's class, query 1 (label 0) takes landmark 3, the only one of
	// its class (0.3 beats 0.1 and −0.2: 2/3); queries 0 and 2 keep theirs.
	own := top1Ranking{"own", true, func(r []float64, c, l int) float64 {
		if llab[l] != c {
			return math.Inf(-1)
		}
		return r[l]
	}}
	if row, err = top1Row(own, effects, queries, qlab, llab); err != nil {
		t.Fatal(err)
	}
	want = Top1Row{Ranking: "own", FitFree: true, Median: 2.0 / 3, Mean: 2.0 / 3, Q25: 1.0 / 3, Q75: 2.0 / 3,
		SameClass: 1, Distinct: 3}
	if !close(row, want) {
		t.Errorf("own-class row %+v, want %+v", row, want)
	}
}

func close(a, b Top1Row) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }
	return a.Ranking == b.Ranking && a.FitFree == b.FitFree && eq(a.Median, b.Median) && eq(a.Mean, b.Mean) &&
		eq(a.Q25, b.Q25) && eq(a.Q75, b.Q75) && eq(a.SameClass, b.SameClass) && a.Distinct == b.Distinct
}

// TestTop1StudySmall runs the study on a small MNIST model: every percentile lies in
// [0, 1], the quartiles are in order, the own-class ranking answers in the query's class
// exactly when some landmark has it, and only x_coef depends on the fit.
func TestTop1StudySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("fits a model")
	}
	o := offline.DefaultModelOptions()
	o.Pipeline.Data, o.Pipeline.N, o.Pipeline.M, o.Pipeline.S, o.Pipeline.H = "mnist", 300, 24, 256, 2
	o.Dim, o.Epochs = 16, 2
	fm, err := offline.FitModel(context.Background(), &o, 1, 40)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Top1Study(fm, "mnist")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Audit != 20 || rep.Queries != 20 || rep.Landmarks != fm.Info.M || rep.NegativeEffects > rep.Landmarks {
		t.Errorf("audit %d, queries %d, landmarks %d (M %d), negative %d", rep.Audit, rep.Queries, rep.Landmarks,
			fm.Info.M, rep.NegativeEffects)
	}
	has := map[int]bool{}
	for _, c := range fm.Info.LandmarkLab {
		has[c] = true
	}
	var n int
	for _, c := range fm.Prob.Test.Labels[rep.Audit:] {
		if has[c] {
			n++
		}
	}
	covered := float64(n) / float64(rep.Queries)
	if len(rep.Rankings) != 6 {
		t.Fatalf("%d rankings, want 6", len(rep.Rankings))
	}
	for _, r := range rep.Rankings {
		for _, v := range []float64{r.Median, r.Mean, r.Q25, r.Q75, r.SameClass} {
			if !(v >= 0 && v <= 1) {
				t.Errorf("%s: %+v has a value outside [0, 1]", r.Ranking, r)
			}
		}
		if r.Q25 > r.Median || r.Median > r.Q75 || r.Distinct < 1 || r.Distinct > rep.Queries {
			t.Errorf("%s: quartiles or distinct count out of order: %+v", r.Ranking, r)
		}
		if r.Ranking == "entk_own_class" && r.SameClass != covered {
			t.Errorf("own-class ranking: same class %v, want %v (the queries whose class has a landmark)", r.SameClass, covered)
		}
		if r.FitFree == (r.Ranking == "entk_x_coef") {
			t.Errorf("%s: fit_free %v", r.Ranking, r.FitFree)
		}
	}
}
