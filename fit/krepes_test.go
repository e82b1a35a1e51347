package fit

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// assembleGN builds Σ_b J_bᵀ H_b J_b + λI explicitly: J_b from its definition
// (∂z[i,c]/∂Ã[l,c'] = K[i,l]δ_cc', ∂z[i,c]/∂b[c'] = δ_cc') and H_b column by column by
// central differences (h = 1e-5) of the analytic gradient in z: a different step and
// assembly than the operator's, so the comparison tests the matrix-free structure.
func assembleGN(o *gn, lam float64) *mat.Dense {
	m, k := o.md.m, o.md.k
	np := m*k + k
	out := mat.NewDense(np, np, nil)
	for bi, rows := range o.batches {
		o.md.gather(o.p, rows)
		r := 2 * len(rows)
		nz := r * k
		j := mat.NewDense(nz, np, nil)
		for i := range r {
			for c := range k {
				for l := range m {
					j.Set(i*k+c, l*k+c, o.md.kcat.At(i, l))
				}
				j.Set(i*k+c, m*k+c, 1)
			}
		}
		h := mat.NewDense(nz, nz, nil)
		z := mat.DenseCopyOf(o.zs[bi])
		gp, gm := mat.NewDense(r, k, nil), mat.NewDense(r, k, nil)
		grad := func(dst *mat.Dense) {
			LossGradTo(dst.Slice(0, r/2, 0, k).(*mat.Dense), dst.Slice(r/2, r, 0, k).(*mat.Dense), o.opt.Loss, o.opt.Params,
				z.Slice(0, r/2, 0, k).(*mat.Dense), z.Slice(r/2, r, 0, k).(*mat.Dense))
		}
		const step = 1e-5
		for q := range nz {
			x := z.At(q/k, q%k)
			z.Set(q/k, q%k, x+step)
			grad(gp)
			z.Set(q/k, q%k, x-step)
			grad(gm)
			z.Set(q/k, q%k, x)
			for p := range nz {
				h.Set(p, q, (gp.At(p/k, p%k)-gm.At(p/k, p%k))/(2*step))
			}
		}
		var t1, t2 mat.Dense
		t1.Mul(h, j)
		t2.Mul(j.T(), &t1)
		out.Add(out, &t2)
	}
	for i := range np {
		out.Set(i, i, out.At(i, i)+lam)
	}
	return out
}

func newGN(p *Problem, a0 *mat.Dense, opt KrepesOptions) *gn {
	n, m := p.KA.Dims()
	_, k := a0.Dims()
	md := newModel(m, k)
	md.a.Copy(a0)
	for j := range md.b {
		md.b[j] = opt.BiasInit
	}
	o := &gn{p: p, md: md, opt: opt}
	order := batchOrder(nil, p.IDs, hashIDs(p.IDs), opt.Seed, 0)
	b := batchBounds(n, opt.BatchSize)
	for i := 0; i+1 < len(b); i++ {
		rows := order[b[i]:b[i+1]]
		o.batches = append(o.batches, rows)
		md.gather(p, rows)
		md.lossGrad(opt.Loss, opt.Params)
		o.zs = append(o.zs, mat.DenseCopyOf(md.z))
	}
	return o
}

// TestGNOperatorMatchesAssembled compares the matrix-free (JᵀHJ + λI)v with the explicit
// matrix on random v for every loss. The operator is exact up to rounding; the assembled
// Hessian is a central difference with h = 1e-5, error ≈ h²|∂⁴L| + ε/h ≈ 1e-9 relative,
// so 1e-7 relative to ||Av||_∞ bounds their difference.
func TestGNOperatorMatchesAssembled(t *testing.T) {
	p := synthetic(9, 8, 4, 2, 2)
	rnd := newRand(10)
	a0 := randDense(rnd, 4, 3, 0.7, 0)
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		opt := DefaultKrepesOptions(loss)
		opt.BatchSize = 4
		opt.Damping = 0.01
		o := newGN(p, a0, opt)
		full := assembleGN(o, opt.Damping)
		np := 4*3 + 3
		v := make([]float64, np)
		for i := range v {
			v[i] = rnd.NormFloat64()
		}
		got := make([]float64, np)
		o.apply(got, v)
		want := mat.NewVecDense(np, nil)
		want.MulVec(full, mat.NewVecDense(np, v))
		scale := floats.Norm(want.RawVector().Data, math.Inf(1))
		for i := range got {
			if math.Abs(got[i]-want.AtVec(i)) > 1e-7*scale {
				t.Errorf("%v: (Av)[%d] = %.12g, want %.12g", loss, i, got[i], want.AtVec(i))
			}
		}
	}
}

