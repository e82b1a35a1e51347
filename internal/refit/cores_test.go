package refit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/base/gemm"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/serving"
)

// refitBytes is what a refit publishes, serialized: the stored model (landmarks, Ã, Ã₀,
// b and the metadata with its id), the fit statistics, the selection's pivots and
// residuals per view (the pool it installs), and the certified answer to one query.
func refitBytes(t *testing.T, f *fixture) []byte {
	t.Helper()
	snap, sel := f.selected(t)
	ctx := context.Background()
	ft, err := f.fitter().Fit(ctx, snap, sel, 4)
	if err != nil {
		t.Fatal(err)
	}
	var w serving.Workspace
	ans, err := ft.Serving.Answer(&w, snap.Entries[1].X, 3, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	pool := [2][3]any{}
	for v := range 2 {
		r := sel.Res[v]
		pool[v] = [3]any{r.Pivots, r.Residual, r.ResidualTrace}
	}
	b, err := json.Marshal(struct {
		Model  any
		Stats  any
		Pool   any
		Answer any
	}{ft.Model, ft.Stats, pool, ans})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFitCores: the same points give the same refit, byte for byte, at GOMAXPROCS 1, 2
// and 3: the serialized model (hence its id), the fit statistics, the pool's selection
// and a certified answer. The fixture is large enough for every parallel loop to split
// (300 points, 2·24 landmarks, batches of 2·128 rows, two fits side by side, the
// reseed measurement on), with internal/base/gemm installed as cairnd installs it.
func TestFitCores(t *testing.T) {
	if testing.Short() {
		t.Skip("three refits")
	}
	blas64.Use(gemm.Implementation{})
	blas32.Use(gemm.Implementation{})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	f := reseedFixture(t, 8, 4, 2)
	var want []byte
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		got := refitBytes(t, f)
		if want == nil {
			want = got
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("GOMAXPROCS %d: the refit's bytes differ from GOMAXPROCS 1's", procs)
		}
	}
	var m struct{ Model struct{ Meta []byte } }
	if err := json.Unmarshal(want, &m); err != nil || !bytes.Contains(m.Model.Meta, []byte(`"reseed"`)) {
		t.Errorf("the model's metadata lacks the reseed measurement (err %v): %s", err, m.Model.Meta)
	}
}

// serialAuditRows is auditRows as it was before its keys were computed side by side:
// the key of both rows recomputed at every comparison, on one goroutine.
func serialAuditRows(seed uint64, role string, snap *ingest.Snapshot, candidates []int, n int) []int {
	var c []int
	for _, i := range candidates {
		if e := snap.Entries[i]; e.HasLabel && e.Label >= 0 {
			c = append(c, i)
		}
	}
	key := func(i int) uint64 { return rng.Seed(seed, "daemon/audit/"+role+"/"+snap.IDs[i]) }
	sort.Slice(c, func(a, b int) bool { return key(c[a]) < key(c[b]) })
	c = c[:min(n, len(c))]
	sort.Ints(c)
	return c
}

// TestAuditRowsCores: auditRows picks the serial reference's rows at GOMAXPROCS 1, 2 and
// 3, for 1,300 candidates (two full key chunks of 512 and a short one; every seventh
// point unlabelled, every eleventh labelled −1) and n below, at and above the count of
// labelled candidates.
func TestAuditRowsCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	snap := &ingest.Snapshot{}
	var candidates []int
	for i := range 1400 {
		e := &ingest.Entry{HasLabel: i%7 != 0, Label: int64(i % 10)}
		if i%11 == 0 {
			e.Label = -1
		}
		snap.IDs = append(snap.IDs, fmt.Sprintf("p%05d", i))
		snap.Entries = append(snap.Entries, e)
		if i%13 != 5 && len(candidates) < 1300 {
			candidates = append(candidates, i)
		}
	}
	labelled := 0
	for _, i := range candidates {
		if e := snap.Entries[i]; e.HasLabel && e.Label >= 0 {
			labelled++
		}
	}
	for _, n := range []int{1, 250, labelled, 1300} {
		want := serialAuditRows(7, "ref", snap, candidates, n)
		if len(want) != min(n, labelled) {
			t.Fatalf("n %d: the reference picked %d of %d labelled rows", n, len(want), labelled)
		}
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			if got := auditRows(7, "ref", snap, candidates, n); !slices.Equal(got, want) {
				t.Errorf("n %d GOMAXPROCS %d: auditRows picked %d rows, not the reference's %d (or not the same)",
					n, procs, len(got), len(want))
			}
		}
	}
}

