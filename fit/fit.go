package fit

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/knn"
	"github.com/cairnhq/cairn/internal/base/linsvm"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// Split is a block of evaluation points against the M landmarks.
type Split struct {
	// K is the points' kernel against the landmarks (rows × M); it is what gets embedded.
	K *mat.Dense
	// KB is an optional second view (rows × M); it gives the validation loss when there
	// are no labels.
	KB *mat.Dense
	// Labels are the points' classes (non-negative), or nil.
	Labels []int
}

// Problem holds the kernel blocks of one fit. Fitting never modifies it, so several fits
// may share one Problem concurrently.
type Problem struct {
	// KA and KB are the two augmented views of the n training points against the M
	// landmarks (n × M).
	KA, KB *mat.Dense
	// IDs are the training points' ids, one per row; the minibatch order is a function of
	// them, never of the row order.
	IDs []string
	// Kmm is the landmark–landmark block (M × M), used by the PCI initializers.
	Kmm *mat.Dense
	// Val selects checkpoints; Test is reported. Either may have nil K.
	Val, Test Split
}

// Validate checks shapes, ids and finiteness.
func (p *Problem) Validate() error {
	if p.KA == nil || p.KB == nil {
		return fmt.Errorf("%w: KA and KB are required", ErrShape)
	}
	n, m := p.KA.Dims()
	if r, c := p.KB.Dims(); r != n || c != m {
		return fmt.Errorf("%w: KA is %d×%d, KB is %d×%d", ErrShape, n, m, r, c)
	}
	if n < 2 {
		return fmt.Errorf("%w: n = %d training points, need at least 2", ErrShape, n)
	}
	if len(p.IDs) != n {
		return fmt.Errorf("%w: %d ids for %d rows", ErrIDs, len(p.IDs), n)
	}
	seen := make(map[string]struct{}, n)
	for i, id := range p.IDs {
		if _, dup := seen[id]; dup {
			return fmt.Errorf("%w: IDs[%d] = %q is duplicated", ErrIDs, i, id)
		}
		seen[id] = struct{}{}
	}
	if p.Kmm != nil {
		if r, c := p.Kmm.Dims(); r != m || c != m {
			return fmt.Errorf("%w: Kmm is %d×%d, want %d×%d", ErrShape, r, c, m, m)
		}
	}
	for _, s := range []struct {
		name string
		sp   Split
	}{{"Val", p.Val}, {"Test", p.Test}} {
		if s.sp.K == nil {
			continue
		}
		r, c := s.sp.K.Dims()
		if c != m {
			return fmt.Errorf("%w: %s.K has %d columns, want M = %d", ErrShape, s.name, c, m)
		}
		if s.sp.KB != nil {
			if r2, c2 := s.sp.KB.Dims(); r2 != r || c2 != m {
				return fmt.Errorf("%w: %s.KB is %d×%d, want %d×%d", ErrShape, s.name, r2, c2, r, m)
			}
		}
		if s.sp.Labels != nil && len(s.sp.Labels) != r {
			return fmt.Errorf("%w: %s has %d labels for %d rows", ErrShape, s.name, len(s.sp.Labels), r)
		}
		for i, l := range s.sp.Labels {
			if l < 0 {
				return fmt.Errorf("%w: %s.Labels[%d] = %d is negative", ErrOption, s.name, i, l)
			}
		}
	}
	for _, b := range []struct {
		name string
		m    *mat.Dense
	}{{"KA", p.KA}, {"KB", p.KB}, {"Kmm", p.Kmm}, {"Val.K", p.Val.K}, {"Val.KB", p.Val.KB}, {"Test.K", p.Test.K}, {"Test.KB", p.Test.KB}} {
		if b.m == nil {
			continue
		}
		if i, j, ok := firstNotFinite(b.m); !ok {
			return fmt.Errorf("%w: %s[%d,%d] = %v", ErrNotFinite, b.name, i, j, b.m.At(i, j))
		}
	}
	return nil
}

