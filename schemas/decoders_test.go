package schemas_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/stream"
)

// The decoders (stream.DecodeTrain, stream.DecodeQuery) and the schemas (train.v1.json,
// query.v1.json, with x bound to the deployment's input size) should accept the same
// messages. Where they cannot, because JSON Schema sees the parsed value and not its
// text, or a limit is the deployment's, or the decoder lags the schema, each class of
// message on which they differ is named here, and the tests below fail on any
// difference outside these classes and on a class no longer seen.
const (
	// A key given twice: encoding/json (and so any schema validator) keeps the last
	// value; the decoder refuses it (duplicate_field).
	diffDuplicateKey = "duplicate key"
	// "v" written as 1.0, 1e0 or 10e-1: JSON Schema compares numbers by value, the
	// decoder wants the literal 1 (bad_version).
	diffVersionText = "v written other than 1"
	// An integer written with a fraction or an exponent (label 3.0, k 1e1): JSON
	// Schema's "integer" is any number with a zero fraction, the decoder wants an
	// integer literal (bad_value).
	diffIntegerText = "integer written as a decimal"
	// An id of at most 256 characters but more than 256 UTF-8 bytes: JSON Schema's
	// maxLength counts characters, the decoder bytes (Limits.MaxIDBytes; bad_id).
	diffIDBytes = "id over 256 bytes"
	// A delta in (0, 1) that float64 rounds to 0 or 1 (1e-400, 0.99999999999999999):
	// JSON Schema compares exactly, the decoder the parsed float64 (bad_value).
	diffDeltaRounds = "delta rounds to 0 or 1"
	// A message longer than Limits.MaxBytes (a deployment's limit, 4 MiB by default),
	// which a schema cannot state (oversize).
	diffOversize = "oversize"
)

// knownDiffs lists the classes above; each must occur in the corpus.
var knownDiffs = []string{diffDuplicateKey, diffVersionText, diffIntegerText, diffIDBytes, diffDeltaRounds, diffOversize}

// testLimits are the decoders' limits in these tests: the defaults but the input size
// and a smaller MaxBytes, so that oversize messages are cheap to make.
var testLimits = stream.Limits{InputDim: testDim, MaxBytes: 4096}

// explain returns the classes of known difference that raw falls in (nil for none).
// It reads raw's top-level keys and the text of their values with encoding/json.
func explain(raw []byte, lim stream.Limits) []string {
	var out []string
	add := func(c string) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(raw) > lim.MaxBytes {
		add(diffOversize)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		if seen[key] {
			add(diffDuplicateKey)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		text := strings.TrimSpace(string(v))
		number := text != "" && (text[0] == '-' || text[0] >= '0' && text[0] <= '9')
		switch key {
		case "v":
			if number && text != "1" {
				add(diffVersionText)
			}
		case "label", "k":
			if number && strings.ContainsAny(text, ".eE") {
				add(diffIntegerText)
			}
		case "delta":
			if r, ok := new(big.Rat).SetString(text); number && ok && r.Sign() > 0 && r.Cmp(big.NewRat(1, 1)) < 0 {
				if f, _ := strconv.ParseFloat(text, 64); f == 0 || f == 1 {
					add(diffDeltaRounds)
				}
			}
		}
		if key == "id" || key == "request" || key == "subject" {
			var s string
			if json.Unmarshal(v, &s) == nil && len(s) > 256 && utf8.RuneCountInString(s) <= 256 {
				add(diffIDBytes)
			}
		}
	}
	return out
}

// hugeExponent matches number literals whose exponent makes exact (big.Rat) arithmetic
// slow; the fuzzers skip them.
var hugeExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

// kind is one decoder and the schema that should agree with it.
type kind struct {
	name   string // schema (with x bound to testDim)
	decode func([]byte, stream.Limits) error
}

var (
	trainKind = kind{"train-dim", func(b []byte, l stream.Limits) error { _, err := stream.DecodeTrain(b, l); return err }}
	queryKind = kind{"query-dim", func(b []byte, l stream.Limits) error { _, err := stream.DecodeQuery(b, l); return err }}
)

// compare decodes and validates raw; it returns whether each accepts it and, when only
// the schema does, the known classes of difference raw falls in. Nothing explains a
// message that only the decoder accepts.
func compare(tb testing.TB, k kind, raw []byte) (decoded, valid bool, why []string) {
	tb.Helper()
	decoded = k.decode(raw, testLimits) == nil
	valid = validate(tb, k.name, raw) == nil
	if valid && !decoded { // every known difference is a message only the schema accepts
		why = explain(raw, testLimits)
	}
	return decoded, valid, why
}

// field is one key and the JSON text of its value, in message order.
type field struct{ key, val string }

// parseFields splits a JSON object into its fields; ok is false when raw is not one.
func parseFields(raw []byte) (fs []field, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		fs = append(fs, field{tok.(string), string(v)})
	}
	return fs, true
}

