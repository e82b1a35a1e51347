package entk

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// headsBackwarder is implemented by backbones that compute J_xᵀ w_j for several heads in
// one backward sweep; the sketch uses it when present. w is h×d row-major and dst h×P
// row-major, row j = J_xᵀ w_j.
type headsBackwarder interface {
	BackwardHeads(dst, w []float64, h int, ws *Workspace)
}

// Sketch is one draw of the sketched multi-head eNTK of paper eq. composed: h Gaussian heads
// w_j ~ N(0, I/d) and one SRHT S shared by all heads (the setting of Prop. two-axis). Its
// feature map (paper section 3.3) is
//
//	ψ(x) = h^{-1/2} [S J_xᵀ w_1; …; S J_xᵀ w_h] ∈ R^{h·q},
//
// q = s (or P when s = 0, no sketch), so <ψ(x), ψ(y)> = K_{h,s}(x, y) and
// E K_{h,s}(x, y) = k*(x, y) = tr(J_x J_yᵀ)/d.
//
// The heads come from the stream rng.New(seed, "entk/heads/"+name) and the SRHT from
// rng.New(seed, "entk/srht/"+name) (draw orders in NewHeads and NewSRHT), so draws with
// different names ("fit", "eval") are independent and every draw is reproducible from
// (seed, name), or from the Heads, Signs and Rows accessors.
//
// A Sketch is immutable after construction except for its internal pool of batch
// workspaces, which is guarded; all methods are safe for concurrent use given distinct
// SketchWorkspaces.
type Sketch struct {
	b     Backbone
	hb    headsBackwarder // b's multi-head backward, nil if it has none
	seed  uint64
	name  string
	h     int
	heads []float64 // h×d row-major
	srht  *SRHT
	plan  srhtPlan // S applied to the blocks that hold parameters, kept rows only

	mu   sync.Mutex
	free []*SketchWorkspace // batch workspaces, reused across FeaturesBatchTo calls
}

// NewSketch draws a sketch of h heads and SRHT width s (0: no sketch) for backbone b under
// (seed, name). It returns an error wrapping ErrSketchSize unless h ≥ 1 and
// 0 ≤ s ≤ PaddedLen(b.NumParams()).
func NewSketch(b Backbone, h, s int, seed uint64, name string) (*Sketch, error) {
	if h < 1 {
		return nil, fmt.Errorf("%w: heads h = %d, want ≥ 1", ErrSketchSize, h)
	}
	t, err := NewSRHT(b.NumParams(), s, rng.New(seed, "entk/srht/"+name))
	if err != nil {
		return nil, err
	}
	sk := &Sketch{
		b:     b,
		seed:  seed,
		name:  name,
		h:     h,
		heads: NewHeads(h, b.OutDim(), rng.New(seed, "entk/heads/"+name)),
		srht:  t,
		plan:  newSRHTPlan(t),
	}
	sk.hb, _ = b.(headsBackwarder)
	return sk, nil
}

// Backbone returns the network the sketch differentiates.
func (sk *Sketch) Backbone() Backbone { return sk.b }

// Seed returns the seed the sketch was drawn under.
func (sk *Sketch) Seed() uint64 { return sk.seed }

// Name returns the draw name ("fit", "eval", …).
func (sk *Sketch) Name() string { return sk.name }

// H is the number of heads.
func (sk *Sketch) H() int { return sk.h }

// S is the SRHT width; 0 means no sketch.
func (sk *Sketch) S() int { return sk.srht.S() }

// PaddedP is P padded to a power of two ≥ 2 (reported also when S() == 0, where it is
// unused).
func (sk *Sketch) PaddedP() int { return sk.srht.PaddedLen() }

// Dim is the feature dimension h·q, q = s, or the unpadded P when s == 0.
func (sk *Sketch) Dim() int { return sk.h * sk.srht.OutLen() }

// Heads returns the heads as an h×d row-major matrix. The caller must not modify it.
func (sk *Sketch) Heads() []float64 { return sk.heads }

