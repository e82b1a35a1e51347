package lineage_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lineage"
)

// TestErasureRun: an erasure record's run names the erasures topic and the request's
// offset from its source coordinates (topic names may hold slashes only before the
// last two fields), in job Job + ".erasure"; another kind of record has none.
func TestErasureRun(t *testing.T) {
	r := &lineage.Recorder{Namespace: "ns", Job: "j"}
	hash := "ab" + strings.Repeat("cd", 31)
	for _, tc := range []struct {
		source string
		want   lineage.Topic
	}{
		{"cairn.erasures/1/52", lineage.Topic{Name: "cairn.erasures", Offsets: []lineage.Offsets{{Partition: 1, First: 52, Last: 52}}}},
		{"odd/name/0/7", lineage.Topic{Name: "odd/name", Offsets: []lineage.Offsets{{Partition: 0, First: 7, Last: 7}}}},
		{"cairn.erasures/x/y", lineage.Topic{Name: "cairn.erasures"}},
		{"nocoordinates", lineage.Topic{Name: "nocoordinates"}},
	} {
		e, ok := r.ErasureRun(&ingest.Deletion{Kind: ingest.KindErasure, Request: "r", Subject: hash, Source: tc.source})
		if !ok || !reflect.DeepEqual(e.Erasures, tc.want) || e.Job != (lineage.Job{Namespace: "ns", Name: "j.erasure"}) || e.SubjectHash != hash {
			t.Errorf("source %q: run %+v, %v; want topic %+v", tc.source, e, ok, tc.want)
		}
	}
	if _, ok := r.ErasureRun(&ingest.Deletion{Request: "r", ID: "p1"}); ok {
		t.Error("a point's deletion has an erasure run")
	}
}