// firstNotFinite returns the first entry of a in row-major order that is NaN or
// infinite, with ok false, or ok true when there is none. Chunks of rows are scanned
// side by side (internal/base/par), each noting its first such entry; the first chunk's that
// has one is returned.
func firstNotFinite(a *mat.Dense) (i, j int, ok bool) {
	r, c := a.Dims()
	const rows = 256
	bad := make([]int, par.Chunks(r, rows)) // per chunk: 1 + the flat index in the chunk's rows, 0 if none
	par.For(r, rows, par.Workers(r, rows), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			for j, v := range a.RawRowView(i) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					bad[lo/rows] = 1 + (i-lo)*c + j
					return
				}
			}
		}
	})
	for ch, b := range bad {
		if b > 0 {
			return ch*rows + (b-1)/c, (b - 1) % c, false
		}
	}
	return 0, 0, true
}

// Options configure the Adam fit (paper Alg. cairn-stage2, Table hparams).
type Options struct {
	Loss   Loss
	Params LossParams
	// Seed drives the minibatch order (stream "fit/minibatch/<epoch>") and, under BYOL,
	// the predictor's initialization (stream "fit/byol/predictor").
	Seed        uint64
	Epochs      int     // 20
	Patience    int     // 7
	BatchSize   int     // 512
	LR          float64 // 1.25e-2, peak of the cosine schedule
	WeightDecay float64 // 3e-5
	// DecoupledDecay applies WeightDecay as AdamW's decoupled shrink θ ← θ − lr·wd·θ instead
	// of adding wd·θ to the gradient (false, torch.optim.Adam's L2).
	DecoupledDecay bool
	ClipNorm       float64 // 1
	BiasInit       float64 // 0.1
	// KNN is the neighbour count of the majority-vote accuracy: knn.ConfidenceK = 50, the
	// one count the issue and the paper name ("cosine, 50 neighbours for confidence,
	// majority vote for accuracy"), so one neighbour set gives both the confidence and the
	// vote.
	KNN int
	// Balanced selects and reports balanced accuracy (unbalanced classes, e.g. Adult).
	Balanced bool
	// Probe also scores the initialization and the reported point with the paper's linear
	// SVM probe (Result.InitProbe, Result.TestProbe). It costs one SVM fit on the
	// validation embeddings each and changes nothing in the fit.
	Probe bool
	// TraceEvery > 0 also scores Adam's iterate on the test split after every TraceEvery
	// optimizer steps (Result.Trace): the Adam side of the paper's Fig. acc-vs-time, the
	// counterpart of KrepesResult.IterateEval. It changes nothing in the fit, and its
	// evaluation time is excluded from every Seconds field (0: off).
	TraceEvery int
	// Float32 forms each batch's matrix products in float32 (f32.go): about half the time
	// of a step, everything else float64. BYOL ignores it. DefaultOptions sets it; the
	// exact-gradient tests and the KREPES solver use float64.
	Float32 bool
}

// DefaultOptions returns the paper's Stage 2 settings for loss l.
func DefaultOptions(l Loss) Options {
	return Options{
		Loss: l, Params: DefaultLossParams(), Epochs: 20, Patience: 7, BatchSize: 512,
		LR: 1.25e-2, WeightDecay: 3e-5, ClipNorm: 1, BiasInit: 0.1, KNN: knn.ConfidenceK,
		Float32: true,
	}
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var bad []string
	if o.Loss < BarlowTwins || o.Loss > BYOL {
		bad = append(bad, fmt.Sprintf("Loss = %d", int(o.Loss)))
	}
	if o.Epochs < 1 {
		bad = append(bad, fmt.Sprintf("Epochs = %d", o.Epochs))
	}
	if o.Patience < 1 {
		bad = append(bad, fmt.Sprintf("Patience = %d", o.Patience))
	}
	if o.BatchSize < 2 {
		bad = append(bad, fmt.Sprintf("BatchSize = %d", o.BatchSize))
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		bad = append(bad, fmt.Sprintf("LR = %v", o.LR))
	}
	if !(o.WeightDecay >= 0) {
		bad = append(bad, fmt.Sprintf("WeightDecay = %v", o.WeightDecay))
	}
	if !(o.ClipNorm > 0) {
		bad = append(bad, fmt.Sprintf("ClipNorm = %v", o.ClipNorm))
	}
	if o.KNN < 1 {
		bad = append(bad, fmt.Sprintf("KNN = %d", o.KNN))
	}
	if o.TraceEvery < 0 {
		bad = append(bad, fmt.Sprintf("TraceEvery = %d", o.TraceEvery))
	}
	if o.Loss == SimCLR && !(o.Params.Temperature > 0) {
		bad = append(bad, fmt.Sprintf("Params.Temperature = %v", o.Params.Temperature))
	}
	if o.Loss == BYOL && !(o.Params.BYOLTauBase >= 0 && o.Params.BYOLTauBase <= 1) {
		bad = append(bad, fmt.Sprintf("Params.BYOLTauBase = %v", o.Params.BYOLTauBase))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrOption, strings.Join(bad, ", "))
	}
	return nil
}

