package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// numbered assigns offsets 0, 1, 2… on partition 0, as one Kafka partition would.
func numbered(ms []stream.Message) []stream.Message {
	for i := range ms {
		ms[i].Offset = int64(i)
	}
	return ms
}

// applyInBatches applies ms in consecutive batches of the given size.
func applyInBatches(t *testing.T, in *State, ms []stream.Message, size int) {
	t.Helper()
	for i := 0; i < len(ms); i += size {
		if _, err := in.Apply(t.Context(), ms[i:min(i+size, len(ms))]); err != nil {
			t.Fatalf("Apply batch at %d: %v", i, err)
		}
	}
}

func storedPool(t *testing.T, st *storage.Store) storage.PoolState {
	t.Helper()
	var ps storage.PoolState
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		var ok bool
		ps, ok, err = tx.PoolState()
		if err == nil && !ok {
			err = errors.New("no pool state stored")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ps
}

// deadLetters decodes the dead-letter outbox entries by source key.
func deadLetters(t *testing.T, st *storage.Store, dlq string) map[string]stream.Reason {
	t.Helper()
	es, err := st.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stream.Reason{}
	for _, e := range es {
		if v, _, _, claim := decodePlaced(e.Value); claim && v == nil && e.Topic != dlq {
			continue // a deletion's tombstone (TestTombstones)
		}
		if e.Topic != dlq {
			t.Errorf("outbox entry %d on topic %q, want only %q", e.Seq, e.Topic, dlq)
			continue
		}
		var d struct {
			Reason stream.Reason `json:"reason"`
			Key    []byte        `json:"key"`
			Offset int64         `json:"offset"`
		}
		if err := json.Unmarshal(e.Value, &d); err != nil {
			t.Fatalf("dead letter %d: %v", e.Seq, err)
		}
		if _, dup := out[string(d.Key)]; dup {
			t.Errorf("dead letter for key %q enqueued twice", d.Key)
		}
		out[string(d.Key)] = d.Reason
	}
	return out
}

// script is a mixed sequence: upserts, replacements, deletes (of stored and of unknown
// ids) and the poison messages, interleaved deterministically.
func script(t *testing.T, n int, tag string) []event {
	g := newGen(t, 11, 6)
	var evs []event
	ps := poisons(tag)
	for i := range n {
		evs = append(evs, g.upsert(id(i)))
		switch {
		case i%23 == 7:
			evs = append(evs, g.upsert(id(i-3))) // replace an earlier point
		case i%31 == 9:
			evs = append(evs, g.del(id(i-5))) // delete a stored point
		case i%47 == 12:
			evs = append(evs, g.del("never-stored"))
		}
		if i%29 == 3 && len(ps) > 0 {
			evs = append(evs, ps[0])
			ps = ps[1:]
		}
	}
	return append(evs, ps...)
}

// TestIngestDeterministicAcrossBatching applies the same event sequence into fresh
// stores with different batch sizes: the stored pool state must be byte-identical
// (docs/architecture.md, "Determinism and views"), before and after a Sync, and the stored points
// and dead letters must match the replayed expectation.
func TestIngestDeterministicAcrossBatching(t *testing.T) {
	cfg := testConfig()
	evs := script(t, 160, "det")
	ms := numbered(msgs(cfg.Kafka.Topics.Train, evs))
	want := expect(evs)
	var first, firstSynced []byte
	for _, size := range []int{1, 7, 64, len(ms)} {
		t.Run(fmt.Sprint("batch", size), func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			applyInBatches(t, in, ms, size)
			ps := storedPool(t, st)
			if ps.Schema != PoolSchema {
				t.Errorf("schema %d, want %d", ps.Schema, PoolSchema)
			}
			if first == nil {
				first = ps.Data
			} else if string(ps.Data) != string(first) {
				t.Errorf("pool state with batch size %d differs from batch size 1", size)
			}
			checkStore(t, st, want.points)
			if got := deadLetters(t, st, cfg.Kafka.Topics.DLQ); !mapsEqual(got, want.poison) {
				t.Errorf("dead letters\n got %v\nwant %v", got, want.poison)
			}
			checkAgainstReference(t, cfg, in, st, want.points)
			ps = storedPool(t, st)
			if firstSynced == nil {
				firstSynced = ps.Data
			} else if string(ps.Data) != string(firstSynced) {
				t.Errorf("synced pool state with batch size %d differs from batch size 1", size)
			}
			s := in.Stats()
			if got, want := s.Upserts+s.Deletes+s.Missing+s.DeadLetters, uint64(len(ms)); got != want {
				t.Errorf("applied %d messages, want %d (stats %+v)", got, want, s)
			}
		})
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestIngestSkipsAppliedOffsets re-delivers an applied batch (as a reader restarted
// from a stale offset would): nothing may be applied twice.
func TestIngestSkipsAppliedOffsets(t *testing.T) {
	cfg := testConfig()
	evs := script(t, 40, "skip")
	ms := numbered(msgs(cfg.Kafka.Topics.Train, evs))
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	applyInBatches(t, in, ms, 16)
	before := storedPool(t, st)
	beforeDL := deadLetters(t, st, cfg.Kafka.Topics.DLQ)
	res, err := in.Apply(t.Context(), ms[10:30])
	if err != nil {
		t.Fatal(err)
	}
	if counts(res) != counts(BatchResult{Skipped: 20}) {
		t.Errorf("re-delivery result %+v, want only 20 skipped", res)
	}
	// A fresh Ingest on the same store skips them too (offsets come from the store).
	in2 := newTestIngest(t, cfg, st)
	if res, err = in2.Apply(t.Context(), ms); err != nil || counts(res) != counts(BatchResult{Skipped: len(ms)}) {
		t.Errorf("fresh ingest re-delivery: %+v, %v; want all %d skipped", res, err, len(ms))
	}
	if after := storedPool(t, st); string(after.Data) != string(before.Data) {
		t.Errorf("pool state changed by a re-delivery")
	}
	if got := deadLetters(t, st, cfg.Kafka.Topics.DLQ); !mapsEqual(got, beforeDL) {
		t.Errorf("dead letters changed by a re-delivery: %v, want %v", got, beforeDL)
	}
	off, ok, err := in2.Start(cfg.Kafka.Topics.Train, 0)
	if err != nil || !ok || off != int64(len(ms)-1) {
		t.Errorf("Start = %d, %v, %v; want %d, true, nil", off, ok, err, len(ms)-1)
	}
}

// TestIngestDeadLetterReasons checks each poison message alone: dead-lettered with its
// reason, offset consumed, no point stored, pool untouched.
func TestIngestDeadLetterReasons(t *testing.T) {
	cfg := testConfig()
	for i, ev := range poisons("r") {
		t.Run(string(ev.poison)+"/"+ev.key, func(t *testing.T) {
			st := tempStore(t)
			in := newTestIngest(t, cfg, st)
			m := stream.Message{Topic: cfg.Kafka.Topics.Train, Partition: 2, Offset: int64(100 + i), Key: []byte(ev.key), Value: ev.value}
			res, err := in.Apply(t.Context(), []stream.Message{m})
			if err != nil {
				t.Fatal(err)
			}
			if counts(res) != counts(BatchResult{DeadLetters: 1}) {
				t.Errorf("result %+v, want one dead letter", res)
			}
			if got := deadLetters(t, st, cfg.Kafka.Topics.DLQ); got[ev.key] != ev.poison || len(got) != 1 {
				t.Errorf("dead letters %v, want {%s: %s}", got, ev.key, ev.poison)
			}
			if off, ok, err := in.Start(m.Topic, m.Partition); err != nil || !ok || off != m.Offset {
				t.Errorf("offset %d, %v, %v; want %d", off, ok, err, m.Offset)
			}
			if in.Len() != 0 {
				t.Errorf("pool holds %d points, want 0", in.Len())
			}
		})
	}
}

// TestIngestRestoreRejectsOtherModel: a store written under one model refuses to be
// restored under another seed or another budget, instead of mixing features.
func TestIngestRestoreRejectsOtherModel(t *testing.T) {
	cfg := testConfig()
	path := filepath.Join(t.TempDir(), "cairn.db")
	st := openStore(t, path)
	in := newTestIngest(t, cfg, st)
	applyInBatches(t, in, numbered(msgs(cfg.Kafka.Topics.Train, script(t, 30, "m"))), 10)
	st.Close()
	seed, budget, sketch := cfg, cfg, cfg
	seed.Model.Seed++
	budget.Pool.M++
	sketch.Sketch.H++
	cases := map[string]func() error{
		"seed":   func() error { return reopen(t, path, seed) },
		"budget": func() error { return reopen(t, path, budget) },
		"sketch": func() error { return reopen(t, path, sketch) },
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, ErrPoolState) {
			t.Errorf("%s changed: NewIngest error %v, want ErrPoolState", name, err)
		}
	}
	if err := reopen(t, path, cfg); err != nil {
		t.Errorf("same config: %v", err)
	}
}

func reopen(t *testing.T, path string, cfg config.Config) error {
	st := openStore(t, path)
	defer st.Close()
	_, err := New(cfg, st, testLogger(t))
	return err
}

// TestIngestSyncDue: a pool that never ran greedy is due; after Sync it is not; deleting
// a landmark makes it due again (inexact certificate), and Sync clears it.
func TestIngestSyncDue(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 4, 6)
	var evs []event
	for i := range 40 {
		evs = append(evs, g.upsert(id(i)))
	}
	applyInBatches(t, in, numbered(msgs(cfg.Kafka.Topics.Train, evs)), 40)
	if !in.SyncDue() {
		t.Errorf("SyncDue = false before the first Sync, want true")
	}
	if err := in.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if in.SyncDue() {
		t.Errorf("SyncDue = true right after Sync, want false")
	}
	lm := in.Landmarks()[0]
	raw := rawBytes(expectMap(evs)[lm].x)
	if !fileContains(t, st.Path(), raw) {
		t.Fatalf("the stored point's raw bytes are not found in the file before the delete: the scan cannot fail")
	}
	del := stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: 40, Key: []byte(lm), Value: g.del(lm).value}
	if res, err := in.Apply(t.Context(), []stream.Message{del}); err != nil || res.Deletes != 1 {
		t.Fatalf("delete landmark: %+v, %v", res, err)
	}
	if !in.SyncDue() {
		t.Errorf("SyncDue = false after deleting landmark %s, want true", lm)
	}
	if slices.Contains(in.Landmarks(), lm) {
		t.Errorf("deleted point %s is still a served landmark", lm)
	}
	if held, err := st.ScrubPending(); err != nil || held {
		t.Errorf("ScrubPending after a deleting batch = %v, %v; want erased (false)", held, err)
	}
	if fileContains(t, st.Path(), raw) {
		t.Errorf("raw bytes of deleted point %s are still readable in the state file or its slots", lm)
	}
	if err := in.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if in.SyncDue() {
		t.Errorf("SyncDue = true after the second Sync")
	}
	pts := expectMap(evs)
	delete(pts, lm)
	checkAgainstReference(t, cfg, in, st, pts)
}

