package entk

import (
	"fmt"
	"math"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// Factored exact rows. In a dense backbone (mlp, resmlp: Linear layers and ReLUs, no
// other parameters) every parameter belongs to a Linear z = W a + b, and the Jacobian
// row of output i restricted to that layer is δ_i ⊗ a (weight) and δ_i (bias), where a
// is the layer's input and δ_i = ∂f_i/∂z its backpropagated output gradient. Hence,
// per layer, Σ_i <J_xᵀe_i, J_yᵀe_i> = (<a_x, a_y> + 1) · Σ_i <δ_{x,i}, δ_{y,i}>, and with
// Δ̃ = d^{-1/2}[δ_1 … δ_d] (out×d) summed over the layers
//
//	k*(x, y) = tr(J_x J_yᵀ)/d = Σ_layers (<a_x, a_y> + 1) · <Δ̃_x, Δ̃_y>_F.
//
// The last Linear has δ_i = e_i, so <Δ̃_x, Δ̃_y> = 1 there and its term is <a_x, a_y> + 1
// (as in the exact feature map of exactrows.go). A point's factored row is therefore,
// for each Linear but the last in parameter order, a (in floats) then Δ̃ (out·d floats,
// row-major: Δ̃[o·d+i] = d^{-1/2} ∂f_i/∂z_o), then the last Linear's input: Σ (in + d·out)
// + A floats instead of ExactDim's ≈ d·P (8,172 against 904,321 for resmlp:108-128x3-8).
// It takes one Forward and one backward sweep that carries the d gradients together as a
// width×d matrix (Wᵀ times it, masked by the ReLU), about d·P multiply–adds and no
// parameter gradient. A kernel entry costs two dot products per layer.
//
// In a row against float32 landmark rows, each dot product is a vec.Dot32 (float32
// landmark factor widened exactly, float64 query factor, four FMA lanes), and the entry is
//
//	s = Dot(a_L, a'_L) + 1;  for each layer l in order: s = fma(Dot(a_l, a'_l) + 1, Dot(Δ̃_l, Δ̃'_l), s)
//
// (the same sums whoever computes them: RowTo, RowBatchTo, and Kernel on float64 rows).
//
// # Rounding bound (RowError)
//
// Let u = 2^-53, v = 2^-24 (float32 storage), γ_n = n·u/(1 − n·u), N the longest segment
// (a or Δ̃ of one layer) and L the number of Linear layers. A stored landmark entry is
// f(1+η), |η| ≤ v; a dot product of n terms rounds each term at most n times (γ_n, Higham
// Thm. 3.1; the FMA lanes round less) and "+1" once more, so with S_a = Σ|a_x||a_y| and
// S_Δ = Σ|Δ̃_x||Δ̃_y| (the query's factors are float64, never rounded)
//
//	|Â_l − A_l| ≤ α(S_a + 1),  |D̂_l − D_l| ≤ α S_Δ,   α = (1+v)(1+γ_{N+3}) − 1,
//
// so |Â D̂ − A D| ≤ (2α + α²)(S_a + 1)S_Δ, and the L − 1 fused multiply–adds add γ_L of
// Σ|Â D̂|. By Cauchy–Schwarz S_a + 1 ≤ sqrt((|a_x|²+1)(|a_y|²+1)) and S_Δ ≤ |Δ̃_x||Δ̃_y|,
// and once more over the layers Σ_l (S_a+1)S_Δ ≤ sqrt(k*(x,x)·k*(y,y)). So
//
//	|computed − k*(x,y)| ≤ (2α + α² + γ_L(1+α)² + ρ) · sqrt(k*(x,x)·k*(y,y)),
//
// ≈ 1.19e-7·sqrt(kll·ktt), twice ExactRowError's float32 term (both factors of a product
// carry a stored rounding), with ρ = 1e-11 for the float64 computation of the factors
// themselves, exactly as in ExactRowError (measured below 1e-13, TestFactoredAgainstJacobian).

// Factored is the layout of the factored exact rows of a dense backbone: which Linear
// layers there are, where each layer's a and Δ̃ sit in a row (Dim floats), and the
// rounding bound of a row entry. It is immutable and safe for concurrent use; a
// FactoredQuery (NewQuery, one per goroutine) computes rows and kernel rows with it.
type Factored struct {
	b      Backbone
	mlp    *MLP
	res    *ResMLP
	d      int
	layers []factoredLayer // every Linear but the last, in parameter order
	lastA  int             // the last Linear's input width A; its a sits at dim − A
	dim    int
	segs   []segment // the dot products of an entry: a_L, then a_l, Δ̃_l per layer
	errC   float64   // RowError's coefficient of sqrt(kll·ktt)
}

// factoredLayer is one Linear's place in a factored row: a at aOff (in floats), Δ̃ at
// gOff (out·d floats).
type factoredLayer struct {
	in, out, aOff, gOff int
}

// segment is one dot product of a kernel entry: n floats from off.
type segment struct{ off, n int }

// NewFactored returns the factored row layout of b and true when b is made of Linear
// layers and ReLUs only (mlp, resmlp), or nil and false (the convnet, whose rows are
// ExactTo's).
func NewFactored(b Backbone) (*Factored, bool) {
	f := &Factored{b: b, d: b.OutDim()}
	var lins []*linear
	switch n := b.(type) {
	case *MLP:
		f.mlp = n
		for i := range n.layers {
			lins = append(lins, &n.layers[i])
		}
	case *ResMLP:
		f.res = n
		lins = append(lins, &n.inp)
		for k := range n.fc1 {
			lins = append(lins, &n.fc1[k], &n.fc2[k])
		}
		lins = append(lins, &n.out)
	default:
		return nil, false
	}
	d, o, p := f.d, 0, 0
	for _, l := range lins[:len(lins)-1] {
		f.layers = append(f.layers, factoredLayer{in: l.in, out: l.out, aOff: o, gOff: o + l.in})
		o += l.in + l.out*d
	}
	for _, l := range lins {
		p += l.out*l.in + l.out
	}
	if p != b.NumParams() {
		panic(fmt.Sprintf("entk: NewFactored(%s): Linear layers hold %d parameters of %d", b.Arch(), p, b.NumParams()))
	}
	f.lastA = lins[len(lins)-1].in
	f.dim = o + f.lastA
	f.segs = append(f.segs, segment{o, f.lastA})
	nmax := f.lastA
	for _, l := range f.layers {
		f.segs = append(f.segs, segment{l.aOff, l.in}, segment{l.gOff, l.out * d})
		nmax = max(nmax, l.in, l.out*d)
	}
	const u32, u64, rho = 0x1p-24, 0x1p-53, 1e-11
	gamma := func(n int) float64 { return float64(n) * u64 / (1 - float64(n)*u64) }
	g := gamma(nmax + 3)
	alpha := u32 + g + u32*g
	f.errC = 2*alpha + alpha*alpha + gamma(len(lins))*(1+alpha)*(1+alpha) + rho
	return f, true
}

// Dim is the length of a factored row: Σ over the Linear layers but the last of
// in + d·out, plus the last one's input width.
func (f *Factored) Dim() int { return f.dim }

// Backbone is the backbone whose rows f lays out.
func (f *Factored) Backbone() Backbone { return f.b }

// RowError bounds |computed − k*(x_ℓ, x_t)| for an entry of RowTo (float32 landmark row,
// float64 query row), given the exact diagonals kll and ktt (the package comment above
// derives it): (2α + α² + γ_L(1+α)² + ρ)·sqrt(kll·ktt).
func (f *Factored) RowError(kll, ktt float64) float64 {
	return f.errC * math.Sqrt(kll*ktt)
}

// Kernel returns the kernel entry of two float64 factored rows, summed as the package
// comment states (k*(x, x) when x = y): the reference RowTo's entries equal bit for bit
// when one row is a float32 row widened.
func (f *Factored) Kernel(x, y []float64) float64 {
	if len(x) != f.dim || len(y) != f.dim {
		panic(fmt.Sprintf("entk: Factored.Kernel lengths %d, %d; want %d", len(x), len(y), f.dim))
	}
	s0 := f.segs[0]
	s := vec.Dot(x[s0.off:s0.off+s0.n], y[s0.off:s0.off+s0.n]) + 1
	for i := 1; i < len(f.segs); i += 2 {
		sa, sg := f.segs[i], f.segs[i+1]
		a := vec.Dot(x[sa.off:sa.off+sa.n], y[sa.off:sa.off+sa.n]) + 1
		s = math.FMA(a, vec.Dot(x[sg.off:sg.off+sg.n], y[sg.off:sg.off+sg.n]), s)
	}
	return s
}

// FactoredQuery is one goroutine's scratch for factored rows: a backbone workspace for
// the Forward, the backward sweep's gradient matrices and the kernel rows' per-segment
// dot products. It is not safe for concurrent use; in steady state its methods allocate
// nothing.
type FactoredQuery struct {
	f     *Factored
	ws    *Workspace
	out   []float64 // f(x)
	eye   []float64 // d^{-1/2}·I, the last Linear's Δ̃ (d×d)
	gh    []float64 // resmlp: the residual stream's gradients (width×d)
	act   []int     // the rows of a masked backward step that a ReLU lets through
	segv  []float64 // RowTo's dot products, segment-major (len(segs)×m)
	fs    [][]float64
	lanes []float64
	cot   []float64 // GradTo's cotangent
}

// NewQuery allocates a FactoredQuery for f.
func (f *Factored) NewQuery() *FactoredQuery {
	d := f.d
	q := &FactoredQuery{f: f, ws: f.b.NewWorkspace(), out: make([]float64, d), eye: make([]float64, d*d)}
	c := 1 / math.Sqrt(float64(d))
	for i := range d {
		q.eye[i*d+i] = c
	}
	w := 0
	for _, l := range f.layers {
		w = max(w, l.in, l.out)
	}
	w = max(w, f.lastA)
	q.act = make([]int, 0, w)
	if f.res != nil {
		q.gh = make([]float64, f.res.arch.Width*d)
	}
	return q
}

// RowTo writes the factored row of x into dst (len Dim) and returns k*(x, x) =
// Kernel(dst, dst). x is not modified; it panics on wrong lengths.
func (q *FactoredQuery) RowTo(dst, x []float64) (kxx float64) {
	f := q.f
	if len(dst) != f.dim || len(x) != f.b.InDim() {
		panic(fmt.Sprintf("entk: FactoredQuery.RowTo lengths dst %d, x %d; want %d, %d", len(dst), len(x), f.dim, f.b.InDim()))
	}
	f.b.Forward(q.out, x, q.ws)
	acts, d := q.ws.acts, f.d
	delta := func(l int) []float64 {
		ly := f.layers[l]
		return dst[ly.gOff : ly.gOff+ly.out*d]
	}
	if m := f.mlp; m != nil {
		// Layer l's input is acts[l]; its Δ̃ is W_{l+1}ᵀ Δ̃_{l+1} masked by the ReLU
		// after it, whose output is acts[l+1].
		L := len(m.layers)
		for l := range f.layers {
			copy(dst[f.layers[l].aOff:], acts[l])
		}
		copy(dst[f.dim-f.lastA:], acts[L-1])
		g := q.eye
		for l := L - 2; l >= 0; l-- {
			q.backTo(delta(l), &m.layers[l+1], g, acts[l+1])
			g = delta(l)
		}
		return f.Kernel(dst, dst)
	}
	// ResMLP (Backward's sweep with d columns): layers inp, fc1_k (1+2k), fc2_k (2+2k);
	// acts = [x, h_0, u_0, h_1, u_1, …, h_B].
	r := f.res
	B := r.arch.Blocks
	copy(dst[f.layers[0].aOff:], acts[0])
	for k := range B {
		copy(dst[f.layers[1+2*k].aOff:], acts[1+2*k])
		copy(dst[f.layers[2+2*k].aOff:], acts[2+2*k])
	}
	copy(dst[f.dim-f.lastA:], acts[1+2*B])
	gh := q.gh
	q.backTo(gh, &r.out, q.eye, nil)
	for k := B - 1; k >= 0; k-- {
		copy(delta(2+2*k), gh) // fc2_k's output is added to the stream h_{k+1}
		q.backTo(delta(1+2*k), &r.fc2[k], gh, acts[2+2*k])
		backAddTo(gh, &r.fc1[k], delta(1+2*k), d, nil)
	}
	g0 := delta(0)
	for i, h := range acts[1] {
		row := g0[i*d : (i+1)*d]
		if h > 0 {
			copy(row, gh[i*d:(i+1)*d])
		} else {
			clear(row)
		}
	}
	return f.Kernel(dst, dst)
}

// backTo writes dst = (Wᵀ g) masked by the ReLU output mask (nil: no mask), for g the
// out×d gradient of l's output and dst the in×d gradient of its input:
//
//	for i { for j { dst[i*d+j] = mask[i] > 0 ? Σ_o W[o*in+i]·g[o*d+j] : 0 } }
//
// summing over o in order by fused multiply–adds.
func (q *FactoredQuery) backTo(dst []float64, l *linear, g, mask []float64) {
	clear(dst)
	q.act = q.act[:0]
	for i := range l.in {
		if mask == nil || mask[i] > 0 {
			q.act = append(q.act, i)
		}
	}
	backAddTo(dst, l, g, q.f.d, q.act)
}

// backAddTo adds Wᵀ g to dst on the input rows act (nil: all of them), as backTo.
// Output rows whose gradient is all zero (a ReLU that is off) add nothing and are
// skipped.
func backAddTo(dst []float64, l *linear, g []float64, d int, act []int) {
	for o := range l.out {
		gr := g[o*d : (o+1)*d]
		zero := true
		for _, v := range gr {
			if v != 0 {
				zero = false
				break
			}
		}
		if zero {
			continue
		}
		w := l.w[o*l.in : (o+1)*l.in]
		if act == nil {
			for i, wi := range w {
				axpyFMA(dst[i*d:(i+1)*d], wi, gr)
			}
			continue
		}
		for _, i := range act {
			axpyFMA(dst[i*d:(i+1)*d], w[i], gr)
		}
	}
}

// axpyFMA is for j { y[j] = fma(a, x[j], y[j]) }.
func axpyFMA(y []float64, a float64, x []float64) {
	x = x[:len(y)]
	for j, v := range x {
		y[j] = math.FMA(a, v, y[j])
	}
}

// KernelRowTo writes the exact kernel row dst[ℓ] of the query row phi (float64, len
// Dim) against m = len(dst) float32 landmark rows lf (row-major, len ≥ m·Dim), each
// entry within RowError of k*(x_ℓ, x_t). Every dot product is one vec.Dots32To over the
// landmarks, so an entry has the bits of Kernel(φ_ℓ widened, phi). lf and phi are not
// modified; it panics on wrong lengths.
func (q *FactoredQuery) KernelRowTo(dst []float64, lf []float32, phi []float64) {
	f, m := q.f, len(dst)
	if len(phi) != f.dim || len(lf) < m*f.dim {
		panic(fmt.Sprintf("entk: FactoredQuery.KernelRowTo lengths phi %d, lf %d for %d rows of %d", len(phi), len(lf), m, f.dim))
	}
	if m == 0 {
		return
	}
	ns := len(f.segs)
	q.segv = growFloats(q.segv, ns*m)
	for s, sg := range f.segs {
		vec.Dots32To(q.segv[s*m:(s+1)*m], phi[sg.off:sg.off+sg.n], lf[sg.off:], f.dim, sg.n)
	}
	f.combineTo(dst, q.segv, m)
}

// KernelRowsTo writes the kernel rows of the queries phis against the m landmark rows
// lf into dst (len ≥ len(phis)·m, query-major), each bit for bit KernelRowTo's; the
// landmark rows are read once per segment for the whole batch (vec.Dots32BatchTo).
func (q *FactoredQuery) KernelRowsTo(dst []float64, lf []float32, phis [][]float64, m int) {
	f, nq := q.f, len(phis)
	if len(dst) < nq*m || len(lf) < m*f.dim {
		panic(fmt.Sprintf("entk: FactoredQuery.KernelRowsTo lengths dst %d, lf %d for %d×%d rows of %d", len(dst), len(lf), nq, m, f.dim))
	}
	for i, phi := range phis {
		if len(phi) != f.dim {
			panic(fmt.Sprintf("entk: FactoredQuery.KernelRowsTo: row %d has %d entries, want %d", i, len(phi), f.dim))
		}
	}
	if nq == 0 || m == 0 {
		return
	}
	ns := len(f.segs)
	q.segv = growFloats(q.segv, ns*nq*m)
	if cap(q.fs) < nq {
		q.fs = make([][]float64, nq)
	}
	fs := q.fs[:nq]
	for s, sg := range f.segs {
		for i, phi := range phis {
			fs[i] = phi[sg.off : sg.off+sg.n]
		}
		q.lanes = vec.Dots32BatchTo(q.segv[s*nq*m:(s+1)*nq*m], fs, lf[sg.off:], f.dim, sg.n, m, q.lanes)
	}
	clear(fs)
	// Segment s of query i sits at segv[s·nq·m + i·m : … + m]; combine per query.
	for i := range nq {
		f.combineStridedTo(dst[i*m:(i+1)*m], q.segv[i*m:], nq*m, m)
	}
}

// combineTo turns the segment-major dot products segv (len(segs)×m) into kernel entries.
func (f *Factored) combineTo(dst, segv []float64, m int) {
	f.combineStridedTo(dst, segv, m, m)
}

// combineStridedTo is combineTo with segment s's m products at segv[s·ld:].
func (f *Factored) combineStridedTo(dst, segv []float64, ld, m int) {
	for l := range m {
		s := segv[l] + 1
		for i := 1; i < len(f.segs); i += 2 {
			s = math.FMA(segv[i*ld+l]+1, segv[(i+1)*ld+l], s)
		}
		dst[l] = s
	}
}

// Batch32To writes the factored rows of the n inputs xs (n×InDim) into dst (n×Dim),
// rounded to float32, on GOMAXPROCS goroutines (each with its own FactoredQuery),
// joined before it returns; diag[i] = k*(x_i, x_i) from the float64 row (before
// rounding). xs is not modified; it panics on wrong lengths.
func (f *Factored) Batch32To(dst []float32, diag []float64, xs []float64, n int) {
	e, in := f.dim, f.b.InDim()
	if len(dst) != n*e || len(diag) != n || len(xs) != n*in {
		panic(fmt.Sprintf("entk: Factored.Batch32To lengths dst %d, diag %d, xs %d for n = %d (dim %d, in %d)",
			len(dst), len(diag), len(xs), n, e, in))
	}
	batch32To(dst, diag, xs, n, e, in, func() func(phi, x []float64) float64 { return f.NewQuery().RowTo })
}

// growFloats returns s resized to n, reusing its array when large enough.
func growFloats(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}