// Selection criteria reported in Result.SelectedBy.
const (
	SelectedByValAccuracy = "val_knn_accuracy"
	SelectedByValLoss     = "val_loss"
	SelectedByFinal       = "final_epoch"
	SelectedByKrepes      = "final_cg_iterate"
)

// Epoch records one epoch of training.
type Epoch struct {
	TrainLoss float64 // mean batch loss over the epoch
	ValMetric float64 // validation accuracy or loss (NaN when neither exists)
	// Seconds is the wall-clock time from the start of Adam to the end of this epoch's
	// validation scoring (not deterministic), excluding Options.TraceEvery's evaluations:
	// the time to reach this checkpoint, for the speed comparison with
	// KrepesResult.IterateSeconds.
	Seconds float64
}

// TracePoint is the test evaluation of Adam's iterate after Step optimizer steps
// (Options.TraceEvery).
type TracePoint struct {
	Step  int // optimizer steps taken, 1-based
	Epoch int // 1-based epoch the step belongs to
	// Seconds is the wall-clock time from the start of Adam to that step, excluding the
	// trace's own evaluations (not deterministic).
	Seconds float64
	Test    Eval
}

// Result is a fitted encoder z = K Ã + b with its provenance.
type Result struct {
	A, A0 *mat.Dense // selected Ã and initial Ã₀ (M×k)
	B, B0 []float64  // selected b and initial b₀ (k)
	// Omega[ℓ] = ||Ã_ℓ − Ã₀,ℓ||₂, the displacement score of landmark ℓ.
	Omega      []float64
	Epochs     int // epochs run (≤ Options.Epochs under early stopping)
	BestEpoch  int // 1-based epoch of the selected checkpoint
	SelectedBy string
	History    []Epoch
	// InitEval and TestEval are the test evaluation of the initialization and of the
	// selected checkpoint (NaN fields when the test split has no labels).
	InitEval, TestEval Eval
	// InitVal is the validation metric of the initialization (Ã₀, b₀) under the same
	// criterion and protocol as History[i].ValMetric (NaN for SelectedByFinal). The
	// initialization is not a checkpoint candidate (a fit returning Ã₀ would have ω = 0);
	// InitVal lets a caller see whether Adam's selected checkpoint beat it on validation.
	InitVal float64
	// InitProbe and TestProbe are the paper's linear-SVM probe (package linsvm: C = 1,
	// balanced class weights, fit on the normalized validation embeddings, scored on the
	// test split) for the initialization and the selected checkpoint, when Options.Probe
	// is set and both splits carry the same label set; NaN fields otherwise. They are
	// reported next to the k-NN evaluation and select nothing.
	InitProbe, TestProbe Eval
	// Trace holds the test evaluation every Options.TraceEvery steps (nil when off). With
	// TraceEvery equal to the steps per epoch, Trace[BestEpoch−1].Test is TestEval.
	Trace []TracePoint
}

// Eval is a k-NN evaluation of test embeddings against the labelled validation
// embeddings (the paper's probe protocol with k-NN in place of the linear SVM).
type Eval struct {
	Accuracy, BalancedAccuracy float64
}

// Value returns the balanced accuracy when balanced is set, else the accuracy.
func (e Eval) Value(balanced bool) float64 {
	if balanced {
		return e.BalancedAccuracy
	}
	return e.Accuracy
}

