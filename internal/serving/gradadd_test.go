package serving

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// TestWithGradPoints: a model whose rows were built over 14 points, extended with the
// points stored since (six new ones, a new version of a stored one, an unchanged one and
// an unlabelled one), answers the gradient ranking as a model built over all of them
// does: the same certified top-K ids with the same scores. The model it came from still
// answers as before; of two extensions of one model, the second (the arrays now hold the
// first's rows past its length) copies instead of overwriting; a covered point changes
// nothing; rows over the
// budget leave a model without rows whose gradient answers say so.
func TestWithGradPoints(t *testing.T) {
	for _, arch := range []string{"mlp:6-8-4", gradConvnet} {
		t.Run(arch, func(t *testing.T) {
			b, err := entk.NewBackbone(arch, 3)
			if err != nil {
				t.Fatal(err)
			}
			pts := testGradPoints(b, 20)
			model := func(rows []GradPoint) *Model {
				in := testInput(b, 12)
				in.Grad, in.GradErr = NewGradRows(b, rows, 1<<30, nil)
				s, err := New(in, Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", Fits: 1})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := model(pts[:14])
			moved := pts[2]
			moved.Version, moved.X = 2, slices.Clone(pts[9].X)
			since := append(slices.Clone(pts[14:]), moved, pts[5], GradPoint{ID: "bare", X: pts[0].X, Label: -1})
			now := slices.Clone(pts)
			now[2] = moved
			want := model(now)

			queries := gradQueries(b, 5)
			before := answersOf(t, s, queries)
			ext := s.WithGradPoints(since, 1<<30)
			if ext == s || ext.Grad == nil || len(ext.gactive) != 20 || len(ext.Grad.IDs) != 21 {
				t.Fatalf("extended model: rows %v, %d active of %d (want 20 of 21: the moved point's old row masked)",
					ext.Grad != nil, len(ext.gactive), len(ext.Grad.IDs))
			}
			got := answersOf(t, ext, queries)
			sameRanked(t, "extended", got, answersOf(t, want, queries))
			sameRanked(t, "the model before", answersOf(t, s, queries), before)

			// ext's arrays have room past its rows: a further extension of ext appends in
			// place, and one more of ext (its header now shorter than the arrays' rows)
			// must copy, leaving the first one's rows alone.
			more := testGradPoints(b, 26)
			for i := 20; i < 26; i++ {
				more[i].ID = fmt.Sprintf("n%02d", i)
			}
			e2 := ext.WithGradPoints(more[20:23], 1<<30)
			a2 := answersOf(t, e2, queries)
			e3 := ext.WithGradPoints(more[23:26], 1<<30)
			if e2.Grad == nil || e3.Grad == nil || len(e2.Grad.IDs) != 24 || len(e3.Grad.IDs) != 24 {
				t.Fatalf("two extensions of one model: rows %v and %v", e2.Grad != nil, e3.Grad != nil)
			}
			if e2.Grad.tail != ext.Grad.tail {
				t.Log("the first further extension did not append in place (no room): the copy path alone is tested")
			}
			sameRanked(t, "an extension, after another of the same model", answersOf(t, e2, queries), a2)
			sameRanked(t, "the first further extension", a2, answersOf(t, model(append(slices.Clone(now), more[20:23]...)), queries))
			sameRanked(t, "the second further extension", answersOf(t, e3, queries), answersOf(t, model(append(slices.Clone(now), more[23:26]...)), queries))

			if ext.WithGradPoints([]GradPoint{pts[5], moved}, 1<<30) != ext {
				t.Error("points the rows cover already made a new model")
			}
			// An id upserted twice in one batch (the ingest's Stored lists it twice, with
			// its latest value each time) gets one row: an answer must not name it twice.
			twice := s.WithGradPoints([]GradPoint{pts[15], pts[15]}, 1<<30)
			if n := len(twice.gactive); n != 15 || len(twice.Grad.IDs) != 15 {
				t.Errorf("a point given twice: %d active rows of %d, want 15 of 15", n, len(twice.Grad.IDs))
			}
			over := s.WithGradPoints(since, GradBytes(20, GradRowDim(b)))
			if over.Grad != nil || !errors.Is(over.GradErr, ErrRanking) {
				t.Fatalf("over budget: rows %v, error %v", over.Grad != nil, over.GradErr)
			}
			if _, err := over.AnswerRanked(new(Workspace), queries[0], 3, 0.05, certify.Gradient); !errors.Is(err, ErrRanking) {
				t.Errorf("gradient answer over budget: %v, want ErrRanking", err)
			}
		})
	}
}

// gradQueries are n seeded query inputs for backbone b.
func gradQueries(b entk.Backbone, n int) [][]float64 {
	r := rand.New(rand.NewPCG(4, 4))
	qs := make([][]float64, n)
	for i := range qs {
		qs[i] = make([]float64, b.InDim())
		for j := range qs[i] {
			qs[i][j] = r.NormFloat64()
		}
	}
	return qs
}

// rankedAnswer is a gradient answer by ids: its verdict and each top-K id's score (the
// runner-up under "").
type rankedAnswer struct {
	verdict certify.Verdict
	scores  map[string]float64
}

func answersOf(t *testing.T, s *Model, queries [][]float64) []rankedAnswer {
	t.Helper()
	var out []rankedAnswer
	for _, x := range queries {
		c, err := s.AnswerRanked(new(Workspace), x, 4, 0.05, certify.Gradient)
		if err != nil {
			t.Fatal(err)
		}
		a := rankedAnswer{verdict: c.Verdict, scores: map[string]float64{}}
		for _, e := range c.TopK {
			id, _ := s.EntryID(c.Ranking, e)
			a.scores[id] = e.Score
		}
		a.scores[""] = c.RunnerUp.Score
		out = append(out, a)
	}
	return out
}

func sameRanked(t *testing.T, what string, got, want []rankedAnswer) {
	t.Helper()
	for q := range want {
		if got[q].verdict != want[q].verdict || len(got[q].scores) != len(want[q].scores) {
			t.Errorf("%s, query %d: verdict %v with %v, want %v with %v", what, q, got[q].verdict, got[q].scores, want[q].verdict, want[q].scores)
			continue
		}
		for id, v := range want[q].scores {
			if g, ok := got[q].scores[id]; !ok || g != v {
				t.Errorf("%s, query %d: %q scores %v (present %v), want %v", what, q, id, g, ok, v)
			}
		}
	}
}

// BenchmarkWithGradPoints times WithGradPoints as the ingest calls it on the built-in
// convnet: four batches of 256 points stored since a model whose rows hold 2,000, each
// extending the model the previous one returned (the first copies the refit's rows,
// which have no room; later ones append in place until the arrays' room runs out), per
// point, beside the same points' two-view ψ at the default sketch (h = 4, s = 1,024),
// which the ingest computes for every upsert anyway: rows/psi is the share rows add.
func BenchmarkWithGradPoints(b *testing.B) {
	bb, err := entk.NewBackbone("convnet:1x28x28-16-32-10", 1)
	if err != nil {
		b.Fatal(err)
	}
	const n, batch, batches = 2000, 256, 4
	in := testInput(bb, 64)
	pts := testGradPoints(bb, n+batch*batches)
	for i := n; i < len(pts); i++ {
		pts[i].ID = fmt.Sprintf("new%04d", i)
	}
	in.Grad, in.GradErr = NewGradRows(bb, pts[:n], 1<<30, nil)
	s, err := New(in, Settings{Backbone: bb, H: 2, S: 16, Seed: 5, DrawName: "bench/eval", Fits: 1})
	if err != nil || s.Grad == nil {
		b.Fatal(err, s.GradErr)
	}
	sk, err := entk.NewSketch(bb, 4, 1024, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	xs := make([]float64, 0, 2*batch*bb.InDim())
	for range 2 {
		for _, p := range pts[n : n+batch] {
			xs = append(xs, p.X...)
		}
	}
	feats := make([]float64, 2*batch*sk.Dim())
	var tr, tp time.Duration
	for b.Loop() {
		cur := s
		for k := range batches {
			t0 := time.Now()
			next := cur.WithGradPoints(pts[n+k*batch:n+(k+1)*batch], 1<<30)
			tr += time.Since(t0)
			if next == cur || next.Grad == nil {
				b.Fatal("no rows added")
			}
			cur = next
		}
		t1 := time.Now()
		sk.FeaturesBatchTo(feats, xs, 2*batch)
		tp += time.Since(t1) * batches
	}
	np := float64(b.N * batch * batches)
	b.ReportMetric(tr.Seconds()*1e6/np, "rows_us/point")
	b.ReportMetric(tp.Seconds()*1e6/np, "psi_us/point")
	b.ReportMetric(tr.Seconds()/tp.Seconds(), "rows/psi")
}

// TestWithGradPointsConcurrent: answers on every model of a chain of extensions run
// while later extensions append in place to the arrays those models share, and each
// answer is the one its model gave before (run under -race, this is the check that no
// extension writes where an earlier model reads).
func TestWithGradPointsConcurrent(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	pts := testGradPoints(b, 60)
	for i := 20; i < len(pts); i++ {
		pts[i].ID = fmt.Sprintf("n%02d", i)
	}
	in := testInput(b, 12)
	in.Grad, in.GradErr = NewGradRows(b, pts[:20], 1<<30, nil)
	s, err := New(in, Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", Fits: 1})
	if err != nil {
		t.Fatal(err)
	}
	queries := gradQueries(b, 3)
	models := []*Model{s}
	for k := 20; k < 60; k += 4 {
		models = append(models, models[len(models)-1].WithGradPoints(pts[k:k+4], 1<<30))
	}
	want := make([][]rankedAnswer, len(models))
	for i, m := range models {
		want[i] = answersOf(t, m, queries)
	}
	// A second chain from the middle model copies; a third from the last appends in
	// place past every model's rows, while the answers run.
	done := make(chan struct{})
	go func() {
		defer close(done)
		m, last := models[5], models[len(models)-1]
		for k := 0; k < 4; k++ {
			mid := testGradPoints(b, 4)
			for i := range mid {
				mid[i].ID = fmt.Sprintf("y%d-%d", k, i)
			}
			m = m.WithGradPoints(mid, 1<<30)
			extra := testGradPoints(b, 2)
			for i := range extra {
				extra[i].ID = fmt.Sprintf("x%d-%d", k, i)
			}
			last = last.WithGradPoints(extra, 1<<30)
		}
	}()
	for i, m := range models {
		sameRanked(t, fmt.Sprintf("model %d of the chain, beside later extensions", i), answersOf(t, m, queries), want[i])
	}
	<-done
}
