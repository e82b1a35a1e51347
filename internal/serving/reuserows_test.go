package serving

import (
	"math"
	"slices"
	"testing"
)

// TestExactRowsReusing: NewExactRowsReusing takes the row of every landmark whose input
// equals a known input bit for bit (in any order, from either of two known sets), and
// computes the others, among them an input that differs from a known one only by −0 for
// 0; known rows are poisoned first, so a row that was taken shows it, and every other
// entry equals NewExactRows's, full and factored. Known rows of another representation
// are not taken; known rows of the same inputs are returned as they are.
func TestExactRowsReusing(t *testing.T) {
	s, b := testModel(t, 40, 1<<30)
	d := b.InDim()
	xs := slices.Clone(s.LandmarkX[:12*d])
	xs[5*d] = 0
	// Known set one: landmarks 0-3 reversed, a −0 copy of 5 and one unrelated input;
	// set two: landmarks 7 and 9.
	var x1 []float64
	for _, l := range []int{3, 2, 1, 0} {
		x1 = append(x1, xs[l*d:(l+1)*d]...)
	}
	neg := slices.Clone(xs[5*d : 6*d])
	neg[0] = math.Copysign(0, -1)
	x1 = append(x1, neg...)
	x1 = append(x1, s.LandmarkX[30*d:31*d]...)
	x2 := append(slices.Clone(xs[7*d:8*d]), xs[9*d:10*d]...)
	taken := map[int]float32{} // landmark: the poisoned first entry it must show
	for _, c := range []struct {
		name   string
		budget int64 // a full row is 233 float32s, a factored row 46: 4 KiB holds 12 factored rows only
		small  int64 // the budget that gives two rows the same representation (1 KiB: factored)
	}{{"full", 1 << 30, 1 << 30}, {"factored", 4 << 10, 1 << 10}} {
		want := NewExactRows(b, xs, 12, c.budget)
		k1, k2 := NewExactRows(b, x1, 6, c.budget), NewExactRows(b, x2, 2, c.small)
		if want == nil || k1 == nil || k2 == nil || want.Factored() != (c.name == "factored") || k1.Factored() != want.Factored() ||
			k2.Factored() != want.Factored() {
			t.Fatalf("%s: rows %v %v %v", c.name, want, k1, k2)
		}
		for j, l := range []int{3, 2, 1, 0} {
			k1.lf[j*k1.dim] = float32(1000 + l)
			taken[l] = float32(1000 + l)
		}
		k1.lf[4*k1.dim], k1.lf[5*k1.dim] = -1, -1 // the −0 copy, the unrelated input
		for j, l := range []int{7, 9} {
			k2.lf[j*k2.dim] = float32(1000 + l)
			taken[l] = float32(1000 + l)
		}
		got := NewExactRowsReusing(b, xs, 12, c.budget, Known{Rows: k1, X: x1}, Known{Rows: k2, X: x2})
		if got.dim != want.dim || got.Factored() != want.Factored() {
			t.Fatalf("%s: %d-float rows (factored %v), want %d (%v)", c.name, got.dim, got.Factored(), want.dim, want.Factored())
		}
		for l := range 12 {
			row, ref := got.lf[l*got.dim:(l+1)*got.dim], slices.Clone(want.lf[l*want.dim:(l+1)*want.dim])
			if v, ok := taken[l]; ok {
				ref[0] = v
			}
			for j := range row {
				if math.Float32bits(row[j]) != math.Float32bits(ref[j]) {
					t.Fatalf("%s landmark %d entry %d: %v, want %v (taken: %v)", c.name, l, j, row[j], ref[j], taken[l] != 0)
				}
			}
			if math.Float64bits(got.diag[l]) != math.Float64bits(want.diag[l]) {
				t.Errorf("%s landmark %d: diagonal %v, want %v", c.name, l, got.diag[l], want.diag[l])
			}
		}
		if r := NewExactRowsReusing(b, xs, 12, c.budget, Known{Rows: want, X: xs}); r != want {
			t.Errorf("%s: rows of the same inputs were not returned as they are", c.name)
		}
	}
	full := NewExactRows(b, xs, 12, 1<<30)
	full.lf[0] = 1000
	if r := NewExactRowsReusing(b, xs, 12, 4<<10, Known{Rows: full, X: xs}); r == full || !r.Factored() || r.lf[0] == 1000 {
		t.Error("factored rows took full rows")
	}
}
