package stream

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Version is the schema version every event carries in its "v" field.
const Version = 1

// Reason is the machine-readable code of a rejected input. It is what the
// dead-letter event's "reason" field holds and what metrics count by.
type Reason string

// Rejection reasons.
const (
	ReasonBadJSON        Reason = "bad_json"        // not one well-formed UTF-8 JSON object
	ReasonBadVersion     Reason = "bad_version"     // "v" missing or not exactly 1
	ReasonUnknownOp      Reason = "unknown_op"      // "op" missing, or not upsert/delete (cairn.train) or erase/unblock (cairn.erasures)
	ReasonUnknownField   Reason = "unknown_field"   // a key the schema does not define
	ReasonDuplicateField Reason = "duplicate_field" // a key given twice
	ReasonMissingField   Reason = "missing_field"   // a required key absent
	ReasonBadType        Reason = "bad_type"        // a value of the wrong JSON type
	ReasonWrongDim       Reason = "wrong_dim"       // len(x) != configured input size
	ReasonNonFinite      Reason = "non_finite"      // a number that overflows float64
	ReasonOversize       Reason = "oversize"        // message longer than Limits.MaxBytes
	ReasonBadID          Reason = "bad_id"          // empty, too long, or bad characters
	ReasonBadValue       Reason = "bad_value"       // k, delta or label out of range
	ReasonUnknownID      Reason = "unknown_id"      // a query names an id that is not stored
	ReasonUnavailable    Reason = "unavailable"     // the serving model cannot answer (e.g. every landmark deleted)
	ReasonKeyMismatch    Reason = "key_mismatch"    // a training event not keyed by its id, or an erasure request not keyed by its subject
	ReasonBadIndex       Reason = "bad_index"       // an x entry the model reads as a table index is not an integer in [0, N)
	// ReasonFeatureMismatch: a record of cairn.features (internal/featrec) that the
	// primary does not apply: it does not decode (a bad checksum), or its pipeline
	// fingerprint, source coordinates, id or dimension are not what the primary would
	// compute for the training event it names. The primary computes those features itself.
	ReasonFeatureMismatch Reason = "feature_mismatch"
)

// RejectError says why an input event was rejected. It matches ErrRejected.
type RejectError struct {
	Reason Reason
	Field  string // the offending key; empty when the message as a whole is at fault
	Msg    string // human explanation naming the offending value
}

func (e *RejectError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("stream: rejected (%s): %s", e.Reason, e.Msg)
	}
	return fmt.Sprintf("stream: rejected (%s): field %q: %s", e.Reason, e.Field, e.Msg)
}

// Is makes errors.Is(err, ErrRejected) true for every RejectError.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

