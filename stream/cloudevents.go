package stream

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/schemas"
)

// CloudEvents in binary content mode (CloudEvents 1.0 and its Kafka protocol binding):
// the record's value is the event's data, unchanged, and its context attributes travel
// as record headers named "ce_" + attribute, UTF-8 strings; the data's media type is
// the "content-type" header. Consumers that know nothing of CloudEvents read the value
// as before.

// CloudEventsVersion is the CloudEvents specification version cairn writes and reads.
const CloudEventsVersion = "1.0"

// Header names of the binary content mode.
const (
	HeaderSpecVersion = "ce_specversion"
	HeaderID          = "ce_id"
	HeaderSource      = "ce_source"
	HeaderType        = "ce_type"
	HeaderTime        = "ce_time"
	HeaderSubject     = "ce_subject"
	HeaderDataSchema  = "ce_dataschema"
	HeaderContentType = "content-type"
)

// ReasonBadHeader: an input record whose CloudEvents headers are invalid
// (ParseCloudEvent).
const ReasonBadHeader Reason = "bad_header"

// maxHeaderValue bounds a CloudEvents header value that ParseCloudEvent accepts
// (ce_id is bounded by Limits.MaxIDBytes instead).
const maxHeaderValue = 2048

// EventType is the CloudEvents type (ce_type) of one kind of cairn output record.
type EventType string

// The types of cairn's output records, one per output topic. An erasure audit is of
// TypeAudit: the audit schema covers it.
const (
	TypeAttribution EventType = "io.cairn.attribution.v1" // cairn.attributions
	TypeAudit       EventType = "io.cairn.audit.v1"       // cairn.audits
	TypeDeadLetter  EventType = "io.cairn.deadletter.v1"  // cairn.dlq
	TypeStatus      EventType = "io.cairn.status.v1"      // cairn.status
	TypeModel       EventType = "io.cairn.model.v1"       // cairn.models (binary)
	TypeLineage     EventType = "io.cairn.lineage.v1"     // cairn.lineage
)

// Schema returns the name of t's JSON Schema in package schemas, "" for a type without
// one (TypeModel, whose records are binary, and types cairn does not define).
func (t EventType) Schema() string {
	switch t {
	case TypeAttribution:
		return "attribution"
	case TypeAudit:
		return "audit"
	case TypeDeadLetter:
		return "deadletter"
	case TypeStatus:
		return "status"
	case TypeLineage:
		return "lineage"
	}
	return ""
}

// ContentType returns the media type of t's records: application/octet-stream for
// TypeModel, application/json for the others.
func (t EventType) ContentType() string {
	if t == TypeModel {
		return "application/octet-stream"
	}
	return "application/json"
}

// CloudEvent is the CloudEvents context of one record. CloudEvent.Headers writes it;
// ParseCloudEvent reads it back.
type CloudEvent struct {
	// Type is ce_type; required.
	Type EventType
	// Source is ce_source, the deployment that writes the record: a URI-reference such
	// as "https://cairn.example.org/prod" or "urn:cairn:prod"; required. Type, Source and
	// ID together identify an event.
	Source string
	// ID is ce_id. Empty: ContentID of the record, so a record written again (a re-send
	// after a crash, a replay of the same inputs, a standby's copy) has the same id,
	// byte for byte, and consumers can drop the duplicate by it.
	ID string
	// Time is ce_time, RFC 3339 in UTC with nanoseconds; zero: no ce_time. A replay
	// reproduces the header only if Time comes from the record's state (the commit time
	// stored with it), never from the clock at publication.
	Time time.Time
	// Subject is ce_subject: the request id an answer or an audit answers, the point id,
	// the run id; empty: none.
	Subject string
	// DataSchema is ce_dataschema; empty: schemas.URI(Type.Schema()) when Type has a
	// schema, else none.
	DataSchema string
	// ContentType is the content-type header; empty: Type.ContentType().
	ContentType string
}

