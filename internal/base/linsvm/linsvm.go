package linsvm

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// Options configure Train.
type Options struct {
	C         float64 // 1, the paper's probe
	Balanced  bool    // class weights n/(classes·n_c)
	Tol       float64 // stop when every |projected dual gradient| < Tol (1e-6)
	MaxEpochs int     // passes over the rows before ErrNotConverged (10000)
	Seed      uint64  // coordinate order
}

// DefaultOptions returns the paper's probe: C = 1, balanced class weights.
func DefaultOptions() Options {
	return Options{C: 1, Balanced: true, Tol: 1e-6, MaxEpochs: 10000}
}

func (o *Options) validate() error {
	if !(o.C > 0) || math.IsInf(o.C, 0) {
		return fmt.Errorf("%w: C = %v", ErrOption, o.C)
	}
	if !(o.Tol > 0) {
		return fmt.Errorf("%w: Tol = %v", ErrOption, o.Tol)
	}
	if o.MaxEpochs < 1 {
		return fmt.Errorf("%w: MaxEpochs = %d", ErrOption, o.MaxEpochs)
	}
	return nil
}

// Model is a trained probe.
type Model struct {
	// W holds one row (w, bias) per problem: one row for two classes, else one per class.
	W       *mat.Dense
	Classes int
	present []bool // class seen in training
	// Epochs is the largest number of passes any problem needed.
	Epochs int
}

// Train fits the probe on the rows of x with the given labels (see the package contracts).
func Train(x mat.Matrix, labels []int, opt Options) (*Model, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	n, d := x.Dims()
	if len(labels) != n {
		panic(fmt.Sprintf("linsvm: %d labels for %d rows", len(labels), n))
	}
	if n == 0 || d == 0 {
		return nil, fmt.Errorf("%w: x is %d×%d", ErrEmpty, n, d)
	}
	classes := 0
	for i, l := range labels {
		if l < 0 {
			return nil, fmt.Errorf("%w: labels[%d] = %d", ErrLabel, i, l)
		}
		classes = max(classes, l+1)
	}
	count := make([]int, classes)
	for _, l := range labels {
		count[l]++
	}
	present := make([]bool, classes)
	seen := 0
	for c, k := range count {
		if k > 0 {
			present[c] = true
			seen++
		}
	}
	if seen < 2 {
		return nil, fmt.Errorf("%w: %d distinct classes, want at least 2", ErrLabel, seen)
	}
	weight := make([]float64, classes)
	for c, k := range count {
		weight[c] = 1
		if opt.Balanced && k > 0 {
			weight[c] = float64(n) / (float64(seen) * float64(k))
		}
	}
	// x̃ rows with the bias feature, and their squared norms.
	xt := mat.NewDense(n, d+1, nil)
	xt.Slice(0, n, 0, d).(*mat.Dense).Copy(x)
	sq := make([]float64, n)
	for i := range n {
		r := xt.RawRowView(i)
		r[d] = 1
		sq[i] = vec.Dot(r, r)
	}
	probs := classes
	if classes == 2 {
		probs = 1
	}
	m := &Model{W: mat.NewDense(probs, d+1, nil), Classes: classes, present: present}
	y := make([]float64, n)
	cw := make([]float64, n)
	alpha := make([]float64, n)
	perm := make([]int, n)
	for p := range probs {
		if classes > 2 && !present[p] {
			continue
		}
		pos := p
		if classes == 2 {
			pos = 1
		}
		for i, l := range labels {
			switch {
			case l == pos:
				y[i], cw[i] = 1, opt.C*weight[l]
			case classes == 2:
				y[i], cw[i] = -1, opt.C*weight[l]
			default:
				y[i], cw[i] = -1, opt.C
			}
		}
		ep, err := dcd(m.W.RawRowView(p), xt, y, cw, sq, alpha, perm, opt)
		if err != nil {
			return nil, fmt.Errorf("problem %d of %d: %w", p+1, probs, err)
		}
		m.Epochs = max(m.Epochs, ep)
	}
	return m, nil
}

// dcd solves one binary problem into w (zeroed first) by dual coordinate descent for the
// squared hinge loss (Hsieh et al. 2008, Alg. 1 with U = ∞, Dᵢᵢ = 1/(2Cᵢ)):
//
//	Gᵢ = yᵢ wᵀx̃ᵢ − 1 + Dᵢᵢαᵢ;  PGᵢ = min(Gᵢ, 0) if αᵢ = 0 else Gᵢ
//	αᵢ ← max(αᵢ − Gᵢ/(‖x̃ᵢ‖² + Dᵢᵢ), 0);  w ← w + Δαᵢ yᵢ x̃ᵢ
//
// and returns the number of passes.
func dcd(w []float64, xt *mat.Dense, y, cw, sq, alpha []float64, perm []int, opt Options) (int, error) {
	clear(w)
	clear(alpha)
	for epoch := 1; epoch <= opt.MaxEpochs; epoch++ {
		r := rng.New(opt.Seed, rng.Sub("linsvm/order", epoch))
		for i := range perm {
			perm[i] = i
		}
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var worst float64
		for _, i := range perm {
			row := xt.RawRowView(i)
			dii := 0.5 / cw[i]
			g := y[i]*vec.Dot(w, row) - 1 + dii*alpha[i]
			pg := g
			if alpha[i] == 0 {
				pg = min(g, 0)
			}
			worst = max(worst, math.Abs(pg))
			if pg == 0 {
				continue
			}
			old := alpha[i]
			alpha[i] = max(old-g/(sq[i]+dii), 0)
			if s := (alpha[i] - old) * y[i]; s != 0 {
				for j, v := range row {
					w[j] += s * v
				}
			}
		}
		if worst < opt.Tol {
			return epoch, nil
		}
	}
	return opt.MaxEpochs, fmt.Errorf("%w after %d passes (tolerance %g)", ErrNotConverged, opt.MaxEpochs, opt.Tol)
}

// decision writes the decision values (w·x̃ per problem) of one row.
func (m *Model) decision(dst, x []float64) {
	_, c := m.W.Dims()
	for p := range dst {
		w := m.W.RawRowView(p)
		dst[p] = vec.Dot(w[:c-1], x) + w[c-1]
	}
}

// PredictTo writes the predicted class of every row of x into dst.
func (m *Model) PredictTo(dst []int, x mat.Matrix) {
	n, d := x.Dims()
	probs, c := m.W.Dims()
	if d != c-1 || len(dst) != n {
		panic(fmt.Sprintf("linsvm: x is %d×%d and dst has %d entries for a model over %d features", n, d, len(dst), c-1))
	}
	row := make([]float64, d)
	dv := make([]float64, probs)
	for i := range n {
		mat.Row(row, i, x)
		m.decision(dv, row)
		if m.Classes == 2 {
			dst[i] = 0
			if dv[0] > 0 {
				dst[i] = 1
			}
			continue
		}
		best, arg := math.Inf(-1), -1
		for p, v := range dv {
			if m.present[p] && v > best {
				best, arg = v, p
			}
		}
		dst[i] = arg
	}
}