func reject(r Reason, field, format string, args ...any) *RejectError {
	return &RejectError{Reason: r, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// CheckTrainKey rejects (ReasonKeyMismatch) a training event whose Kafka message key is
// not its id. The producer contract keys cairn.train by id, so that every event of an
// id lands in one partition and is applied in the order it was produced: a delete sent
// under another key could overtake the upsert it is meant to remove.
func CheckTrainKey(key []byte, ev TrainEvent) error {
	if string(key) != ev.ID {
		return reject(ReasonKeyMismatch, "id", "the message key %q is not the id %q (cairn.train is keyed by id)", truncate(string(key), 64), ev.ID)
	}
	return nil
}

// ReasonOf returns the reason code of a rejection, or "" if err is not one.
func ReasonOf(err error) Reason {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// Limits bound what an input event may contain.
type Limits struct {
	// InputDim is the required length of every "x"; at least 1.
	InputDim int
	// MaxBytes bounds the encoded message. Default 4 MiB.
	MaxBytes int
	// MaxIDBytes bounds ids and request ids in bytes. Default 256.
	MaxIDBytes int
	// MaxK bounds a query's "k". Default 1000.
	MaxK int
	// Scores are the ranking names a query's "score" may take; nil accepts the four
	// rankings of package certify (gradient, entk, displacement, representer).
	Scores []string
	// Indices are the entries of x that the model reads as table indices (an ONNX
	// backbone's embedding codes): each must be an integer in [0, N), or the event is
	// rejected with ReasonBadIndex.
	Indices []IndexLimit
}

// IndexLimit is one entry of x read as a table index: x[Pos] ∈ {0, 1, …, N−1}.
type IndexLimit struct {
	Pos, N int
}

// checkIndices rejects an x whose index entries are not integers in their tables' range.
func checkIndices(x []float64, field string, idx []IndexLimit) *RejectError {
	for _, l := range idx {
		if v := x[l.Pos]; !(v >= 0 && v < float64(l.N)) || v != math.Trunc(v) {
			return reject(ReasonBadIndex, field, "element %d is %v: it is a table index, want an integer in [0, %d)", l.Pos, v, l.N)
		}
	}
	return nil
}

// defaultScores are the rankings a query may name when Limits.Scores is nil (package
// certify's Rankings; stream keeps its own copy because it knows no mathematics). The
// daemon sets Limits.Scores from certify.Rankings itself, and TestQueryScores checks that
// this copy accepts exactly those names.
var defaultScores = []string{"gradient_cosine", "gradient", "entk", "displacement", "representer"}

// Defaults used by Limits when a field is zero.
const (
	DefaultMaxBytes   = 4 << 20
	DefaultMaxIDBytes = 256
	DefaultMaxK       = 1000
)

// withDefaults fills zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxIDBytes == 0 {
		l.MaxIDBytes = DefaultMaxIDBytes
	}
	if l.MaxK == 0 {
		l.MaxK = DefaultMaxK
	}
	return l
}

// Validate reports every invalid limit at once.
func (l Limits) Validate() error {
	var errs []error
	if l.InputDim < 1 {
		errs = append(errs, fmt.Errorf("%w: limits.input_dim %d: must be at least 1", ErrConfig, l.InputDim))
	}
	if l.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: limits.max_bytes %d: must not be negative", ErrConfig, l.MaxBytes))
	}
	if l.MaxIDBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: limits.max_id_bytes %d: must not be negative", ErrConfig, l.MaxIDBytes))
	}
	if l.MaxK < 0 {
		errs = append(errs, fmt.Errorf("%w: limits.max_k %d: must not be negative", ErrConfig, l.MaxK))
	}
	for _, x := range l.Indices {
		if x.Pos < 0 || x.Pos >= l.InputDim || x.N < 1 {
			errs = append(errs, fmt.Errorf("%w: limits.indices: position %d of a table of %d: want 0 <= position < %d and a table of at least 1", ErrConfig, x.Pos, x.N, l.InputDim))
		}
	}
	return errors.Join(errs...)
}

// Op is the operation of a training event.
type Op string

// Training operations.
const (
	OpUpsert Op = "upsert"
	OpDelete Op = "delete"
)

// TrainEvent is one message of the training topic:
//
//	{"v":1,"op":"upsert","id":"p1","x":[0.5,1],"label":3,"subject":"customer-42"}
//	{"v":1,"op":"delete","id":"p1","request":"r9"}
//
// Upserts carry X (exactly Limits.InputDim finite values) and optionally an
// integer Label and the data Subject the point is about (an id under the rules of ids,
// whose erasure request removes the point: ErasureEvent); deletes carry the Request id
// that the audit will answer.
type TrainEvent struct {
	Op      Op
	ID      string
	X       []float64 // upsert only
	Label   *int64    // upsert only, optional
	Subject string    // upsert only, optional ("": none)
	Request string    // delete only
}

// QueryEvent is one message of the query topic: either a point X or the id
// of a stored point, with optional K and Delta (0 means the daemon's default).
//
//	{"v":1,"request":"q1","x":[0.5,1],"k":10,"delta":0.05}
//	{"v":1,"request":"q2","id":"p7"}
type QueryEvent struct {
	Request string
	X       []float64 // exactly one of X and ID
	ID      string
	K       int     // 0: default; else 1..Limits.MaxK
	Delta   float64 // 0: default; else in (0, 1)
	Score   string  // "": default (query.score); else one of Limits.Scores
}