// TestGNSimclrCache: under SimCLR the operator keeps each batch's softmax and (W + Wᵀ)U
// from its first application (gn.at) and reads them in every later one. The reads must
// give the bits of the forward pass: the same v applied before and after the cache is
// filled, and by an operator that never caches (fresh for each product), agree exactly.
func TestGNSimclrCache(t *testing.T) {
	p := synthetic(9, 8, 4, 2, 2)
	rnd := newRand(11)
	a0 := randDense(rnd, 4, 3, 0.7, 0)
	opt := DefaultKrepesOptions(SimCLR)
	opt.BatchSize = 4
	np := 4*3 + 3
	vs := make([][]float64, 3)
	for i := range vs {
		vs[i] = make([]float64, np)
		for j := range vs[i] {
			vs[i][j] = rnd.NormFloat64()
		}
	}
	cached := newGN(p, a0, opt)
	for round := range 2 {
		for i, v := range vs {
			got := make([]float64, np)
			cached.apply(got, v)
			want := make([]float64, np)
			newGN(p, a0, opt).apply(want, v) // fills a cache it never reads
			for j := range got {
				if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
					t.Fatalf("round %d, v%d: (Av)[%d] = %v cached, %v recomputed", round, i, j, got[j], want[j])
				}
			}
		}
		if len(cached.at) != len(cached.batches) || cached.at[0].p == nil || cached.at[0].gu == nil {
			t.Fatalf("round %d: the operator kept %d of %d batches' points", round, len(cached.at), len(cached.batches))
		}
	}
	// The other losses keep nothing.
	vo := DefaultKrepesOptions(VICReg)
	vo.BatchSize = 4
	o := newGN(p, a0, vo)
	o.apply(make([]float64, np), vs[0])
	if o.at != nil {
		t.Errorf("VICReg: the operator kept SimCLR points")
	}
}

// TestKrepesSolvesDampedSystem: with a damping that makes the system SPD and well
// conditioned, CG must reach its tolerance and its Δ must equal the dense solution of
// (JᵀHJ + λI)Δ = −g (to 1e-6 relative: CG stops at residual 1e-10, condition ≤ 1e3,
// the assembled Hessian carries ≈ 1e-9 relative error).
func TestKrepesSolvesDampedSystem(t *testing.T) {
	p := synthetic(11, 8, 4, 6, 6)
	rnd := newRand(12)
	a0 := randDense(rnd, 4, 3, 0.7, 0)
	for _, loss := range []Loss{BarlowTwins, SimCLR, VICReg} {
		opt := DefaultKrepesOptions(loss)
		opt.BatchSize, opt.Tol, opt.KNN = 4, 1e-10, 3
		o := newGN(p, a0, opt)
		full := assembleGN(o, 0)
		// λ above the most negative eigenvalue's magnitude and ≈ the largest: SPD, κ ≲ 1e3.
		var es mat.EigenSym
		sym := mat.NewSymDense(15, nil)
		for i := range 15 {
			for j := i; j < 15; j++ {
				sym.SetSym(i, j, (full.At(i, j)+full.At(j, i))/2)
			}
		}
		es.Factorize(sym, false)
		ev := es.Values(nil)
		opt.Damping = math.Abs(ev[0]) + math.Abs(ev[len(ev)-1]) + 1e-3
		res, err := Krepes(p, a0, opt)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.CGResiduals); n == 0 || res.CGResiduals[n-1] > opt.Tol {
			t.Fatalf("%v: CG did not converge: %v", loss, res.CGResiduals)
		}
		if len(res.IterateEval) != len(res.CGResiduals) {
			t.Errorf("%v: %d iterate evaluations for %d iterations", loss, len(res.IterateEval), len(res.CGResiduals))
		}
		// Without the per-iterate evaluations: the same solution, residuals and final
		// evaluation, bit for bit.
		skip := opt
		skip.SkipIterateEval = true
		res2, err := Krepes(p, a0, skip)
		if err != nil {
			t.Fatal(err)
		}
		if len(res2.IterateEval) != 0 || !mat.Equal(res2.A, res.A) || !slices.Equal(res2.B, res.B) ||
			!slices.Equal(res2.CGResiduals, res.CGResiduals) || res2.TestEval != res.TestEval || len(res2.IterateSeconds) != len(res.IterateSeconds) {
			t.Errorf("%v: SkipIterateEval changed the solve (%d evaluations kept)", loss, len(res2.IterateEval))
		}
		g := make([]float64, 15)
		md := newModel(4, 3)
		md.a.Copy(a0)
		for j := range md.b {
			md.b[j] = opt.BiasInit
		}
		for _, rows := range o.batches {
			md.gather(p, rows)
			md.lossGrad(loss, opt.Params)
			floats.Add(g, md.grad)
		}
		for i := range 15 {
			full.Set(i, i, full.At(i, i)+opt.Damping)
			g[i] = -g[i]
		}
		var want mat.VecDense
		if err := want.SolveVec(full, mat.NewVecDense(15, g)); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, 15)
		for l := range 4 {
			for c := range 3 {
				got[l*3+c] = res.A.At(l, c) - a0.At(l, c)
			}
		}
		for c := range 3 {
			got[12+c] = res.B[c] - res.B0[c]
		}
		wn := floats.Norm(want.RawVector().Data, 2)
		for i := range got {
			if math.Abs(got[i]-want.AtVec(i)) > 1e-6*wn {
				t.Errorf("%v: Δ[%d] = %.10g, want %.10g", loss, i, got[i], want.AtVec(i))
			}
		}
	}
}