// batchOrder returns the training rows in the minibatch order of epoch e: sorted by a
// seeded 64-bit hash of (seed, epoch, id), ties by id. It depends only on the set of ids,
// so permuting the rows of a Problem permutes nothing in the fit.
func batchOrder(dst []int, ids []string, idHash []uint64, seed uint64, epoch int) []int {
	key := rng.Seed(seed, rng.Sub("fit/minibatch", epoch))
	dst = dst[:0]
	for i := range ids {
		dst = append(dst, i)
	}
	h := make([]uint64, len(ids))
	for i, v := range idHash {
		h[i] = mix64(v ^ key)
	}
	slices.SortFunc(dst, func(a, b int) int {
		if h[a] != h[b] {
			if h[a] < h[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(ids[a], ids[b])
	})
	return dst
}

// hashIDs returns FNV-1a of each id: the epoch-independent part of the order hash.
func hashIDs(ids []string) []uint64 {
	out := make([]uint64, len(ids))
	var lb [8]byte
	for i, id := range ids {
		f := fnv.New64a()
		binary.BigEndian.PutUint64(lb[:], uint64(len(id)))
		f.Write(lb[:])
		f.Write([]byte(id))
		out[i] = f.Sum64()
	}
	return out
}

// mix64 is the SplitMix64 finalizer (Steele, Lea & Flood 2014), a bijection with full
// avalanche, so hashes keyed by different epochs give unrelated orders.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// batchBounds splits n rows into nb = max(1, n/size) batches of n/nb rows (sizes differ by
// at most one), so no batch is a tiny remainder and every batch has ≥ 2 rows when n ≥ 2.
func batchBounds(n, size int) []int {
	nb := max(1, n/size)
	b := make([]int, nb+1)
	for i := range b {
		b[i] = i * n / nb
	}
	return b
}

// model is the trained parameters as one flat vector θ = (vec Ã row-major, b) with the
// matrix view A over the same storage, plus the buffers of one batch step. Under BYOL θ
// continues with the predictor (vec W, c) and byol holds it and the target (byol.go); the
// optimizer, clipping and checkpoints then cover the predictor too.
type model struct {
	m, k  int
	theta []float64
	a     *mat.Dense
	b     []float64
	// batch workspace
	kcat, z, g *mat.Dense // 2B×M gathered rows [K_A; K_B], 2B×k latents and gradients
	grad       []float64
	ga         *mat.Dense
	loss       lossWS
	byol       *byolState // nil unless the loss is BYOL
	// f32 forms the batch products in float32 (Options.Float32; never under BYOL), in
	// p32 instead of kcat/ga.
	f32 bool
	p32 products32
	// team runs the batch step's row loops and float32 products (AdamContext's, for the
	// whole fit; nil: par.For's goroutines, loop by loop).
	team *par.Team
}

func newModel(m, k int) *model {
	th := make([]float64, m*k+k)
	md := &model{m: m, k: k, theta: th, a: mat.NewDense(m, k, th[:m*k]), b: th[m*k:], grad: make([]float64, m*k+k)}
	md.ga = mat.NewDense(m, k, md.grad[:m*k])
	return md
}

// embedTo writes z = K Ã + 1bᵀ into dst (rows(K) × k), the bias added to chunks of rows
// side by side (internal/base/par).
func embedTo(dst, k, a *mat.Dense, b []float64) {
	dst.Mul(k, a)
	r, _ := dst.Dims()
	par.For(r, rowChunk, par.Workers(r, rowChunk), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := dst.RawRowView(i)
			for j := range row {
				row[j] += b[j]
			}
		}
	})
}

// gather copies rows rows of KA then of KB into md.kcat (2B×M).
func (md *model) gather(p *Problem, rows []int) {
	if md.f32 {
		md.gather32(p, rows)
		return
	}
	bs := len(rows)
	md.kcat = ensure(md.kcat, 2*bs, md.m)
	for i, r := range rows {
		copy(md.kcat.RawRowView(i), p.KA.RawRowView(r))
		copy(md.kcat.RawRowView(bs+i), p.KB.RawRowView(r))
	}
}

