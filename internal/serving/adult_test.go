package serving_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/serving"
)

// The Adult measurements run when $CAIRN_ADULT_DIR names a directory with UCI Adult
// (adult.data and adult.test, or their .gz forms): the copy cairn ships is
// CAIRN_ADULT_DIR=../../dataset/adult from this package's directory. Without it they
// skip (about 45 s together). The served model is the shipped Adult backbone (resmlp:108-128x3-8, weights
// shipped:adult) with M = 512 landmarks: per view (A, B) 256 augmented views of the
// first 2,000 training rows chosen by greedy pivoted Cholesky on the exact eNTK with
// normalized pivots (the daemon's pool.normalize rule on k* instead of its sketch), at
// the default query.exact_memory_bytes of 256 MiB, where full exact rows (1.85 GB) do
// not fit and factored rows (16.7 MB) do. Queries are the first 100 test rows, K = 10.
const (
	adultCandidates = 2000
	adultPerView    = 256
	adultQueries    = 100
	adultK          = 10
	adultBudget     = 256 << 20
)

type adultFixture struct {
	b       entk.Backbone
	in      serving.Input
	model   *serving.Model
	queries [][]float64
	byID    [][]float64   // the first adultQueries training rows, as queries by id ask them
	build   time.Duration // NewExactRows and the Gram (serving.New)
}

var (
	adultOnce sync.Once
	adult     *adultFixture
	adultErr  error
)

func adultModel(tb testing.TB) *adultFixture {
	dir := os.Getenv("CAIRN_ADULT_DIR")
	if dir == "" {
		tb.Skip("CAIRN_ADULT_DIR is not set")
	}
	adultOnce.Do(func() { adult, adultErr = newAdultFixture(dir) })
	if adultErr != nil {
		tb.Fatal(adultErr)
	}
	return adult
}

func newAdultFixture(dir string) (*adultFixture, error) {
	spec := "adult:" + dir
	train, err := dataset.Open(spec, "train", adultCandidates)
	if err != nil {
		return nil, err
	}
	test, err := dataset.Open(spec, "test", adultQueries)
	if err != nil {
		return nil, err
	}
	b, _, err := weights.Load("resmlp:108-128x3-8", "shipped:adult", "adult", false, 0)
	if err != nil {
		return nil, err
	}
	f, ok := entk.NewFactored(b)
	if !ok {
		return nil, fmt.Errorf("%s has no factored rows", b.Arch())
	}
	D := b.InDim()
	aug := train.Augmenter(7)
	var ids []string
	var views []byte
	var xs []float64
	for v := range 2 {
		cand := make([]float64, train.N*D)
		for i := range train.N {
			aug.ViewTo(cand[i*D:(i+1)*D], train.Row(i), train.IDs[i], v)
		}
		for _, i := range pivots(f, cand, train.N, adultPerView) {
			ids, views = append(ids, train.IDs[i]), append(views, "AB"[v])
			xs = append(xs, cand[i*D:(i+1)*D]...)
		}
	}
	m := len(ids)
	in := serving.Input{Version: 1, Points: train.N, LandmarkIDs: ids, Views: views, LandmarkX: xs,
		A: mat.NewDense(m, 4, nil), B: make([]float64, 4), Scale: 1, Omega: make([]float64, m)}
	for l := range m {
		in.Omega[l] = 1
		in.A.Set(l, l%4, 1)
	}
	in.ID = serving.ModelID(ids, views, in.A, in.B)
	t0 := time.Now()
	model, err := serving.New(in, serving.Settings{Backbone: b, H: 4, S: 1024, Seed: 1, DrawName: "adult/eval",
		ExactMemoryBytes: adultBudget, Fits: 1, StableJaccard: 0.8})
	if err != nil {
		return nil, err
	}
	fx := &adultFixture{b: b, in: in, model: model, build: time.Since(t0)}
	for i := range test.N {
		fx.queries = append(fx.queries, test.Row(i))
	}
	for i := range min(adultQueries, train.N) {
		fx.byID = append(fx.byID, train.Row(i))
	}
	return fx, nil
}

// pivots returns m of the n inputs xs chosen by greedy pivoted Cholesky on the exact
// eNTK (factored rows in float64), each step taking the largest residual diagonal
// relative to the point's own k*(x, x).
func pivots(f *entk.Factored, xs []float64, n, m int) []int {
	D, e := f.Backbone().InDim(), f.Dim()
	rows := make([]float32, n*e)
	diag := make([]float64, n)
	f.Batch32To(rows, diag, xs, n)
	res := slices.Clone(diag)
	L := make([]float64, n*m) // column k of the partial Cholesky factor at L[·*m+k]
	q := f.NewQuery()
	phi, col := make([]float64, e), make([]float64, n)
	var out []int
	for k := range m {
		best := -1
		for j := range n {
			if best < 0 || res[j]/diag[j] > res[best]/diag[best] {
				best = j
			}
		}
		out = append(out, best)
		q.RowTo(phi, xs[best*D:(best+1)*D])
		q.KernelRowTo(col, rows, phi)
		piv := math.Sqrt(res[best])
		for j := range n {
			v := col[j]
			for c := range k {
				v -= L[j*m+c] * L[best*m+c]
			}
			L[j*m+k] = v / piv
			res[j] = max(res[j]-L[j*m+k]*L[j*m+k], 0)
		}
		res[best] = 0
	}
	return out
}

