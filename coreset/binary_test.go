package coreset

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/base/binenc"
)

// binaryPool returns a pool over n points, synced, then with one landmark deleted, so
// that its state is inexact and stale, has top-up landmarks (budget beyond the rank of
// the generator) and every State field carries a non-default value.
func binaryPool(t testing.TB, n int) *Pool { return binaryPoolRule(t, n, true, 0.6) }

// binaryPoolNormalize is binaryPool with Config.Normalize set to normalize and the exact
// argmax (Tolerance 0).
func binaryPoolNormalize(t testing.TB, n int, normalize bool) *Pool {
	return binaryPoolRule(t, n, normalize, 0)
}

// binaryPoolRule is binaryPool with Config.Normalize and Config.Tolerance set.
func binaryPoolRule(t testing.TB, n int, normalize bool, tolerance float64) *Pool {
	t.Helper()
	cfg := Config{Dim: 6, Budget: LandmarkBudget{M: 8}, TopUp: true, Seed: 3, SLQ: SLQOptions{Probes: 4, Steps: 5, Deflate: -1, Power: 1}, Normalize: normalize, Tolerance: tolerance}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(9, 6, 4)
	src := MapSource{}
	for i := range n {
		id := fmt.Sprintf("p%03d", i)
		src[id] = g.point()
		if err := p.Insert(id, src[id]); err != nil {
			t.Fatal(err)
		}
	}
	if n > 0 {
		if err := p.Sync(src); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(p.Landmarks()[0]); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestStateFields fails when State (or a struct inside it) grows a field: the binary
// encoding writes every field by hand, so a new one needs a new layout (a pool schema
// in the daemon, storage/FORMAT.md) and a line in appendBinary and decodeState.
func TestStateFields(t *testing.T) {
	for typ, want := range map[reflect.Type]int{
		reflect.TypeFor[State]():          22,
		reflect.TypeFor[Config]():         8,
		reflect.TypeFor[LandmarkBudget](): 2,
		reflect.TypeFor[SLQOptions]():     4,
		reflect.TypeFor[PointState]():     3,
	} {
		if got := typ.NumField(); got != want {
			t.Errorf("%v has %d fields, the binary encoding writes %d: update appendBinary, decodeState and the layout", typ, got, want)
		}
	}
}

// TestStateLayout: the bytes of a small State, field by field as the package
// documentation (and storage/FORMAT.md "Pool state") lists them, written out by hand.
func TestStateLayout(t *testing.T) {
	s := State{
		Version: 1,
		Config:  Config{Dim: 2, Budget: LandmarkBudget{M: 3}, Tol: 0.5, TopUp: true, Seed: 7, SLQ: SLQOptions{Probes: 1, Steps: 2, Deflate: 3, Power: 4}, Normalize: true, Tolerance: 0.25},
		Points:  []PointState{{ID: "ignored", Diag: 1}}, LandmarkFeatures: []float64{9, 9},
		Landmarks: []string{"a"}, Greedy: 1, PivotValues: []float64{2}, StepMax: []float64{3}, StepMaxIDs: []string{"b"},
		Factor: []float64{1.5}, Gram: []float64{4},
		M: 3, Threshold: 0.25, Cert: 1, TraceK: 2, Exact: true, Changed: true,
	}
	want := strings.Join([]string{
		"0100000000000000",                                                             // Version 1
		"0200000000000000",                                                             // Config.Dim 2
		"0300000000000000",                                                             // Config.Budget.M 3
		"0000000000000000",                                                             // Config.Budget.Lambda 0
		"000000000000e03f",                                                             // Config.Tol 0.5
		"01",                                                                           // Config.TopUp
		"0700000000000000",                                                             // Config.Seed 7
		"0100000000000000", "0200000000000000", "0300000000000000", "0400000000000000", // Config.SLQ
		"01",                            // Config.Normalize
		"000000000000d03f",              // Config.Tolerance 0.25
		"01000000" + "01000000" + "61",  // Landmarks ["a"]
		"0100000000000000",              // Greedy 1
		"01000000" + "0000000000000040", // PivotValues [2]
		"01000000" + "0000000000000840", // StepMax [3]
		"01000000" + "01000000" + "62",  // StepMaxIDs ["b"]
		"01000000" + "000000000000f83f", // Factor [1.5]
		"01000000" + "0000000000001040", // Gram [4]
		"00000000",                      // TopUpKeys []
		"0300000000000000",              // M 3
		"000000000000d03f",              // Threshold 0.25
		"000000000000f03f",              // Cert 1
		"0000000000000000",              // CertComp 0
		"0000000000000040",              // TraceK 2
		"0000000000000000",              // TraceKComp 0
		"01", "00",                      // Exact, Stale
		"0000000000000000", // StaleFrom 0
		"01",               // Changed
	}, "")
	got, err := s.AppendBinary([]byte{0xee})
	if err != nil || hex.EncodeToString(got) != "ee"+want {
		t.Errorf("AppendBinary = %x, %v\nwant ee%s", got, err, want)
	}
	var empty State
	if b, _ := empty.AppendBinary(nil); len(b) != stateFixedLen {
		t.Errorf("empty state encodes to %d bytes, stateFixedLen is %d", len(b), stateFixedLen)
	}
}

// withoutStepMax is s as the layouts before tolerant pivoting hold it: no StepMax or
// StepMaxIDs (which Restore fills in from the pivots' keys).
func withoutStepMax(s State) State {
	s.StepMax, s.StepMaxIDs = nil, nil
	return s
}

// TestStateRoundTrip: DecodeState gives back the core (CoreState) of pools of 0, 1 and
// 40 points, DecodeStateWithoutTolerance the core of a pool without Tolerance in the
// layout without that field and the step maxima, DecodeStateWithoutNormalize the core
// of a raw pool in the layout before, DecodeStateWithPoints the full State without
// features in the one before that, each followed by the bytes after it; re-encoding
// gives the same bytes; each earlier layout is the current one less the fields it
// lacks; and a Restore from the decoded core plus the pool's points and features
// behaves like the original (from an earlier layout: like the exact-argmax pool it
// came from, its step maxima taken from the pivots' keys).
func TestStateRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 40} {
		p := binaryPool(t, n)
		core := p.CoreState()
		b, _ := core.AppendBinary(nil)
		tail := []byte("next")
		got, rest, err := DecodeState(append(b, tail...))
		if err != nil || !reflect.DeepEqual(got, core) || !bytes.Equal(rest, tail) {
			t.Fatalf("n=%d: DecodeState = %+v, rest %q, %v\nwant %+v", n, got, rest, err, core)
		}
		if again, _ := got.AppendBinary(nil); !bytes.Equal(again, b) {
			t.Errorf("n=%d: re-encoding changed the bytes", n)
		}

		// The layout before Tolerance is the core without its 8 bytes (offset 82) and
		// without the two counts of StepMax and StepMaxIDs after PivotValues (the
		// Tolerance 0 pool's step maxima left out), and decodes as Tolerance = 0 with
		// no step maxima.
		exact := binaryPoolNormalize(t, n, true)
		exactCore := withoutStepMax(exact.CoreState())
		eb, _ := exactCore.AppendBinary(nil)
		b0 := exactCore.appendBinary(nil, layoutNoTolerance)
		pv := configLen + 4 + 8 + 4 + 8*exactCore.Greedy // PivotValues' end in the core
		for _, id := range exactCore.Landmarks {
			pv += 4 + len(id)
		}
		if len(b0) != len(eb)-16 || !bytes.Equal(b0[:82], eb[:82]) || !bytes.Equal(eb[82:90], make([]byte, 8)) ||
			!bytes.Equal(b0[82:pv-8], eb[90:pv]) || !bytes.Equal(eb[pv:pv+8], make([]byte, 8)) || !bytes.Equal(b0[pv-8:], eb[pv+8:]) {
			t.Errorf("n=%d: the layout without Tolerance is not the core less Tolerance and the step maxima", n)
		}
		got0, rest, err := DecodeStateWithoutTolerance(append(b0, tail...))
		if err != nil || !reflect.DeepEqual(got0, exactCore) || !bytes.Equal(rest, tail) {
			t.Fatalf("n=%d: DecodeStateWithoutTolerance = %+v, rest %q, %v\nwant %+v", n, got0, rest, err, exactCore)
		}
		got0.Points, got0.LandmarkFeatures = exact.State().Points, exact.LandmarkFeaturesTo(nil)
		if q, err := Restore(got0); err != nil || !reflect.DeepEqual(q.State(), exact.State()) {
			t.Errorf("n=%d: pool restored from the layout without Tolerance differs (%v)", n, err)
		}

		// The layout before Normalize is that one without its byte (offset 81), and
		// decodes as Normalize = false.
		raw := binaryPoolNormalize(t, n, false)
		rawCore := withoutStepMax(raw.CoreState())
		rb := rawCore.appendBinary(nil, layoutNoTolerance)
		b1 := rawCore.appendBinary(nil, layoutNoNormalize)
		if len(b1) != len(rb)-1 || !bytes.Equal(b1[:81], rb[:81]) || rb[81] != 0 || !bytes.Equal(b1[81:], rb[82:]) {
			t.Errorf("n=%d: the layout without Normalize is not the one without Tolerance less byte 81", n)
		}
		got1, rest, err := DecodeStateWithoutNormalize(append(b1, tail...))
		if err != nil || !reflect.DeepEqual(got1, rawCore) || !bytes.Equal(rest, tail) {
			t.Fatalf("n=%d: DecodeStateWithoutNormalize = %+v, rest %q, %v\nwant %+v", n, got1, rest, err, rawCore)
		}
		got1.Points, got1.LandmarkFeatures = raw.State().Points, raw.LandmarkFeaturesTo(nil)
		if q, err := Restore(got1); err != nil || !reflect.DeepEqual(q.State(), raw.State()) {
			t.Errorf("n=%d: pool restored from the layout without Normalize differs (%v)", n, err)
		}

		full := withoutStepMax(raw.State())
		full.LandmarkFeatures = nil
		wp := full.appendBinary(nil, layoutWithPoints)
		gotP, rest, err := DecodeStateWithPoints(wp)
		if err != nil || !reflect.DeepEqual(gotP, full) || len(rest) != 0 {
			t.Fatalf("n=%d: DecodeStateWithPoints = %+v, rest %q, %v\nwant %+v", n, gotP, rest, err, full)
		}
		// The layout with points is the one without Normalize with the points inserted
		// after Config.
		perPoint := 0
		for _, ps := range full.Points {
			perPoint += 4 + len(ps.ID) + 16
		}
		if len(wp) != len(b1)+4+perPoint || !bytes.Equal(wp[:81], b1[:81]) || !bytes.Equal(wp[len(wp)-(len(b1)-81):], b1[81:]) {
			t.Errorf("n=%d: the layout with points is not the one without Normalize with the points after Config", n)
		}
		full = p.State()

		got.Points = full.Points
		got.LandmarkFeatures = p.LandmarkFeaturesTo(nil)
		q, err := Restore(got)
		if err != nil {
			t.Fatalf("n=%d: Restore: %v", n, err)
		}
		if !reflect.DeepEqual(q.State(), p.State()) {
			t.Errorf("n=%d: restored pool differs", n)
		}
	}
}

