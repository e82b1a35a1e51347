package serving

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/serving/gradref"
)

// gradRef is the gradient ranking's slow reference (gradref.Score).
var gradRef = gradref.Score

// TestGradientRanking: every score of the gradient ranking is its full-Jacobian
// definition (gradRef) within its radius, the radius is at float32 rounding level
// (relative 1e-6), entries carry the gradients' cosine, a certified top-K is the
// reference top-K, and the answer names the ranking with stability 1. Unlabelled points
// and labels outside [0, d) get no row; a deleted point leaves the ranking at once.
func TestGradientRanking(t *testing.T) {
	for _, c := range []struct {
		arch     string
		factored bool
	}{{"mlp:6-8-4", true}, {"resmlp:6-8x2-4", true}, {gradConvnet, false}} {
		t.Run(c.arch, func(t *testing.T) {
			b, err := entk.NewBackbone(c.arch, 3)
			if err != nil {
				t.Fatal(err)
			}
			// The sketched path: the gradient ranking needs no exact rows.
			s, err := New(testInput(b, 12), Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", Fits: 1})
			if err != nil {
				t.Fatal(err)
			}
			if s.Grad == nil || s.Grad.Factored() != c.factored {
				t.Fatalf("gradient rows %v (%v), factored want %v", s.Grad != nil, s.GradErr, c.factored)
			}
			checkGradientRanking(t, s, b)
		})
	}
}

// gradConvnet is a small convnet: its gradient rows are full rows.
const gradConvnet = "convnet:1x6x6-2-3-4"

// checkGradientRanking is TestGradientRanking on the model s of backbone b.
func checkGradientRanking(t *testing.T, s *Model, b entk.Backbone) {
	t.Helper()
	pts := testGradPoints(b, 20)
	g := s.Grad
	if len(g.IDs) != len(pts) || g.Classes() != 3 {
		t.Fatalf("gradient rows %d over %d classes, want 20 rows over 3 classes", len(g.IDs), g.Classes())
	}
	r := rand.New(rand.NewPCG(9, 9))
	for q := range 6 {
		x := make([]float64, b.InDim())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		ref := make([]float64, len(pts))
		for i, pt := range pts {
			ref[i], _, _ = gradRef(b, x, pt.X, pt.Label, 3)
		}
		c, err := s.AnswerRanked(new(Workspace), x, 4, 0.05, certify.Gradient)
		if err != nil {
			t.Fatal(err)
		}
		ce, err := s.AnswerRanked(new(Workspace), x, 4, 0.05, certify.Similarity)
		if err != nil {
			t.Fatal(err)
		}
		if c.ResidualFraction == nil || ce.ResidualFraction == nil || *c.ResidualFraction != *ce.ResidualFraction {
			t.Errorf("query %d: residual fraction %v, the landmark answer's %v", q, c.ResidualFraction, ce.ResidualFraction)
		}
		if c.Ranking != certify.Gradient || !c.Stable || c.Stability == nil || *c.Stability != 1 || c.VarianceModel != certify.VarianceExactKernel {
			t.Fatalf("query %d: ranking %q stable %v stability %v variance %q", q, c.Ranking, c.Stable, c.Stability, c.VarianceModel)
		}
		for _, e := range append(slices.Clone(c.TopK), c.RunnerUp) {
			want := ref[e.Index]
			if math.Abs(e.Score-want) > e.Radius || e.Radius > 1e-6*math.Abs(want)+1e-12 || e.Radius == 0 {
				t.Errorf("query %d point %d: score %v, reference %v, radius %v", q, e.Index, e.Score, want, e.Radius)
			}
			_, vn, rn := gradRef(b, x, pts[e.Index].X, pts[e.Index].Label, 3)
			if math.Abs(e.Cosine-want/(vn*rn)) > 1e-6 {
				t.Errorf("query %d point %d: cosine %v, reference %v", q, e.Index, e.Cosine, want/(vn*rn))
			}
		}
		order := make([]int, len(ref))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(i, j int) bool { return ref[order[i]] > ref[order[j]] })
		if c.Verdict == certify.Certified {
			got := c.TopKSet()
			want := slices.Clone(order[:4])
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("query %d: certified top-4 %v, reference %v", q, got, want)
			}
		}
		checkGradientCosine(t, s, b, x, pts, q)
		// Deleting the top-1 takes it out of the next answer, and of nothing else.
		top, _ := s.EntryID(c.Ranking, c.TopK[0])
		m := s.WithMask([]string{top})
		if m == s {
			t.Fatalf("masking gradient point %s returned the same model", top)
		}
		c2, err := m.AnswerRanked(new(Workspace), x, 4, 0.05, certify.Gradient)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range c2.TopK {
			if id, view := m.EntryID(c2.Ranking, e); id == top || view != "" || id != m.Grad.IDs[order[i+1]] {
				t.Errorf("query %d after deleting %s: entry %d is %s (view %q), want %s", q, top, i, id, view, m.Grad.IDs[order[i+1]])
			}
		}
	}
	if s.WithMask([]string{"nobody"}) != s {
		t.Error("masking an unknown id made a new model")
	}
	extra := append(slices.Clone(pts), GradPoint{ID: "unlabelled", X: pts[0].X, Label: -1},
		GradPoint{ID: "big", X: pts[0].X, Label: b.OutDim()})
	if g2, err := NewGradRows(b, extra, 1<<30, nil); err != nil || len(g2.IDs) != len(pts) {
		t.Errorf("points without a usable label: rows %v (%v), want %d", g2, err, len(pts))
	}
}

