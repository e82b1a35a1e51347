package ingest

import (
	"maps"
	"strconv"
	"testing"

	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// storedDeleted is the store's deleted bucket.
func storedDeleted(t *testing.T, st *storage.Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if err := st.View(func(tx *storage.ReadTx) error {
		return tx.ForEachDeleted(func(id string, v int64) error { out[id] = v; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// topicLog is one partition of a training topic as a test writes it: every record gets
// the next offset, and the State's own claims (its outbox entries on the topic) are
// appended when the test publishes them, as the daemon's publisher would.
type topicLog struct {
	t     *testing.T
	topic string
	recs  []stream.Message
}

func (l *topicLog) add(ms ...stream.Message) []stream.Message {
	out := make([]stream.Message, len(ms))
	for i, m := range ms {
		m.Topic, m.Offset = l.topic, int64(len(l.recs))
		l.recs, out[i] = append(l.recs, m), m
	}
	return out
}

// publish moves st's outbox entries on the topic to the log (the publisher, with their
// headers) and acknowledges them; it returns what it appended.
func (l *topicLog) publish(st *storage.Store) []stream.Message {
	l.t.Helper()
	box := NewOutbox(st, l.topic, "compact", nil)
	es, err := box.Pending(0)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []stream.Message
	var seqs []uint64
	for _, e := range es {
		seqs = append(seqs, e.Seq)
		if e.Topic == l.topic {
			out = append(out, l.add(stream.Message{Key: e.Key, Value: e.Value, Headers: e.Headers})...)
		}
	}
	if err := box.Ack(seqs...); err != nil {
		l.t.Fatal(err)
	}
	return out
}

func (l *topicLog) apply(in *State, ms []stream.Message) BatchResult {
	l.t.Helper()
	res, err := in.Apply(l.t.Context(), ms)
	if err != nil {
		l.t.Fatal(err)
	}
	return res
}

// versionOf is a published claim's version header.
func versionOf(t *testing.T, m stream.Message) int64 {
	t.Helper()
	h, ok := m.Header(VersionHeader)
	if !ok {
		t.Fatalf("record at %d has no version header", m.Offset)
	}
	v, err := strconv.ParseInt(string(h), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// storedX is the stored input of id (nil when not stored) and its version.
func storedX(t *testing.T, st *storage.Store, id string) ([]float64, int64) {
	t.Helper()
	var (
		p  storage.Point
		ok bool
	)
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		p, ok, err = tx.Point(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil, -1
	}
	return p.X, p.Version
}

// newest is the value the compacted log keeps for id: the newest record of its key.
func (l *topicLog) newest(id string) stream.Message {
	for i := len(l.recs) - 1; i >= 0; i-- {
		if string(l.recs[i].Key) == id {
			return l.recs[i]
		}
	}
	return stream.Message{}
}

// TestClaims: the interleavings of upserts, deletes and re-upserts of one id with the
// publication of its tombstone (doc.go, "Versions"). In each, the newest record of the
// id on the topic ends as the newest applied upsert of a stored point (or a tombstone
// of a deleted one), a republication is never applied twice nor brings back a deleted
// or older value, and a reader that sees only the compacted topic (the newest record
// of each key) ends with the same points.
func TestClaims(t *testing.T) {
	cfg := testConfig()
	topic := cfg.Kafka.Topics.Train
	g := newGen(t, 11, 6)
	x1, x2, x3 := g.upsert("a"), g.upsert("a"), g.upsert("a")
	del := g.del("a")
	m := func(ev event) stream.Message { return stream.Message{Key: []byte(ev.key), Value: ev.value} }

	type step struct {
		produce []event // inputs produced now
		publish bool    // the publisher runs now (the tombstone or republication lands)
		read    bool    // the reader applies everything up to the end now
	}
	tests := []struct {
		name  string
		steps []step
		want  *event // the final value of a (nil: deleted)
	}{
		{"re-upsert produced before the tombstone lands", []step{
			{produce: []event{x1, del, x2}, read: true}, {publish: true, read: true}, {publish: true, read: true},
		}, &x2},
		{"re-upsert read after the tombstone landed", []step{
			{produce: []event{x1, del}, read: true}, {produce: []event{x2}}, {publish: true, read: true}, {publish: true, read: true},
		}, &x2},
		{"re-upsert after the tombstone", []step{
			{produce: []event{x1, del}, read: true}, {publish: true, read: true}, {produce: []event{x2}, read: true},
		}, &x2},
		{"delete again while the republication is on its way", []step{
			{produce: []event{x1, del, x2}, read: true}, {publish: true, read: true}, {produce: []event{del}},
			{publish: true}, {read: true}, {publish: true, read: true}, {publish: true, read: true},
		}, nil},
		{"newer upsert while the republication is on its way", []step{
			{produce: []event{x1, del, x2}, read: true}, {publish: true, read: true}, {produce: []event{x3}},
			{publish: true}, {read: true}, {publish: true, read: true}, {publish: true, read: true},
		}, &x3},
		{"delete, re-upsert, delete, re-upsert in one batch", []step{
			{produce: []event{x1, del, x2, del, x3}, read: true}, {publish: true, read: true}, {publish: true, read: true},
		}, &x3},
		{"everything lags", []step{
			{produce: []event{x1, del}}, {read: true}, {produce: []event{x2, del, x3}}, {publish: true}, {read: true},
			{publish: true}, {read: true}, {publish: true, read: true},
		}, &x3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			l := &topicLog{t: t, topic: topic}
			read := 0
			for _, s := range tc.steps {
				for _, ev := range s.produce {
					l.add(m(ev))
				}
				if s.publish {
					l.publish(st)
				}
				if s.read && read < len(l.recs) {
					l.apply(in, l.recs[read:])
					read = len(l.recs)
				}
			}
			if extra := l.publish(st); len(extra) > 0 {
				t.Fatalf("quiescent, yet %d more claims to publish", len(extra))
			}
			x, _ := storedX(t, st, "a")
			switch n := l.newest("a"); {
			case tc.want == nil && x != nil:
				t.Fatalf("a stored %v, want deleted", x)
			case tc.want == nil && n.Value != nil:
				t.Fatalf("a deleted, but the newest record of a on the topic (offset %d) has a value", n.Offset)
			case tc.want != nil && !vec.SameBits(x, tc.want.x):
				t.Fatalf("a stored %v, want %v", x, tc.want.x)
			case tc.want != nil && string(n.Value) != string(tc.want.value):
				if ev, err := stream.DecodeTrain(n.Value, in.lim); err != nil || !vec.SameBits(ev.X, tc.want.x) {
					t.Fatalf("newest record of a on the topic (offset %d) holds %q, want the stored value", n.Offset, n.Value)
				}
			}
			if len(in.deleted) != 0 || len(storedDeleted(t, st)) != 0 {
				t.Errorf("deletions still awaited %v (stored %v)", in.deleted, storedDeleted(t, st))
			}
			// Re-delivering the whole log changes nothing.
			before := in.Stats()
			l.apply(in, l.recs)
			if after := in.Stats(); after.Upserts != before.Upserts || after.Deletes != before.Deletes || after.Erased != before.Erased {
				t.Errorf("a re-delivery applied something: %+v, then %+v", before, after)
			}
			// A reader of the compacted topic (the newest record of each key) and a
			// reader of the whole topic end with the same value of a.
			for name, recs := range map[string][]stream.Message{"compacted": {l.newest("a")}, "whole": l.recs} {
				st2 := tempStore(t)
				in2 := newTestIngest(t, cfg, st2)
				l.apply(in2, recs)
				if x2, _ := storedX(t, st2, "a"); !vec.SameBits(x2, x) {
					t.Errorf("a reader of the %s topic holds %v, want %v", name, x2, x)
				}
				if tc.want != nil && name == "compacted" && in2.Stats().Upserts != 1 {
					t.Errorf("a reader of the compacted topic applied %d upserts, want the newest record's", in2.Stats().Upserts)
				}
			}
		})
	}
}

// TestClaimRules: how one claim meets the stored state (doc.go, "Versions"), each case
// on a fresh store: what is stored afterwards, and whether the id is republished.
func TestClaimRules(t *testing.T) {
	cfg := testConfig()
	topic := cfg.Kafka.Topics.Train
	g := newGen(t, 12, 6)
	xa, xb, xb0 := g.upsert("a"), g.upsert("a"), g.upsert("b")
	tomb := func(v int64) stream.Message {
		return stream.Message{Key: []byte("a"), Headers: []stream.Header{{Key: VersionHeader, Value: []byte(strconv.FormatInt(v, 10))}}}
	}
	repub := func(ev event, v int64) stream.Message {
		m := tomb(v)
		m.Value = ev.value
		return m
	}
	plain := func(ev event) stream.Message { return stream.Message{Key: []byte(ev.key), Value: ev.value} }
	tests := []struct {
		name      string
		log       []stream.Message // offsets 0, 1, …
		want      *event
		republish int64 // the version republished, -1: none
	}{
		{"stale tombstone over a stored point", []stream.Message{plain(xb0), plain(xa), tomb(0)}, &xa, 1},
		{"erasure's tombstone of the stored value", []stream.Message{plain(xa), tomb(0)}, nil, -1},
		{"erasure's tombstone of an older value", []stream.Message{plain(xa), plain(xb), tomb(0)}, &xb, 1},
		{"unversioned tombstone over a stored point", []stream.Message{plain(xa), {Key: []byte("a")}}, &xa, 0},
		{"newer tombstone over a stored point", []stream.Message{plain(xb0), plain(xb0), repub(xa, 0), tomb(1)}, nil, -1},
		{"republication of the stored value", []stream.Message{plain(xa), repub(xa, 0)}, &xa, -1},
		{"stale republication", []stream.Message{plain(xa), plain(xb), repub(xa, 0)}, &xb, 1},
		{"newer republication", []stream.Message{plain(xb0), plain(xb0), repub(xa, 0), repub(xb, 1)}, &xb, -1},
		{"republication of an unknown id", []stream.Message{plain(xb0), repub(xa, 0)}, &xa, -1},
		{"republication older than a deletion", []stream.Message{plain(xa), plain(g.del("a")), repub(xa, 0)}, nil, -1},
		{"a version header at or past the record's offset is an input's", []stream.Message{plain(xa), repub(xb, 5)}, &xb, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			l := &topicLog{t: t, topic: topic}
			l.apply(in, l.add(tc.log...))
			x, _ := storedX(t, st, "a")
			if (tc.want == nil) != (x == nil) || (tc.want != nil && !vec.SameBits(x, tc.want.x)) {
				t.Errorf("a stored %v, want %v", x, tc.want)
			}
			got := int64(-1)
			for _, r := range l.publish(st) {
				if string(r.Key) == "a" && r.Value != nil {
					got = versionOf(t, r)
				}
			}
			if got != tc.republish {
				t.Errorf("republished version %d, want %d", got, tc.republish)
			}
		})
	}
}

// TestClaimsRestart: the awaited deletion and a point's version survive a restart (the
// deleted bucket, Point.Version): a republication older than the deletion read after
// the restart does not bring the point back, and one of the stored value is not
// applied again.
func TestClaimsRestart(t *testing.T) {
	cfg := testConfig()
	topic := cfg.Kafka.Topics.Train
	g := newGen(t, 13, 6)
	xa, xb := g.upsert("a"), g.upsert("b")
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	l := &topicLog{t: t, topic: topic}
	l.apply(in, l.add(stream.Message{Key: []byte("a"), Value: xa.value}, stream.Message{Key: []byte("b"), Value: xb.value},
		stream.Message{Key: []byte("a"), Value: g.del("a").value}))
	in = newTestIngest(t, cfg, st)
	if !maps.Equal(in.deleted, map[string]int64{"a": 2}) {
		t.Fatalf("restored awaited deletions %v, want a: 2", in.deleted)
	}
	if e := in.cache.Get("b"); e == nil || e.Version != 1 {
		t.Fatalf("restored entry of b %+v, want version 1", e)
	}
	v := func(n int64) []stream.Header {
		return []stream.Header{{Key: VersionHeader, Value: []byte(strconv.FormatInt(n, 10))}}
	}
	res := l.apply(in, l.add(stream.Message{Key: []byte("a"), Value: xa.value, Headers: v(0)},
		stream.Message{Key: []byte("b"), Value: xb.value, Headers: v(1)}))
	if res.Upserts != 0 {
		t.Errorf("stale republications applied: %+v", res)
	}
	if x, _ := storedX(t, st, "a"); x != nil {
		t.Errorf("a came back: %v", x)
	}
}