// Headers returns the CloudEvents headers of m as the event e, in the order of the
// constants above: ce_specversion, ce_id, ce_source, ce_type, then ce_time, ce_subject
// and ce_dataschema when set, then content-type. It reads m's topic, key and value
// only (for ContentID) and does not modify m; to send them, append them to m.Headers.
// An error names the attribute that is missing or invalid.
func (e CloudEvent) Headers(m Message) ([]Header, error) {
	var errs []error
	if e.Type == "" {
		errs = append(errs, errors.New("type: empty"))
	} else if msg := checkAttr(string(e.Type)); msg != "" {
		errs = append(errs, fmt.Errorf("type: %s", msg))
	}
	if err := ValidateSource(e.Source); err != nil {
		errs = append(errs, err)
	}
	id := e.ID
	if id == "" {
		id = ContentID(m)
	} else if msg := checkAttr(id); msg != "" {
		errs = append(errs, fmt.Errorf("id: %s", msg))
	}
	schema := e.DataSchema
	if schema == "" && e.Type.Schema() != "" {
		schema = schemas.URI(e.Type.Schema())
	}
	if schema != "" {
		if u, err := url.Parse(schema); err != nil || !u.IsAbs() {
			errs = append(errs, fmt.Errorf("dataschema %q: not an absolute URI", schema))
		}
	}
	if msg := checkAttr(e.Subject); e.Subject != "" && msg != "" {
		errs = append(errs, fmt.Errorf("subject: %s", msg))
	}
	ct := e.ContentType
	if ct == "" {
		ct = e.Type.ContentType()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("stream: cloudevent: %w", err)
	}
	hs := make([]Header, 0, 8)
	add := func(k, v string) { hs = append(hs, Header{Key: k, Value: []byte(v)}) }
	add(HeaderSpecVersion, CloudEventsVersion)
	add(HeaderID, id)
	add(HeaderSource, e.Source)
	add(HeaderType, string(e.Type))
	if !e.Time.IsZero() {
		add(HeaderTime, e.Time.UTC().Format(time.RFC3339Nano))
	}
	if e.Subject != "" {
		add(HeaderSubject, e.Subject)
	}
	if schema != "" {
		add(HeaderDataSchema, schema)
	}
	add(HeaderContentType, ct)
	return hs, nil
}

// ValidateSource checks a ce_source: a non-empty URI-reference (RFC 3986) without
// control characters. A configuration that sets the deployment's source validates it
// here, so that Headers cannot fail on it later.
func ValidateSource(source string) error {
	if source == "" {
		return errors.New("stream: cloudevent source: empty")
	}
	if msg := checkAttr(source); msg != "" {
		return fmt.Errorf("stream: cloudevent source %q: %s", truncate(source, 64), msg)
	}
	if _, err := url.Parse(source); err != nil {
		return fmt.Errorf("stream: cloudevent source %q: not a URI-reference: %w", truncate(source, 64), err)
	}
	return nil
}