// MaxLabel bounds |label|; class labels are small integers and the bound
// keeps them exact in float64 and int32 code paths.
const MaxLabel = 1<<31 - 1

// DecodeTrain parses and validates one training event. Every returned error
// is a *RejectError. The result shares no memory with raw.
//
// Unknown keys are rejected (reason unknown_field), not ignored: a misspelt
// "lable" must not silently drop data, and a schema change is announced by a
// new "v", so strictness costs compatibility nothing. Keys match exactly
// (encoding/json's case-insensitive matching is not used).
func DecodeTrain(raw []byte, lim Limits) (TrainEvent, error) {
	lim = lim.withDefaults()
	var ev TrainEvent
	var op string
	var have fieldSet
	err := decodeObject(raw, lim, func(key string, d *scanner) *RejectError {
		switch key {
		case "v":
			return decodeVersion(d)
		case "op":
			s, rerr := decodeString(d, key)
			op = s
			return rerr
		case "id":
			s, rerr := decodeID(d, key, lim)
			ev.ID = s
			return rerr
		case "x":
			x, rerr := decodeVector(d, key, lim.InputDim)
			if rerr == nil {
				rerr = checkIndices(x, key, lim.Indices)
			}
			ev.X = x
			return rerr
		case "label":
			n, rerr := decodeInt(d, key, -MaxLabel, MaxLabel)
			ev.Label = &n
			return rerr
		case "request":
			s, rerr := decodeID(d, key, lim)
			ev.Request = s
			return rerr
		case "subject":
			s, rerr := decodeSubject(d, key, lim)
			ev.Subject = s
			return rerr
		}
		return reject(ReasonUnknownField, key, "key not in the training schema")
	}, &have)
	if err != nil {
		return TrainEvent{}, err
	}
	if !have.has("v") {
		return TrainEvent{}, reject(ReasonBadVersion, "v", "missing; want 1")
	}
	if !have.has("op") {
		return TrainEvent{}, reject(ReasonUnknownOp, "op", "missing; want %q or %q", OpUpsert, OpDelete)
	}
	ev.Op = Op(op)
	if !have.has("id") {
		return TrainEvent{}, reject(ReasonMissingField, "id", "missing")
	}
	switch ev.Op {
	case OpUpsert:
		if !have.has("x") {
			return TrainEvent{}, reject(ReasonMissingField, "x", "missing; upsert needs %d values", lim.InputDim)
		}
		if have.has("request") {
			return TrainEvent{}, reject(ReasonUnknownField, "request", "not allowed in an upsert")
		}
	case OpDelete:
		if !have.has("request") {
			return TrainEvent{}, reject(ReasonMissingField, "request", "missing; a delete needs a request id for its audit")
		}
		for _, k := range []string{"x", "label", "subject"} {
			if have.has(k) {
				return TrainEvent{}, reject(ReasonUnknownField, k, "not allowed in a delete")
			}
		}
	default:
		return TrainEvent{}, reject(ReasonUnknownOp, "op", "%q: want %q or %q", truncate(op, 64), OpUpsert, OpDelete)
	}
	return ev, nil
}

// DecodeQuery parses and validates one query event; see DecodeTrain for the
// rules shared by all input decoders.
func DecodeQuery(raw []byte, lim Limits) (QueryEvent, error) {
	return decodeQuery(raw, lim, "")
}