func render(fs []field) []byte {
	b := []byte{'{'}
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.key)
		b = append(b, ':')
		b = append(b, f.val...)
	}
	return append(b, '}')
}

// values are the replacement values of the mutations: every JSON type, the edges of
// each field's range, numbers at float64's limits and written in other forms, and ids
// at the byte and character limits.
var values = []string{
	`null`, `true`, `false`, `{}`, `[]`, `""`, `"s"`, `"p7"`, `0`, `-0`, `1`, `2`, `-1`, `1.0`, `1e0`, `10e-1`, `3.0`, `1e1`,
	`0.5`, `5e-1`, `1e-400`, `0.99999999999999999999`, `1e400`, `-1e400`, `1.7976931348623157e308`,
	`1.7976931348623158e308`, `1.797693134862315808e308`, `1000`, `1001`, `2147483647`, `2147483648`, `-2147483648`,
	`[1,2,3]`, `[1,2]`, `[1,2,3,4]`, `["1",2,3]`, `[1e400,0,0]`, `[0,1e-400,0]`, `[null,0,0]`, `[[1],2,3]`,
	`"upsert"`, `"delete"`, `"Upsert"`, `"entk"`, `"representer"`, `"ENTK"`, `"a\u0000b"`, `"a\u007fb"`, `"a\u0085b"`,
	`"\ud800"`, `"\ufffd"`, `"\u00e9t\u00e9"`, `"a\tb"`, `" "`,
	strconv.Quote(strings.Repeat("a", 256)), strconv.Quote(strings.Repeat("a", 257)),
	strconv.Quote(strings.Repeat("é", 128)), strconv.Quote(strings.Repeat("é", 129)), strconv.Quote(strings.Repeat("é", 256)),
	strconv.Quote(strings.Repeat("é", 257)),
}

var keys = []string{"v", "op", "id", "x", "label", "request", "k", "delta", "score", "subject", "lable", "V", "extra"}

// mutate returns a variant of the valid message raw.
func mutate(r *rand.Rand, raw []byte) []byte {
	fs, ok := parseFields(raw)
	if !ok || len(fs) == 0 {
		return damage(r, raw)
	}
	switch r.IntN(9) {
	case 0: // drop a key
		i := r.IntN(len(fs))
		fs = slices.Delete(fs, i, i+1)
	case 1: // add a key, known or not
		fs = slices.Insert(fs, r.IntN(len(fs)+1), field{keys[r.IntN(len(keys))], values[r.IntN(len(values))]})
	case 2: // repeat a key, with its value or another
		f := fs[r.IntN(len(fs))]
		if r.IntN(2) == 0 {
			f.val = values[r.IntN(len(values))]
		}
		fs = append(fs, f)
	case 3, 4, 5: // replace a value
		fs[r.IntN(len(fs))].val = values[r.IntN(len(values))]
	case 6: // a valid subject: the data-subject field
		fs = append(fs, field{"subject", `"s-` + strconv.Itoa(r.IntN(100)) + `"`})
	case 7:
		return damage(r, raw)
	default: // two mutations
		return mutate(r, mutate(r, raw))
	}
	return render(fs)
}