func expectMap(evs []event) map[string]event { return expect(evs).points }

// rawBytes is x as storage writes it: float64 little-endian bit patterns (FORMAT.md).
func rawBytes(x []float64) []byte {
	var b []byte
	for _, v := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// fileContains reports whether the state file at path or one of its slot files (the
// directory path+".slots", where storage keeps the inputs) holds needle.
func fileContains(t *testing.T, path string, needle []byte) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, needle) {
		return true
	}
	es, err := os.ReadDir(path + ".slots")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(path+".slots", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, needle) {
			return true
		}
	}
	return false
}

// TestIngestFailedCommitRecovers simulates a crash at the commit: the store goes away
// while a batch is applied. The batch must not be half-applied: the Ingest reports
// ErrBroken from then on, and a new Ingest on the reopened store, fed the whole
// sequence again (as a restarted reader would from the stored offsets, plus
// re-deliveries), ends byte-identical to a run that never failed.
func TestIngestFailedCommitRecovers(t *testing.T) {
	cfg := testConfig()
	ms := numbered(msgs(cfg.Kafka.Topics.Train, script(t, 80, "crash")))
	half := len(ms) / 2

	ref := tempStore(t)
	applyInBatches(t, newTestIngest(t, cfg, ref), ms, 16)

	path := filepath.Join(t.TempDir(), "cairn.db")
	st := openStore(t, path)
	in := newTestIngest(t, cfg, st)
	applyInBatches(t, in, ms[:half], 16)
	st.Close() // the "crash": the commit of the next batch fails
	if _, err := in.Apply(t.Context(), ms[half:half+16]); !errors.Is(err, ErrBroken) {
		t.Fatalf("Apply on a failed store: %v, want ErrBroken", err)
	}
	if _, err := in.Apply(t.Context(), ms[half+16:]); !errors.Is(err, ErrBroken) {
		t.Fatalf("Apply after a failure: %v, want ErrBroken", err)
	}
	st = openStore(t, path)
	defer st.Close()
	in = newTestIngest(t, cfg, st)
	if in.Len() != expectLenAt(ms[:half]) {
		t.Errorf("restored %d points, want the %d of the committed half", in.Len(), expectLenAt(ms[:half]))
	}
	applyInBatches(t, in, ms, 16)
	if s := in.Stats(); s.Skipped != uint64(half) {
		t.Errorf("skipped %d re-delivered messages, want %d", s.Skipped, half)
	}
	if got, want := storedPool(t, st), storedPool(t, ref); string(got.Data) != string(want.Data) {
		t.Errorf("pool state after recovery differs from the uninterrupted run")
	}
}