// decodeQuery is DecodeQuery, with request the request id of a query that names none
// ("": "request" is required).
func decodeQuery(raw []byte, lim Limits, request string) (QueryEvent, error) {
	lim = lim.withDefaults()
	var ev QueryEvent
	var have fieldSet
	err := decodeObject(raw, lim, func(key string, d *scanner) *RejectError {
		switch key {
		case "v":
			return decodeVersion(d)
		case "request":
			s, rerr := decodeID(d, key, lim)
			ev.Request = s
			return rerr
		case "x":
			x, rerr := decodeVector(d, key, lim.InputDim)
			if rerr == nil {
				rerr = checkIndices(x, key, lim.Indices)
			}
			ev.X = x
			return rerr
		case "id":
			s, rerr := decodeID(d, key, lim)
			ev.ID = s
			return rerr
		case "k":
			n, rerr := decodeInt(d, key, 1, int64(lim.MaxK))
			ev.K = int(n)
			return rerr
		case "delta":
			f, rerr := decodeNumber(d, key)
			if rerr != nil {
				return rerr
			}
			if !(f > 0 && f < 1) {
				return reject(ReasonBadValue, key, "%v: want 0 < delta < 1", f)
			}
			ev.Delta = f
			return nil
		case "score":
			v, rerr := decodeString(d, key)
			if rerr != nil {
				return rerr
			}
			names := lim.Scores
			if names == nil {
				names = defaultScores
			}
			if !slices.Contains(names, v) {
				return reject(ReasonBadValue, key, "%q: want one of %s", v, strings.Join(names, ", "))
			}
			ev.Score = v
			return nil
		}
		return reject(ReasonUnknownField, key, "key not in the query schema")
	}, &have)
	if err != nil {
		return QueryEvent{}, err
	}
	if !have.has("v") {
		return QueryEvent{}, reject(ReasonBadVersion, "v", "missing; want 1")
	}
	if !have.has("request") {
		if request == "" {
			return QueryEvent{}, reject(ReasonMissingField, "request", "missing")
		}
		ev.Request = request
	}
	switch {
	case have.has("x") && have.has("id"):
		return QueryEvent{}, reject(ReasonBadValue, "id", "both x and id given; want exactly one")
	case !have.has("x") && !have.has("id"):
		return QueryEvent{}, reject(ReasonMissingField, "x", "neither x nor id given; want exactly one")
	}
	return ev, nil
}

// fieldSet records which keys were seen; the schemas are small, so a slice
// beats a map.
type fieldSet struct{ keys []string }

func (s *fieldSet) has(k string) bool {
	for _, x := range s.keys {
		if x == k {
			return true
		}
	}
	return false
}

// decodeObject checks the framing shared by all input events (size, UTF-8,
// exactly one JSON object, no duplicate keys, nothing after it) and hands
// each value to field. field must consume exactly one value from sc.
func decodeObject(raw []byte, lim Limits, field func(string, *scanner) *RejectError, have *fieldSet) error {
	if len(raw) > lim.MaxBytes {
		return reject(ReasonOversize, "", "%d bytes > limit %d", len(raw), lim.MaxBytes)
	}
	// encoding/json replaces invalid UTF-8 by U+FFFD silently; JSON text
	// must be UTF-8 (RFC 8259 section 8.1), so refuse it up front.
	if !utf8.Valid(raw) {
		return reject(ReasonBadJSON, "", "not valid UTF-8")
	}
	sc := &scanner{b: raw}
	if sc.ws() != '{' {
		return reject(ReasonBadJSON, "", "top level is %s, want an object", sc.kind())
	}
	sc.i++
	if sc.ws() == '}' {
		sc.i++
	} else {
		for {
			if sc.ws() != '"' {
				return reject(ReasonBadJSON, "", "at byte %d: object key is %s", sc.i, sc.kind())
			}
			key, msg := sc.str()
			if msg != "" {
				return reject(ReasonBadJSON, "", "at byte %d: %s", sc.i, msg)
			}
			if sc.ws() != ':' {
				return reject(ReasonBadJSON, truncate(key, 64), "at byte %d: want ':' after key", sc.i)
			}
			sc.i++
			if have.has(key) {
				return reject(ReasonDuplicateField, truncate(key, 64), "key given twice")
			}
			if len(have.keys) >= 16 {
				// No schema has more than 6 keys; refusing early bounds the
				// work an adversarial object can cause.
				return reject(ReasonUnknownField, truncate(key, 64), "too many keys")
			}
			have.keys = append(have.keys, key)
			if rerr := field(key, sc); rerr != nil {
				rerr.Field = truncate(rerr.Field, 64)
				return rerr
			}
			c := sc.ws()
			sc.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return reject(ReasonBadJSON, "", "at byte %d: want ',' or '}' after the value of %q", sc.i-1, truncate(key, 64))
			}
		}
	}
	if sc.ws() != 0 {
		return reject(ReasonBadJSON, "", "at byte %d: trailing %s after the object", sc.i, sc.kind())
	}
	return nil
}