// checkGradientCosine: the gradient cosine ranking's every score is the reference cosine
// of the two full-Jacobian gradients within its radius, the radius is at float32 rounding
// level (1e-6), the score is the entry's cosine, and a certified top-K is the reference's.
func checkGradientCosine(t *testing.T, s *Model, b entk.Backbone, x []float64, pts []GradPoint, q int) {
	t.Helper()
	ref := make([]float64, len(pts))
	for i, pt := range pts {
		sc, vn, rn := gradRef(b, x, pt.X, pt.Label, 3)
		ref[i] = sc / (vn * rn)
	}
	c, err := s.AnswerRanked(new(Workspace), x, 4, 0.05, certify.GradientCosine)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ranking != certify.GradientCosine || !c.Stable || c.Stability == nil || *c.Stability != 1 {
		t.Fatalf("query %d: ranking %q stable %v stability %v", q, c.Ranking, c.Stable, c.Stability)
	}
	for _, e := range append(slices.Clone(c.TopK), c.RunnerUp) {
		want := ref[e.Index]
		if math.Abs(e.Score-want) > e.Radius || e.Radius > 1e-6 || e.Radius == 0 || e.Score != e.Cosine {
			t.Errorf("query %d point %d: cosine score %v (entry cosine %v), reference %v, radius %v", q, e.Index, e.Score, e.Cosine, want, e.Radius)
		}
	}
	if c.Verdict != certify.Certified { // radii ≤ 1e-6, far below the gaps between 20 random points' cosines
		t.Errorf("query %d: cosine verdict %q", q, c.Verdict)
	} else {
		got, want := c.TopKSet(), certify.TopKIndices(ref, 4)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("query %d: certified cosine top-4 %v, reference %v", q, got, want)
		}
	}
}

