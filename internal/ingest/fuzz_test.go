package ingest

import (
	"testing"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// FuzzIngestApply feeds arbitrary message bytes to one long-lived Ingest: Apply must
// never panic and never fail on input (only the daemon's own failures are errors),
// must consume every message as exactly one of upsert, delete, missing delete or dead
// letter, and the pool must keep holding exactly the stored points.
func FuzzIngestApply(f *testing.F) {
	cfg := testConfig()
	st := tempStore(f)
	in := newTestIngest(f, cfg, st)
	g := newGen(f, 1, 6)
	f.Add([]byte("k"), g.upsert("a").value)
	f.Add([]byte("k"), g.upsert("b").value)
	f.Add([]byte("k"), g.del("a").value)
	for _, p := range poisons("f") {
		f.Add([]byte(p.key), p.value)
	}
	f.Add([]byte(nil), []byte(`{"v":1,"op":"upsert","id":"z","x":[1e300,-1e300,1e300,0,0,1],"label":2147483647}`))
	var off int64
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m := stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: off, Key: key, Value: value}
		off++
		res, err := in.Apply(t.Context(), []stream.Message{m})
		if err != nil {
			t.Fatalf("Apply(%q) = %v; input must never make Apply fail", value, err)
		}
		if n := res.Upserts + res.Deletes + res.Missing + res.DeadLetters; n != 1 || res.Skipped != 0 {
			t.Fatalf("Apply(%q) = %+v, want exactly one message consumed", value, res)
		}
		if len(res.Stored) != res.Upserts || (res.Upserts == 1 && in.Points().Get(res.Stored[0]) == nil) {
			t.Fatalf("Apply(%q): stored %q with %d upserts, or not in Points", value, res.Stored, res.Upserts)
		}
		var count int
		if err := st.View(func(tx *storage.ReadTx) error {
			var err error
			count, err = tx.PointCount()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if count != in.Len() {
			t.Fatalf("store holds %d points, pool %d", count, in.Len())
		}
	})
}
