package coreset

import (
	"fmt"
	"slices"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// PairRecordLen is the length of a Pair's per-point record (AppendPairRecord).
const PairRecordLen = 32

// stateFixedLen is the length of the core encoding of a State without landmarks,
// step maxima, factor or top-up keys: Version and Config (configLen bytes), the seven
// counts, Greedy, M and StaleFrom, Threshold and the four running sums, and the three
// booleans.
const stateFixedLen = configLen + 7*4 + 3*8 + 5*8 + 3

// configLen is the length of Version and Config at the front of a state: 81 bytes up to
// Config.SLQ.Power, Config.Normalize's byte, then Config.Tolerance's 8. The earlier
// layouts stop at 82 and 81.
const configLen = 90

// layout is one of the binary layouts of State: the current core (tolerance: with
// Config.Tolerance, StepMax and StepMaxIDs; normalize: with Config.Normalize), the core
// before tolerant pivoting (the daemon's pool schema 4), the core before
// Config.Normalize (schema 3), and the one before that, which also held Points after
// Config (schema 2).
type layout struct{ points, normalize, tolerance bool }

var (
	layoutCore        = layout{normalize: true, tolerance: true}
	layoutNoTolerance = layout{normalize: true}
	layoutNoNormalize = layout{}
	layoutWithPoints  = layout{points: true}
)

// AppendBinary appends the binary encoding of the core of s, everything but Points and
// LandmarkFeatures (what CoreState returns), to b: its fields in declaration order, each
// in the internal/base/binenc encoding of its type (see "Binary encoding" in the package
// documentation). Equal states give equal bytes. It implements encoding.BinaryAppender;
// the error is always nil.
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	return s.appendBinary(b, layoutCore), nil
}

// appendBinary writes the core of s in layout l: without Config.Tolerance, StepMax and
// StepMaxIDs unless l.tolerance, without Config.Normalize's byte unless l.normalize, and
// with Points between Config and Landmarks when l.points (the earlier layouts
// DecodeStateWithoutTolerance, DecodeStateWithoutNormalize and DecodeStateWithPoints
// read; tests write them). Writing a state with a field set in a layout without it is
// a programmer error.
func (s *State) appendBinary(b []byte, l layout) []byte {
	if s.Config.Normalize && !l.normalize {
		panic("coreset: appendBinary: Config.Normalize in a layout without it")
	}
	if (s.Config.Tolerance != 0 || len(s.StepMax) != 0 || len(s.StepMaxIDs) != 0) && !l.tolerance {
		panic("coreset: appendBinary: Config.Tolerance or StepMax in a layout without them")
	}
	points := l.points
	n := stateFixedLen + 8*(len(s.PivotValues)+len(s.StepMax)+len(s.Factor)+len(s.Gram)+len(s.TopUpKeys))
	for _, id := range s.Landmarks {
		n += 4 + len(id)
	}
	for _, id := range s.StepMaxIDs {
		n += 4 + len(id)
	}
	if points {
		n += 4
		for _, p := range s.Points {
			n += 4 + len(p.ID) + 16
		}
	}
	b = slices.Grow(b, n)
	b = binenc.AppendI64(b, int64(s.Version))
	c := &s.Config
	b = binenc.AppendI64(b, int64(c.Dim))
	b = binenc.AppendI64(b, int64(c.Budget.M))
	b = binenc.AppendF64(b, c.Budget.Lambda)
	b = binenc.AppendF64(b, c.Tol)
	b = binenc.AppendBool(b, c.TopUp)
	b = binenc.AppendU64(b, c.Seed)
	b = binenc.AppendI64(b, int64(c.SLQ.Probes))
	b = binenc.AppendI64(b, int64(c.SLQ.Steps))
	b = binenc.AppendI64(b, int64(c.SLQ.Deflate))
	b = binenc.AppendI64(b, int64(c.SLQ.Power))
	if l.normalize {
		b = binenc.AppendBool(b, c.Normalize)
	}
	if l.tolerance {
		b = binenc.AppendF64(b, c.Tolerance)
	}
	if points {
		b = binenc.AppendU32(b, uint32(len(s.Points)))
		for _, p := range s.Points {
			b = binenc.AppendString(b, p.ID)
			b = binenc.AppendF64(b, p.Diag)
			b = binenc.AppendF64(b, p.Residual)
		}
	}
	b = binenc.AppendStrings(b, s.Landmarks)
	b = binenc.AppendI64(b, int64(s.Greedy))
	b = binenc.AppendFloats(b, s.PivotValues)
	if l.tolerance {
		b = binenc.AppendFloats(b, s.StepMax)
		b = binenc.AppendStrings(b, s.StepMaxIDs)
	}
	b = binenc.AppendFloats(b, s.Factor)
	b = binenc.AppendFloats(b, s.Gram)
	b = binenc.AppendU64s(b, s.TopUpKeys)
	b = binenc.AppendI64(b, int64(s.M))
	b = binenc.AppendF64(b, s.Threshold)
	b = binenc.AppendF64(b, s.Cert)
	b = binenc.AppendF64(b, s.CertComp)
	b = binenc.AppendF64(b, s.TraceK)
	b = binenc.AppendF64(b, s.TraceKComp)
	b = binenc.AppendBool(b, s.Exact)
	b = binenc.AppendBool(b, s.Stale)
	b = binenc.AppendI64(b, int64(s.StaleFrom))
	return binenc.AppendBool(b, s.Changed)
}

// DecodeState decodes a core State written by AppendBinary from the front of b and
// returns it with the bytes after it. Points and LandmarkFeatures are nil: the caller
// fills them in for Restore, which checks the values; DecodeState checks only the
// encoding. A malformed one (truncated, a count beyond the bytes left, a boolean byte
// other than 0 or 1) is an error matching ErrState that names the field and its offset.
// It never panics and allocates no more than a small multiple of len(b).
func DecodeState(b []byte) (s State, rest []byte, err error) {
	return decodeState(b, layoutCore)
}

