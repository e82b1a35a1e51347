package stream

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// secret is a subject id the tests look for in every rejection message: it must never
// appear there.
const secret = "alice@example"

func TestDecodeTrainSubject(t *testing.T) {
	long := strings.Repeat("s", 17)
	tests := []struct {
		name   string
		in     string
		want   TrainEvent
		reason Reason
		field  string
	}{
		{"upsert with subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"` + secret + `"}`,
			TrainEvent{Op: OpUpsert, ID: "p", X: []float64{1, 2, 3}, Subject: secret}, "", ""},
		{"empty subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":""}`, TrainEvent{}, ReasonBadID, "subject"},
		{"long subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"` + long + `"}`, TrainEvent{}, ReasonBadID, "subject"},
		{"control char subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"` + secret + `\u0001"}`, TrainEvent{}, ReasonBadID, "subject"},
		{"lone surrogate subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"` + secret + `\udc00"}`, TrainEvent{}, ReasonBadID, "subject"},
		{"numeric subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":7}`, TrainEvent{}, ReasonBadType, "subject"},
		{"delete with subject", `{"v":1,"op":"delete","id":"p","request":"r","subject":"` + secret + `"}`, TrainEvent{}, ReasonUnknownField, "subject"},
		{"duplicate subject", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"a","subject":"b"}`, TrainEvent{}, ReasonDuplicateField, "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeTrain([]byte(tt.in), testLim)
			checkDecode(t, got, tt.want, err, tt.reason, tt.field)
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("rejection %q quotes the subject", err)
			}
			if err == nil {
				b, err := EncodeTrain(got, testLim)
				if err != nil {
					t.Fatal(err)
				}
				back, err := DecodeTrain(b, testLim)
				if err != nil || !reflect.DeepEqual(back, got) {
					t.Errorf("round trip %s: %+v, %v; want %+v", b, back, err, got)
				}
			}
		})
	}
	// EncodeTrain refuses what DecodeTrain refuses, without the value either.
	for _, ev := range []TrainEvent{
		{Op: OpUpsert, ID: "p", X: []float64{1, 2, 3}, Subject: secret + "\x01"},
		{Op: OpDelete, ID: "p", Request: "r", Subject: secret},
	} {
		if _, err := EncodeTrain(ev, testLim); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("EncodeTrain(%+v): %v; want a rejection that does not quote the subject", ev, err)
		}
	}
}

func TestDecodeErasure(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   ErasureEvent
		reason Reason
		field  string
	}{
		{"erase", `{"v":1,"op":"erase","subject":"` + secret + `","request":"r1"}`, ErasureEvent{Op: ErasureErase, Subject: secret, Request: "r1"}, "", ""},
		{"unblock, any order", `{"request":"r2","subject":"` + secret + `","op":"unblock","v":1}`, ErasureEvent{Op: ErasureUnblock, Subject: secret, Request: "r2"}, "", ""},
		{"not json", `{"v":1,"op":"erase","subject":"` + secret, ErasureEvent{}, ReasonBadJSON, "subject"},
		{"no version", `{"op":"erase","subject":"` + secret + `","request":"r"}`, ErasureEvent{}, ReasonBadVersion, "v"},
		{"no op", `{"v":1,"subject":"` + secret + `","request":"r"}`, ErasureEvent{}, ReasonUnknownOp, "op"},
		{"unknown op", `{"v":1,"op":"forget","subject":"` + secret + `","request":"r"}`, ErasureEvent{}, ReasonUnknownOp, "op"},
		{"no subject", `{"v":1,"op":"erase","request":"r"}`, ErasureEvent{}, ReasonMissingField, "subject"},
		{"no request", `{"v":1,"op":"erase","subject":"` + secret + `"}`, ErasureEvent{}, ReasonMissingField, "request"},
		{"empty subject", `{"v":1,"op":"erase","subject":"","request":"r"}`, ErasureEvent{}, ReasonBadID, "subject"},
		{"long subject", `{"v":1,"op":"erase","subject":"` + secret + secret + `","request":"r"}`, ErasureEvent{}, ReasonBadID, "subject"},
		{"control subject", `{"v":1,"op":"erase","subject":"` + secret + `\n","request":"r"}`, ErasureEvent{}, ReasonBadID, "subject"},
		{"unknown field", `{"v":1,"op":"erase","subject":"` + secret + `","request":"r","id":"p"}`, ErasureEvent{}, ReasonUnknownField, "id"},
		{"oversize", `{"v":1,"op":"erase","subject":"` + secret + `","request":"r"}` + strings.Repeat(" ", 512), ErasureEvent{}, ReasonOversize, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeErasure([]byte(tt.in), testLim)
			if (err == nil) != (tt.reason == "") || ReasonOf(err) != tt.reason {
				t.Fatalf("DecodeErasure: %v; want reason %q", err, tt.reason)
			}
			if err != nil {
				var re *RejectError
				if !errors.As(err, &re) || re.Field != tt.field || !errors.Is(err, ErrRejected) {
					t.Errorf("error %#v: want field %q", err, tt.field)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("rejection %q quotes the subject", err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckErasureKey(t *testing.T) {
	ev := ErasureEvent{Op: ErasureErase, Subject: secret, Request: "r"}
	if err := CheckErasureKey([]byte(secret), ev); err != nil {
		t.Errorf("matching key: %v", err)
	}
	err := CheckErasureKey([]byte("other-"+secret), ev)
	if ReasonOf(err) != ReasonKeyMismatch || strings.Contains(err.Error(), secret) {
		t.Errorf("mismatched key: %v; want key_mismatch without the subject", err)
	}
}

func TestMayNameSubject(t *testing.T) {
	for in, want := range map[string]bool{
		`{"v":1,"op":"upsert","id":"p","x":[1]}`:                    false,
		`{"v":1,"op":"upsert","id":"p","x":[1],"subject":"s"}`:      true,
		`{"v":1,"op":"upsert","id":"p","x":[1],"\u0073ubject":"s"}`: true,
		`not json subject`: true,
	} {
		if got := MayNameSubject([]byte(in)); got != want {
			t.Errorf("MayNameSubject(%s) = %v, want %v", in, got, want)
		}
	}
}

func FuzzDecodeErasure(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"erase","subject":"s","request":"r"}`,
		`{"v":1,"op":"unblock","subject":"\u00e9","request":"r"}`,
		`{"v":1,"op":"erase","subject":"a\ud800","request":"r"}`,
		`{"v":1,"op":"erase","subject":"s","subject":"t","request":"r"}`,
		`{}`, ``, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeErasure(raw, testLim)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" || re.Msg == "" {
				t.Fatalf("error %v is not a complete RejectError", err)
			}
			return
		}
		var ref struct {
			V       int    `json:"v"`
			Op      string `json:"op"`
			Subject string `json:"subject"`
			Request string `json:"request"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("accepted %q but encoding/json: %v", raw, err)
		}
		if want := (ErasureEvent{Op: ErasureOp(ref.Op), Subject: ref.Subject, Request: ref.Request}); ref.V != 1 || ev != want {
			t.Fatalf("decoded %+v, encoding/json read %+v (v=%d)", ev, want, ref.V)
		}
		b, err := EncodeErasure(ev, testLim)
		if err != nil {
			t.Fatalf("accepted %q but EncodeErasure(%+v): %v", raw, ev, err)
		}
		if back, err := DecodeErasure(b, testLim); err != nil || back != ev {
			t.Fatalf("round trip %+v -> %s -> %+v, %v", ev, b, back, err)
		}
	})
}
