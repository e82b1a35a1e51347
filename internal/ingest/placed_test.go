package ingest

import (
	"testing"

	"github.com/cairnhq/cairn/stream"
)

// TestClaimsFollowTheRecord: the tombstones of a deletion and of a subject's erasure,
// and the scrub of a refused upsert, are placed on the partition where the id's record
// is, whatever partition cairn's own writer would pick for the key: a producer with
// another partitioner (librdkafka's default hashes keys with CRC32) puts ids elsewhere,
// and a tombstone on another partition erases nothing. The partition survives a
// restart (the store keeps it with the point).
func TestClaimsFollowTheRecord(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 7, 6)
	topic := cfg.Kafka.Topics.Train
	at := func(ev event, part int, off int64) stream.Message {
		return stream.Message{Topic: topic, Partition: part, Offset: off, Key: []byte(ev.key), Value: ev.value}
	}
	if _, err := in.Apply(t.Context(), []stream.Message{
		at(g.upsert("a"), 3, 0), at(g.upsertAbout("s1", alice), 1, 0), at(g.upsertAbout("s2", alice), 2, 0),
		at(g.del("a"), 3, 1),
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openStore(t, st.Path())
	in = newTestIngest(t, cfg, st) // the erasure below reads the partitions back from the store
	erase := request(t, stream.ErasureErase, alice, "e1")
	erase.Topic, erase.Offset = stream.DefaultErasuresTopic, 0
	if _, err := in.Apply(t.Context(), []stream.Message{erase}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Apply(t.Context(), []stream.Message{at(g.upsertAbout("s3", alice), 0, 1)}); err != nil {
		t.Fatal(err) // refused (subject_erased), its record scrubbed
	}
	out, err := NewOutbox(st, topic, "compact", nil).Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range out {
		if e.Topic != topic {
			continue
		}
		if e.Value != nil || !e.Placed {
			t.Errorf("entry for %s on %s: value %q placed %v, want a placed tombstone", e.Key, topic, e.Value, e.Placed)
		}
		got[string(e.Key)] = e.Partition
	}
	want := map[string]int{"a": 3, "s1": 1, "s2": 2, "s3": 0}
	if len(got) != len(want) {
		t.Errorf("tombstones %v, want %v", got, want)
	}
	for k, p := range want {
		if q, ok := got[k]; !ok || q != p {
			t.Errorf("tombstone of %s on partition %d (%v), want %d", k, q, ok, p)
		}
	}
}