// expectLenAt is the number of points stored after applying ms (decoded again here).
func expectLenAt(ms []stream.Message) int {
	pts := map[string]bool{}
	for _, m := range ms {
		ev, err := stream.DecodeTrain(m.Value, stream.Limits{InputDim: 6, MaxBytes: 2048, MaxIDBytes: 32})
		if err != nil {
			continue
		}
		if ev.Op == stream.OpDelete {
			delete(pts, ev.ID)
		} else if !strings.HasPrefix(ev.ID, "huge-") { // rejected after featurization
			pts[ev.ID] = true
		}
	}
	return len(pts)
}

// TestNewIngestConfigErrors: settings only the daemon can check are refused with
// ErrConfig, naming the setting.
func TestNewIngestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*config.Config)
		want string
	}{
		{"arch", func(c *config.Config) { c.Model.Arch = "mlp:6-x-4" }, "model.arch"},
		{"heads", func(c *config.Config) { c.Sketch.H = 0 }, "sketch"},
		{"sketch width", func(c *config.Config) { c.Sketch.S = 4096 }, "sketch"},
		{"weights", func(c *config.Config) { c.Model.Weights = filepath.Join(t.TempDir(), "missing.safetensors") }, "weights"},
		{"budget", func(c *config.Config) { c.Pool.Budget = "deff:-1" }, "pool.budget"},
		{"id limit", func(c *config.Config) { c.Limits.MaxIDBytes = storage.MaxIDLen + 1 }, "limits.max_id_bytes"},
		{"dlq", func(c *config.Config) { c.Kafka.Topics.DLQ = "" }, "kafka.topics.dlq"},
	} {
		cfg := testConfig()
		tc.mod(&cfg)
		_, err := New(cfg, tempStore(t), testLogger(t))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrConfig naming %q", tc.name, err, tc.want)
		}
	}
}

