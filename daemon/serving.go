package daemon

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/rng"
)

// serving is one immutable model version as queries and audits read it: the fitted
// coefficients, the landmarks with their evaluation-draw features and exact diagonals,
// and the landmarks masked since the fit (deleted or replaced points, whose terms left
// the encoder at once, DESIGN.md section 4). A mask change makes a new serving value
// (withMask); readers load the current one from Daemon.serving and never see it change.
type serving struct {
	version uint64
	id      string // content hash of the model (modelID)
	points  int    // stored points the model was fitted on

	// Landmarks in model row order: view A's pivots, then view B's.
	landmarkIDs []string
	views       []byte    // 'A' or 'B' per landmark
	landmarkX   []float64 // M×D augmented inputs, for a new evaluation draw
	masked      []bool

	enc   certify.Encoder // Ã and b in the fit's kernel units
	scale float64         // kernel_scale: raw-unit coefficients are scale·Ã
	// omega, omegaMean (ω̄) and tau2 (τ², nil with one fit) in raw kernel units.
	omega, omegaMean, tau2 []float64
	residual               [2]certify.Residual // the pool's certificate at the fit

	draw  *evalDraw
	audit *auditBlocks // nil without labelled audit points

	// Active (unmasked) landmarks, compacted for the query path.
	active               []int
	lf                   []float64 // len(active)×q evaluation features
	diag, om, omMean, t2 []float64
	h, s, padded         int
}

// evalDraw is the evaluation sketch (paper Thm. topk: heads and SRHT drawn independently
// of the fit) with the landmarks' features under it. Queries that share a draw split δ
// (certify.UniformAllocation with Queries = cfg.Query.DrawQueries); used counts them.
type evalDraw struct {
	sketch *entk.Sketch
	seed   uint64 // the sketch is entk.NewSketch(backbone, h, s, seed, "eval")
	lf     []float64
	diag   []float64
	used   atomic.Int64
}

// auditBlocks are the deletion audit's embeddings (appendix D): fit-draw kernel rows of
// labelled reference and test points against the landmarks, and their embeddings under
// the unmasked model.
type auditBlocks struct {
	kRef, kTest *mat.Dense
	zRef, zTest *mat.Dense
	refLabels   []int
}

// newEvalDraw draws the evaluation sketch named by (seed, name) and computes the
// landmarks' features and exact diagonals from their augmented inputs xs (M×D), on all
// cores.
func newEvalDraw(b entk.Backbone, h, s int, seed uint64, name string, xs []float64, m int) (*evalDraw, error) {
	es := rng.Seed(seed, name)
	sk, err := entk.NewSketch(b, h, s, es, "eval")
	if err != nil {
		return nil, err
	}
	d := &evalDraw{sketch: sk, seed: es, lf: make([]float64, m*sk.Dim()), diag: make([]float64, m)}
	sk.FeaturesBatchTo(d.lf, xs, m)
	exactDiagsTo(d.diag, b, xs, m)
	return d, nil
}

// withMask returns a copy of s with the landmarks of the given ids masked too, or s
// itself when none of them is an unmasked landmark.
func (s *serving) withMask(ids []string) *serving {
	hit := false
	for l, id := range s.landmarkIDs {
		if !s.masked[l] && contains(ids, id) {
			hit = true
			break
		}
	}
	if !hit {
		return s
	}
	c := *s
	c.masked = append([]bool(nil), s.masked...)
	for l, id := range s.landmarkIDs {
		if contains(ids, id) {
			c.masked[l] = true
		}
	}
	c.compact()
	return &c
}

func contains(ids []string, id string) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// compact rebuilds the active arrays from masked.
func (s *serving) compact() {
	q := s.draw.sketch.Dim()
	n := 0
	for _, m := range s.masked {
		if !m {
			n++
		}
	}
	// Sized once: the landmark features are m·q floats (16 MiB at the defaults), and
	// growing them by appends copied them about twice, on the deletion's path.
	s.active = make([]int, 0, n)
	s.lf = make([]float64, 0, n*q)
	s.diag, s.om, s.omMean = make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	s.t2 = nil
	if s.tau2 != nil {
		s.t2 = make([]float64, 0, n)
	}
	for l, m := range s.masked {
		if m {
			continue
		}
		s.active = append(s.active, l)
		s.lf = append(s.lf, s.draw.lf[l*q:(l+1)*q]...)
		s.diag = append(s.diag, s.draw.diag[l])
		s.om = append(s.om, s.omega[l])
		s.omMean = append(s.omMean, s.omegaMean[l])
		if s.tau2 != nil {
			s.t2 = append(s.t2, s.tau2[l])
		}
	}
}

