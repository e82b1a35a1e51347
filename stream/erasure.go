package stream

import (
	"strings"
)

// ReasonSubjectErased: an upsert that names a data subject whose erasure was applied
// (and not lifted by an unblock request): the subject's later data is refused.
const ReasonSubjectErased Reason = "subject_erased"

// ErasureOp is the operation of an erasure request.
type ErasureOp string

// Erasure operations.
const (
	// ErasureErase erases every point stored about the subject when the request is
	// applied, and blocks the subject's later upserts.
	ErasureErase ErasureOp = "erase"
	// ErasureUnblock lifts the block an erasure left.
	ErasureUnblock ErasureOp = "unblock"
)

// ErasureEvent is one message of the erasures topic, keyed by its subject:
//
//	{"v":1,"op":"erase","subject":"customer-42","request":"gdpr-2026-0117"}
//	{"v":1,"op":"unblock","subject":"customer-42","request":"gdpr-2026-0121"}
//
// Subject is the data subject's id as the producer names it in the upserts' "subject";
// Request is the request id its audit answers (the audit's key).
type ErasureEvent struct {
	Op      ErasureOp
	Subject string
	Request string
}

// DecodeErasure parses and validates one erasure request under the rules of
// DecodeTrain (subject and request as ids under lim.MaxIDBytes). Every returned error
// is a *RejectError, whose message never quotes the subject: a rejected request is
// dead-lettered, and subject ids do not leave cairn in plain text. The result shares
// no memory with raw.
func DecodeErasure(raw []byte, lim Limits) (ErasureEvent, error) {
	lim = lim.withDefaults()
	var ev ErasureEvent
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
		case "subject":
			s, rerr := decodeSubject(d, key, lim)
			ev.Subject = s
			return rerr
		case "request":
			s, rerr := decodeID(d, key, lim)
			ev.Request = s
			return rerr
		}
		return reject(ReasonUnknownField, key, "key not in the erasure schema")
	}, &have)
	if err != nil {
		return ErasureEvent{}, err
	}
	if !have.has("v") {
		return ErasureEvent{}, reject(ReasonBadVersion, "v", "missing; want 1")
	}
	if !have.has("op") {
		return ErasureEvent{}, reject(ReasonUnknownOp, "op", "missing; want %q or %q", ErasureErase, ErasureUnblock)
	}
	ev.Op = ErasureOp(op)
	if ev.Op != ErasureErase && ev.Op != ErasureUnblock {
		return ErasureEvent{}, reject(ReasonUnknownOp, "op", "%q: want %q or %q", truncate(op, 64), ErasureErase, ErasureUnblock)
	}
	for _, k := range []string{"subject", "request"} {
		if !have.has(k) {
			return ErasureEvent{}, reject(ReasonMissingField, k, "missing")
		}
	}
	return ev, nil
}

// EncodeErasure validates ev against lim and writes it as JSON; DecodeErasure of the
// result gives back ev.
func EncodeErasure(ev ErasureEvent, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	if ev.Op != ErasureErase && ev.Op != ErasureUnblock {
		return nil, reject(ReasonUnknownOp, "op", "%q: want %q or %q", truncate(string(ev.Op), 64), ErasureErase, ErasureUnblock)
	}
	if e := checkID(ev.Subject, lim.MaxIDBytes); e != "" {
		return nil, reject(ReasonBadID, "subject", "%s", e)
	}
	if e := checkID(ev.Request, lim.MaxIDBytes); e != "" {
		return nil, reject(ReasonBadID, "request", "%q: %s", truncate(ev.Request, 64), e)
	}
	b := make([]byte, 0, 48+len(ev.Subject)+len(ev.Request))
	b = append(b, `{"v":1,"op":`...)
	b = appendString(b, string(ev.Op))
	b = append(b, `,"subject":`...)
	b = appendString(b, ev.Subject)
	b = append(b, `,"request":`...)
	b = appendString(b, ev.Request)
	b = append(b, '}')
	if len(b) > lim.MaxBytes {
		return nil, reject(ReasonOversize, "", "%d bytes > limit %d", len(b), lim.MaxBytes)
	}
	return b, nil
}

// CheckErasureKey rejects (ReasonKeyMismatch) an erasure request whose Kafka message key
// is not its subject. The erasures topic is compacted and keyed by subject, so that the
// last request of each subject stays and a subject's requests are applied in the order
// they were produced. The message names neither the key nor the subject.
func CheckErasureKey(key []byte, ev ErasureEvent) error {
	if string(key) != ev.Subject {
		return reject(ReasonKeyMismatch, "subject", "the message key (%d bytes) is not the subject (%s is keyed by subject)",
			len(key), DefaultErasuresTopic)
	}
	return nil
}

// decodeSubject reads a data subject's id: an id (checkID) whose rejection names the
// problem but never the value.
func decodeSubject(sc *scanner, field string, lim Limits) (string, *RejectError) {
	s, rerr := decodeString(sc, field)
	if rerr != nil {
		return "", rerr
	}
	if err := checkID(s, lim.MaxIDBytes); err != "" {
		return "", reject(ReasonBadID, field, "%s (a data subject: the value is not repeated)", err)
	}
	return s, nil
}

// MayNameSubject reports whether raw, an input record's value, may name a data subject:
// whether it holds the text "subject" or a \u escape (which could spell it). A dead
// letter of such a record keeps none of its bytes, whatever kafka.dlq_keep_raw says.
// It errs on the side of yes.
func MayNameSubject(raw []byte) bool {
	s := string(raw)
	return strings.Contains(s, "subject") || strings.Contains(s, `\u`)
}
