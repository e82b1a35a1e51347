package ingest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/base/vec"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// The subjects of these tests; neither may appear in anything the ingest writes.
const (
	alice = "alice@example.org"
	bob   = "bob@example.org"
)

// upsertAbout is an upsert of id about subject ("" for none).
func (g *gen) upsertAbout(id, subject string) event {
	ev := g.upsert(id)
	v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: ev.x, Label: &ev.label, Subject: subject}, g.lim)
	if err != nil {
		g.t.Fatal(err)
	}
	ev.value = v
	return ev
}

// request is a message of the erasures topic, keyed by its subject.
func request(t *testing.T, op stream.ErasureOp, subject, req string) stream.Message {
	t.Helper()
	v, err := stream.EncodeErasure(stream.ErasureEvent{Op: op, Subject: subject, Request: req}, stream.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Key: []byte(subject), Value: v}
}

// subjectPoints is what st files under subject (hashed with in's key), and whether the
// subject is blocked.
func subjectPoints(t *testing.T, in *State, st *storage.Store, subject string) ([]string, bool) {
	t.Helper()
	var (
		ids     []string
		blocked bool
	)
	h := in.Subjects().Hash(subject)
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		if ids, err = tx.SubjectPoints(h); err != nil {
			return err
		}
		_, blocked, err = tx.Blocked(h)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ids, blocked
}

