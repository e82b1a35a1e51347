package stream

import (
	"errors"
	"testing"
)

// TestIndexLimits: an x entry read as a table index must be an integer in [0, N), in
// training upserts and in queries, decoded or encoded; other entries are free.
func TestIndexLimits(t *testing.T) {
	lim := Limits{InputDim: 3, Indices: []IndexLimit{{Pos: 1, N: 4}, {Pos: 2, N: 2}}}
	for _, tc := range []struct {
		x    string
		want Reason // "" = accepted
	}{
		{"[0.5,3,1]", ""},
		{"[-7.25,0,0]", ""},
		{"[1,4,0]", ReasonBadIndex},
		{"[1,2.5,0]", ReasonBadIndex},
		{"[1,-1,0]", ReasonBadIndex},
		{"[1,0,2]", ReasonBadIndex},
		{"[1,0]", ReasonWrongDim},
	} {
		train := `{"v":1,"op":"upsert","id":"p","x":` + tc.x + `}`
		query := `{"v":1,"request":"q","x":` + tc.x + `}`
		_, terr := DecodeTrain([]byte(train), lim)
		_, qerr := DecodeQuery([]byte(query), lim)
		for name, err := range map[string]error{"train": terr, "query": qerr} {
			if got := ReasonOf(err); got != tc.want || (tc.want != "" && !errors.Is(err, ErrRejected)) {
				t.Errorf("%s x=%s: %v, want reason %q", name, tc.x, err, tc.want)
			}
		}
	}
	if _, err := EncodeTrain(TrainEvent{Op: OpUpsert, ID: "p", X: []float64{0, 9, 0}}, lim); ReasonOf(err) != ReasonBadIndex {
		t.Errorf("EncodeTrain with a code out of range: %v", err)
	}
	if _, err := EncodeQuery(QueryEvent{Request: "q", X: []float64{0, 1, 0.5}}, lim); ReasonOf(err) != ReasonBadIndex {
		t.Errorf("EncodeQuery with a fractional code: %v", err)
	}
	for _, bad := range []IndexLimit{{Pos: 3, N: 2}, {Pos: -1, N: 2}, {Pos: 0, N: 0}} {
		if err := (Limits{InputDim: 3, Indices: []IndexLimit{bad}}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate with index limit %+v: %v", bad, err)
		}
	}
}