// TestFitCancelJoinsReseed: the reseed measurement runs on a goroutine of its own beside
// the fits; a Fit whose context ends at any point (here after 0.5 to 64 ms, so in the
// blocks, the initializer and the fits with the measurement running) returns the
// context's error and has joined it (no goroutine runs it any more), and a Fit with a
// live context then still gives the model of a run that was never cancelled.
func TestFitCancelJoinsReseed(t *testing.T) {
	f := reseedFixture(t, 8, 8, 0)
	snap, err := f.in.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ingest.Select(context.Background(), f.feat, f.pcfg, snap.IDs, snap.Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.fitter().Fit(context.Background(), snap, sel, 1)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for _, after := range []time.Duration{500 * time.Microsecond, 2 * time.Millisecond, 8 * time.Millisecond,
		16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), after)
		got, err := f.fitter().Fit(ctx, snap, sel, 1)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			cancelled++
		case err != nil:
			t.Fatalf("Fit cut after %v: %v", after, err)
		case got.Meta.ID != want.Meta.ID:
			t.Errorf("Fit with %v to spare: model %s, want %s", after, got.Meta.ID, want.Meta.ID)
		}
		// Joined: nothing runs the measurement any more (its goroutine may still be
		// on its way out, past the channel that Fit waited on).
		buf := make([]byte, 1<<20)
		if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "measureReseed") {
			t.Errorf("the reseed measurement still runs after a Fit cut after %v:\n%s", after, st)
		}
	}
	if cancelled == 0 {
		t.Errorf("no Fit was cut short: the test exercised nothing")
	}
	got, err := f.fitter().Fit(context.Background(), snap, sel, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.ID != want.Meta.ID || got.Meta.Reseed == nil {
		t.Errorf("model %s (reseed %v) after cancelled Fits, %s before", got.Meta.ID, got.Meta.Reseed, want.Meta.ID)
	}
}

