package daemon

import (
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cluster"
	"github.com/cairnhq/cairn/schemas/schematest"
	"github.com/cairnhq/cairn/stream"
)

// checkRecords checks every record a test's daemon wrote to its JSON output topics, as
// the test's reader collected them: its CloudEvents headers (the topic's type, the
// deployment's source, ce_id the record's content id, a ce_time) and its value under
// the type's schema (a lineage event under OpenLineage's too). Records without
// CloudEvents headers are not cairnd's (a test that writes forged records to an output
// topic) and are only counted. It checks nothing after a failure.
func checkRecords(t testing.TB, cfg config.Config, r *running) {
	t.Helper()
	if t.Failed() {
		return
	}
	ev := cluster.Events(cfg)
	n, foreign := 0, 0
	for topic, typ := range ev.Types {
		if typ == stream.TypeModel {
			continue
		}
		for _, m := range r.messages(topic) {
			ce, ok, err := stream.ParseCloudEvent(m, stream.Limits{MaxIDBytes: 1024})
			switch {
			case !ok && err == nil:
				foreign++
				continue
			case err != nil:
				t.Errorf("%s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
				continue
			case ce.Type != typ || ce.Source != ev.Source || ce.ID != stream.ContentID(m) || ce.Time.IsZero():
				t.Errorf("%s/%d@%d: CloudEvent %+v", m.Topic, m.Partition, m.Offset, ce)
			}
			if m.Value == nil {
				continue
			}
			if typ == stream.TypeLineage {
				err = schematest.ValidateRunEvent(m.Value)
			} else {
				err = schematest.Validate(typ.Schema(), m.Value)
			}
			if err != nil {
				t.Errorf("%s/%d@%d is not valid under its schema: %v\n%s", m.Topic, m.Partition, m.Offset, err, m.Value)
			}
			n++
		}
	}
	t.Logf("records checked: %d with valid CloudEvents headers and schemas, %d written by the test", n, foreign)
}