// TestAdultFactored: the Adult model serves on the exact path with factored rows; every
// separated entk-similarity answer at K = 10 (certified, or unstable for want of a pool
// stability measurement: the arithmetic part of certified) has the top-10 of k* from
// full Jacobians (entk.JacobianTo, the slow reference), every reported score is within
// its radius of it, at least 90% of the answers separate, and AnswerBatch gives the same
// answers. It logs the memory, the share and the build time.
func TestAdultFactored(t *testing.T) {
	fx := adultModel(t)
	s, b := fx.model, fx.b
	if s.Exact == nil || !s.Exact.Factored() {
		t.Fatalf("exact rows %v: want factored rows at %d bytes", s.Exact != nil, adultBudget)
	}
	full := int64(len(s.LandmarkIDs)) * int64(entk.ExactDim(b)) * 4
	t.Logf("M = %d: factored rows %.1f MB (%d floats per landmark), full rows would take %.2f GB (%d floats); rows and Gram built in %v",
		len(s.LandmarkIDs), float64(s.Exact.Bytes())/1e6, s.Exact.Bytes()/4/int64(len(s.LandmarkIDs)), float64(full)/1e9, entk.ExactDim(b), fx.build)
	n := len(fx.queries)
	ans := make([]certify.Certificate, n)
	var w serving.Workspace
	for i, x := range fx.queries {
		c, err := s.AnswerRanked(&w, x, adultK, 0.05, certify.Similarity)
		if err != nil {
			t.Fatal(err)
		}
		ans[i] = c
	}
	ref := referenceRows(b, s, fx.queries)
	separated, incorrect, worst := 0, 0, 0.0
	for i, c := range ans {
		if c.VarianceModel != certify.VarianceExactKernel {
			t.Fatalf("query %d: variance model %q", i, c.VarianceModel)
		}
		for _, e := range append(slices.Clone(c.TopK), c.RunnerUp) {
			d := math.Abs(e.Score - ref[i][e.Index])
			if d > e.Radius {
				t.Errorf("query %d landmark %d: score %v, reference %v, radius %v", i, e.Index, e.Score, ref[i][e.Index], e.Radius)
			}
			worst = max(worst, d/e.Radius)
		}
		if c.Verdict != certify.Certified && c.Verdict != certify.Unstable {
			continue
		}
		separated++
		top := make([]int, adultK)
		certify.TopKTo(top, ref[i])
		got := make([]int, 0, adultK)
		for _, e := range c.TopK {
			got = append(got, e.Index)
		}
		slices.Sort(top)
		slices.Sort(got)
		if !slices.Equal(top, got) {
			incorrect++
			t.Errorf("query %d: separated top-%d %v, reference %v", i, adultK, got, top)
		}
	}
	share := float64(separated) / float64(n)
	t.Logf("%d of %d answers separate at K = %d (%.0f%%), %d incorrect against full Jacobians; largest |score − reference| %.2g of its radius",
		separated, n, adultK, 100*share, incorrect, worst)
	if share < 0.9 {
		t.Errorf("%.0f%% of the answers separate, want ≥ 90%%", 100*share)
	}
	ks, ds, rs := make([]int, n), make([]float64, n), make([]certify.Ranking, n)
	for i := range n {
		ks[i], ds[i], rs[i] = adultK, 0.05, certify.Similarity
	}
	out, errs := make([]certify.Certificate, n), make([]error, n)
	s.AnswerBatch(&w, out, errs, fx.queries, ks, ds, rs)
	for i := range n {
		got, _ := json.Marshal(out[i])
		want, _ := json.Marshal(ans[i])
		if errs[i] != nil || string(got) != string(want) {
			t.Fatalf("query %d: AnswerBatch %s (%v), AnswerRanked %s", i, got, errs[i], want)
		}
	}
}