// TestFitReusesReseedRows: with the reseed measurement on, the serving form takes the
// served pool's exact rows that the measurement computed beside the fits (Input.Exact,
// of the same landmark inputs) instead of computing them again, and answers as a model
// whose rows were computed afresh does, bit for bit, for the first 20 stored points;
// with the measurement off it gets none. Reseed.RowsOf gives rows only for inputs equal
// bit for bit (0 and −0 differ).
func TestFitReusesReseedRows(t *testing.T) {
	for _, queries := range []int{8, 0} {
		f := reseedFixture(t, queries, 2, 0)
		snap, sel := f.selected(t)
		ctx := context.Background()
		fr := f.fitter()
		serve := fr.Serve
		var given bool
		var fresh *serving.Model
		fr.Serve = func(in serving.Input) (*serving.Model, error) {
			given = in.Exact != nil
			m, err := serve(in)
			if err != nil {
				return nil, err
			}
			in.Exact = nil
			fresh, err = serve(in)
			return m, err
		}
		ft, err := fr.Fit(ctx, snap, sel, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := queries > 0; given != want {
			t.Fatalf("reseed queries %d: the serving form was given rows: %v, want %v", queries, given, want)
		}
		if fresh.Exact == nil || given && fresh.Exact == ft.Serving.Exact {
			t.Fatalf("reseed queries %d: the fresh model has no rows of its own", queries)
		}
		var w serving.Workspace
		for i := range 20 {
			got, err := ft.Serving.Answer(&w, snap.Entries[i].X, 3, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Answer(&w, snap.Entries[i].X, 3, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if !bytes.Equal(gb, wb) {
				t.Errorf("reseed queries %d, point %d: the answer with the reused rows\n%s\ndiffers from the fresh rows'\n%s", queries, i, gb, wb)
			}
		}
	}
	r := &serving.ExactRows{}
	rs := ingest.Reseed{Rows: r, RowsX: []float64{1, 0, 2}}
	if rs.RowsOf([]float64{1, 0, 2}) != r {
		t.Error("Reseed.RowsOf: equal inputs gave no rows")
	}
	if rs.RowsOf([]float64{1, math.Copysign(0, -1), 2}) != nil || rs.RowsOf([]float64{1, 0}) != nil {
		t.Error("Reseed.RowsOf: other inputs (−0 for 0, or fewer) gave the rows")
	}
}

// TestFitReusesReseedFeatures: a Fitter's second refit, after a point that is no
// landmark left, reuses the first reseed measurement's features of every point it still
// holds (ingest.FreshRows) and, the pool being the same, the first model's exact rows;
// it fits what a new Fitter fits on the same points, bit for bit: the same model id,
// metadata (the reseed figures included) and stored model, and the same answers for
// 20 points.
func TestFitReusesReseedFeatures(t *testing.T) {
	f := reseedFixture(t, 8, 2, 0)
	snap, sel := f.selected(t)
	ctx := context.Background()
	fr := f.fitter()
	first, err := fr.Fit(ctx, snap, sel, 1)
	if err != nil {
		t.Fatal(err)
	}
	gone := 17 // a point of neither view's landmarks
	for slices.Contains(sel.Res[0].Pivots, gone) || slices.Contains(sel.Res[1].Pivots, gone) {
		gone++
	}
	after := *snap
	after.IDs = slices.Delete(slices.Clone(snap.IDs), gone, gone+1)
	after.Entries = slices.Delete(slices.Clone(snap.Entries), gone, gone+1)
	sel2, err := ingest.Select(ctx, f.feat, f.pcfg, after.IDs, after.Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Fit(ctx, &after, sel2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r := fr.reseed.Load(); r == nil || r.Fresh.Reused != len(after.IDs) {
		t.Fatalf("the second refit's measurement reused %+v, want the rows of all %d points", r, len(after.IDs))
	}
	// The pool is the same, so its exact rows are the first model's own.
	if got.Serving.Exact == nil || got.Serving.Exact != first.Serving.Exact {
		t.Errorf("the second model's exact rows %p are not the first's %p", got.Serving.Exact, first.Serving.Exact)
	}
	want, err := f.fitter().Fit(ctx, &after, sel2, 2)
	if err != nil {
		t.Fatal(err)
	}
	gm, _ := json.Marshal(got.Meta)
	wm, _ := json.Marshal(want.Meta)
	if got.Meta.Reseed == nil || !bytes.Equal(gm, wm) || !reflect.DeepEqual(got.Model, want.Model) {
		t.Fatalf("with the reused features the refit gave\n%s\nafresh\n%s", gm, wm)
	}
	if want.Serving.Exact == got.Serving.Exact {
		t.Fatal("the new Fitter's model has no exact rows of its own")
	}
	var w serving.Workspace
	for i := range 20 {
		ga, err := got.Serving.Answer(&w, after.Entries[i].X, 3, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		wa, err := want.Serving.Answer(&w, after.Entries[i].X, 3, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(ga)
		wb, _ := json.Marshal(wa)
		if !bytes.Equal(gb, wb) {
			t.Errorf("point %d: the answer with the reused rows\n%s\ndiffers from the fresh rows'\n%s", i, gb, wb)
		}
	}
}

// reseedFixture is a fixture of 300 points with the reseed measurement on (queries
// sample points; 0: off), a sketch, pool and fit large enough for it, and epochs epochs
// (fits fits, 0: the default).
func reseedFixture(t *testing.T, queries, epochs, fits int) *fixture {
	t.Helper()
	return newFixtureWith(t, 300, func(c *config.Config) {
		c.Sketch = config.Sketch{H: 2, S: 64}
		c.Pool.M = 24
		c.Fit.K, c.Fit.Batch, c.Fit.Epochs = 16, 128, epochs
		if fits > 0 {
			c.Fit.Fits = fits
		}
		c.Query.ReseedQueries = queries
	})
}