// ContentID is the default ce_id of a record: the hex SHA-256 of the domain tag
// "cairn-ce-id-v1", then the topic, the key and the value, each preceded by its length
// as an unsigned varint (the key and value lengths plus one, 0 standing for null, so
// that a tombstone and an empty value differ). It is a function of the record's bytes
// only: the same record gets the same id wherever and whenever it is written, and
// records that differ in any byte get different ids.
func ContentID(m Message) string {
	h := sha256.New()
	h.Write([]byte("cairn-ce-id-v1"))
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(m.Topic)))])
	h.Write([]byte(m.Topic))
	for _, b := range [][]byte{m.Key, m.Value} {
		l := uint64(0)
		if b != nil {
			l = uint64(len(b)) + 1
		}
		h.Write(n[:binary.PutUvarint(n[:], l)])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ParseCloudEvent reads the CloudEvents headers of an input record. A record with no
// header named "ce_…" is no CloudEvent: ok is false and err nil, and the record is
// read as before. Otherwise the headers must be a valid binary-mode event, else err is
// a *RejectError with reason bad_header naming the header:
//
//   - ce_specversion "1.0"; ce_id (at most lim.MaxIDBytes bytes, as ids), ce_source (a
//     URI-reference) and ce_type present and non-empty;
//   - ce_time, when present, RFC 3339; ce_dataschema an absolute URI; ce_subject
//     non-empty;
//   - every value valid UTF-8 without control characters (U+0000–U+001F,
//     U+007F–U+009F), at most 2048 bytes; no header given twice;
//   - "ce_" header names lower case, other attributes (extensions) named by lower-case
//     ASCII letters and digits; no ce_datacontenttype, which binary mode carries as
//     content-type;
//   - content-type (any case), when present, application/json (parameters allowed).
//
// The returned event holds copies of the values; extensions are not returned.
func ParseCloudEvent(m Message, lim Limits) (ev CloudEvent, ok bool, err error) {
	for _, h := range m.Headers {
		ok = ok || strings.HasPrefix(strings.ToLower(h.Key), "ce_")
	}
	if !ok {
		return CloudEvent{}, false, nil
	}
	lim = lim.withDefaults()
	seen := make(map[string]bool, 8)
	for _, h := range m.Headers {
		name := strings.ToLower(h.Key)
		if !strings.HasPrefix(name, "ce_") && name != HeaderContentType {
			continue
		}
		if name != HeaderContentType && name != h.Key {
			return CloudEvent{}, false, reject(ReasonBadHeader, truncate(h.Key, 64), "CloudEvents header names are lower case")
		}
		if rerr := checkHeader(name, string(h.Value), seen, lim); rerr != nil {
			return CloudEvent{}, false, rerr
		}
		v := string(h.Value)
		switch name {
		case HeaderID:
			ev.ID = v
		case HeaderSource:
			ev.Source = v
		case HeaderType:
			ev.Type = EventType(v)
		case HeaderSubject:
			ev.Subject = v
		case HeaderDataSchema:
			ev.DataSchema = v
		case HeaderContentType:
			ev.ContentType = v
		case HeaderTime:
			ev.Time, _ = time.Parse(time.RFC3339Nano, v) // checked by checkHeader
		}
	}
	for _, k := range []string{HeaderSpecVersion, HeaderID, HeaderSource, HeaderType} {
		if !seen[k] {
			return CloudEvent{}, false, reject(ReasonBadHeader, k, "missing; a CloudEvent needs %s, %s, %s and %s",
				HeaderSpecVersion, HeaderID, HeaderSource, HeaderType)
		}
	}
	return ev, true, nil
}

// checkHeader checks the value v of the CloudEvents or content-type header name (in
// lower case) and records the name in seen.
func checkHeader(name, v string, seen map[string]bool, lim Limits) *RejectError {
	if seen[name] {
		return reject(ReasonBadHeader, truncate(name, 64), "header given twice")
	}
	seen[name] = true
	if msg := checkAttr(v); msg != "" {
		return reject(ReasonBadHeader, truncate(name, 64), "%q: %s", truncate(v, 64), msg)
	}
	if len(v) > maxHeaderValue {
		return reject(ReasonBadHeader, truncate(name, 64), "%d bytes > limit %d", len(v), maxHeaderValue)
	}
	switch name {
	case HeaderSpecVersion:
		if v != CloudEventsVersion {
			return reject(ReasonBadHeader, truncate(name, 64), "%q: want %q", truncate(v, 64), CloudEventsVersion)
		}
	case HeaderID:
		if msg := checkID(v, lim.MaxIDBytes); msg != "" {
			return reject(ReasonBadHeader, truncate(name, 64), "%q: %s", truncate(v, 64), msg)
		}
	case HeaderSource:
		if err := ValidateSource(v); err != nil {
			return reject(ReasonBadHeader, truncate(name, 64), "%s", err.Error())
		}
	case HeaderTime:
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return reject(ReasonBadHeader, truncate(name, 64), "%q: not an RFC 3339 time", truncate(v, 64))
		}
	case HeaderDataSchema:
		if u, err := url.Parse(v); err != nil || !u.IsAbs() {
			return reject(ReasonBadHeader, truncate(name, 64), "%q: not an absolute URI", truncate(v, 64))
		}
	case HeaderContentType:
		if mt, _, err := mime.ParseMediaType(v); err != nil || mt != "application/json" {
			return reject(ReasonBadHeader, truncate(name, 64), "%q: want application/json", truncate(v, 64))
		}
	case "ce_datacontenttype":
		return reject(ReasonBadHeader, truncate(name, 64), "binary mode carries the data's type as %s", HeaderContentType)
	default:
		attr := strings.TrimPrefix(name, "ce_")
		if attr == "" || strings.TrimLeft(attr, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			return reject(ReasonBadHeader, truncate(name, 64), "attribute names are lower-case ASCII letters and digits")
		}
	}
	if v == "" {
		return reject(ReasonBadHeader, truncate(name, 64), "empty")
	}
	return nil
}

// checkAttr returns "" for a valid CloudEvents string, else why it is not: the spec's
// String excludes the control characters U+0000–U+001F and U+007F–U+009F, and the
// value must be valid UTF-8.
func checkAttr(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for i, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return fmt.Sprintf("control character U+%04X at byte %d", r, i)
		}
	}
	return ""
}

// DecodeQueryMessage decodes the query record m, headers included: when m carries
// CloudEvents headers they must be a valid event (ParseCloudEvent, else a *RejectError
// with reason bad_header), and a query that names no "request" takes the event's ce_id
// as its request id, which the answer then echoes as its "request" and key. Without
// CloudEvents headers it is DecodeQuery of the value. Every returned error is a
// *RejectError.
func DecodeQueryMessage(m Message, lim Limits) (QueryEvent, error) {
	ev, ok, err := ParseCloudEvent(m, lim)
	if err != nil {
		return QueryEvent{}, err
	}
	request := ""
	if ok {
		request = ev.ID
	}
	return decodeQuery(m.Value, lim, request)
}