// damage mutates raw as text.
func damage(r *rand.Rand, raw []byte) []byte {
	b := slices.Clone(raw)
	switch r.IntN(5) {
	case 0:
		return append(b, "{}"...)
	case 1:
		return b[:r.IntN(len(b)+1)]
	case 2:
		return append([]byte("["), append(b, ']')...)
	case 3: // an invalid UTF-8 byte after the first quote
		i := bytes.IndexByte(b, '"')
		return slices.Insert(b, i+1, 0xff)
	default:
		return append(b, bytes.Repeat([]byte{' '}, testLimits.MaxBytes)...)
	}
}

// Valid messages, made by stream's encoders (what cairnctl and package client send).

var idRunes = []rune("ab7_-.:/é点🙂")

func randID(r *rand.Rand) string {
	b := make([]rune, 1+r.IntN(12))
	for i := range b {
		b[i] = idRunes[r.IntN(len(idRunes))]
	}
	return string(b)
}

func randVec(r *rand.Rand) []float64 {
	x := make([]float64, testDim)
	for i := range x {
		switch r.IntN(8) {
		case 0:
			x[i] = 1.7976931348623157e308 * float64(1-2*r.IntN(2))
		case 1:
			x[i] = 5e-324
		default:
			x[i] = r.NormFloat64()
		}
	}
	return x
}