// TestDeadLettersKeepNoInput: by default a dead letter records the rejected message's
// length and SHA-256 but none of its bytes (the input of a bad upsert is still
// somebody's data, beyond the reach of a deletion); with kafka.dlq_keep_raw it copies
// them.
func TestDeadLettersKeepNoInput(t *testing.T) {
	value := []byte(`{"v":1,"op":"upsert","id":"w","x":[1,2,3]}`) // wrong dimension
	sum := sha256.Sum256(value)
	for _, keep := range []bool{false, true} {
		cfg := testConfig()
		cfg.Kafka.DLQKeepRaw = keep
		st := tempStore(t)
		in := newTestIngest(t, cfg, st)
		m := stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: 1, Key: []byte("w"), Value: value}
		if _, err := in.Apply(t.Context(), []stream.Message{m}); err != nil {
			t.Fatal(err)
		}
		es, err := st.Pending(0)
		if err != nil || len(es) != 1 {
			t.Fatalf("outbox %v, %v", es, err)
		}
		var dl stream.DeadLetter
		if err := json.Unmarshal(es[0].Value, &dl); err != nil {
			t.Fatal(err)
		}
		if dl.SHA256 != hex.EncodeToString(sum[:]) || dl.RawLen != len(value) || dl.Reason != stream.ReasonWrongDim {
			t.Errorf("keep %v: dead letter %+v, want the digest, length and reason", keep, dl)
		}
		if got := len(dl.Raw) > 0; got != keep || (keep && !bytes.Equal(dl.Raw, value)) {
			t.Errorf("keep %v: raw %q in the dead letter", keep, dl.Raw)
		}
	}
}