// DecodeStateWithoutTolerance decodes the core layout written before tolerant pivoting:
// the current one without Config.Tolerance (after Config.Normalize), StepMax and
// StepMaxIDs (after PivotValues). It is what the daemon's pool schema 4 held per view
// (storage/FORMAT.md); it is read so that such stores still open, and nothing writes it.
// Tolerance reads as 0 (those pools took the exact argmax) and StepMax and StepMaxIDs
// as nil, which Restore fills in from the pivots' keys.
func DecodeStateWithoutTolerance(b []byte) (s State, rest []byte, err error) {
	return decodeState(b, layoutNoTolerance)
}

// DecodeStateWithoutNormalize decodes the layout before that, written before
// Config.Normalize existed: DecodeStateWithoutTolerance's without that field's byte
// (after Config.SLQ.Power). It is what the daemon's pool schema 3 held per view
// (storage/FORMAT.md); it is read so that such stores still open, and nothing writes it.
// Normalize reads as false: those pools pivoted on raw residuals.
func DecodeStateWithoutNormalize(b []byte) (s State, rest []byte, err error) {
	return decodeState(b, layoutNoNormalize)
}

// DecodeStateWithPoints decodes the layout before that, which also held Points, sorted
// by id, between Config (without Normalize, which reads as false) and Landmarks: u32 n,
// then n × (bytes id, f64 Diag, f64 Residual). It is what a two-view pool's blob held
// per view before the records moved out of it (the daemon's pool schema 2,
// storage/FORMAT.md); it is read so that such stores still open, and nothing writes it.
// Points is non-nil (empty when n is 0).
func DecodeStateWithPoints(b []byte) (s State, rest []byte, err error) {
	return decodeState(b, layoutWithPoints)
}

func decodeState(b []byte, l layout) (State, []byte, error) {
	r := binenc.NewReader(b)
	var s State
	s.Version = r.Int("Version")
	c := &s.Config
	c.Dim = r.Int("Config.Dim")
	c.Budget.M = r.Int("Config.Budget.M")
	c.Budget.Lambda = r.F64("Config.Budget.Lambda")
	c.Tol = r.F64("Config.Tol")
	c.TopUp = r.Bool("Config.TopUp")
	c.Seed = r.U64("Config.Seed")
	c.SLQ.Probes = r.Int("Config.SLQ.Probes")
	c.SLQ.Steps = r.Int("Config.SLQ.Steps")
	c.SLQ.Deflate = r.Int("Config.SLQ.Deflate")
	c.SLQ.Power = r.Int("Config.SLQ.Power")
	if l.normalize {
		c.Normalize = r.Bool("Config.Normalize")
	}
	if l.tolerance {
		c.Tolerance = r.F64("Config.Tolerance")
	}
	if l.points {
		// Each point takes at least its id's length and two f64s.
		s.Points = make([]PointState, r.Count(4+16, "Points"))
		for i := range s.Points {
			s.Points[i] = PointState{ID: r.String("Points.ID"), Diag: r.F64("Points.Diag"), Residual: r.F64("Points.Residual")}
		}
	}
	s.Landmarks = r.Strings("Landmarks")
	s.Greedy = r.Int("Greedy")
	s.PivotValues = r.Floats("PivotValues")
	if l.tolerance {
		s.StepMax = r.Floats("StepMax")
		s.StepMaxIDs = r.Strings("StepMaxIDs")
	}
	s.Factor = r.Floats("Factor")
	s.Gram = r.Floats("Gram")
	s.TopUpKeys = r.U64s("TopUpKeys")
	s.M = r.Int("M")
	s.Threshold = r.F64("Threshold")
	s.Cert = r.F64("Cert")
	s.CertComp = r.F64("CertComp")
	s.TraceK = r.F64("TraceK")
	s.TraceKComp = r.F64("TraceKComp")
	s.Exact = r.Bool("Exact")
	s.Stale = r.Bool("Stale")
	s.StaleFrom = r.Int("StaleFrom")
	s.Changed = r.Bool("Changed")
	if err := r.Err(); err != nil {
		return State{}, nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	return s, r.Rest(), nil
}

// AppendPairRecord appends the per-point record of one point of a Pair to dst: a.Diag,
// a.Residual (view A), b.Diag, b.Residual (view B), each as f64, PairRecordLen bytes in
// all. The ids are not written: the caller stores the record under the point's id.
func AppendPairRecord(dst []byte, a, b PointState) []byte {
	dst = binenc.AppendF64(dst, a.Diag)
	dst = binenc.AppendF64(dst, a.Residual)
	dst = binenc.AppendF64(dst, b.Diag)
	return binenc.AppendF64(dst, b.Residual)
}

// DecodePairRecord decodes the record of point id written by AppendPairRecord into the
// point's view-A and view-B states. It checks only the length (an error matching
// ErrState otherwise), so any PairRecordLen bytes decode and re-encode to themselves,
// NaN payloads included; Restore checks the values (finite, non-negative).
func DecodePairRecord(id string, rec []byte) (a, b PointState, err error) {
	if len(rec) != PairRecordLen {
		return a, b, fmt.Errorf("%w: record of point %q is %d bytes, want %d", ErrState, id, len(rec), PairRecordLen)
	}
	r := binenc.NewReader(rec)
	a = PointState{ID: id, Diag: r.F64("A.Diag"), Residual: r.F64("A.Residual")}
	b = PointState{ID: id, Diag: r.F64("B.Diag"), Residual: r.F64("B.Residual")}
	return a, b, nil
}