// lossGrad evaluates the batch loss at θ and writes ∂L/∂θ into md.grad:
//
//	[z_A; z_B] = [K_A; K_B] Ã + 1bᵀ,  ∂L/∂Ã = [K_A; K_B]ᵀ [G_A; G_B],  ∂L/∂b = 1ᵀ[G_A; G_B]
//
// with G = ∂L/∂z; under BYOL G comes through the predictor, which also receives its
// gradient (byolState.gradTo). The batch rows must have been gathered.
func (md *model) lossGrad(loss Loss, lp LossParams) float64 {
	if md.f32 {
		return md.lossGrad32(loss, lp)
	}
	r, _ := md.kcat.Dims()
	bs := r / 2
	md.z = ensure(md.z, r, md.k)
	md.g = ensure(md.g, r, md.k)
	embedTo(md.z, md.kcat, md.a, md.b)
	var l float64
	if loss == BYOL {
		if md.byol == nil {
			panic("fit: BYOL loss on a model without predictor and target")
		}
		l = md.byol.gradTo(md.g, md.kcat, md.z)
	} else {
		za := md.z.Slice(0, bs, 0, md.k).(*mat.Dense)
		zb := md.z.Slice(bs, r, 0, md.k).(*mat.Dense)
		ga := md.g.Slice(0, bs, 0, md.k).(*mat.Dense)
		gb := md.g.Slice(bs, r, 0, md.k).(*mat.Dense)
		l = md.loss.grad(ga, gb, loss, lp, za, zb)
	}
	md.ga.Mul(md.kcat.T(), md.g)
	gbias := md.grad[md.m*md.k : md.m*md.k+md.k]
	for j := range gbias {
		gbias[j] = 0
	}
	for i := range r {
		floats64AddTo(gbias, md.g.RawRowView(i))
	}
	return l
}

// update takes optimizer step t of total from the gradient in md.grad (which it clips in
// place): clip to global norm opt.ClipNorm, one Adam step at the cosine-scheduled rate,
// then, under BYOL, the target's EMA step toward the new online parameters.
func (md *model) update(ad *adam, opt Options, t, total int) {
	clipNorm(md.team, md.grad, opt.ClipNorm)
	ad.step(md.theta, md.grad, cosineLR(opt.LR, t, total))
	if md.byol != nil {
		md.byol.follow(md.theta, emaTau(opt.Params.BYOLTauBase, t, total))
	}
}

func floats64AddTo(dst, s []float64) {
	for i, v := range s {
		dst[i] += v
	}
}

// evaluator embeds the validation and test splits and scores checkpoints.
type evaluator struct {
	p        *Problem
	opt      Options
	zv, zt   *mat.Dense
	zvb      *mat.Dense
	loss     lossWS
	gva, gvb *mat.Dense
	// byol is the fit's predictor and target, which the BYOL validation loss needs (set
	// by AdamContext; nil otherwise).
	byol *byolState
}

func newEvaluator(p *Problem, opt Options, k int) *evaluator {
	e := &evaluator{p: p, opt: opt}
	if p.Val.K != nil {
		r, _ := p.Val.K.Dims()
		e.zv = mat.NewDense(r, k, nil)
		if p.Val.KB != nil {
			e.zvb = mat.NewDense(r, k, nil)
			e.gva, e.gvb = mat.NewDense(r, k, nil), mat.NewDense(r, k, nil)
		}
	}
	if p.Test.K != nil {
		r, _ := p.Test.K.Dims()
		e.zt = mat.NewDense(r, k, nil)
	}
	return e
}

// criterion returns how checkpoints are selected for this problem.
func (e *evaluator) criterion() string {
	switch {
	case e.p.Val.K != nil && e.p.Val.Labels != nil:
		return SelectedByValAccuracy
	case e.p.Val.K != nil && e.p.Val.KB != nil && (e.opt.Loss != VICReg || e.zvb.RawMatrix().Rows >= 2):
		return SelectedByValLoss
	}
	return SelectedByFinal
}

