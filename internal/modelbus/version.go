package modelbus

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/binenc"
	"github.com/cairnhq/cairn/internal/serving"
)

// Version is one model version as the models topic carries it: the serving model's
// Input with its mask, and the fingerprint of the feature pipeline.
type Version struct {
	Features string // pipeline.Features.Fingerprint of the primary
	Version  uint64
	ID       string
	Points   int
	// Landmarks in model row order; X is M×D, a masked landmark's row zero.
	LandmarkIDs []string
	Views       []byte
	X           []float64
	Masked      []bool
	// A is Ã (M×k) in the fit's kernel units, B is b (k).
	Rows, Cols int
	A, B       []float64
	Scale      float64
	// Omega, OmegaMean and Tau2 (nil with one fit) in raw kernel units.
	Omega, OmegaMean, Tau2 []float64
	Residual               [2]certify.Residual
	// PoolStability is the pool part of the answers' stability (serving.Input's); nil:
	// not measured. Encoded last, as a flag byte and the value, so a version from before
	// it (which ends after Residual) still decodes, as not measured.
	PoolStability *float64
}

// FromModel is the version of serving model s under the pipeline fingerprint features,
// with s's current mask; the masked landmarks' input rows are zeroed. The slices are
// copies or s's own read-only slices; s is not modified.
func FromModel(s *serving.Model, features string) Version {
	in := s.Input()
	r, c := in.A.Dims()
	a := make([]float64, 0, r*c)
	for i := range r {
		a = append(a, in.A.RawRowView(i)...)
	}
	mm := len(in.LandmarkIDs)
	x := append([]float64(nil), in.LandmarkX...)
	masked := make([]bool, mm)
	if in.Missing != nil {
		copy(masked, in.Missing)
	}
	if mm > 0 {
		d := len(x) / mm
		for l := range mm {
			if masked[l] {
				clear(x[l*d : (l+1)*d])
			}
		}
	}
	return Version{Features: features, Version: in.Version, ID: in.ID, Points: in.Points,
		LandmarkIDs: in.LandmarkIDs, Views: in.Views, X: x, Masked: masked, Rows: r, Cols: c, A: a, B: in.B,
		Scale: in.Scale, Omega: in.Omega, OmegaMean: in.OmegaMean, Tau2: in.Tau2, Residual: in.Residual, PoolStability: in.PoolStability}
}

// Input is the serving.Input that rebuilds the version (serving.New), the masked
// landmarks missing from the start. It shares v's slices.
func (v *Version) Input() serving.Input {
	return serving.Input{Version: v.Version, ID: v.ID, Points: v.Points, LandmarkIDs: v.LandmarkIDs, Views: v.Views,
		LandmarkX: v.X, Missing: v.Masked, A: mat.NewDense(v.Rows, v.Cols, v.A), B: v.B, Scale: v.Scale,
		Omega: v.Omega, OmegaMean: v.OmegaMean, Tau2: v.Tau2, Residual: v.Residual, PoolStability: v.PoolStability}
}

// Encode returns the version's bytes (the payload its chunks split).
func (v *Version) Encode() []byte {
	b := make([]byte, 0, 64+8*(len(v.X)+len(v.A)+3*len(v.Omega))+16*len(v.LandmarkIDs))
	b = binenc.AppendString(b, v.Features)
	b = binenc.AppendU64(b, v.Version)
	b = binenc.AppendString(b, v.ID)
	b = binenc.AppendI64(b, int64(v.Points))
	b = binenc.AppendStrings(b, v.LandmarkIDs)
	b = binenc.AppendBytes(b, v.Views)
	b = binenc.AppendFloats(b, v.X)
	masked := make([]byte, len(v.Masked))
	for i, m := range v.Masked {
		if m {
			masked[i] = 1
		}
	}
	b = binenc.AppendBytes(b, masked)
	b = binenc.AppendMatrix(b, v.Rows, v.Cols, v.A)
	b = binenc.AppendFloats(b, v.B)
	b = binenc.AppendF64(b, v.Scale)
	b = binenc.AppendFloats(b, v.Omega)
	b = binenc.AppendFloats(b, v.OmegaMean)
	b = binenc.AppendFloats(b, v.Tau2)
	for _, r := range v.Residual {
		b = binenc.AppendF64(b, r.TraceR)
		b = binenc.AppendF64(b, r.TraceK)
		b = binenc.AppendBool(b, r.Exact)
		b = binenc.AppendF64(b, r.UnroundedBound)
	}
	if v.PoolStability != nil {
		b = binenc.AppendBool(b, true)
		b = binenc.AppendF64(b, *v.PoolStability)
	}
	return b
}

