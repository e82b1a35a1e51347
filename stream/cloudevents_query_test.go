package stream

import (
	"reflect"
	"testing"
)

func ceHeaders(id string) []Header {
	return []Header{{Key: HeaderSpecVersion, Value: []byte("1.0")}, {Key: HeaderID, Value: []byte(id)},
		{Key: HeaderSource, Value: []byte("urn:producer")}, {Key: HeaderType, Value: []byte("com.example.query")}}
}

func TestDecodeQueryMessage(t *testing.T) {
	lim := Limits{InputDim: 2}
	tests := []struct {
		name    string
		m       Message
		request string // "" with reason set
		reason  Reason
	}{
		{"plain", Message{Value: []byte(`{"v":1,"request":"r1","x":[1,2]}`)}, "r1", ""},
		{"plain without request", Message{Value: []byte(`{"v":1,"x":[1,2]}`)}, "", ReasonMissingField},
		{"cloudevent without request: ce_id", Message{Value: []byte(`{"v":1,"x":[1,2]}`), Headers: ceHeaders("ev-7")}, "ev-7", ""},
		{"cloudevent with request: request", Message{Value: []byte(`{"v":1,"request":"r2","id":"p"}`), Headers: ceHeaders("ev-8")}, "r2", ""},
		{"bad cloudevent", Message{Value: []byte(`{"v":1,"request":"r3","x":[1,2]}`), Headers: ceHeaders("")}, "", ReasonBadHeader},
		{"cloudevent with bad value", Message{Value: []byte(`{"v":1,"x":[1]}`), Headers: ceHeaders("ev-9")}, "", ReasonWrongDim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := DecodeQueryMessage(tc.m, lim)
			if got := ReasonOf(err); got != tc.reason {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.reason)
			}
			if q.Request != tc.request {
				t.Errorf("request %q, want %q", q.Request, tc.request)
			}
		})
	}
}

// FuzzDecodeQueryMessage: never panics; without CloudEvents headers it is DecodeQuery;
// with valid ones a query that names its request decodes as DecodeQuery does, and one
// that does not gets ce_id.
func FuzzDecodeQueryMessage(f *testing.F) {
	f.Add([]byte(`{"v":1,"request":"r","x":[1,2]}`), "", true)
	f.Add([]byte(`{"v":1,"x":[1,2]}`), "id-1", true)
	f.Add([]byte(`{"v":1,"id":"p"}`), "a\x01", false)
	f.Fuzz(func(t *testing.T, value []byte, id string, withCE bool) {
		lim := Limits{InputDim: 2}
		m := Message{Value: value}
		if withCE {
			m.Headers = ceHeaders(id)
		}
		q, err := DecodeQueryMessage(m, lim)
		plain, perr := DecodeQuery(value, lim)
		_, isCE, ceErr := ParseCloudEvent(m, lim)
		switch {
		case ceErr != nil:
			if ReasonOf(err) != ReasonBadHeader {
				t.Fatalf("invalid headers gave %v", err)
			}
		case !isCE || perr == nil:
			if ReasonOf(err) != ReasonOf(perr) || !reflect.DeepEqual(q, plain) {
				t.Fatalf("got %+v, %v; DecodeQuery %+v, %v", q, err, plain, perr)
			}
		case err == nil && q.Request != id:
			t.Fatalf("request %q without one in the value, want ce_id %q", q.Request, id)
		}
	})
}