// TestTombstones: the deletion of a stored id enqueues one tombstone for it (its topic,
// its id as key, a claim of the delete's offset, published as null with that version
// in its header) and awaits it in the deleted bucket, and a deletion of an unknown id
// enqueues none; tombstones read back from the topic are neither applied nor
// dead-lettered, the versioned one ends the wait, and their offsets are not stored but
// count as read (Applied).
func TestTombstones(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 4, 6)
	topic := cfg.Kafka.Topics.Train
	evs := []event{g.upsert("a"), g.upsert("b"), g.del("a"), g.del("ghost")}
	ms := msgs(topic, evs)
	for i := range ms {
		ms[i].Offset = int64(i)
	}
	if _, err := in.Apply(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
	var tombs []string
	box := NewOutbox(st, topic, "compact", nil)
	out, err := box.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Topic == topic {
			if v, ok := (stream.Message{Headers: e.Headers}).Header(VersionHeader); e.Value != nil || !ok || string(v) != "2" {
				t.Errorf("entry on %s: value %q, version header %q (%v); want null and 2", topic, e.Value, v, ok)
			}
			tombs = append(tombs, string(e.Key))
		}
	}
	if !slices.Equal(tombs, []string{"a"}) {
		t.Errorf("tombstones %v, want one for a", tombs)
	}
	if !maps.Equal(in.deleted, map[string]int64{"a": 2}) || !maps.Equal(storedDeleted(t, st), in.deleted) {
		t.Errorf("awaited deletions %v, stored %v; want a: 2", in.deleted, storedDeleted(t, st))
	}
	// A copy without a version, the tombstone and a second copy come back from the
	// topic, then an upsert.
	v2 := []stream.Header{{Key: VersionHeader, Value: []byte("2")}}
	back := []stream.Message{{Topic: topic, Offset: 4, Key: []byte("a")}, {Topic: topic, Offset: 5, Key: []byte("a"), Headers: v2},
		{Topic: topic, Offset: 6, Key: []byte("a"), Headers: v2}}
	res, err := in.Apply(t.Context(), back[:1])
	if err != nil || res.DeadLetters != 0 || res.Upserts != 0 || res.Deletes != 0 || len(storedDeleted(t, st)) != 1 {
		t.Fatalf("unversioned tombstone applied: %+v, %v, awaited %v", res, err, storedDeleted(t, st))
	}
	res, err = in.Apply(t.Context(), back[1:])
	if err != nil || res.DeadLetters != 0 || res.Upserts != 0 || res.Deletes != 0 {
		t.Fatalf("tombstones applied: %+v, %v", res, err)
	}
	if len(in.deleted) != 0 || len(storedDeleted(t, st)) != 0 {
		t.Errorf("awaited deletions %v, stored %v after the tombstone; want none", in.deleted, storedDeleted(t, st))
	}
	if off, ok, _ := in.Start(topic, 0); !ok || off != 3 {
		t.Errorf("stored offset %d (%v), want 3: tombstones store none", off, ok)
	}
	if off, ok := in.Applied(topic, 0); !ok || off != 6 {
		t.Errorf("applied %d (%v), want 6: tombstones count as read", off, ok)
	}
	up := msgs(topic, []event{g.upsert("c")})
	up[0].Offset = 7
	if res, err := in.Apply(t.Context(), up); err != nil || res.Upserts != 1 {
		t.Fatalf("upsert after tombstones: %+v, %v", res, err)
	}
	if off, _, _ := in.Start(topic, 0); off != 7 {
		t.Errorf("stored offset %d, want 7", off)
	}
}