// TestStateMalformed: every truncation, a bad boolean and a hostile count are refused
// with ErrState and a *binenc.Error naming the field; nothing panics.
func TestStateMalformed(t *testing.T) {
	p := binaryPool(t, 12)
	core := p.CoreState()
	b, _ := core.AppendBinary(nil)
	exactCore := withoutStepMax(binaryPoolNormalize(t, 12, true).CoreState())
	b0 := exactCore.appendBinary(nil, layoutNoTolerance)
	raw := binaryPoolNormalize(t, 12, false)
	rawCore, full := withoutStepMax(raw.CoreState()), withoutStepMax(raw.State())
	b1 := rawCore.appendBinary(nil, layoutNoNormalize)
	wp := full.appendBinary(nil, layoutWithPoints)
	for cut := range len(b) {
		if _, _, err := DecodeState(b[:cut]); !errors.Is(err, ErrState) {
			t.Fatalf("DecodeState of %d of %d bytes: %v, want ErrState", cut, len(b), err)
		}
	}
	for cut := range len(b0) {
		if _, _, err := DecodeStateWithoutTolerance(b0[:cut]); !errors.Is(err, ErrState) {
			t.Fatalf("DecodeStateWithoutTolerance of %d of %d bytes: %v, want ErrState", cut, len(b0), err)
		}
	}
	for cut := range len(b1) {
		if _, _, err := DecodeStateWithoutNormalize(b1[:cut]); !errors.Is(err, ErrState) {
			t.Fatalf("DecodeStateWithoutNormalize of %d of %d bytes: %v, want ErrState", cut, len(b1), err)
		}
	}
	for cut := range len(wp) {
		if _, _, err := DecodeStateWithPoints(wp[:cut]); !errors.Is(err, ErrState) {
			t.Fatalf("DecodeStateWithPoints of %d of %d bytes: %v, want ErrState", cut, len(wp), err)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(b []byte)
		field string
	}{
		{"Changed = 2", func(b []byte) { b[len(b)-1] = 2 }, "Changed"},
		{"TopUp = 7", func(b []byte) { b[40] = 7 }, "Config.TopUp"},
		{"Normalize = 2", func(b []byte) { b[81] = 2 }, "Config.Normalize"},
		{"landmark count 2^32-1", func(b []byte) { copy(b[configLen:], []byte{0xff, 0xff, 0xff, 0xff}) }, "Landmarks count"},
	} {
		bad := bytes.Clone(b)
		tc.edit(bad)
		_, _, err := DecodeState(bad)
		var e *binenc.Error
		if !errors.Is(err, ErrState) || !errors.As(err, &e) || e.What != tc.field {
			t.Errorf("%s: %v, want ErrState naming %s", tc.name, err, tc.field)
		}
	}
}

// TestPairRecord: the record is view A's Diag and Residual, then view B's, as f64, and
// decodes back with the id; other lengths are refused with ErrState.
func TestPairRecord(t *testing.T) {
	a := PointState{ID: "x", Diag: 2, Residual: 0.5}
	b := PointState{ID: "x", Diag: 3, Residual: math.Copysign(0, -1)}
	rec := AppendPairRecord([]byte{0xee}, a, b)
	want := "ee" + "0000000000000040" + "000000000000e03f" + "0000000000000840" + "0000000000000080"
	if hex.EncodeToString(rec) != want {
		t.Errorf("AppendPairRecord = %x, want %s", rec, want)
	}
	ga, gb, err := DecodePairRecord("x", rec[1:])
	if err != nil || ga != a || gb != b || !math.Signbit(gb.Residual) {
		t.Errorf("DecodePairRecord = %+v, %+v, %v", ga, gb, err)
	}
	for _, n := range []int{0, PairRecordLen - 1, PairRecordLen + 1} {
		if _, _, err := DecodePairRecord("x", make([]byte, n)); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "want 32") {
			t.Errorf("%d bytes: %v, want ErrState", n, err)
		}
	}
}