// wrongType reports a value of the wrong JSON type, or bad JSON when the
// bytes start no value at all. Decoding stops at the first error, so the
// rest of the value need not be consumed.
func wrongType(field string, sc *scanner, want string) *RejectError {
	if !valueStart(sc.ws()) {
		return reject(ReasonBadJSON, field, "at byte %d: %s, want %s", sc.i, sc.kind(), want)
	}
	return reject(ReasonBadType, field, "got %s, want %s", sc.kind(), want)
}

func decodeVersion(sc *scanner) *RejectError {
	c := sc.ws()
	if c == '-' || ('0' <= c && c <= '9') {
		if n, ok := sc.num(); ok && string(n) == "1" {
			return nil
		} else if ok {
			return reject(ReasonBadVersion, "v", "%s: want 1", truncate(string(n), 32))
		}
		return reject(ReasonBadJSON, "v", "at byte %d: malformed number", sc.i)
	}
	if !valueStart(c) {
		return reject(ReasonBadJSON, "v", "at byte %d: %s", sc.i, sc.kind())
	}
	return reject(ReasonBadVersion, "v", "%s: want the number 1", sc.kind())
}

func decodeString(sc *scanner, field string) (string, *RejectError) {
	if sc.ws() != '"' {
		return "", wrongType(field, sc, "a string")
	}
	v, msg := sc.str()
	if msg != "" {
		return "", reject(ReasonBadJSON, field, "at byte %d: %s", sc.i, msg)
	}
	return v, nil
}

func decodeID(sc *scanner, field string, lim Limits) (string, *RejectError) {
	s, rerr := decodeString(sc, field)
	if rerr != nil {
		return "", rerr
	}
	if err := checkID(s, lim.MaxIDBytes); err != "" {
		return "", reject(ReasonBadID, field, "%q: %s", truncate(s, 64), err)
	}
	return s, nil
}

// checkID returns "" for a valid id, else why it is not. Ids are keys in
// bbolt and Kafka and appear in logs, so they must be non-empty, bounded,
// valid UTF-8 (guaranteed by the framing check), free of control characters,
// and free of U+FFFD, which is what an escaped lone surrogate such as
// "\ud800" decodes to (accepting it would map distinct wire ids to one
// stored id).
func checkID(s string, maxBytes int) string {
	if s == "" {
		return "empty"
	}
	if len(s) > maxBytes {
		return fmt.Sprintf("%d bytes > limit %d", len(s), maxBytes)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("control character U+%04X at byte %d", r, i)
		}
		if r == utf8.RuneError {
			return fmt.Sprintf("U+FFFD at byte %d (invalid UTF-8 or lone surrogate escape)", i)
		}
	}
	return ""
}

// number reads one JSON number; a non-number is a type error.
func number(sc *scanner, field, want string) ([]byte, *RejectError) {
	c := sc.ws()
	if c != '-' && !('0' <= c && c <= '9') {
		return nil, wrongType(field, sc, want)
	}
	n, ok := sc.num()
	if !ok {
		return nil, reject(ReasonBadJSON, field, "at byte %d: malformed number", sc.i)
	}
	return n, nil
}

// decodeNumber reads one JSON number as a finite float64.
func decodeNumber(sc *scanner, field string) (float64, *RejectError) {
	n, rerr := number(sc, field, "a number")
	if rerr != nil {
		return 0, rerr
	}
	return parseFinite(n, field)
}

func parseFinite(n []byte, field string) (float64, *RejectError) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		// The scanner has already checked JSON number syntax, so the only
		// failure left is overflow to ±Inf.
		return 0, reject(ReasonNonFinite, field, "%s overflows float64", truncate(string(n), 32))
	}
	return f, nil
}

