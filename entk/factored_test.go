package entk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// factoredSpecs are dense backbones whose segments straddle the dot kernels' edges: a
// single Linear (no layer but the last), segments shorter than the four FMA lanes,
// widths that are not multiples of four, and Δ̃ segments longer than one
// vec.Dots32BatchChunk (512 columns: 65·8 = 520, 130·8 = 1040).
var factoredSpecs = []string{"mlp:9-4", "mlp:7-5-3", "mlp:5-13-6-3", "mlp:4-130-8", "resmlp:6-8x2-3", "resmlp:5-9x1-4", "resmlp:3-65x1-8"}

// TestFactoredAgainstJacobian: on random mlp and resmlp backbones, the factored kernel of
// two float64 rows (Factored.Kernel) equals the reference k*(x, y) = tr(J_x J_yᵀ)/d from
// full Jacobians (ExactKernel) to 1e-13 relative to sqrt(k*(x,x)·k*(y,y)) — two summation
// orders of the same float64 products, so a few hundred u₆₄ at most, the allowance ρ of
// RowError a hundredfold; RowTo's return equals ExactDiag likewise; Batch32To's rows are
// RowTo's rounded to float32 with RowTo's diagonals; and every entry of KernelRowTo
// against the float32 rows (m = 1 … 9 landmarks: on both sides of the four-row blocks)
// is within RowError of the reference, with Kernel's bits on the widened row.
// KernelRowsTo gives KernelRowTo's bits. It logs the largest float64 discrepancy and the
// largest observed error as a share of the bound, which must be at least 1/100: the
// bound is tight-ish on real rows too (0.28 at this seed, the diagonal entries, whose
// products share a sign; TestFactoredRowErrorTight attains it with aligned roundings).
func TestFactoredAgainstJacobian(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	worst, share := 0.0, 0.0
	for _, spec := range factoredSpecs {
		t.Run(spec, func(t *testing.T) {
			b, err := NewBackbone(spec, 11)
			if err != nil {
				t.Fatal(err)
			}
			f, ok := NewFactored(b)
			if !ok {
				t.Fatalf("NewFactored(%s): not factored", spec)
			}
			in, e := b.InDim(), f.Dim()
			const n = 9
			xs := make([]float64, n*in)
			for i := range xs {
				xs[i] = r.NormFloat64()
			}
			ws := b.NewWorkspace()
			q := f.NewQuery()
			phis := make([][]float64, n)
			kxx := make([]float64, n)
			for i := range n {
				x := xs[i*in : (i+1)*in]
				phis[i] = make([]float64, e)
				kxx[i] = q.RowTo(phis[i], x)
				if want := ExactDiag(b, x, ws); math.Abs(kxx[i]-want) > 1e-13*want {
					t.Fatalf("RowTo k*(x_%d, x_%d) = %v, ExactDiag %v", i, i, kxx[i], want)
				}
			}
			lf := make([]float32, n*e)
			diag := make([]float64, n)
			f.Batch32To(lf, diag, xs, n)
			for i := range n {
				if diag[i] != kxx[i] {
					t.Errorf("Batch32To diag[%d] = %v, RowTo %v", i, diag[i], kxx[i])
				}
				for k, v := range phis[i] {
					if lf[i*e+k] != float32(v) {
						t.Fatalf("Batch32To row %d[%d] = %v, want float32(%v)", i, k, lf[i*e+k], v)
					}
				}
			}
			ref := make([][]float64, n)
			for i := range n {
				ref[i] = make([]float64, n)
				for j := range n {
					ref[i][j] = ExactKernel(b, xs[i*in:(i+1)*in], xs[j*in:(j+1)*in], ws)
				}
			}
			wide := make([]float64, e)
			for m := 1; m <= n; m++ {
				row := make([]float64, m)
				for j := range n {
					q.KernelRowTo(row, lf[:m*e], phis[j])
					for l := range m {
						scale := math.Sqrt(diag[l] * diag[j])
						if m == n {
							rel := math.Abs(f.Kernel(phis[l], phis[j])-ref[l][j]) / scale
							worst = max(worst, rel)
							if rel > 1e-13 {
								t.Errorf("Kernel(φ_%d, φ_%d) = %v, ExactKernel %v: relative %g > 1e-13", l, j, f.Kernel(phis[l], phis[j]), ref[l][j], rel)
							}
						}
						bound := f.RowError(diag[l], diag[j])
						got := math.Abs(row[l] - ref[l][j])
						share = max(share, got/bound)
						if got > bound {
							t.Errorf("m=%d: row entry (%d,%d) = %v, ExactKernel %v: |diff| %g > bound %g", m, l, j, row[l], ref[l][j], got, bound)
						}
						for k := range wide {
							wide[k] = float64(lf[l*e+k])
						}
						if want := f.Kernel(wide, phis[j]); math.Float64bits(row[l]) != math.Float64bits(want) {
							t.Errorf("m=%d: row entry (%d,%d) = %v, Kernel of the widened row %v", m, l, j, row[l], want)
						}
					}
				}
				rows := make([]float64, n*m)
				q.KernelRowsTo(rows, lf[:m*e], phis, m)
				for j := range n {
					q.KernelRowTo(row, lf[:m*e], phis[j])
					for l := range m {
						if math.Float64bits(rows[j*m+l]) != math.Float64bits(row[l]) {
							t.Fatalf("m=%d: KernelRowsTo (%d,%d) = %v, KernelRowTo %v", m, j, l, rows[j*m+l], row[l])
						}
					}
				}
			}
		})
	}
	t.Logf("largest float64 discrepancy relative to sqrt(kxx·kyy): %.2g; largest float32 row error: %.2g of RowError", worst, share)
	if share < 0.01 {
		t.Errorf("largest float32 row error %.2g of RowError: the bound is more than 100× the error", share)
	}
}