// noSubjectIn fails when a subject's id appears in any outbox entry or pending record
// of st, or in the state file.
func noSubjectIn(t *testing.T, st *storage.Store) {
	t.Helper()
	es, err := st.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]byte
	for _, e := range es {
		all = append(all, e.Key, e.Value)
	}
	if err := st.View(func(tx *storage.ReadTx) error {
		return tx.ForEachPending(func(_ uint64, b []byte) error { all = append(all, bytes.Clone(b)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, file)
	for _, b := range all {
		for _, s := range []string{alice, bob} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("subject %q in plain text: %.200q", s, b)
			}
		}
	}
}

// TestErasure: an erasure request removes every point stored about its subject (not
// those whose latest upsert named another subject or none), in one record with a
// tombstone per point at the version of the value it erases, blocks the subject (its
// later upserts are dead letters, subject_erased), and an unblock lets them in again.
func TestErasure(t *testing.T) {
	cfg := testConfig()
	cfg.Kafka.DLQKeepRaw = true // even so, no dead letter may copy a subject
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 21, 6)
	train := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	plain := func(ev event) stream.Message { return stream.Message{Key: []byte(ev.key), Value: ev.value} }
	var log []stream.Message
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		log = append(log, plain(g.upsertAbout(id, alice)))
	}
	for _, id := range []string{"o1", "o2", "o3"} {
		log = append(log, plain(g.upsertAbout(id, bob)))
	}
	log = append(log, plain(g.upsert("n1")), plain(g.upsert("s3")), plain(g.upsertAbout("o3", alice)))
	train.apply(in, train.add(log...))
	if ids, _ := subjectPoints(t, in, st, alice); !slices.Equal(ids, []string{"o3", "s1", "s2", "s4", "s5"}) {
		t.Fatalf("alice's points %v", ids)
	}
	res := reqs.apply(in, reqs.add(request(t, stream.ErasureErase, alice, "e1")))
	want := []string{"o3", "s1", "s2", "s4", "s5"}
	if len(res.Subjects) != 1 || res.Erasures != len(want) {
		t.Fatalf("erasure result %+v", res)
	}
	rec := res.Subjects[0]
	var got []string
	for _, p := range rec.Points {
		got = append(got, p.ID)
		if x, _ := storedX(t, st, p.ID); x != nil {
			t.Errorf("%s still stored", p.ID)
		}
	}
	if rec.Kind != KindErasure || rec.Request != "e1" || rec.Subject != SubjectHex(in.Subjects().Hash(alice)) || !slices.Equal(got, want) {
		t.Errorf("record %+v, points %v; want an erasure of %v", rec, got, want)
	}
	if ids, blocked := subjectPoints(t, in, st, alice); len(ids) != 0 || !blocked {
		t.Errorf("after the erasure alice has %v, blocked %v", ids, blocked)
	}
	if ids, _ := subjectPoints(t, in, st, bob); !slices.Equal(ids, []string{"o1", "o2"}) {
		t.Errorf("bob's points %v", ids)
	}
	if in.Len() != 4 || in.PendingCount() != 1 || !slices.Equal(in.PendingIDs(), want) {
		t.Errorf("pool %d points, pending %v", in.Len(), in.PendingIDs())
	}
	if off, ok := in.Applied(stream.DefaultErasuresTopic, 0); !ok || off != 0 {
		t.Errorf("erasures offset %d %v", off, ok)
	}
	// The tombstones: one per point, each of the version of the value it erased.
	stones := map[string]int64{}
	for _, m := range train.publish(st) {
		if m.Value == nil {
			stones[string(m.Key)] = versionOf(t, m)
		}
	}
	wantV := map[string]int64{"s1": 0, "s2": 1, "s4": 3, "s5": 4, "o3": 10}
	if len(stones) != len(wantV) {
		t.Errorf("tombstones %v, want versions %v", stones, wantV)
	}
	for id, v := range wantV {
		if stones[id] != v {
			t.Errorf("tombstone of %s has version %d, want %d", id, stones[id], v)
		}
	}
	// An upsert of alice now is a dead letter, without her id, the raw bytes or a key
	// that names her; bob's upserts go on.
	res = train.apply(in, train.add(plain(g.upsertAbout("s6", alice)), plain(g.upsertAbout("o4", bob))))
	if res.Upserts != 1 || !slices.Equal(res.Reasons, []stream.Reason{stream.ReasonSubjectErased}) || !slices.Equal(res.Stored, []string{"o4"}) {
		t.Errorf("upserts after the erasure: %+v (stored %v, want bob's o4 alone)", res, res.Stored)
	}
	noSubjectIn(t, st)
	// The refused upsert is followed by a tombstone that erases nothing stored (version
	// -1), so that compaction drops its bytes from the topic.
	var scrubs []int64
	for _, m := range train.publish(st) {
		if m.Value == nil {
			scrubs = append(scrubs, versionOf(t, m))
			if string(m.Key) != "s6" {
				t.Errorf("tombstone of %q after the refused upsert of s6", m.Key)
			}
		}
	}
	if !slices.Equal(scrubs, []int64{-1}) {
		t.Errorf("tombstones after the refused upsert: versions %v, want [-1]", scrubs)
	}
	// Unblock: nothing audits it here (no hooks), so it is pending; alice's upserts are
	// accepted again.
	res = reqs.apply(in, reqs.add(request(t, stream.ErasureUnblock, alice, "u1")))
	if len(res.Subjects) != 1 || res.Subjects[0].Kind != KindUnblock || !res.Subjects[0].Blocked {
		t.Fatalf("unblock result %+v", res.Subjects)
	}
	train.apply(in, train.add(plain(g.upsertAbout("s7", alice))))
	if ids, blocked := subjectPoints(t, in, st, alice); !slices.Equal(ids, []string{"s7"}) || blocked {
		t.Errorf("after the unblock alice has %v, blocked %v", ids, blocked)
	}
	noSubjectIn(t, st)
}

// TestErasureRequestsRejected: a malformed request or one keyed by another subject is
// a dead letter that names neither the key nor the subject, and its offset is consumed;
// a tombstone of a request is consumed without one.
func TestErasureRequestsRejected(t *testing.T) {
	cfg := testConfig()
	cfg.Kafka.DLQKeepRaw = true
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	bad := request(t, stream.ErasureErase, alice, "e1")
	bad.Key = []byte(bob)
	res := reqs.apply(in, reqs.add(
		stream.Message{Key: []byte(alice), Value: []byte(`{"v":1,"op":"forget","subject":"` + alice + `","request":"r"}`)},
		stream.Message{Key: []byte(alice), Value: []byte(`{"v":1,"op":"erase","subject":"` + alice + `"`)},
		bad, stream.Message{Key: []byte(alice), Value: nil}))
	if !slices.Equal(res.Reasons, []stream.Reason{stream.ReasonUnknownOp, stream.ReasonBadJSON, stream.ReasonKeyMismatch}) {
		t.Errorf("reasons %v (a tombstone on the topic is no request, and no dead letter either)", res.Reasons)
	}
	if off, ok := in.Applied(stream.DefaultErasuresTopic, 0); !ok || off != 3 {
		t.Errorf("erasures offset %d %v, want 3", off, ok)
	}
	es, err := st.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		var d stream.DeadLetter
		if err := json.Unmarshal(e.Value, &d); err != nil {
			t.Fatal(err)
		}
		if d.Key != nil || d.Raw != nil || d.Topic != stream.DefaultErasuresTopic {
			t.Errorf("dead letter %+v keeps the key or the raw bytes", d)
		}
	}
	noSubjectIn(t, st)
}