func randTrain(tb testing.TB, r *rand.Rand) []byte {
	tb.Helper()
	ev := stream.TrainEvent{Op: stream.OpUpsert, ID: randID(r), X: randVec(r)}
	switch r.IntN(3) {
	case 0:
		ev = stream.TrainEvent{Op: stream.OpDelete, ID: ev.ID, Request: randID(r)}
	case 1:
		l := int64(r.IntN(2*stream.MaxLabel+1) - stream.MaxLabel)
		ev.Label = &l
	}
	b, err := stream.EncodeTrain(ev, testLimits)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func randQuery(tb testing.TB, r *rand.Rand) []byte {
	tb.Helper()
	ev := stream.QueryEvent{Request: randID(r)}
	if r.IntN(2) == 0 {
		ev.X = randVec(r)
	} else {
		ev.ID = randID(r)
	}
	if r.IntN(2) == 0 {
		ev.K = 1 + r.IntN(stream.DefaultMaxK)
	}
	if r.IntN(2) == 0 {
		ev.Delta = r.Float64()
		if ev.Delta == 0 {
			ev.Delta = 0.5
		}
	}
	if r.IntN(2) == 0 {
		ev.Score = []string{"entk", "displacement", "representer"}[r.IntN(3)]
	}
	b, err := stream.EncodeQuery(ev, testLimits)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestDecodersMatchSchemas: on stream's encodings of random valid events both the
// decoder and the schema accept; on mutations of them they agree, except on the known
// classes of difference above, and each of those classes occurs.
func TestDecodersMatchSchemas(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const valid, mutants = 300, 3000
	seen := map[string]int{}
	for _, c := range []struct {
		kind
		gen func(testing.TB, *rand.Rand) []byte
	}{{trainKind, randTrain}, {queryKind, randQuery}} {
		agree, accepted := 0, 0
		for i := range valid + mutants {
			raw := c.gen(t, r)
			if i >= valid {
				raw = mutate(r, raw)
			}
			decoded, ok, why := compare(t, c.kind, raw)
			switch {
			case i < valid && (!decoded || !ok):
				t.Errorf("%s: stream's encoding %s: decoder accepts %v, schema accepts %v (%v)", c.name, raw, decoded, ok,
					validate(t, c.name, raw))
			case decoded == ok:
				agree++
				if ok {
					accepted++
				}
			case len(why) == 0:
				t.Errorf("%s: unexplained difference on %s: decoder accepts %v (%v), schema accepts %v (%v)", c.name, raw,
					decoded, c.decode(raw, testLimits), ok, validate(t, c.name, raw))
			default:
				for _, w := range why {
					seen[w]++
				}
			}
		}
		t.Logf("%s: %d messages, %d agreed (%d of them accepted by both)", c.name, valid+mutants, agree, accepted)
	}
	for _, d := range knownDiffs {
		if seen[d] == 0 {
			t.Errorf("known difference %q never occurred: is it gone? then drop it from knownDiffs and the docs", d)
		}
	}
	t.Logf("differences by class: %v", seen)
}

// TestKnownDiffs pins each class of difference to one message, and which side accepts.
func TestKnownDiffs(t *testing.T) {
	long := strings.Repeat("é", 200) // 200 characters, 400 bytes
	for _, c := range []struct {
		kind
		raw            string
		decoded, valid bool
		why            string
	}{
		{trainKind, `{"v":1,"op":"delete","id":"p","request":"r","id":"p"}`, false, true, diffDuplicateKey},
		{trainKind, `{"v":1.0,"op":"delete","id":"p","request":"r"}`, false, true, diffVersionText},
		{trainKind, `{"v":1,"op":"upsert","id":"p","x":[1,2,3],"label":3.0}`, false, true, diffIntegerText},
		{queryKind, `{"v":1,"request":"q","id":"p","k":1e1}`, false, true, diffIntegerText},
		{trainKind, `{"v":1,"op":"delete","id":"` + long + `","request":"r"}`, false, true, diffIDBytes},
		{queryKind, `{"v":1,"request":"q","id":"p","delta":1e-400}`, false, true, diffDeltaRounds},
		{queryKind, `{"v":1,"request":"q","id":"p","delta":0.99999999999999999999}`, false, true, diffDeltaRounds},
		{queryKind, `{"v":1,"request":"q","id":"p"}` + strings.Repeat(" ", testLimits.MaxBytes), false, true, diffOversize},
	} {
		decoded, valid, why := compare(t, c.kind, []byte(c.raw))
		if decoded != c.decoded || valid != c.valid || !slices.Contains(why, c.why) {
			t.Errorf("%.80s: decoder %v, schema %v, why %v; want %v, %v, %q", c.raw, decoded, valid, why, c.decoded, c.valid, c.why)
		}
	}
}

// fuzzDecoder checks one input: a difference between the decoder and the schema must
// be a known one.
func fuzzDecoder(t *testing.T, k kind, raw []byte) {
	if len(raw) > 2*testLimits.MaxBytes || hugeExponent.Match(raw) {
		return
	}
	decoded, valid, why := compare(t, k, raw)
	if decoded != valid && len(why) == 0 {
		t.Errorf("%s: unexplained difference on %q: decoder accepts %v (%v), schema accepts %v (%v)", k.name, raw,
			decoded, k.decode(raw, testLimits), valid, validate(t, k.name, raw))
	}
}

func fuzzSeeds(f *testing.F, gen func(testing.TB, *rand.Rand) []byte) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 16 {
		raw := gen(f, r)
		f.Add(raw)
		f.Add(mutate(r, raw))
	}
}

// FuzzTrainSchema: on any input, DecodeTrain and train.v1.json agree but for the known
// differences.
func FuzzTrainSchema(f *testing.F) {
	fuzzSeeds(f, randTrain)
	f.Fuzz(func(t *testing.T, raw []byte) { fuzzDecoder(t, trainKind, raw) })
}

// FuzzQuerySchema: on any input, DecodeQuery and query.v1.json agree but for the known
// differences.
func FuzzQuerySchema(f *testing.F) {
	fuzzSeeds(f, randQuery)
	f.Fuzz(func(t *testing.T, raw []byte) { fuzzDecoder(t, queryKind, raw) })
}
