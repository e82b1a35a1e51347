package coreset

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestInsertCrossEqualsInsert runs the same random operation sequence on two pools, one
// inserting with Insert, the other in batches whose products come from one CrossTo at the
// start of each batch (so later inserts of a batch use products computed before the
// batch's landmark deletions or a sync, which InsertCross must notice and recompute); the
// two pools' states must stay identical bit for bit.
func TestInsertCrossEqualsInsert(t *testing.T) {
	for _, q := range []int{7, 33} {
		t.Run(fmt.Sprintf("q=%d", q), func(t *testing.T) {
			r := rand.New(rand.NewPCG(21, uint64(q)))
			g := newGen(uint64(q), q, q/2+1)
			cfg := Config{Dim: q, Budget: LandmarkBudget{M: 6}, TopUp: true, Seed: 3}
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := New(cfg)
			src := MapSource{}
			next, stale := 0, 0
			for batch := 0; batch < 40; batch++ {
				type op struct {
					del bool
					id  string
					f   []float64
				}
				var ops []op
				var fs []float64
				after := MapSource{} // the stored points once the batch is applied
				for id, f := range src {
					after[id] = f
				}
				for i := 0; i < 1+r.IntN(9); i++ {
					if len(after) > 3 && r.IntN(4) == 0 {
						// Half the deletions hit a landmark, when there is one.
						id := ""
						if lm := a.Landmarks(); len(lm) > 0 && r.IntN(2) == 0 {
							id = lm[r.IntN(len(lm))]
						} else {
							ids := slices.Sorted(maps.Keys(after))
							id = ids[r.IntN(len(ids))]
						}
						if _, ok := after[id]; ok {
							ops = append(ops, op{del: true, id: id})
							delete(after, id)
							continue
						}
					}
					id := fmt.Sprintf("p%04d", next)
					next++
					f := g.point()
					after[id] = f
					ops = append(ops, op{id: id, f: f})
					fs = append(fs, f...)
				}
				nf := len(fs) / q
				k := b.Greedy()
				cross := make([]float64, nf*k)
				tok := b.CrossTo(cross, fs, q, nf)
				if batch%5 == 4 {
					// A sync after the products were computed: usually the same number
					// of landmarks, other landmarks, so the token must be refused.
					if err := a.Sync(src); err != nil {
						t.Fatal(err)
					}
					if err := b.Sync(src); err != nil {
						t.Fatal(err)
					}
				}
				row := 0
				for _, o := range ops {
					if o.del {
						if err := a.Delete(o.id); err != nil {
							t.Fatal(err)
						}
						if err := b.Delete(o.id); err != nil {
							t.Fatal(err)
						}
						continue
					}
					if err := a.Insert(o.id, o.f); err != nil {
						t.Fatal(err)
					}
					if err := b.InsertCross(o.id, o.f, cross[row*k:(row+1)*k], tok); err != nil {
						t.Fatal(err)
					}
					row++
				}
				src = after
				if !reflect.DeepEqual(a.State(), b.State()) {
					t.Fatalf("batch %d: states differ", batch)
				}
				if a.Residual().Stale {
					stale++
				}
			}
			if len(a.Landmarks()) == 0 || stale == 0 {
				t.Fatalf("degenerate run: %d landmarks, %d stale batches", len(a.Landmarks()), stale)
			}
		})
	}
}
