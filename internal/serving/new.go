package serving

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// Input is the model a Model serves, from a fresh fit or from a stored Version: the
// landmarks in model row order (view A's pivots, then view B's) with their augmented
// inputs, the coefficients, ω statistics in raw kernel units, the pool's residual
// certificate at the fit, and optionally the labelled audit blocks.
type Input struct {
	Version     uint64
	ID          string
	Points      int
	LandmarkIDs []string
	Views       []byte
	LandmarkX   []float64 // M×D augmented inputs (zero rows for missing landmarks)
	Missing     []bool    // landmarks no longer stored (masked from the start); nil: none
	A           *mat.Dense
	B           []float64
	Scale       float64
	// Omega, OmegaMean and Tau2 (nil with one fit) in raw kernel units.
	Omega, OmegaMean, Tau2 []float64
	Residual               [2]certify.Residual
	KRef, KTest            *mat.Dense // nil: no audit blocks
	RefLabels              []int
	Exact                  *ExactRows // reused by a new draw of the same model; nil: compute
	// PoolStability is the measured pool part of the answers' stability (ReseedJaccard,
	// Meta.Reseed); nil: not measured, and then no answer is stable.
	PoolStability *float64
	// Grad are the gradient ranking's rows (NewGradRows) and GradErr why there are none.
	Grad    *GradRows
	GradErr error
}

// Settings are the serving settings of the configuration, and the name of the
// evaluation draw a sketched model makes (a named stream under Seed: distinct per draw).
type Settings struct {
	Backbone         entk.Backbone
	H, S             int     // sketch.h, sketch.s: the evaluation draw's budget
	Seed             uint64  // model.Seed
	DrawName         string  // the stream of this model's evaluation draw
	ExactMemoryBytes int64   // query.exact_memory_bytes
	ExactDisk        *Disk   // query.exact_disk_bytes: rows past ExactMemoryBytes (nil: none)
	Fits             int     // fit.fits: R
	ExactRowsCap     int     // query.exact_rows_cap
	StableJaccard    float64 // query.stable_jaccard: the stability an answer needs to certify
}

// New builds the serving form of a model: the landmarks' exact rows when they fit
// st.ExactMemoryBytes, or else st.ExactDisk (or in.Exact, reused), otherwise a fresh
// evaluation draw named st.DrawName with the landmarks' evaluation features and exact
// diagonals; the audit embeddings; and the mask of missing landmarks. It refuses
// non-finite weights or diagonals. Rows that fit the disk but fail there (ErrRowsDisk,
// ErrRowsDamaged) leave the model on the sketched path with the reason in ExactRowsErr.
func New(in Input, st Settings) (*Model, error) {
	mm := len(in.LandmarkIDs)
	ex := in.Exact
	var exErr error
	if ex == nil {
		ex, exErr = exactRowsOn(st.Backbone, in.LandmarkX, mm, st.ExactMemoryBytes, st.ExactDisk, in.Version)
	}
	var draw *Draw
	var diags [][]float64 // every per-landmark diagonal, for the finiteness check
	padded := 0
	if ex != nil {
		diags = append(diags, ex.diag)
	} else {
		// The sketched path only: an exact answer uses no draw.
		var err error
		if draw, err = newDraw(st.Backbone, st.H, st.S, st.Seed, st.DrawName, in.LandmarkX, mm); err != nil {
			return nil, err
		}
		diags, padded = append(diags, draw.diag), draw.sketch.PaddedP()
	}
	s := &Model{
		Version: in.Version, ID: in.ID, Points: in.Points, LandmarkIDs: in.LandmarkIDs, Views: in.Views,
		LandmarkX: in.LandmarkX, masked: make([]bool, mm), enc: certify.Encoder{A: in.A, B: in.B}, Scale: in.Scale,
		Omega: in.Omega, omegaMean: in.OmegaMean, tau2: in.Tau2, residual: in.Residual, Draw: draw,
		h: st.H, s: st.S, padded: padded,
		Exact: ex, Backbone: st.Backbone, fits: st.Fits, exactCap: st.ExactRowsCap, stableJaccard: st.StableJaccard,
		poolStab: in.PoolStability, ExactRowsErr: exErr,
		Grad: in.Grad, GradErr: in.GradErr, gactive: gradActive(in.Grad, func(string) bool { return false }),
	}
	if s.omegaMean == nil {
		s.omegaMean = s.Omega
	}
	if in.Missing != nil {
		copy(s.masked, in.Missing)
	}
	if ex != nil {
		s.gram = ex.gram(mm)
	} else {
		s.gram = gramDense(draw.lf, mm, draw.sketch.Dim())
	}
	for _, v := range slices.Concat(append([][]float64{s.Omega, s.omegaMean, s.tau2}, diags...)...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: model %d has a non-finite weight or diagonal", ErrModel, in.Version)
		}
	}
	if in.KRef != nil && in.RefLabels != nil {
		ab := &auditBlocks{KRef: in.KRef, KTest: in.KTest, RefLabels: in.RefLabels}
		ab.zRef = embed(s.enc, in.KRef)
		ab.zTest = embed(s.enc, in.KTest)
		s.audit = ab
	}
	s.compact()
	return s, nil
}

// embed returns z = K A + b for the rows of k.
func embed(e certify.Encoder, k *mat.Dense) *mat.Dense {
	n, _ := k.Dims()
	_, c := e.A.Dims()
	z := mat.NewDense(n, c, nil)
	e.EmbedTo(z, k, nil)
	return z
}

// Scaled returns v multiplied by s in a new slice (nil for nil): ω in raw kernel units
// from the fit's units.
func Scaled(v []float64, s float64) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = s * x
	}
	return out
}