// score returns the validation metric, oriented so that larger is better (loss negated).
func (e *evaluator) score(a *mat.Dense, b []float64, crit string) (float64, error) {
	switch crit {
	case SelectedByValAccuracy:
		embedTo(e.zv, e.p.Val.K, a, b)
		c, err := knn.New(e.zv, e.p.Val.Labels)
		if err != nil {
			return 0, err
		}
		pr, err := c.LeaveOneOut(e.opt.KNN)
		if err != nil {
			return 0, err
		}
		if e.opt.Balanced {
			return knn.BalancedAccuracy(pr.Label, e.p.Val.Labels), nil
		}
		return knn.Accuracy(pr.Label, e.p.Val.Labels), nil
	case SelectedByValLoss:
		embedTo(e.zv, e.p.Val.K, a, b)
		embedTo(e.zvb, e.p.Val.KB, a, b)
		if e.opt.Loss == BYOL {
			return -e.byol.valLoss(e.gva, e.gvb, e.p.Val.K, e.p.Val.KB, e.zv, e.zvb), nil
		}
		return -e.loss.grad(e.gva, e.gvb, e.opt.Loss, e.opt.Params, e.zv, e.zvb), nil
	}
	return math.NaN(), nil
}

// test evaluates the encoder on the test split with the labelled validation embeddings as
// the k-NN reference.
func (e *evaluator) test(a *mat.Dense, b []float64) (Eval, error) {
	ev := Eval{math.NaN(), math.NaN()}
	if e.zv == nil || e.zt == nil || e.p.Val.Labels == nil || e.p.Test.Labels == nil {
		return ev, nil
	}
	embedTo(e.zv, e.p.Val.K, a, b)
	embedTo(e.zt, e.p.Test.K, a, b)
	c, err := knn.New(e.zv, e.p.Val.Labels)
	if err != nil {
		return ev, err
	}
	pr, err := c.Predict(e.zt, e.opt.KNN)
	if err != nil {
		return ev, err
	}
	ev.Accuracy = knn.Accuracy(pr.Label, e.p.Test.Labels)
	ev.BalancedAccuracy = knn.BalancedAccuracy(pr.Label, e.p.Test.Labels)
	return ev, nil
}

// probe evaluates the paper's linear-SVM probe (appendix "Training and evaluation"): a
// class-weighted ℓ2 linear SVM, C = 1, fit on the row-normalized validation embeddings and
// scored on the row-normalized test embeddings. Like the paper's it refuses (NaN) when the
// two splits' label sets differ, and it runs only under Options.Probe.
func (e *evaluator) probe(a *mat.Dense, b []float64) (Eval, error) {
	ev := Eval{math.NaN(), math.NaN()}
	if !e.opt.Probe || e.zv == nil || e.zt == nil || e.p.Val.Labels == nil || e.p.Test.Labels == nil {
		return ev, nil
	}
	if !sameLabelSet(e.p.Val.Labels, e.p.Test.Labels) {
		return ev, nil
	}
	embedTo(e.zv, e.p.Val.K, a, b)
	embedTo(e.zt, e.p.Test.K, a, b)
	knn.NormalizeRowsTo(e.zv, e.zv)
	knn.NormalizeRowsTo(e.zt, e.zt)
	o := linsvm.DefaultOptions()
	o.Seed = rng.Seed(e.opt.Seed, "fit/probe")
	m, err := linsvm.Train(e.zv, e.p.Val.Labels, o)
	if err != nil {
		return ev, fmt.Errorf("linear probe: %w", err)
	}
	pred := make([]int, len(e.p.Test.Labels))
	m.PredictTo(pred, e.zt)
	ev.Accuracy = knn.Accuracy(pred, e.p.Test.Labels)
	ev.BalancedAccuracy = knn.BalancedAccuracy(pred, e.p.Test.Labels)
	return ev, nil
}

func sameLabelSet(a, b []int) bool {
	set := func(l []int) map[int]bool {
		s := map[int]bool{}
		for _, v := range l {
			s[v] = true
		}
		return s
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) {
		return false
	}
	for v := range sa {
		if !sb[v] {
			return false
		}
	}
	return true
}

func checkA0(p *Problem, a0 *mat.Dense) (m, k int, err error) {
	_, m = p.KA.Dims()
	r, k := a0.Dims()
	if r != m {
		return 0, 0, fmt.Errorf("%w: Ã₀ has %d rows, want M = %d", ErrShape, r, m)
	}
	if k < 1 {
		return 0, 0, fmt.Errorf("%w: Ã₀ has %d columns", ErrShape, k)
	}
	return m, k, nil
}