// TestFactoredRowErrorTight: RowError is attained up to a small factor when the
// roundings align. Every landmark entry is 1 + 2⁻²⁴ − 2⁻⁴⁰, which float32 rounds down by
// almost u₃₂ relative, and the query's entries are equal, so every product errs by the
// same relative amount in the same direction: the error of an entry is then (2·n_a +
// 1)/(2·n_a + 2) of the bound's 2u₃₂ term, per layer (n_a the layer's input width), and
// must reach 0.7 of the whole bound here (the smallest n_a is 3). The reference is the
// float64 kernel of the unrounded rows, exact to ~1e-16 relative.
func TestFactoredRowErrorTight(t *testing.T) {
	for _, spec := range []string{"mlp:3-8-4", "resmlp:6-8x2-3"} {
		b, _ := NewBackbone(spec, 1)
		f, _ := NewFactored(b)
		e := f.Dim()
		v := 1 + 0x1p-24 - 0x1p-40
		phi := make([]float64, e)
		lf := make([]float32, e)
		for k := range phi {
			phi[k] = v
			lf[k] = float32(v)
		}
		if float64(lf[0]) != 1 {
			t.Fatalf("float32(%v) = %v, want 1", v, lf[0])
		}
		want := f.Kernel(phi, phi)
		row := make([]float64, 1)
		f.NewQuery().KernelRowTo(row, lf, phi)
		got, bound := math.Abs(row[0]-want), f.RowError(want, want)
		if got > bound || got < 0.7*bound {
			t.Errorf("%s: aligned roundings err %g, bound %g (ratio %.3f): want within [0.7, 1]", spec, got, bound, got/bound)
		}
		t.Logf("%s: aligned roundings reach %.3f of RowError", spec, got/bound)
	}
}

