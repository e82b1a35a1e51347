package coreset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestAdoptEqualsSync: Plan + Greedy + Adopt on a copy of the features, as the daemon
// runs a sync without holding the pool, leaves the pool in exactly the state Sync
// leaves a twin in (top-up and deff budgets); adopting a sync over another point set is
// refused and changes nothing.
func TestAdoptEqualsSync(t *testing.T) {
	for _, cfg := range []Config{
		{Dim: 6, Budget: LandmarkBudget{M: 4}, TopUp: true, Seed: 3},
		{Dim: 6, Budget: LandmarkBudget{M: 40}, TopUp: true, Seed: 4}, // budget beyond the rank: top-up
		{Dim: 6, Budget: LandmarkBudget{Lambda: 0.05}, Seed: 5},
	} {
		g := newGen(12, 6, 6)
		a, _ := New(cfg)
		b, _ := New(cfg)
		src := MapSource{}
		for i := range 30 {
			id := fmt.Sprintf("p%02d", (i*11)%37)
			src[id] = g.point()
			if err1, err2 := a.Insert(id, src[id]), b.Insert(id, src[id]); err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
		}
		if lm := a.Landmarks(); len(lm) > 0 { // the deff pool has none before its first sync
			_, _ = a.Delete(lm[0]), b.Delete(lm[0])
			delete(src, lm[0])
		}
		if err := a.Sync(src); err != nil {
			t.Fatal(err)
		}
		ids, feats, m, res := greedyOver(t, cfg, src)
		before := b.State()
		other := append([]string(nil), ids...)
		other[len(other)-1] = "zz-not-stored"
		if err := b.Adopt(other, feats, m, res); !errors.Is(err, ErrUnknownID) {
			t.Fatalf("%+v: adopting over a different point set: %v, want ErrUnknownID", cfg.Budget, err)
		}
		if !reflect.DeepEqual(b.State(), before) {
			t.Fatalf("%+v: a refused Adopt changed the pool", cfg.Budget)
		}
		if err := b.Adopt(ids, feats, m, res); err != nil {
			t.Fatal(err)
		}
		if got, want := b.State(), a.State(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: adopted state differs from Sync's:\ngot  %+v\nwant %+v", cfg.Budget, got, want)
		}
	}
}

// TestGreedyContextCancel: a cancelled context stops the selection with ctx.Err(); an
// open one gives Greedy's result.
func TestGreedyContextCancel(t *testing.T) {
	g := newGen(13, 6, 6)
	n, q := 40, 6
	feats := make([]float64, 0, n*q)
	for range n {
		feats = append(feats, g.point()...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GreedyContext(ctx, feats, n, q, 5, GreedyOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
	got, err := GreedyContext(context.Background(), feats, n, q, 5, GreedyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Greedy(feats, n, q, 5, GreedyOptions{})
	if !reflect.DeepEqual(got, want) {
		t.Fatal("GreedyContext differs from Greedy")
	}
}

// greedyOver runs what a background sync runs outside the pool: cfg.Plan and Greedy over
// the points of src in id order. It returns the ids, their stacked features, the budget
// and the result, ready for Pool.Adopt.
func greedyOver(t *testing.T, cfg Config, src MapSource) ([]string, []float64, int, *GreedyResult) {
	t.Helper()
	ids := sortedIDs(src)
	q := cfg.Dim
	feats := make([]float64, len(ids)*q)
	for i, id := range ids {
		copy(feats[i*q:], src[id])
	}
	m, opt, err := cfg.Plan(ids, feats)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Greedy(feats, len(ids), q, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	return ids, feats, m, res
}