// TestRecordTombstones: the position of a deletion's tombstone is stored in its pending
// record (so an audit after a restart states it), the first one recorded stays, and
// records of other ids are untouched; New restores it with the record.
func TestRecordTombstones(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 5, 6)
	topic := cfg.Kafka.Topics.Train
	ms := msgs(topic, []event{g.upsert("a"), g.upsert("b"), g.del("a"), g.del("b")})
	for i := range ms {
		ms[i].Offset = int64(i)
	}
	if _, err := in.Apply(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{17, 99} {
		if err := st.Apply(func(tx *storage.Tx) error {
			return RecordTombstones(tx, map[string]Tombstone{"a": {Topic: topic, Partition: 1, Offset: off, Policy: "compact"}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	in2 := newTestIngest(t, cfg, st)
	got := map[string]*Tombstone{}
	for _, rec := range in2.pending {
		got[rec.ID] = rec.Tombstone
	}
	if a := got["a"]; a == nil || a.Offset != 17 || a.Partition != 1 || a.Policy != "compact" {
		t.Errorf("restored tombstone of a %+v, want partition 1 offset 17 (the first recorded)", a)
	}
	if b, ok := got["b"]; !ok || b != nil {
		t.Errorf("pending b: present %v, tombstone %+v; want present without one", ok, b)
	}
}

// TestRelabelingHook: an upsert that restates a stored point's input with another label
// (or none) calls Relabeling with its id and not Removing (its landmark terms stay
// exact, its gradient row does not); one that changes the input calls Removing only; one
// that restates input and label calls neither.
func TestRelabelingHook(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	var removed, relabeled []string
	in.SetHooks(Hooks{Removing: func(ids []string) { removed = append(removed, ids...) },
		Relabeling: func(ids []string) { relabeled = append(relabeled, ids...) }})
	g := newGen(t, 7, 6) // testConfig's model takes 6 inputs
	evs := []event{g.upsert(id(0)), g.upsert(id(1)), g.upsert(id(2)), g.upsert(id(3))}
	topic := cfg.Kafka.Topics.Train
	ms := numbered(msgs(topic, evs))
	if _, err := in.Apply(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
	enc := func(ev event, label *int64) stream.Message {
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: ev.id, X: ev.x, Label: label}, g.lim)
		if err != nil {
			t.Fatal(err)
		}
		return stream.Message{Topic: topic, Key: []byte(ev.id), Value: v}
	}
	other, same := evs[0].label+1, evs[2].label
	moved := g.upsert(id(1)) // a new input for p0001
	batch := []stream.Message{enc(evs[0], &other), {Topic: topic, Key: []byte(id(1)), Value: moved.value}, enc(evs[2], &same), enc(evs[3], nil)}
	for i := range batch {
		batch[i].Offset = int64(len(ms) + i)
	}
	if _, err := in.Apply(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(relabeled, []string{id(0), id(3)}) || !slices.Equal(removed, []string{id(1)}) {
		t.Errorf("relabeled %v, removed %v; want [p0000 p0003] and [p0001]", relabeled, removed)
	}
}