// FuzzDecodeState: a stored state is outside bytes. Decoding never panics, refusals
// match ErrState, and an accepted state followed by its rest re-encodes to the input
// (the encoding is canonical), in the current layout and the one with points
// (FuzzDecodeStateWithoutNormalize has the third).
func FuzzDecodeState(f *testing.F) {
	for _, n := range []int{0, 5} {
		p := binaryPool(f, n)
		core := p.CoreState()
		b, _ := core.AppendBinary(nil)
		full := withoutStepMax(binaryPoolNormalize(f, n, false).State())
		f.Add(b, false)
		f.Add(full.appendBinary(nil, layoutWithPoints), true)
		f.Add(b[:len(b)/2], false)
	}
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, in []byte, points bool) {
		dec, l := DecodeState, layoutCore
		if points {
			dec, l = DecodeStateWithPoints, layoutWithPoints
		}
		s, rest, err := dec(in)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not match ErrState", err)
			}
			return
		}
		if points != (s.Points != nil) || s.LandmarkFeatures != nil {
			t.Fatalf("points %v: decoded Points %v, LandmarkFeatures %v", points, s.Points, s.LandmarkFeatures)
		}
		if got := append(s.appendBinary(nil, l), rest...); !bytes.Equal(got, in) {
			t.Fatalf("accepted state is not canonical:\n in  %x\n out %x", in, got)
		}
	})
}