// decodeInt reads one JSON number that must be an integer in [lo, hi].
// "3.0" and "3e0" are refused: integers are written as integers.
func decodeInt(sc *scanner, field string, lo, hi int64) (int64, *RejectError) {
	n, rerr := number(sc, field, "an integer")
	if rerr != nil {
		return 0, rerr
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, reject(ReasonBadValue, field, "%s: want an integer in [%d, %d]", truncate(string(n), 32), lo, hi)
	}
	if v < lo || v > hi {
		return 0, reject(ReasonBadValue, field, "%d: want an integer in [%d, %d]", v, lo, hi)
	}
	return v, nil
}

// decodeVector reads an array of exactly dim finite numbers.
func decodeVector(sc *scanner, field string, dim int) ([]float64, *RejectError) {
	if sc.ws() != '[' {
		return nil, wrongType(field, sc, "an array of numbers")
	}
	sc.i++
	x := make([]float64, 0, dim)
	if sc.ws() == ']' {
		sc.i++
	} else {
		for {
			n, rerr := number(sc, field, "a number")
			if rerr != nil {
				if rerr.Reason == ReasonBadType {
					rerr.Msg = fmt.Sprintf("element %d: %s", len(x), rerr.Msg)
				}
				return nil, rerr
			}
			if len(x) == dim {
				return nil, reject(ReasonWrongDim, field, "more than %d values; want exactly %d", dim, dim)
			}
			f, rerr := parseFinite(n, field)
			if rerr != nil {
				rerr.Msg = fmt.Sprintf("element %d: %s", len(x), rerr.Msg)
				return nil, rerr
			}
			x = append(x, f)
			c := sc.ws()
			sc.i++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, reject(ReasonBadJSON, field, "at byte %d: want ',' or ']' in the array", sc.i-1)
			}
		}
	}
	if len(x) != dim {
		return nil, reject(ReasonWrongDim, field, "%d values; want exactly %d", len(x), dim)
	}
	return x, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary so the message stays valid UTF-8.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// EncodeTrain validates ev against lim and writes it as JSON. Decoding the
// result with DecodeTrain gives back ev (NaN and ±Inf cannot be written
// and are refused; -0 is written as "-0" and read back as -0).
func EncodeTrain(ev TrainEvent, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	if err := checkTrain(ev, lim); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 48+len(ev.ID)+len(ev.Request)+len(ev.Subject)+24*len(ev.X))
	b = append(b, `{"v":1,"op":`...)
	b = appendString(b, string(ev.Op))
	b = append(b, `,"id":`...)
	b = appendString(b, ev.ID)
	switch ev.Op {
	case OpUpsert:
		b = append(b, `,"x":`...)
		b = appendVector(b, ev.X)
		if ev.Label != nil {
			b = append(b, `,"label":`...)
			b = strconv.AppendInt(b, *ev.Label, 10)
		}
		if ev.Subject != "" {
			b = append(b, `,"subject":`...)
			b = appendString(b, ev.Subject)
		}
	case OpDelete:
		b = append(b, `,"request":`...)
		b = appendString(b, ev.Request)
	}
	b = append(b, '}')
	if len(b) > lim.MaxBytes {
		return nil, reject(ReasonOversize, "", "%d bytes > limit %d", len(b), lim.MaxBytes)
	}
	return b, nil
}

// EncodeQuery validates ev against lim and writes it as JSON; see EncodeTrain.
func EncodeQuery(ev QueryEvent, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	if err := checkQuery(ev, lim); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 48+len(ev.ID)+len(ev.Request)+24*len(ev.X))
	b = append(b, `{"v":1,"request":`...)
	b = appendString(b, ev.Request)
	if ev.X != nil {
		b = append(b, `,"x":`...)
		b = appendVector(b, ev.X)
	} else {
		b = append(b, `,"id":`...)
		b = appendString(b, ev.ID)
	}
	if ev.K != 0 {
		b = append(b, `,"k":`...)
		b = strconv.AppendInt(b, int64(ev.K), 10)
	}
	if ev.Delta != 0 {
		b = append(b, `,"delta":`...)
		b = strconv.AppendFloat(b, ev.Delta, 'g', -1, 64)
	}
	if ev.Score != "" {
		b = append(b, `,"score":`...)
		b = appendString(b, ev.Score)
	}
	b = append(b, '}')
	if len(b) > lim.MaxBytes {
		return nil, reject(ReasonOversize, "", "%d bytes > limit %d", len(b), lim.MaxBytes)
	}
	return b, nil
}