// Adam fits Ã and b from Ã₀ (M×k, not modified) and b₀ = BiasInit·1 by minibatch Adam on
// opt.Loss (paper Alg. cairn-stage2): per batch, clip the gradient to global norm
// ClipNorm, add weight decay, take one Adam step at the cosine-scheduled rate; after each
// epoch score the validation split and keep the best checkpoint; stop after Patience
// epochs without a strict gain. Checkpoints are selected by leave-one-out k-NN accuracy on
// the labelled validation split, else by validation loss on its two views, else the final
// epoch is kept (Result.SelectedBy says which).
func Adam(p *Problem, a0 *mat.Dense, opt Options) (*Result, error) {
	return AdamContext(context.Background(), p, a0, opt)
}

// AdamContext is Adam that stops early with ctx.Err() when ctx is done: it checks ctx
// before every minibatch, so a cancelled fit returns within one batch step. The daemon
// uses it so that shutdown never waits for a refit.
func AdamContext(ctx context.Context, p *Problem, a0 *mat.Dense, opt Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	md, k, err := startModel(p, a0, opt.BiasInit)
	if err != nil {
		return nil, err
	}
	if opt.Loss == BYOL {
		md.addBYOL(opt.Seed)
	}
	md.f32 = opt.Float32 && opt.Loss != BYOL
	start := time.Now()
	n, _ := p.KA.Dims()
	res := &Result{A0: mat.DenseCopyOf(a0), B0: slices.Clone(md.b)}
	ev := newEvaluator(p, opt, k)
	ev.byol = md.byol
	crit := ev.criterion()
	res.SelectedBy = crit
	if res.InitEval, err = ev.test(md.a, md.b); err != nil {
		return nil, err
	}
	if res.InitVal, err = ev.score(md.a, md.b, crit); err != nil {
		return nil, err
	}
	if res.InitProbe, err = ev.probe(md.a, md.b); err != nil {
		return nil, err
	}
	if crit == SelectedByValLoss {
		res.InitVal = -res.InitVal
	}
	bounds := batchBounds(n, opt.BatchSize)
	run := &adamRun{
		p: p, opt: opt, md: md, ev: ev, res: res,
		ad:     newAdam(len(md.theta), opt.WeightDecay, opt.DecoupledDecay),
		bounds: bounds, total: opt.Epochs * (len(bounds) - 1), start: start,
	}
	// One team of workers for every step (par.Team): a step is some 40 loops of a few
	// hundred microseconds, too short to start goroutines for each.
	team := par.NewTeam(runtime.GOMAXPROCS(0))
	md.team, md.loss.team, run.ad.team = team, team, team
	best, err := run.epochs(ctx, crit)
	md.team, md.loss.team, run.ad.team = nil, nil, nil
	team.Close()
	if err != nil {
		return nil, err
	}
	copy(md.theta, best)
	for _, v := range md.theta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: parameter after %d epochs", ErrNotFinite, res.Epochs)
		}
	}
	res.A = mat.DenseCopyOf(md.a)
	res.B = slices.Clone(md.b)
	res.Omega = Omega(res.A, res.A0)
	if res.TestEval, err = ev.test(md.a, md.b); err != nil {
		return nil, err
	}
	if res.TestProbe, err = ev.probe(md.a, md.b); err != nil {
		return nil, err
	}
	return res, nil
}

// adamRun is one Adam fit in progress: the problem, the model being trained, the
// optimizer and its step counter, and the result that each epoch extends.
type adamRun struct {
	p      *Problem
	opt    Options
	md     *model
	ev     *evaluator
	res    *Result
	ad     *adam
	bounds []int // batch boundaries of an epoch (batchBounds)
	total  int   // optimizer steps of all epochs, for the schedules
	step   int   // optimizer steps taken
	start  time.Time
	// traceTime is the time spent scoring Trace points, excluded from every Seconds field.
	traceTime time.Duration
}

