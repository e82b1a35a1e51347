package coreset

import (
	"fmt"
	"sort"
	"testing"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// records returns every stored point's record by id, from State (the slow, obviously
// complete reference: it copies and sorts them all).
func records(p *Pool) map[string]PointState {
	out := map[string]PointState{}
	for _, ps := range p.State().Points {
		out[ps.ID] = ps
	}
	return out
}

// TestRecordChangesAreLocal checks the contract Generation documents, which lets a
// caller persist the per-point records incrementally: over a seeded random sequence of
// inserts, deletes of landmarks and of other points, syncs (needed or not) and adopts,
// every record that differs after an operation (added, removed or with other bits) is
// the operated point's, unless Generation advanced; and Generation advances exactly
// when the operation adopted a greedy result (Adopt, or a Sync that had work to do).
// PointState must agree with State for every id. Fixed and deff budgets, with and
// without top-up, and a rank-deficient generator (ties, zero residuals).
func TestRecordChangesAreLocal(t *testing.T) {
	for _, cfg := range []Config{
		{Dim: 6, Budget: LandmarkBudget{M: 4}, TopUp: true, Seed: 3},
		{Dim: 6, Budget: LandmarkBudget{M: 12}, TopUp: true, Seed: 4}, // budget beyond the rank
		{Dim: 6, Budget: LandmarkBudget{M: 3}, Seed: 6},
		{Dim: 6, Budget: LandmarkBudget{Lambda: 0.05}, Seed: 5},
	} {
		t.Run(cfg.Budget.String(), func(t *testing.T) {
			r := rng.New(uint64(cfg.Seed), "coreset/test/records")
			g := newGen(uint64(cfg.Seed)+20, cfg.Dim, 5)
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src := MapSource{}
			next := 0
			var syncs, adopts int
			for step := range 400 {
				before, gen := records(p), p.Generation()
				var op, id string
				adopted := false
				switch k := r.IntN(20); {
				case k < 11 || len(src) < 3: // insert a new point
					id, op = fmt.Sprintf("p%03d", next), "insert"
					next++
					src[id] = g.point()
					if err := p.Insert(id, src[id]); err != nil {
						t.Fatal(err)
					}
				case k < 13 && len(p.Landmarks()) > 0: // delete a landmark
					lm := p.Landmarks()
					id, op = lm[r.IntN(len(lm))], "delete landmark"
					if err := p.Delete(id); err != nil {
						t.Fatal(err)
					}
					delete(src, id)
				case k < 17: // delete any stored point
					ids := sortedIDs(src)
					id, op = ids[r.IntN(len(ids))], "delete"
					if err := p.Delete(id); err != nil {
						t.Fatal(err)
					}
					delete(src, id)
				case k < 19:
					op = "sync"
					adopted = p.NeedsSync()
					if err := p.Sync(src); err != nil {
						t.Fatal(err)
					}
					syncs++
				default:
					op, adopted = "adopt", true
					ids, feats, m, res := greedyOver(t, cfg, src)
					if err := p.Adopt(ids, feats, m, res); err != nil {
						t.Fatal(err)
					}
					adopts++
				}
				after := records(p)
				if got, want := p.Generation(), gen+map[bool]uint64{false: 0, true: 1}[adopted]; got != want {
					t.Fatalf("step %d %s: Generation %d → %d, want %d", step, op, gen, got, want)
				}
				if len(after) != len(src) {
					t.Fatalf("step %d %s: %d records for %d stored points", step, op, len(after), len(src))
				}
				for pid, rec := range after {
					if ps, ok := p.PointState(pid); !ok || ps != rec {
						t.Fatalf("step %d: PointState(%s) = %+v, %v; State has %+v", step, pid, ps, ok, rec)
					}
				}
				if adopted {
					continue
				}
				for _, pid := range unionIDs(before, after) {
					b, inB := before[pid]
					a, inA := after[pid]
					if inA == inB && b == a {
						continue
					}
					if pid != id {
						t.Fatalf("step %d %s %q: the record of %q changed (%+v, %v → %+v, %v) without a Generation change",
							step, op, id, pid, b, inB, a, inA)
					}
				}
			}
			if syncs == 0 || adopts == 0 {
				t.Fatalf("sequence ran %d syncs and %d adopts; the test needs both", syncs, adopts)
			}
		})
	}
}

func sortedIDs(src MapSource) []string {
	ids := make([]string, 0, len(src))
	for id := range src {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func unionIDs(a, b map[string]PointState) []string {
	var ids []string
	for id := range a {
		ids = append(ids, id)
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}