func checkTrain(ev TrainEvent, lim Limits) error {
	if e := checkID(ev.ID, lim.MaxIDBytes); e != "" {
		return reject(ReasonBadID, "id", "%q: %s", truncate(ev.ID, 64), e)
	}
	switch ev.Op {
	case OpUpsert:
		if ev.Request != "" {
			return reject(ReasonUnknownField, "request", "not allowed in an upsert")
		}
		if err := checkVector(ev.X, "x", lim.InputDim); err != nil {
			return err
		}
		if err := checkIndices(ev.X, "x", lim.Indices); err != nil {
			return err
		}
		if ev.Label != nil && (*ev.Label < -MaxLabel || *ev.Label > MaxLabel) {
			return reject(ReasonBadValue, "label", "%d: want |label| <= %d", *ev.Label, MaxLabel)
		}
		if e := checkID(ev.Subject, lim.MaxIDBytes); ev.Subject != "" && e != "" {
			return reject(ReasonBadID, "subject", "%s (a data subject: the value is not repeated)", e)
		}
	case OpDelete:
		if e := checkID(ev.Request, lim.MaxIDBytes); e != "" {
			return reject(ReasonBadID, "request", "%q: %s", truncate(ev.Request, 64), e)
		}
		if ev.X != nil || ev.Label != nil || ev.Subject != "" {
			return reject(ReasonUnknownField, "x", "x, label and subject not allowed in a delete")
		}
	default:
		return reject(ReasonUnknownOp, "op", "%q: want %q or %q", truncate(string(ev.Op), 64), OpUpsert, OpDelete)
	}
	return nil
}

func checkQuery(ev QueryEvent, lim Limits) error {
	if e := checkID(ev.Request, lim.MaxIDBytes); e != "" {
		return reject(ReasonBadID, "request", "%q: %s", truncate(ev.Request, 64), e)
	}
	switch {
	case ev.X != nil && ev.ID != "":
		return reject(ReasonBadValue, "id", "both x and id given; want exactly one")
	case ev.X != nil:
		if err := checkVector(ev.X, "x", lim.InputDim); err != nil {
			return err
		}
		if err := checkIndices(ev.X, "x", lim.Indices); err != nil {
			return err
		}
	default:
		if e := checkID(ev.ID, lim.MaxIDBytes); e != "" {
			return reject(ReasonBadID, "id", "%q: %s", truncate(ev.ID, 64), e)
		}
	}
	if ev.K != 0 && (ev.K < 1 || ev.K > lim.MaxK) {
		return reject(ReasonBadValue, "k", "%d: want an integer in [1, %d]", ev.K, lim.MaxK)
	}
	if ev.Delta != 0 && !(ev.Delta > 0 && ev.Delta < 1) {
		return reject(ReasonBadValue, "delta", "%v: want 0 < delta < 1", ev.Delta)
	}
	if names := lim.Scores; ev.Score != "" && !slices.Contains(names, ev.Score) && (names != nil || !slices.Contains(defaultScores, ev.Score)) {
		return reject(ReasonBadValue, "score", "%q: not a ranking", ev.Score)
	}
	return nil
}

func checkVector(x []float64, field string, dim int) error {
	if len(x) != dim {
		return reject(ReasonWrongDim, field, "%d values; want exactly %d", len(x), dim)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return reject(ReasonNonFinite, field, "element %d is %v", i, v)
		}
	}
	return nil
}

func appendVector(b []byte, x []float64) []byte {
	b = append(b, '[')
	for i, v := range x {
		if i > 0 {
			b = append(b, ',')
		}
		// 'g' with -1 precision is the shortest text that parses back
		// to the same float64; it is valid JSON for finite values.
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']')
}

// appendString writes s as a JSON string. s is valid UTF-8 without control
// characters when it comes from a validated event, but the escaping below is
// complete for any string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