// FuzzDecodeStateWithoutTolerance is FuzzDecodeState for the layout before
// Config.Tolerance, which decodes as 0 with no step maxima.
func FuzzDecodeStateWithoutTolerance(f *testing.F) {
	for _, n := range []int{0, 5} {
		core := withoutStepMax(binaryPoolNormalize(f, n, true).CoreState())
		b := core.appendBinary(nil, layoutNoTolerance)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, rest, err := DecodeStateWithoutTolerance(in)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not match ErrState", err)
			}
			return
		}
		if s.Points != nil || s.LandmarkFeatures != nil || s.Config.Tolerance != 0 || s.StepMax != nil || s.StepMaxIDs != nil {
			t.Fatalf("decoded Points %v, LandmarkFeatures %v, Tolerance %v, StepMax %v, StepMaxIDs %v",
				s.Points, s.LandmarkFeatures, s.Config.Tolerance, s.StepMax, s.StepMaxIDs)
		}
		if got := append(s.appendBinary(nil, layoutNoTolerance), rest...); !bytes.Equal(got, in) {
			t.Fatalf("accepted state is not canonical:\n in  %x\n out %x", in, got)
		}
	})
}

// FuzzDecodeStateWithoutNormalize is FuzzDecodeState for the layout before
// Config.Normalize, which decodes as false.
func FuzzDecodeStateWithoutNormalize(f *testing.F) {
	for _, n := range []int{0, 5} {
		core := withoutStepMax(binaryPoolNormalize(f, n, false).CoreState())
		b := core.appendBinary(nil, layoutNoNormalize)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, rest, err := DecodeStateWithoutNormalize(in)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not match ErrState", err)
			}
			return
		}
		if s.Points != nil || s.LandmarkFeatures != nil || s.Config.Normalize {
			t.Fatalf("decoded Points %v, LandmarkFeatures %v, Normalize %v", s.Points, s.LandmarkFeatures, s.Config.Normalize)
		}
		if got := append(s.appendBinary(nil, layoutNoNormalize), rest...); !bytes.Equal(got, in) {
			t.Fatalf("accepted state is not canonical:\n in  %x\n out %x", in, got)
		}
	})
}

// FuzzDecodePairRecord: a stored record is outside bytes; DecodePairRecord never
// panics, refuses every length but PairRecordLen with ErrState, and what it accepts
// re-encodes to the same bytes, NaN payloads included.
func FuzzDecodePairRecord(f *testing.F) {
	f.Add("p1", AppendPairRecord(nil, PointState{Diag: 2, Residual: 0.5}, PointState{Diag: 3}))
	f.Add("p2", []byte{})
	f.Add("p3", make([]byte, PairRecordLen-1))
	f.Add("p4", make([]byte, PairRecordLen+1))
	f.Fuzz(func(t *testing.T, id string, rec []byte) {
		a, b, err := DecodePairRecord(id, rec)
		if err != nil {
			if !errors.Is(err, ErrState) || len(rec) == PairRecordLen {
				t.Fatalf("%d bytes: error %v", len(rec), err)
			}
			return
		}
		if a.ID != id || b.ID != id {
			t.Fatalf("ids %q, %q, want %q", a.ID, b.ID, id)
		}
		if got := AppendPairRecord(nil, a, b); !bytes.Equal(got, rec) {
			t.Fatalf("record not canonical:\n in  %x\n out %x", rec, got)
		}
	})
}