// TestAdultDiskRows: the Adult model with its rows forced to disk (a memory budget of
// one byte, query.exact_disk_bytes 8 GiB) answers byte for byte as with its rows in
// memory, on 100 test rows and on the first 100 training points asked by id; it logs how
// many answers separate (certified, or unstable for want of a pool stability
// measurement: the arithmetic part of certified) from disk rows and on the sketched path
// that served the same rows before (no disk: variance model conservative, h = 4,
// s = 1024, δ = 0.05, up to 32 exact rows for crossing landmarks, the daemon's
// query.exact_rows_cap), and the build times.
func TestAdultDiskRows(t *testing.T) {
	fx := adultModel(t)
	st := serving.Settings{Backbone: fx.b, H: 4, S: 1024, Seed: 1, DrawName: "adult/eval", ExactMemoryBytes: 1,
		ExactDisk: serving.NewDisk(filepath.Join(t.TempDir(), "exactrows"), 8<<30), Fits: 1, ExactRowsCap: 32, StableJaccard: 0.8}
	t0 := time.Now()
	dsk, err := serving.New(fx.in, st)
	if err != nil {
		t.Fatal(err)
	}
	if dsk.Exact == nil || dsk.Exact.Where() != serving.RowsOnDisk {
		t.Fatalf("no disk rows (%v)", dsk.ExactRowsErr)
	}
	tDisk := time.Since(t0)
	st.ExactDisk = nil
	sk, err := serving.New(fx.in, st)
	if err != nil || sk.Exact != nil {
		t.Fatalf("sketched model: %v", err)
	}
	t.Logf("rows: memory %v, disk %v (%.1f MB file)", fx.build, tDisk, float64(dsk.Exact.Bytes())/1e6)
	var wm, wd, ws serving.Workspace
	for _, set := range []struct {
		name string
		xs   [][]float64
	}{{"test rows", fx.queries}, {"training points by id", fx.byID}} {
		var sepM, sepD, sepS, certS int
		for i, x := range set.xs {
			cm, err1 := fx.model.AnswerRanked(&wm, x, adultK, 0.05, certify.Similarity)
			cd, err2 := dsk.AnswerRanked(&wd, x, adultK, 0.05, certify.Similarity)
			cs, err3 := sk.AnswerRanked(&ws, x, adultK, 0.05, certify.Similarity)
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			jm, _ := json.Marshal(cm)
			jd, _ := json.Marshal(cd)
			if string(jm) != string(jd) {
				t.Fatalf("%s %d: memory %s, disk %s", set.name, i, jm, jd)
			}
			sep := func(c certify.Certificate) int {
				if c.Verdict == certify.Certified || c.Verdict == certify.Unstable {
					return 1
				}
				return 0
			}
			sepM, sepD, sepS = sepM+sep(cm), sepD+sep(cd), sepS+sep(cs)
			if cs.Verdict == certify.Certified {
				certS++
			}
		}
		t.Logf("%s (%d): separate at K = %d: memory rows %d, disk rows %d, sketched (no disk) %d (%d certified)",
			set.name, len(set.xs), adultK, sepM, sepD, sepS, certS)
	}
}

// referenceRows returns k*(x_ℓ, x_t) for every landmark and query from full Jacobians:
// J_t once per query, then J_ℓ's rows one backward pass at a time, on all cores.
func referenceRows(b entk.Backbone, s *serving.Model, qs [][]float64) [][]float64 {
	d, p, D := b.OutDim(), b.NumParams(), b.InDim()
	m := len(s.LandmarkIDs)
	ref := make([][]float64, len(qs))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := b.NewWorkspace()
			jt, jl := make([]float64, d*p), make([]float64, d*p)
			for i := w; i < len(qs); i += workers {
				entk.JacobianTo(jt, b, qs[i], ws)
				row := make([]float64, m)
				for l := range m {
					entk.JacobianTo(jl, b, s.LandmarkX[l*D:(l+1)*D], ws)
					var sum float64
					for k, v := range jt {
						sum += v * jl[k]
					}
					row[l] = sum / float64(d)
				}
				ref[i] = row
			}
		}()
	}
	wg.Wait()
	return ref
}

// BenchmarkAdultAnswer times the Adult model's answers (entk similarity, K = 10):
// single answers (AnswerRanked, reporting the p50 and p99 over the queries) and batches
// of 16 (AnswerBatch, per query). x_copy is the single answer's mean time over one copy
// of the landmark rows, measured in the same loop (the kernel row streams them once).
func BenchmarkAdultAnswer(b *testing.B) {
	fx := adultModel(b)
	s := fx.model
	n := len(fx.queries)
	b.Run("single", func(b *testing.B) {
		var w serving.Workspace
		lat := make([]time.Duration, 0, b.N*n)
		buf := make([]byte, s.Exact.Bytes())
		src := make([]byte, len(buf))
		var tc time.Duration
		for b.Loop() {
			for _, x := range fx.queries {
				t0 := time.Now()
				if _, err := s.AnswerRanked(&w, x, adultK, 0.05, certify.Similarity); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			t0 := time.Now()
			copy(buf, src)
			tc += time.Since(t0)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		var sum time.Duration
		for _, l := range lat {
			sum += l
		}
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99_ms")
		b.ReportMetric(float64(sum)/float64(len(lat))/(float64(tc)/float64(b.N)), "x_copy")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("batch16", func(b *testing.B) {
		var w serving.Workspace
		const bs = 16
		ks, ds, rs := make([]int, bs), make([]float64, bs), make([]certify.Ranking, bs)
		for i := range bs {
			ks[i], ds[i], rs[i] = adultK, 0.05, certify.Similarity
		}
		out, errs := make([]certify.Certificate, bs), make([]error, bs)
		for b.Loop() {
			for i0 := 0; i0+bs <= n; i0 += bs {
				s.AnswerBatch(&w, out, errs, fx.queries[i0:i0+bs], ks, ds, rs)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N*(n/bs)*bs), "ms/query")
		b.ReportMetric(0, "ns/op")
	})
}