// SRHT returns the shared SRHT (its Signs and Rows reproduce the draw).
func (sk *Sketch) SRHT() *SRHT { return sk.srht }

// SketchWorkspace is the scratch of FeaturesTo for one goroutine: the backbone workspace,
// the output and the VJP buffers, and the SRHT work buffer. Create it with
// Sketch.NewWorkspace; it must not be shared between goroutines.
type SketchWorkspace struct {
	bws  *Workspace
	out  []float64 // f(x), len d
	grad []float64 // J_xᵀ w_j: len P, or headsChunk×P when the backbone has BackwardHeads
	work []float64 // SRHT scratch, len WorkLen
}

// maxHeadsGrad bounds, in float64s, the multi-head gradient buffer of a workspace (16 MiB):
// with BackwardHeads the heads go through the backbone in chunks of headsChunk heads so
// that a wide network with many heads does not need an h×P buffer per goroutine.
const maxHeadsGrad = 1 << 21

// maxHeadsChunk bounds the heads per BackwardHeads call: ConvNet's multi-column scratch
// grows with it ((H+2)(W+2)·9·C_in floats per head and conv layer, 1.8·P for the MNIST
// convnet) and falls out of cache. Measured on the MNIST convnet, h = 16, s = 1024 (one
// goroutine, shared machine, ms per row): chunks of 2: 6.3–7.2, 4: 6.6–7.4, 8: 7.6–9.0,
// 16: 10.0–10.9; at h = 4, chunks of 1 were slower than 2 or 4 (3.3–3.8 against 1.2–2.8).
const maxHeadsChunk = 4

// headsChunk is the number of heads per BackwardHeads call.
func (sk *Sketch) headsChunk() int {
	return max(1, min(sk.h, maxHeadsChunk, maxHeadsGrad/sk.b.NumParams()))
}

// NewWorkspace allocates the scratch of FeaturesTo.
func (sk *Sketch) NewWorkspace() *SketchWorkspace {
	p := sk.b.NumParams()
	if sk.hb != nil {
		p *= sk.headsChunk()
	}
	bws := sk.b.NewWorkspace()
	if n, ok := sk.b.(*ConvNet); ok {
		// BackwardHeads' scratch for the chunk size and the remainder, so that FeaturesTo
		// allocates nothing from its first call.
		hc := sk.headsChunk()
		bws.convHeads(n, hc)
		if r := sk.h % hc; r != 0 {
			bws.convHeads(n, r)
		}
	}
	return &SketchWorkspace{
		bws:  bws,
		out:  make([]float64, sk.b.OutDim()),
		grad: make([]float64, p),
		work: make([]float64, sk.srht.WorkLen()),
	}
}

// FeaturesTo writes ψ(x) into dst (len Dim): one Forward, then for each head j
//
//	dst[j·q : (j+1)·q] = h^{-1/2} · S · J_xᵀ w_j
//
// (one Backward and one SRHT per head; with a backbone that has BackwardHeads — ConvNet,
// ONNX — one call per chunk of heads, see maxHeadsChunk and maxHeadsGrad). S is applied by
// srhtPlan, which transforms only the blocks of the padded vector that hold parameters and
// evaluates only the s kept rows; it equals SRHT.ApplyTo up to rounding (same sums, other
// order).
// The result depends only on x and the sketch, never on ws's history, so FeaturesBatchTo's
// rows are bit for bit FeaturesTo's. x (len InDim) is not modified. It allocates nothing
// and panics on wrong lengths.
func (sk *Sketch) FeaturesTo(dst, x []float64, ws *SketchWorkspace) {
	if len(dst) != sk.Dim() || len(x) != sk.b.InDim() {
		panic(fmt.Sprintf("entk: Sketch.FeaturesTo lengths dst %d, x %d; want %d, %d",
			len(dst), len(x), sk.Dim(), sk.b.InDim()))
	}
	p, d, q := sk.b.NumParams(), sk.b.OutDim(), sk.srht.OutLen()
	c := 1 / math.Sqrt(float64(sk.h))
	sk.b.Forward(ws.out, x, ws.bws)
	if sk.hb != nil {
		hc := sk.headsChunk()
		for j0 := 0; j0 < sk.h; j0 += hc {
			k := min(hc, sk.h-j0)
			sk.hb.BackwardHeads(ws.grad[:k*p], sk.heads[j0*d:(j0+k)*d], k, ws.bws)
			for j := 0; j < k; j++ {
				sk.plan.applyScaledTo(dst[(j0+j)*q:(j0+j+1)*q], ws.grad[j*p:(j+1)*p], ws.work, c)
			}
		}
		return
	}
	for j := 0; j < sk.h; j++ {
		sk.b.Backward(ws.grad, sk.heads[j*d:(j+1)*d], ws.bws)
		sk.plan.applyScaledTo(dst[j*q:(j+1)*q], ws.grad, ws.work, c)
	}
}