// TestFactoredDim: a factored row holds each Linear's input and d·out gradients but the
// last one's gradients (the identity), as the package comment counts them; the convnet
// has none.
func TestFactoredDim(t *testing.T) {
	for _, c := range []struct {
		spec string
		want int
	}{
		{"mlp:9-4", 9},
		{"mlp:7-5-3", 7 + 5*3 + 5},
		{"mlp:5-13-6-3", 5 + 13*3 + 13 + 6*3 + 6},
		{"resmlp:6-8x2-3", 6 + 8*3 + 4*(8+8*3) + 8},
		{"resmlp:108-128x3-8", 108 + 128*8 + 6*(128+128*8) + 128},
	} {
		b, err := NewBackbone(c.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := NewFactored(b)
		if !ok || f.Dim() != c.want {
			t.Errorf("NewFactored(%s): dim %v (ok %v), want %d", c.spec, f.Dim(), ok, c.want)
		}
	}
	b, _ := NewBackbone("convnet:1x8x8-3-4-5", 1)
	if f, ok := NewFactored(b); ok || f != nil {
		t.Errorf("NewFactored(convnet) = %v, %v; want nil, false", f, ok)
	}
}

// TestFactoredAllocates: a query's factored row and its kernel rows allocate nothing in
// steady state (docs/architecture.md, "Invariants").
func TestFactoredAllocates(t *testing.T) {
	for _, spec := range []string{"mlp:7-5-3", "resmlp:6-8x2-3"} {
		b, _ := NewBackbone(spec, 2)
		f, _ := NewFactored(b)
		q := f.NewQuery()
		x := make([]float64, b.InDim())
		for i := range x {
			x[i] = float64(i%5) / 5
		}
		phi := make([]float64, f.Dim())
		const m = 37
		lf := make([]float32, m*f.Dim())
		row := make([]float64, m)
		rows := make([]float64, 3*m)
		phis := [][]float64{phi, phi, phi}
		q.RowTo(phi, x)
		q.KernelRowTo(row, lf, phi)
		q.KernelRowsTo(rows, lf, phis, m)
		if a := testing.AllocsPerRun(20, func() {
			q.RowTo(phi, x)
			q.KernelRowTo(row, lf, phi)
			q.KernelRowsTo(rows, lf, phis, m)
		}); a != 0 {
			t.Errorf("%s: %v allocations per query", spec, a)
		}
	}
}

// ExampleFactored: the shipped Adult backbone's factored rows against its full exact
// rows, and an exact kernel entry from two factored rows.
func ExampleFactored() {
	b, _ := NewBackbone("resmlp:108-128x3-8", 1)
	f, ok := NewFactored(b)
	fmt.Println(ok, f.Dim(), ExactDim(b))

	x, y := make([]float64, b.InDim()), make([]float64, b.InDim())
	x[0], y[1] = 1, 1
	q := f.NewQuery()
	fx, fy := make([]float64, f.Dim()), make([]float64, f.Dim())
	q.RowTo(fx, x)
	q.RowTo(fy, y)
	ws := b.NewWorkspace()
	fmt.Println(math.Abs(f.Kernel(fx, fy)-ExactKernel(b, x, y, ws)) < 1e-12)
	// Output:
	// true 8172 904321
	// true
}

// BenchmarkFactored times, for resmlp:108-128x3-8 (the Adult backbone's shape, seeded
// weights) and M = 512 landmarks, a query's factored row (RowTo) and its kernel row
// (KernelRowTo), interleaved with their references in the same loop: x_diag is RowTo's
// time over ExactDiag's (one Forward and d Backward passes, the sketched path's diagonal),
// x_copy the kernel row's time over one copy of the landmark rows (memory bandwidth).
// batch16 reports the kernel rows of 16 queries (KernelRowsTo) per query.
func BenchmarkFactored(b *testing.B) {
	bb, _ := NewBackbone("resmlp:108-128x3-8", 1)
	f, _ := NewFactored(bb)
	const m = 512
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, m*bb.InDim())
	for i := range xs {
		xs[i] = r.Float64()
	}
	lf, diag := make([]float32, m*f.Dim()), make([]float64, m)
	f.Batch32To(lf, diag, xs, m)
	cp := make([]float32, len(lf))
	q, ws := f.NewQuery(), bb.NewWorkspace()
	phi, row := make([]float64, f.Dim()), make([]float64, m)
	x := xs[:bb.InDim()]
	b.Run("single", func(b *testing.B) {
		var tr, tk, td, tc time.Duration
		for b.Loop() {
			t0 := time.Now()
			q.RowTo(phi, x)
			t1 := time.Now()
			q.KernelRowTo(row, lf, phi)
			t2 := time.Now()
			ExactDiag(bb, x, ws)
			t3 := time.Now()
			copy(cp, lf)
			tr, tk, td, tc = tr+t1.Sub(t0), tk+t2.Sub(t1), td+t3.Sub(t2), tc+time.Since(t3)
		}
		b.ReportMetric(float64(tr.Microseconds())/float64(b.N), "µs/row")
		b.ReportMetric(float64(tk.Microseconds())/float64(b.N), "µs/kernel_row")
		b.ReportMetric(float64(tr)/float64(td), "x_diag")
		b.ReportMetric(float64(tk)/float64(tc), "x_copy")
	})
	b.Run("batch16", func(b *testing.B) {
		phis := make([][]float64, 16)
		for i := range phis {
			phis[i] = make([]float64, f.Dim())
			q.RowTo(phis[i], xs[i*bb.InDim():(i+1)*bb.InDim()])
		}
		rows := make([]float64, 16*m)
		for b.Loop() {
			q.KernelRowsTo(rows, lf, phis, m)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(16*b.N), "µs/kernel_row")
	})
	factoredSink = row[0]
}

var factoredSink float64