// epochs trains for up to opt.Epochs epochs, scoring the validation split by crit after
// each one and appending it to res.History, and returns the parameters of the selected
// checkpoint: the best strict gain in the score (the last epoch under SelectedByFinal),
// stopping after opt.Patience epochs without one. It sets res.Epochs and res.BestEpoch.
func (r *adamRun) epochs(ctx context.Context, crit string) ([]float64, error) {
	md, res := r.md, r.res
	n, _ := r.p.KA.Dims()
	best := slices.Clone(md.theta)
	bestScore := math.Inf(-1)
	idHash := hashIDs(r.p.IDs)
	order := make([]int, 0, n)
	stale := 0
	for epoch := 1; epoch <= r.opt.Epochs; epoch++ {
		order = batchOrder(order, r.p.IDs, idHash, r.opt.Seed, epoch)
		sum, err := r.epoch(ctx, epoch, order)
		if err != nil {
			return nil, err
		}
		sc, err := r.ev.score(md.a, md.b, crit)
		if err != nil {
			return nil, err
		}
		val := sc
		if crit == SelectedByValLoss {
			val = -sc
		}
		res.History = append(res.History, Epoch{TrainLoss: sum / float64(len(r.bounds)-1), ValMetric: val, Seconds: (time.Since(r.start) - r.traceTime).Seconds()})
		res.Epochs = epoch
		if crit == SelectedByFinal || sc > bestScore {
			bestScore = sc
			copy(best, md.theta)
			res.BestEpoch = epoch
			stale = 0
			continue
		}
		stale++
		if stale >= r.opt.Patience {
			break
		}
	}
	return best, nil
}

// epoch takes one optimizer step per minibatch of order, checking ctx before each, and
// returns the sum of the batch losses (an ErrNotFinite error for a NaN or infinite one).
// Every opt.TraceEvery steps it appends the test split's evaluation to res.Trace.
func (r *adamRun) epoch(ctx context.Context, epoch int, order []int) (float64, error) {
	md := r.md
	var sum float64
	for bi := 0; bi+1 < len(r.bounds); bi++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		md.gather(r.p, order[r.bounds[bi]:r.bounds[bi+1]])
		l := md.lossGrad(r.opt.Loss, r.opt.Params)
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return 0, fmt.Errorf("%w: loss %v at epoch %d batch %d", ErrNotFinite, l, epoch, bi)
		}
		sum += l
		md.update(r.ad, r.opt, r.step, r.total)
		r.step++
		if r.opt.TraceEvery > 0 && r.step%r.opt.TraceEvery == 0 {
			t0 := time.Now()
			te, err := r.ev.test(md.a, md.b)
			if err != nil {
				return 0, err
			}
			r.res.Trace = append(r.res.Trace, TracePoint{Step: r.step, Epoch: epoch, Seconds: (t0.Sub(r.start) - r.traceTime).Seconds(), Test: te})
			r.traceTime += time.Since(t0)
		}
	}
	return sum, nil
}

// Omega returns ω_ℓ = ||Ã_ℓ − Ã₀,ℓ||₂ for every landmark row ℓ (paper eq. influence).
func Omega(a, a0 *mat.Dense) []float64 {
	m, k := a.Dims()
	if r, c := a0.Dims(); r != m || c != k {
		panic(fmt.Sprintf("fit: Ã is %d×%d, Ã₀ is %d×%d", m, k, r, c))
	}
	out := make([]float64, m)
	for l := range m {
		var ss float64
		ra, r0 := a.RawRowView(l), a0.RawRowView(l)
		for j := range k {
			d := ra[j] - r0[j]
			ss += d * d
		}
		out[l] = math.Sqrt(ss)
	}
	return out
}

// startModel checks Ã₀ against p and returns the model at (Ã₀, b₀ = biasInit·1) and the
// latent width k: the common starting point of Adam and the KREPES baseline, so their
// comparison isolates the solver.
func startModel(p *Problem, a0 *mat.Dense, biasInit float64) (*model, int, error) {
	m, k, err := checkA0(p, a0)
	if err != nil {
		return nil, 0, err
	}
	md := newModel(m, k)
	md.a.Copy(a0)
	for j := range md.b {
		md.b[j] = biasInit
	}
	return md, k, nil
}