// DecodeVersion decodes Encode's bytes and checks them: shapes that agree, views 'A' or
// 'B', finite numbers, a positive kernel scale. It never panics.
func DecodeVersion(p []byte) (Version, error) {
	r := binenc.NewReader(p)
	var v Version
	v.Features = r.String("features")
	v.Version = r.U64("version")
	v.ID = r.String("id")
	v.Points = r.Int("points")
	v.LandmarkIDs = r.Strings("landmark ids")
	v.Views = r.Bytes("views")
	v.X = r.Floats("x")
	masked := r.Bytes("masked")
	v.Rows, v.Cols, v.A = r.Matrix("a")
	v.B = r.Floats("b")
	v.Scale = r.F64("scale")
	v.Omega = r.Floats("omega")
	v.OmegaMean = r.Floats("omega mean")
	v.Tau2 = r.Floats("tau2")
	for i := range v.Residual {
		v.Residual[i] = certify.Residual{TraceR: r.F64("trace r"), TraceK: r.F64("trace k"), Exact: r.Bool("exact"),
			UnroundedBound: r.F64("trace r unrounded bound")}
	}
	if r.Err() == nil && r.Len() > 0 {
		if !r.Bool("pool stability flag") {
			r.Fail("pool stability flag", "0 is never written: a version without it ends before it")
		}
		ps := r.F64("pool stability")
		if !(ps >= 0 && ps <= 1) {
			r.Fail("pool stability", "want a Jaccard index in [0, 1]")
		}
		v.PoolStability = &ps
	}
	if err := r.End(); err != nil {
		return Version{}, fmt.Errorf("%w: version: %w", ErrMessage, err)
	}
	v.Masked = make([]bool, len(masked))
	for i, m := range masked {
		if m > 1 {
			return Version{}, fmt.Errorf("%w: version %d: mask byte %d", ErrMessage, v.Version, m)
		}
		v.Masked[i] = m == 1
	}
	if err := v.check(); err != nil {
		return Version{}, fmt.Errorf("%w: version %d: %v", ErrMessage, v.Version, err)
	}
	return v, nil
}

// check reports the first inconsistency of a decoded version.
func (v *Version) check() error {
	mm := len(v.LandmarkIDs)
	switch {
	case v.Version == 0:
		return fmt.Errorf("version 0")
	case mm == 0:
		return fmt.Errorf("no landmarks")
	case len(v.Views) != mm || len(v.Masked) != mm || len(v.Omega) != mm:
		return fmt.Errorf("%d landmarks but %d views, %d mask bits, %d ω", mm, len(v.Views), len(v.Masked), len(v.Omega))
	case len(v.X)%mm != 0 || len(v.X) == 0:
		return fmt.Errorf("%d inputs for %d landmarks", len(v.X), mm)
	case v.Rows != mm || v.Cols < 1 || len(v.B) != v.Cols:
		return fmt.Errorf("the coefficients Ã are %d×%d and b has %d entries for %d landmarks", v.Rows, v.Cols, len(v.B), mm)
	case len(v.OmegaMean) != 0 && len(v.OmegaMean) != mm, len(v.Tau2) != 0 && len(v.Tau2) != mm:
		return fmt.Errorf("ω̄ or τ² of the wrong length")
	case !(v.Scale > 0) || math.IsInf(v.Scale, 0):
		return fmt.Errorf("kernel scale %v", v.Scale)
	case v.Points < 0:
		return fmt.Errorf("points %d", v.Points)
	}
	if len(v.OmegaMean) == 0 {
		v.OmegaMean = nil
	}
	if len(v.Tau2) == 0 {
		v.Tau2 = nil
	}
	for _, c := range v.Views {
		if c != 'A' && c != 'B' {
			return fmt.Errorf("view %q", c)
		}
	}
	for _, s := range [][]float64{v.X, v.A, v.B, v.Omega, v.OmegaMean, v.Tau2} {
		for _, x := range s {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("non-finite number")
			}
		}
	}
	return nil
}