// TestGradRowsReuse: rows built with the last ones reused (same id, version and label)
// are bit for bit those built from scratch, with a changed point recomputed; budgets and
// missing rows give ErrRanking, which an answer that names the ranking returns.
func TestGradRowsReuse(t *testing.T) {
	s, b := testModel(t, 12, 1<<30)
	pts := testGradPoints(b, 20)
	pts[3].X = slices.Clone(pts[5].X)
	pts[3].Version = 2
	pts[7].Label = 2 // a label changed without a new version is recomputed too
	fresh, err := NewGradRows(b, pts, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	reused, err := NewGradRows(b, pts, 1<<30, s.Grad)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(flatRows(fresh), flatRows(reused)) || !slices.Equal(fresh.norms, reused.norms) || !slices.Equal(fresh.IDs, reused.IDs) {
		t.Fatal("reused gradient rows differ from fresh ones")
	}
	p := GradRowDim(b)
	if slices.Equal(flatRows(fresh)[3*p:4*p], flatRows(s.Grad)[3*p:4*p]) || slices.Equal(flatRows(fresh)[7*p:8*p], flatRows(s.Grad)[7*p:8*p]) {
		t.Error("a changed point kept its old row")
	}
	for _, c := range []struct {
		name   string
		pts    []GradPoint
		budget int64
	}{{"over budget", pts, GradBytes(len(pts), p) - 1}, {"off", pts, 0}, {"one point", pts[:1], 1 << 30}} {
		if g, err := NewGradRows(b, c.pts, c.budget, nil); g != nil || !errors.Is(err, ErrRanking) {
			t.Errorf("%s: rows %v, error %v, want ErrRanking", c.name, g, err)
		}
	}
	in := testInput(b, 12)
	in.Grad, in.GradErr = nil, nil
	bare, err := New(in, Settings{Backbone: b, H: 2, S: 16, ExactMemoryBytes: 1 << 30, Fits: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.AnswerRanked(new(Workspace), pts[0].X, 3, 0.05, certify.Gradient); !errors.Is(err, ErrRanking) {
		t.Errorf("gradient answer without rows: %v, want ErrRanking", err)
	}
}

// BenchmarkGradientAnswer times one answer (K = 10) under the gradient ranking over n
// stored points against the entk ranking's on exact rows of M = 512 landmarks, on the
// same model, and under the gradient cosine ranking, alternating the three: the built-in
// convnet (n = 2,000: the rows are 2,000·P float32s) and the Adult architecture. It
// reports the mean time of each, gradient/entk and cosine/gradient.
func BenchmarkGradientAnswer(b *testing.B) {
	for _, c := range []struct {
		name, arch string
		n          int
	}{{"convnet", "convnet:1x28x28-16-32-10", 2000}, {"resmlp", "resmlp:108-128x3-8", 2000}} {
		bb, err := entk.NewBackbone(c.arch, 1)
		if err != nil {
			b.Fatal(err)
		}
		in := testInput(bb, 512)
		in.Grad, in.GradErr = NewGradRows(bb, testGradPoints(bb, c.n), 1<<30, nil)
		s, err := New(in, Settings{Backbone: bb, H: 2, S: 16, Seed: 5, DrawName: "bench/eval", ExactMemoryBytes: 1 << 30, Fits: 1})
		if err != nil || s.Grad == nil {
			b.Fatal(err, s.GradErr)
		}
		qs := testGradPoints(bb, 16)
		xs, ks, ds, rs := make([][]float64, len(qs)), make([]int, len(qs)), make([]float64, len(qs)), make([]certify.Ranking, len(qs))
		for i, q := range qs {
			xs[i], ks[i], ds[i], rs[i] = q.X, 10, 0.05, certify.GradientCosine
		}
		out, errs := make([]certify.Certificate, len(qs)), make([]error, len(qs))
		b.Run(c.name, func(b *testing.B) {
			var w Workspace
			var tg, te, tc, tb time.Duration
			for b.Loop() {
				for _, q := range qs {
					t0 := time.Now()
					if _, err := s.AnswerRanked(&w, q.X, 10, 0.05, certify.Gradient); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, err := s.AnswerRanked(&w, q.X, 10, 0.05, certify.Similarity); err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					if _, err := s.AnswerRanked(&w, q.X, 10, 0.05, certify.GradientCosine); err != nil {
						b.Fatal(err)
					}
					tg, te, tc = tg+t1.Sub(t0), te+t2.Sub(t1), tc+time.Since(t2)
				}
				// The same 16 cosine queries as one batch (the rows read once).
				t0 := time.Now()
				s.AnswerBatch(&w, out, errs, xs, ks, ds, rs)
				if tb += time.Since(t0); errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
			nq := float64(b.N * len(qs))
			b.ReportMetric(tb.Seconds()*1e3/nq, "cosine_batch16_ms")
			b.ReportMetric(tc.Seconds()/tb.Seconds(), "cosine_single/batch16")
			b.ReportMetric(tg.Seconds()*1e3/nq, "gradient_ms")
			b.ReportMetric(te.Seconds()*1e3/nq, "entk_ms")
			b.ReportMetric(tc.Seconds()*1e3/nq, "cosine_ms")
			b.ReportMetric(tg.Seconds()/te.Seconds(), "gradient/entk")
			b.ReportMetric(tc.Seconds()/tg.Seconds(), "cosine/gradient")
			b.ReportMetric(float64(s.Grad.Bytes())/1e6, "rows_MB")
		})
	}
}

// TestGradMask: WithGradMask masks gradient rows only (a relabeled point's landmark terms
// stay), WithMask both, and WithRemovals each removal as its kind says.
func TestGradMask(t *testing.T) {
	s, _ := testModel(t, 12, 1<<30)
	rows := func(m *Model) []string {
		var ids []string
		for _, i := range m.gactive {
			ids = append(ids, m.Grad.IDs[i])
		}
		return ids
	}
	g := s.WithGradMask([]string{"g03", "p01"})
	if g.MaskedCount() != 0 || slices.Contains(rows(g), "g03") || len(rows(g)) != len(rows(s))-1 {
		t.Errorf("WithGradMask: %d landmarks masked, rows %v", g.MaskedCount(), rows(g))
	}
	if s.WithGradMask([]string{"p01"}) != s {
		t.Error("WithGradMask of a landmark id without a gradient row made a new model")
	}
	r := s.WithRemovals([]Removal{{ID: "p01"}, {ID: "g05", GradOnly: true}})
	if r.MaskedCount() != 2 || slices.Contains(rows(r), "g05") || len(rows(r)) != len(rows(s))-1 {
		t.Errorf("WithRemovals: %d landmark terms masked (want p01's 2), rows %v", r.MaskedCount(), rows(r))
	}
	if _, ok := r.LandmarkInput("p01"); ok {
		t.Error("WithRemovals left p01's landmark terms")
	}
}

// flatRows is g's rows, row after row.
func flatRows(g *GradRows) []float32 {
	var out []float32
	for i := range g.IDs {
		out = append(out, g.row(i)...)
	}
	return out
}

// TestAnswerBatchGradient: AnswerBatch answers the gradient rankings' queries of a
// batch (mixed with landmark rankings) with AnswerRanked's certificates, bit for bit,
// on full rows over several row blocks (300 points: a partial last block) and on
// factored rows, with masked rows, exact landmark rows and the sketched path.
func TestAnswerBatchGradient(t *testing.T) {
	for _, c := range []struct {
		arch  string
		exact int64
	}{{gradConvnet, 1 << 30}, {gradConvnet, 0}, {"mlp:6-8-4", 1 << 30}} {
		b, err := entk.NewBackbone(c.arch, 3)
		if err != nil {
			t.Fatal(err)
		}
		in := testInput(b, 9)
		in.Grad, in.GradErr = NewGradRows(b, testGradPoints(b, 300), 1<<30, nil)
		s, err := New(in, Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", ExactMemoryBytes: c.exact, Fits: 1})
		if err != nil || s.Grad == nil {
			t.Fatal(err, s.GradErr)
		}
		s = s.WithMask([]string{s.Grad.IDs[7], s.Grad.IDs[260]})
		r := rand.New(rand.NewPCG(6, 6))
		var xs [][]float64
		var ks []int
		var ds []float64
		var rs []certify.Ranking
		for i := range 9 {
			x := make([]float64, b.InDim())
			for j := range x {
				x[j] = r.NormFloat64()
			}
			xs, ks, ds = append(xs, x), append(ks, 1+i%5), append(ds, 0.05)
			rs = append(rs, []certify.Ranking{certify.GradientCosine, certify.Gradient, certify.Similarity}[i%3])
		}
		out, errs := make([]certify.Certificate, len(xs)), make([]error, len(xs))
		var wb, w1 Workspace
		s.AnswerBatch(&wb, out, errs, xs, ks, ds, rs)
		for i, x := range xs {
			want, werr := s.AnswerRanked(&w1, x, ks[i], ds[i], rs[i])
			if errs[i] != nil || werr != nil {
				t.Fatalf("%s exact %d query %d: batch error %v, single %v", c.arch, c.exact, i, errs[i], werr)
			}
			gotJ, _ := json.Marshal(out[i])
			wantJ, _ := json.Marshal(want)
			if string(gotJ) != string(wantJ) || want.ResidualFraction == nil {
				t.Fatalf("%s exact %d query %d (%s):\nbatch  %s\nsingle %s", c.arch, c.exact, i, rs[i], gotJ, wantJ)
			}
		}
	}
}