// FeaturesBatchTo writes ψ of the n rows of xs (n×InDim row-major, not modified) into dst
// (n×Dim row-major), using min(GOMAXPROCS, n) goroutines that it joins before returning.
// Row i of dst is bit-for-bit FeaturesTo of row i. Workspaces are kept by the sketch and
// reused across calls, so the cost per example allocates nothing; concurrent calls each
// get their own workspaces.
func (sk *Sketch) FeaturesBatchTo(dst, xs []float64, n int) {
	q, in := sk.Dim(), sk.b.InDim()
	if n < 0 || len(dst) != n*q || len(xs) != n*in {
		panic(fmt.Sprintf("entk: Sketch.FeaturesBatchTo lengths dst %d, xs %d for n = %d; want %d, %d",
			len(dst), len(xs), n, n*q, n*in))
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers == 0 {
		return
	}
	wss := sk.takeWorkspaces(workers)
	defer sk.putWorkspaces(wss)
	var next atomic.Int64
	run := func(ws *SketchWorkspace) {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			sk.FeaturesTo(dst[i*q:(i+1)*q], xs[i*in:(i+1)*in], ws)
		}
	}
	var wg sync.WaitGroup
	for _, ws := range wss[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ws)
		}()
	}
	run(wss[0])
	wg.Wait()
}

func (sk *Sketch) takeWorkspaces(k int) []*SketchWorkspace {
	wss := make([]*SketchWorkspace, k)
	sk.mu.Lock()
	for i := range wss {
		if n := len(sk.free); n > 0 {
			wss[i], sk.free = sk.free[n-1], sk.free[:n-1]
		}
	}
	sk.mu.Unlock()
	for i, ws := range wss {
		if ws == nil {
			wss[i] = sk.NewWorkspace()
		}
	}
	return wss
}

func (sk *Sketch) putWorkspaces(wss []*SketchWorkspace) {
	sk.mu.Lock()
	sk.free = append(sk.free, wss...)
	sk.mu.Unlock()
}

// KernelTo writes the sketched Gram matrix K_{h,s}(x_a, x_b) = <ψ(x_a), ψ(x_b)> of the n
// rows of xs into dst (n×n row-major, exactly symmetric). It allocates the n×Dim feature
// matrix, so it suits offline tools, not hot paths.
func (sk *Sketch) KernelTo(dst, xs []float64, n int) {
	if len(dst) != n*n {
		panic(fmt.Sprintf("entk: Sketch.KernelTo len(dst) = %d, want %d", len(dst), n*n))
	}
	q := sk.Dim()
	feats := make([]float64, n*q)
	sk.FeaturesBatchTo(feats, xs, n)
	for a := 0; a < n; a++ {
		fa := feats[a*q : (a+1)*q]
		for b := a; b < n; b++ {
			fb := feats[b*q : (b+1)*q][:len(fa)]
			var sum float64
			for k, v := range fa {
				sum += v * fb[k]
			}
			dst[a*n+b], dst[b*n+a] = sum, sum
		}
	}
}