// maskedCount is the number of masked landmarks.
func (s *serving) maskedCount() int { return len(s.masked) - len(s.active) }

// modelID names a fitted encoder by content: "sha256:" and the first 16 hex digits of
// the hash of the landmark ids and views, Ã and b (float64 bits, little-endian), so the
// same fit on the same points always has the same id, whatever its version number.
func modelID(ids []string, views []byte, a *mat.Dense, b []float64) string {
	h := sha256.New()
	var buf [8]byte
	u := func(v uint64) { binary.LittleEndian.PutUint64(buf[:], v); h.Write(buf[:]) }
	u(uint64(len(ids)))
	for i, id := range ids {
		u(uint64(len(id)))
		h.Write([]byte(id))
		h.Write([]byte{views[i]})
	}
	r, c := a.Dims()
	u(uint64(r))
	u(uint64(c))
	for i := range r {
		for _, v := range a.RawRowView(i) {
			u(math.Float64bits(v))
		}
	}
	for _, v := range b {
		u(math.Float64bits(v))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// queryWork is one goroutine's workspace for answers: the evaluation sketch's Query
// (one forward, the Jacobian rows, ψ and the exact diagonal, on two goroutines) and the
// buffers of the kernel row and the variance bounds.
type queryWork struct {
	sk   *entk.Sketch
	q    *entk.Query
	qf   []float64
	row  []float64
	vbar []float64
	rk   certify.Ranker
}

// answer certifies the top-k landmarks for x (Thm. topk with the conservative variance
// bound from exact diagonals, eq. conservative-variance; the fit floor of Thm.
// fit-floor when the model has τ²), on this serving's evaluation draw. k is clamped to
// the active landmarks minus one. delta is split over drawQueries queries.
func (s *serving) answer(w *queryWork, x []float64, k int, delta float64, drawQueries int) (certify.Certificate, error) {
	var c certify.Certificate
	m := len(s.active)
	if m < 2 {
		return c, fmt.Errorf("%w: %d unmasked landmarks", ErrNoModel, m)
	}
	k = min(k, m-1)
	sk := s.draw.sketch
	if w.sk != sk {
		w.sk, w.q, w.qf = sk, sk.NewQuery(), make([]float64, sk.Dim())
	}
	w.row = grow(w.row, m)
	w.vbar = grow(w.vbar, m)
	kqq := w.q.FeaturesDiagTo(w.qf, x)
	entk.KernelRowTo(w.row, s.lf, w.qf)
	certify.ConservativeRowTo(w.vbar, s.diag, kqq, s.h, s.s, s.padded)
	alloc, err := certify.UniformAllocation(delta, m, drawQueries)
	if err != nil {
		return c, err
	}
	if err := w.rk.CertifyTo(&c, w.row, s.om, w.vbar, k, alloc); err != nil {
		return c, err
	}
	if s.t2 != nil {
		// κ is not computed exactly here; the evaluation draw's kernel row is its
		// plug-in estimate, and the floor is diagnostic (paper §3.2, as in explain).
		fl, err := certify.FitFloor(w.row, w.vbar, s.omMean, s.t2, k, alloc, true)
		if err != nil {
			return c, err
		}
		c.ApplyFloor(fl)
	}
	for i := range c.TopK {
		c.TopK[i].Index = s.active[c.TopK[i].Index]
	}
	c.RunnerUp.Index = s.active[c.RunnerUp.Index]
	c.Budget = certify.Budget{H: s.h, S: s.s, M: m, Pool: len(s.landmarkIDs), PaddedP: s.padded}
	c.VarianceModel = certify.VarianceConservative
	c.EvalSeed = s.draw.seed
	c.EvalDraw = "eval"
	c.ModelVersion = s.version
	return c, nil
}

// exactDiagsTo writes dst[i] = k*(x_i, x_i) (entk.ExactDiag) for the m rows of xs, on
// GOMAXPROCS goroutines with one workspace each, all joined before it returns.
func exactDiagsTo(dst []float64, b entk.Backbone, xs []float64, m int) {
	d := b.InDim()
	workers := min(runtime.GOMAXPROCS(0), max(m, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := b.NewWorkspace()
			for i := w; i < m; i += workers {
				dst[i] = entk.ExactDiag(b, xs[i*d:(i+1)*d], ws)
			}
		}()
	}
	wg.Wait()
}