// TestErasureInBatch: in one batch, offset order decides: an upsert of the subject
// before its erasure is erased, one after it is a dead letter; and applying the same
// messages one by one stores the same points, subjects and records.
func TestErasureInBatch(t *testing.T) {
	cfg := testConfig()
	g := newGen(t, 22, 6)
	up := func(id, s string) stream.Message {
		ev := g.upsertAbout(id, s)
		return stream.Message{Topic: cfg.Kafka.Topics.Train, Key: []byte(id), Value: ev.value}
	}
	req := func(op stream.ErasureOp, s, r string, off int64) stream.Message {
		m := request(t, op, s, r)
		m.Topic, m.Offset = stream.DefaultErasuresTopic, off
		return m
	}
	ms := []stream.Message{up("a1", alice), up("b1", bob), up("a2", alice), req(stream.ErasureErase, alice, "e1", 0),
		up("a3", alice), up("b2", bob), req(stream.ErasureErase, bob, "e2", 1), up("b3", bob),
		req(stream.ErasureUnblock, bob, "u2", 2), up("b4", bob), up("a1", "")}
	train := int64(0)
	for i := range ms {
		if ms[i].Topic == cfg.Kafka.Topics.Train {
			ms[i].Offset, train = train, train+1
		}
	}
	type outcome struct {
		points, alice, bob []string
		blocked            [2]bool
		pending            []string
		reasons            []stream.Reason
	}
	run := func(size int) outcome {
		st := tempStore(t)
		in := newTestIngest(t, cfg, st)
		var o outcome
		for i := 0; i < len(ms); i += size {
			res, err := in.Apply(t.Context(), ms[i:min(i+size, len(ms))])
			if err != nil {
				t.Fatal(err)
			}
			o.reasons = append(o.reasons, res.Reasons...)
		}
		o.points = in.Points().IDs()
		o.alice, o.blocked[0] = subjectPoints(t, in, st, alice)
		o.bob, o.blocked[1] = subjectPoints(t, in, st, bob)
		for _, r := range in.pending {
			var ids []string
			for _, p := range r.Points {
				ids = append(ids, p.ID)
			}
			o.pending = append(o.pending, r.Kind+":"+r.Request+":"+strings.Join(ids, ","))
		}
		return o
	}
	want := outcome{points: []string{"a1", "b4"}, bob: []string{"b4"}, blocked: [2]bool{true, false},
		pending: []string{"erasure:e1:a1,a2", "erasure:e2:b1,b2", "unblock:u2:"},
		reasons: []stream.Reason{stream.ReasonSubjectErased, stream.ReasonSubjectErased}}
	for _, size := range []int{len(ms), 1, 4} {
		if got := run(size); !equalOutcome(got.points, want.points) || !equalOutcome(got.alice, want.alice) ||
			!equalOutcome(got.bob, want.bob) || got.blocked != want.blocked || !slices.Equal(got.pending, want.pending) ||
			!slices.Equal(got.reasons, want.reasons) {
			t.Errorf("batches of %d: %+v\nwant %+v", size, got, want)
		}
	}
}

func equalOutcome(a, b []string) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) }

// TestErasureRestart: subjects and pending erasures survive a restart (New reads the
// subject index and the pending records), and a request applied after it finds the
// points filed before.
func TestErasureRestart(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 23, 6)
	train := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	for _, id := range []string{"a1", "a2"} {
		train.apply(in, train.add(stream.Message{Key: []byte(id), Value: g.upsertAbout(id, alice).value}))
	}
	train.apply(in, train.add(stream.Message{Key: []byte("b1"), Value: g.upsertAbout("b1", bob).value}))
	reqs.apply(in, reqs.add(request(t, stream.ErasureErase, alice, "e1")))
	in = newTestIngest(t, cfg, st)
	if e := in.Points().Get("b1"); e == nil || e.Subject == nil || *e.Subject != in.Subjects().Hash(bob) {
		t.Errorf("restored entry of b1 %+v", e)
	}
	if subs := in.PendingSubjects(); len(subs) != 1 || subs[0].Points != 2 || subs[0].Request != "e1" {
		t.Errorf("restored pending %+v", subs)
	}
	res := reqs.apply(in, reqs.add(request(t, stream.ErasureErase, bob, "e2")))
	if res.Erasures != 1 || len(in.Points().IDs()) != 0 {
		t.Errorf("erasure after the restart: %+v, left %v", res, in.Points().IDs())
	}
}

