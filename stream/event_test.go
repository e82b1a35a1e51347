package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

var testLim = Limits{InputDim: 3, MaxBytes: 512, MaxIDBytes: 16, MaxK: 50}

func i64(v int64) *int64 { return &v }

func TestDecodeTrain(t *testing.T) {
	long := strings.Repeat("a", 17)
	tests := []struct {
		name   string
		in     string
		want   TrainEvent
		reason Reason
		field  string
	}{
		{"upsert", `{"v":1,"op":"upsert","id":"p1","x":[1,-2.5,3e-3]}`, TrainEvent{Op: OpUpsert, ID: "p1", X: []float64{1, -2.5, 3e-3}}, "", ""},
		{"upsert label, any key order, spaces", " {\"x\":[0,0,0], \"label\":7,\"id\":\"é\",\"op\":\"upsert\",\"v\":1}\n", TrainEvent{Op: OpUpsert, ID: "é", X: []float64{0, 0, 0}, Label: i64(7)}, "", ""},
		{"delete", `{"v":1,"op":"delete","id":"p1","request":"r1"}`, TrainEvent{Op: OpDelete, ID: "p1", Request: "r1"}, "", ""},
		{"not json", `{"v":1,`, TrainEvent{}, ReasonBadJSON, ""},
		{"array top level", `[1,2]`, TrainEvent{}, ReasonBadJSON, ""},
		{"trailing object", `{"v":1,"op":"delete","id":"p","request":"r"}{}`, TrainEvent{}, ReasonBadJSON, ""},
		{"invalid utf8", "{\"v\":1,\"op\":\"upsert\",\"id\":\"\xff\",\"x\":[1,2,3]}", TrainEvent{}, ReasonBadJSON, ""},
		{"no version", `{"op":"upsert","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonBadVersion, "v"},
		{"version 2", `{"v":2,"op":"upsert","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonBadVersion, "v"},
		{"version 1.0", `{"v":1.0,"op":"upsert","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonBadVersion, "v"},
		{"version string", `{"v":"1","op":"upsert","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonBadVersion, "v"},
		{"unknown op", `{"v":1,"op":"merge","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonUnknownOp, "op"},
		{"missing op", `{"v":1,"id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonUnknownOp, "op"},
		{"short x", `{"v":1,"op":"upsert","id":"p","x":[1,2]}`, TrainEvent{}, ReasonWrongDim, "x"},
		{"long x", `{"v":1,"op":"upsert","id":"p","x":[1,2,3,4]}`, TrainEvent{}, ReasonWrongDim, "x"},
		{"overflow", `{"v":1,"op":"upsert","id":"p","x":[1,1e400,3]}`, TrainEvent{}, ReasonNonFinite, "x"},
		{"negative overflow", `{"v":1,"op":"upsert","id":"p","x":[1,-1e309,3]}`, TrainEvent{}, ReasonNonFinite, "x"},
		{"NaN literal", `{"v":1,"op":"upsert","id":"p","x":[1,NaN,3]}`, TrainEvent{}, ReasonBadJSON, "x"},
		{"NaN string", `{"v":1,"op":"upsert","id":"p","x":[1,"NaN",3]}`, TrainEvent{}, ReasonBadType, "x"},
		{"null element", `{"v":1,"op":"upsert","id":"p","x":[1,null,3]}`, TrainEvent{}, ReasonBadType, "x"},
		{"nested array", `{"v":1,"op":"upsert","id":"p","x":[[1],2,3]}`, TrainEvent{}, ReasonBadType, "x"},
		{"oversize", `{"v":1,"op":"upsert","id":"p","x":[1,2,3]}` + strings.Repeat(" ", 512), TrainEvent{}, ReasonOversize, ""},
		{"empty id", `{"v":1,"op":"upsert","id":"","x":[1,2,3]}`, TrainEvent{}, ReasonBadID, "id"},
		{"long id", `{"v":1,"op":"upsert","id":"` + long + `","x":[1,2,3]}`, TrainEvent{}, ReasonBadID, "id"},
		{"control char id", `{"v":1,"op":"upsert","id":"a\u0007b","x":[1,2,3]}`, TrainEvent{}, ReasonBadID, "id"},
		{"lone surrogate id", `{"v":1,"op":"upsert","id":"a\ud800","x":[1,2,3]}`, TrainEvent{}, ReasonBadID, "id"},
		{"numeric id", `{"v":1,"op":"upsert","id":5,"x":[1,2,3]}`, TrainEvent{}, ReasonBadType, "id"},
		{"missing id", `{"v":1,"op":"upsert","x":[1,2,3]}`, TrainEvent{}, ReasonMissingField, "id"},
		{"missing x", `{"v":1,"op":"upsert","id":"p"}`, TrainEvent{}, ReasonMissingField, "x"},
		{"delete without request", `{"v":1,"op":"delete","id":"p"}`, TrainEvent{}, ReasonMissingField, "request"},
		{"delete with x", `{"v":1,"op":"delete","id":"p","request":"r","x":[1,2,3]}`, TrainEvent{}, ReasonUnknownField, "x"},
		{"upsert with request", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"request":"r"}`, TrainEvent{}, ReasonUnknownField, "request"},
		{"duplicate id", `{"v":1,"op":"upsert","id":"p","id":"q","x":[1,2,3]}`, TrainEvent{}, ReasonDuplicateField, "id"},
		{"duplicate v", `{"v":1,"v":1,"op":"upsert","id":"p","x":[1,2,3]}`, TrainEvent{}, ReasonDuplicateField, "v"},
		{"unknown field", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"lable":3}`, TrainEvent{}, ReasonUnknownField, "lable"},
		{"case variant key", `{"v":1,"op":"upsert","ID":"p","x":[1,2,3]}`, TrainEvent{}, ReasonUnknownField, "ID"},
		{"fractional label", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"label":1.5}`, TrainEvent{}, ReasonBadValue, "label"},
		{"huge label", `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"label":4294967296}`, TrainEvent{}, ReasonBadValue, "label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeTrain([]byte(tt.in), testLim)
			checkDecode(t, got, tt.want, err, tt.reason, tt.field)
		})
	}
}

func TestDecodeQuery(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   QueryEvent
		reason Reason
		field  string
	}{
		{"by x", `{"v":1,"request":"q","x":[1,2,3]}`, QueryEvent{Request: "q", X: []float64{1, 2, 3}}, "", ""},
		{"by id with k and delta", `{"v":1,"request":"q","id":"p","k":10,"delta":0.05}`, QueryEvent{Request: "q", ID: "p", K: 10, Delta: 0.05}, "", ""},
		{"both", `{"v":1,"request":"q","id":"p","x":[1,2,3]}`, QueryEvent{}, ReasonBadValue, "id"},
		{"neither", `{"v":1,"request":"q"}`, QueryEvent{}, ReasonMissingField, "x"},
		{"no request", `{"v":1,"id":"p"}`, QueryEvent{}, ReasonMissingField, "request"},
		{"k zero", `{"v":1,"request":"q","id":"p","k":0}`, QueryEvent{}, ReasonBadValue, "k"},
		{"k too big", `{"v":1,"request":"q","id":"p","k":51}`, QueryEvent{}, ReasonBadValue, "k"},
		{"delta one", `{"v":1,"request":"q","id":"p","delta":1}`, QueryEvent{}, ReasonBadValue, "delta"},
		{"delta overflow", `{"v":1,"request":"q","id":"p","delta":1e999}`, QueryEvent{}, ReasonNonFinite, "delta"},
		{"op in query", `{"v":1,"request":"q","id":"p","op":"upsert"}`, QueryEvent{}, ReasonUnknownField, "op"},
		{"duplicate request", `{"v":1,"request":"q","request":"q","id":"p"}`, QueryEvent{}, ReasonDuplicateField, "request"},
		{"wrong dim", `{"v":1,"request":"q","x":[]}`, QueryEvent{}, ReasonWrongDim, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeQuery([]byte(tt.in), testLim)
			checkDecode(t, got, tt.want, err, tt.reason, tt.field)
		})
	}
}

func checkDecode[E any](t *testing.T, got, want E, err error, reason Reason, field string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
		return
	}
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want a rejection", err)
	}
	var re *RejectError
	errors.As(err, &re)
	if re.Reason != reason || re.Field != field {
		t.Errorf("rejection (%s, field %q), want (%s, field %q); message %q", re.Reason, re.Field, reason, field, re.Msg)
	}
	if re.Msg == "" {
		t.Error("rejection has no human message")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	trains := []TrainEvent{
		{Op: OpUpsert, ID: "p\"\\<>&", X: []float64{math.SmallestNonzeroFloat64, -math.MaxFloat64, math.Copysign(0, -1)}, Label: i64(-3)},
		{Op: OpUpsert, ID: "日本", X: []float64{0.1, 1e-300, 123456789012345678}},
		{Op: OpDelete, ID: "x", Request: "r\u2028"},
	}
	for _, ev := range trains {
		b, err := EncodeTrain(ev, testLim)
		if err != nil {
			t.Fatalf("EncodeTrain(%+v): %v", ev, err)
		}
		if !json.Valid(b) {
			t.Fatalf("EncodeTrain wrote invalid JSON %s", b)
		}
		got, err := DecodeTrain(b, testLim)
		if err != nil {
			t.Fatalf("DecodeTrain(%s): %v", b, err)
		}
		if !reflect.DeepEqual(got, ev) || (ev.X != nil && math.Signbit(got.X[2]) != math.Signbit(ev.X[2])) {
			t.Errorf("round trip of %+v gave %+v", ev, got)
		}
	}
	bad := []struct {
		ev     TrainEvent
		reason Reason
	}{
		{TrainEvent{Op: OpUpsert, ID: "p", X: []float64{1, math.NaN(), 2}}, ReasonNonFinite},
		{TrainEvent{Op: OpUpsert, ID: "p", X: []float64{1, 2}}, ReasonWrongDim},
		{TrainEvent{Op: "noop", ID: "p"}, ReasonUnknownOp},
		{TrainEvent{Op: OpDelete, ID: "p"}, ReasonBadID},
	}
	for _, tt := range bad {
		if _, err := EncodeTrain(tt.ev, testLim); ReasonOf(err) != tt.reason {
			t.Errorf("EncodeTrain(%+v) reason %q, want %q (err %v)", tt.ev, ReasonOf(err), tt.reason, err)
		}
	}
	q := QueryEvent{Request: "q", X: []float64{1, 2, 3}, K: 5, Delta: 1e-9}
	b, err := EncodeQuery(q, testLim)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeQuery(b, testLim); err != nil || !reflect.DeepEqual(got, q) {
		t.Errorf("query round trip: got %+v, %v; want %+v", got, err, q)
	}
}

func TestOutputEncode(t *testing.T) {
	a := Attribution{Request: "q1", Model: 4, Verdict: VerdictCertified, TopK: []Scored{{ID: "p1", Score: 0.5, Radius: 0.1}},
		Lower: 0.4, Upper: 0.2, Budget: Budget{Heads: 4, SketchDim: 64, PerView: 8, Pool: 16}, Delta: 0.05, Seed: 9}
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("attribution %s: %v", b, err)
	}
	for _, k := range []string{"v", "request", "model", "verdict", "topk"} {
		if _, ok := m[k]; !ok {
			t.Errorf("attribution %s lacks key %q", b, k)
		}
	}
	if m["v"] != 1.0 {
		t.Errorf("attribution v = %v, want 1", m["v"])
	}
	top := m["topk"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "score", "radius"} {
		if _, ok := top[k]; !ok {
			t.Errorf("topk entry %v lacks %q", top, k)
		}
	}
	a.TopK[0].Radius = math.Inf(1)
	a.Verdict = "maybe"
	if _, err := a.Encode(); err == nil || !strings.Contains(err.Error(), "topk[0].radius") || !strings.Contains(err.Error(), "verdict") {
		t.Errorf("bad attribution: err %v, want both problems named", err)
	}
	au := Audit{Request: "r", ID: "p", WasLandmark: true, ModelBefore: 1, ModelAfter: 2, Percentile: 99, Seq: 3, PrevHash: "aa", Hash: "bb"}
	b, err = au.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m = nil
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"v", "request", "id", "was_landmark", "model_before", "model_after", "percentile", "seq", "prev_hash", "hash"} {
		if _, ok := m[k]; !ok {
			t.Errorf("audit %s lacks key %q", b, k)
		}
	}
	big := make([]byte, MaxDeadLetterRaw+10)
	d := NewDeadLetter(Message{Topic: "t", Partition: 2, Offset: 7, Value: big}, reject(ReasonOversize, "", "x"))
	if len(d.Raw) != MaxDeadLetterRaw || !d.Truncated || d.RawLen != len(big) || d.Reason != ReasonOversize {
		t.Errorf("dead letter of %d bytes: raw %d truncated %v raw_len %d reason %s", len(big), len(d.Raw), d.Truncated, d.RawLen, d.Reason)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings, one per expected problem
	}{
		{"ok", Config{Brokers: []string{"a:9092"}}, nil},
		{"ok scram", Config{Brokers: []string{"a:9092"}, SASL: SASLConfig{Mechanism: SASLScramSHA512, Username: "u", Password: "p"}, TLS: TLSConfig{Enable: true}}, nil},
		{"scram without tls", Config{Brokers: []string{"a:9092"}, SASL: SASLConfig{Mechanism: SASLScramSHA256, Username: "u", Password: "p"}},
			[]string{"sasl.mechanism SCRAM-SHA-256 without tls.enable"}},
		{"plain without tls", Config{Brokers: []string{"a:9092"}, SASL: SASLConfig{Mechanism: SASLPlain, Username: "u", Password: "p"}},
			[]string{"sasl.mechanism PLAIN without tls.enable"}},
		{"plain without tls, allowed", Config{Brokers: []string{"a:9092"}, SASL: SASLConfig{Mechanism: SASLPlain, Username: "u", Password: "p"},
			AllowPlaintextSASL: true}, nil},
		{"everything wrong", Config{Brokers: []string{"nohost"}, SASL: SASLConfig{Mechanism: "GSSAPI"}, TLS: TLSConfig{CAFile: "x"}},
			[]string{`brokers[0] "nohost"`, `sasl.mechanism "GSSAPI"`, "tls.enable is false"}},
		{"plain without password", Config{Brokers: []string{"a:1"}, SASL: SASLConfig{Mechanism: SASLPlain, Username: "u"}}, []string{"sasl.password"}},
		{"missing ca", Config{Brokers: []string{"a:1"}, TLS: TLSConfig{Enable: true, CAFile: "/nonexistent/ca.pem"}}, []string{"tls.ca_file"}},
		{"cert without key", Config{Brokers: []string{"a:1"}, TLS: TLSConfig{Enable: true, CertFile: "c.pem"}}, []string{"tls.cert_file"}},
		{"no brokers", Config{}, []string{"brokers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
		})
	}
	for _, name := range []string{"cairn.train", "a", "A-b_c.9", strings.Repeat("t", 249)} {
		if err := validTopicName(name); err != nil {
			t.Errorf("validTopicName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "b c", "é", strings.Repeat("t", 250)} {
		if err := validTopicName(name); err == nil {
			t.Errorf("validTopicName(%q) = nil, want an error", name)
		}
	}
}

func FuzzDecodeTrain(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"upsert","id":"p1","x":[1,-2.5,3e-3],"label":2}`,
		`{"v":1,"op":"delete","id":"p1","request":"r1"}`,
		`{"v":1,"op":"upsert","id":"p","id":"q","x":[1,2,3]}`,
		`{"v":1,"op":"upsert","id":"a\ud800","x":[1,1e400,3]}`,
		`{"v":1,"op":"upsert","id":"p","x":[1,2,3]} x`,
		"{\"v\":1,\"op\":\"upsert\",\"id\":\"\xff\"}",
		`[]`, `{}`, ``, `{"v":1,"x":[[[[`,
		`{"v":1,"op":"upsert","id":"\u00e9\ud83d\ude00\n","x":[-0,0.5E+2,1e-7],"label":-0}`,
		`{ "v" : 1 , "op" : "delete" , "id" : "a\/b" , "request" : "\"r\"" }`,
		`{"v":1,"op":"upsert","id":"p","x":[1,2,3],"subject":"s\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeTrain(raw, testLim)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" || re.Msg == "" {
				t.Fatalf("error %v is not a complete RejectError", err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		// Oracle: encoding/json must read the same values (keys are
		// exact and unique in an accepted event, so its case-insensitive
		// and last-wins rules cannot differ from ours).
		var ref struct {
			V       int       `json:"v"`
			Op      string    `json:"op"`
			ID      string    `json:"id"`
			X       []float64 `json:"x"`
			Label   *int64    `json:"label"`
			Subject string    `json:"subject"`
			Request string    `json:"request"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("accepted %q but encoding/json: %v", raw, err)
		}
		if want := (TrainEvent{Op: Op(ref.Op), ID: ref.ID, X: ref.X, Label: ref.Label, Subject: ref.Subject, Request: ref.Request}); ref.V != 1 || !reflect.DeepEqual(ev, want) {
			t.Fatalf("decoded %+v, encoding/json read %+v (v=%d)", ev, want, ref.V)
		}
		b, err := EncodeTrain(ev, testLim)
		if err != nil {
			t.Fatalf("accepted %q but EncodeTrain(%+v): %v", raw, ev, err)
		}
		ev2, err := DecodeTrain(b, testLim)
		if err != nil {
			t.Fatalf("re-decode of %q: %v", b, err)
		}
		if !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("round trip %+v -> %s -> %+v", ev, b, ev2)
		}
	})
}

func FuzzDecodeQuery(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"request":"q","x":[1,2,3]}`,
		`{"v":1,"request":"q","id":"p","k":10,"delta":0.05}`,
		`{"v":1,"request":"q","id":"p","x":[1,2,3]}`,
		`{"v":1,"request":"q","id":"p","delta":1e999}`,
		`{"v":1,"request":"q","request":"q"}`,
		`{"v":1,"request":"q","id":"p","score":"entk"}`,
		`{"v":1,"request":"q","id":"p","score":"nope"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeQuery(raw, testLim)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" || re.Msg == "" {
				t.Fatalf("error %v is not a complete RejectError", err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		var ref struct {
			V       int       `json:"v"`
			Request string    `json:"request"`
			X       []float64 `json:"x"`
			ID      string    `json:"id"`
			K       int       `json:"k"`
			Delta   float64   `json:"delta"`
			Score   string    `json:"score"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("accepted %q but encoding/json: %v", raw, err)
		}
		if want := (QueryEvent{Request: ref.Request, X: ref.X, ID: ref.ID, K: ref.K, Delta: ref.Delta, Score: ref.Score}); ref.V != 1 || !reflect.DeepEqual(ev, want) {
			t.Fatalf("decoded %+v, encoding/json read %+v (v=%d)", ev, want, ref.V)
		}
		b, err := EncodeQuery(ev, testLim)
		if err != nil {
			t.Fatalf("accepted %q but EncodeQuery(%+v): %v", raw, ev, err)
		}
		ev2, err := DecodeQuery(b, testLim)
		if err != nil {
			t.Fatalf("re-decode of %q: %v", b, err)
		}
		if !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("round trip %+v -> %s -> %+v", ev, b, ev2)
		}
	})
}

func ExampleDecodeTrain() {
	lim := Limits{InputDim: 2}
	ev, err := DecodeTrain([]byte(`{"v":1,"op":"upsert","id":"p1","x":[0.5,-1],"label":3}`), lim)
	fmt.Println(ev.Op, ev.ID, ev.X, *ev.Label, err)
	_, err = DecodeTrain([]byte(`{"v":1,"op":"upsert","id":"p1","x":[0.5]}`), lim)
	fmt.Println(ReasonOf(err))
	fmt.Println(err)
	// Output:
	// upsert p1 [0.5 -1] 3 <nil>
	// wrong_dim
	// stream: rejected (wrong_dim): field "x": 1 values; want exactly 2
}
