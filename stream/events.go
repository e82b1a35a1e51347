package stream

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Events stamps the records a deployment writes with their CloudEvents headers
// (binary content mode, CloudEvent.Headers). It is set once (WriterConfig.Events) and
// read-only afterwards, so it is safe for concurrent use.
//
// What a record's headers are made of, and why a re-publication repeats them:
//
//   - ce_id is ContentID of the record's topic, key and value: the same record written
//     again (a re-send after a crash, a standby's copy) has the same id;
//   - ce_source is Source, from the deployment's configuration only;
//   - ce_type is Types[topic];
//   - ce_time is the Message's Time when set: the writer of a record from stored state
//     sets the time stored with it (the outbox entry's commit time), never the clock
//     at publication; a record written without a Time has no ce_time (cairnd's model
//     versions on the models topic, which it writes from the serving model again after
//     a restart and stores with no time: a clock time would make the copies' headers
//     differ, while ce_id, their content's, stays the same);
//   - ce_subject is the record's key (the request id of an answer or an audit, the
//     coordinates of a dead letter, the kind of a status event, the run id of a lineage
//     event) when it is a valid attribute (UTF-8 without control characters, at most
//     2048 bytes); ce_dataschema the type's schema (package schemas); content-type the
//     type's media type.
type Events struct {
	// Source is every record's ce_source (ValidateSource).
	Source string
	// Types is the ce_type of the records of each topic. A record of a topic not listed
	// is written as it is: inputs, and the claims cairnd writes on the training topic,
	// are no events of cairn's.
	Types map[string]EventType
}

// Validate reports every problem at once: an invalid Source, a type or topic that is
// empty or not a valid attribute.
func (e *Events) Validate() error {
	var errs []error
	if err := ValidateSource(e.Source); err != nil {
		errs = append(errs, fmt.Errorf("%w: events.source: %w", ErrConfig, err))
	}
	for _, topic := range slices.Sorted(maps.Keys(e.Types)) {
		t := e.Types[topic]
		if topic == "" || t == "" || checkAttr(string(t)) != "" {
			errs = append(errs, fmt.Errorf("%w: events.types[%q] = %q: want a topic and a type", ErrConfig, topic, t))
		}
	}
	return errors.Join(errs...)
}

// Stamp returns the headers m is written with: m's own, then its CloudEvents headers
// when m's topic is in Types and m carries no "ce_" header yet (a record that has them
// keeps them). It neither keeps nor modifies m.
func (e *Events) Stamp(m Message) ([]Header, error) {
	t, ok := e.Types[m.Topic]
	if !ok {
		return m.Headers, nil
	}
	for _, h := range m.Headers {
		if strings.HasPrefix(strings.ToLower(h.Key), "ce_") {
			return m.Headers, nil
		}
	}
	ev := CloudEvent{Type: t, Source: e.Source, Time: m.Time}
	if k := string(m.Key); k != "" && len(k) <= maxHeaderValue && checkAttr(k) == "" {
		ev.Subject = k
	}
	hs, err := ev.Headers(m)
	if err != nil {
		return nil, err
	}
	return append(slices.Clip(m.Headers), hs...), nil
}