// TestErasureAudit: the audit of an erasure lists every point with where its
// tombstone landed (stored when the broker acknowledged it), names the subject by its
// hash only, and its event repeats what its body says.
func TestErasureAudit(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 24, 6)
	train := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	train.apply(in, train.add(stream.Message{Key: []byte("a1"), Value: g.upsertAbout("a1", alice).value},
		stream.Message{Key: []byte("a2"), Value: g.upsertAbout("a2", alice).value}))
	reqs.apply(in, reqs.add(request(t, stream.ErasureErase, alice, "e1")))
	box := NewOutbox(st, cfg.Kafka.Topics.Train, "compact", nil)
	es, err := box.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	var written []stream.Message
	var seqs []uint64
	for i, e := range es {
		seqs = append(seqs, e.Seq)
		written = append(written, stream.Message{Topic: e.Topic, Key: e.Key, Value: e.Value, Partition: 1, Offset: int64(40 + i)})
	}
	box.Written(written)
	if err := box.Ack(seqs...); err != nil {
		t.Fatal(err)
	}
	var ev stream.Audit
	if err := st.Apply(func(tx *storage.Tx) error {
		rec, err := box.WithTombstones(tx, in.pending[0])
		if err != nil {
			return err
		}
		ev, err = AppendAudit(tx, "t.audits", rec, nil, rec.Applied, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var body SubjectAuditBody
	if err := json.Unmarshal([]byte(ev.Body), &body); err != nil {
		t.Fatal(err)
	}
	h := SubjectHex(in.Subjects().Hash(alice))
	if body.Kind != KindErasure || body.SubjectHash != h || body.ID != h || !body.Known || len(body.Points) != 2 ||
		ev.SubjectHash != h || len(ev.Points) != 2 || ev.ID != h || !ev.Known || ev.Percentile != -1 {
		t.Fatalf("audit %+v\nbody %+v", ev, body)
	}
	for i, p := range body.Points {
		if p.Tombstone == nil || p.Tombstone.Partition != 1 || p.Tombstone.Offset != int64(40+i) || p.ID != ev.Points[i].ID {
			t.Errorf("point %d: %+v, tombstone %+v", i, p, p.Tombstone)
		}
	}
	if strings.Contains(ev.Body, alice) {
		t.Errorf("the audit names the subject: %s", ev.Body)
	}
}

// TestRepublishedSubject: a republished upsert carries its point's subject hash
// (SubjectHeader), so a reader that applies it files the point under the subject.
func TestRepublishedSubject(t *testing.T) {
	cfg := testConfig()
	g := newGen(t, 25, 6)
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	l := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	b, a := g.upsert("b"), g.upsertAbout("a", alice)
	stale := stream.Message{Key: []byte("a"), Headers: []stream.Header{{Key: VersionHeader, Value: []byte("0")}}}
	l.apply(in, l.add(stream.Message{Key: []byte("b"), Value: b.value}, stream.Message{Key: []byte("a"), Value: a.value}, stale))
	pub := l.publish(st)
	if len(pub) != 1 {
		t.Fatalf("published %d records, want the republication of a", len(pub))
	}
	if h, ok := pub[0].Header(SubjectHeader); !ok || string(h) != SubjectHex(in.Subjects().Hash(alice)) {
		t.Fatalf("republication's subject header %q %v", h, ok)
	}
	// A reader of the compacted topic, which holds only the republication of a.
	dir := t.TempDir()
	key, err := os.ReadFile(filepath.Join(filepath.Dir(st.Path()), SubjectKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SubjectKeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	st2 := openStore(t, filepath.Join(dir, "cairn.db"))
	defer st2.Close()
	in2 := newTestIngest(t, cfg, st2)
	m := pub[0]
	m.Topic = cfg.Kafka.Topics.Train
	if res, err := in2.Apply(t.Context(), []stream.Message{m}); err != nil || res.Upserts != 1 {
		t.Fatalf("applying the republication: %+v, %v", res, err)
	}
	if ids, _ := subjectPoints(t, in2, st2, alice); !slices.Equal(ids, []string{"a"}) {
		t.Errorf("the reader files %v under alice, want [a]", ids)
	}
}

// TestSubjectKey: the key is made once (mode 0600) and read back; a key readable by
// others is refused; the hash is HMAC-SHA256 (reference values from Python's hmac).
func TestSubjectKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), SubjectKeyFile)
	k, created, err := LoadOrCreateSubjectKey(path)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	k2, created, err := LoadOrCreateSubjectKey(path)
	if err != nil || created || k2.Hash(alice) != k.Hash(alice) {
		t.Fatalf("reload: created %v, %v", created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSubjectKey(path); err == nil {
		t.Error("a key readable by others was accepted")
	}
	var raw [32]byte
	for i := range raw {
		raw[i] = byte(i)
	}
	ref := NewSubjectKey(raw)
	for s, want := range map[string]string{
		"alice@example": "1b4f4a254e6403c0af58b411caebd3fbb0db9e13232e042a34089ac3061335f7",
		"Zoë":           "895eaa5b6ad2cd8a4aadf561368adafa408a261c6abf62b7d2b3de638877e91b",
	} {
		if got := SubjectHex(ref.Hash(s)); got != want {
			t.Errorf("hash of %q = %s, want %s", s, got, want)
		}
	}
}

// TestScrubKeepsStored: the tombstone after a refused upsert of an erased subject does
// not erase the value stored under the same id: read back, it makes the daemon
// republish that value, so the topic's newest record of the id restates it again.
func TestScrubKeepsStored(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 26, 6)
	train := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	kept := g.upsert("x")
	train.apply(in, train.add(stream.Message{Key: []byte("x"), Value: kept.value}))
	reqs.apply(in, reqs.add(request(t, stream.ErasureErase, alice, "e1")))
	train.apply(in, train.add(stream.Message{Key: []byte("x"), Value: g.upsertAbout("x", alice).value}))
	pub := train.publish(st)
	if len(pub) != 1 || pub[0].Value != nil {
		t.Fatalf("published %v, want the tombstone after the refused upsert", pub)
	}
	train.apply(in, pub)
	if x, v := storedX(t, st, "x"); !vec.SameBits(x, kept.x) || v != 0 {
		t.Fatalf("x stored %v at version %d, want the first upsert's value", x, v)
	}
	pub = train.publish(st)
	if len(pub) != 1 || pub[0].Value == nil || versionOf(t, pub[0]) != 0 {
		t.Fatalf("after reading the tombstone back published %v, want x republished at version 0", pub)
	}
}

// TestErasureParts: a subject with more than MaxErasurePoints points is erased in the
// same transaction, in records of at most MaxErasurePoints points numbered part i of
// parts, which /status counts as one request.
func TestErasureParts(t *testing.T) {
	cfg := testConfig()
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	g := newGen(t, 27, 6)
	train := &topicLog{t: t, topic: cfg.Kafka.Topics.Train}
	reqs := &topicLog{t: t, topic: stream.DefaultErasuresTopic}
	n := MaxErasurePoints + 3
	var ms []stream.Message
	for i := range n {
		ms = append(ms, stream.Message{Key: []byte(id(i)), Value: g.upsertAbout(id(i), alice).value})
	}
	train.apply(in, train.add(ms...))
	res := reqs.apply(in, reqs.add(request(t, stream.ErasureErase, alice, "big")))
	if len(res.Subjects) != 2 || res.Erasures != n || in.Len() != 0 {
		t.Fatalf("%d records, %d points erased, %d left", len(res.Subjects), res.Erasures, in.Len())
	}
	for i, r := range res.Subjects {
		want := []int{MaxErasurePoints, 3}[i]
		if r.Part != i+1 || r.Parts != 2 || len(r.Points) != want || r.Request != "big" {
			t.Errorf("record %d: part %d of %d, %d points; want part %d of 2, %d points", i, r.Part, r.Parts, len(r.Points), i+1, want)
		}
	}
	if subs := in.PendingSubjects(); len(subs) != 1 || subs[0].Points != n {
		t.Errorf("pending %+v, want one request of %d points", subs, n)
	}
}
