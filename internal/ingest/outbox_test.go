package ingest

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// publishRound is one publisher round of box, as stream.Publisher.Drain runs it: the
// pending entries, their tombstones written (the writer's OnWritten says where, from
// offset on), then Ack. It returns Ack's error.
func publishRound(t *testing.T, box *Outbox, topic string, offset int64) error {
	t.Helper()
	es, err := box.Pending(0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		seqs    []uint64
		written []stream.Message
	)
	for _, e := range es {
		seqs = append(seqs, e.Seq)
		if e.Topic == topic {
			written = append(written, stream.Message{Topic: e.Topic, Key: e.Key, Value: e.Value, Headers: e.Headers, Offset: offset})
			offset++
		}
	}
	box.Written(written)
	return box.Ack(seqs...)
}

// auditTombstone is the tombstone the audit of the pending deletion of id states, as
// the daemon's refit writes it (TombstoneOf inside its transaction), and the audit
// body's JSON of it.
func auditTombstone(t *testing.T, st *storage.Store, box *Outbox, in *State, id string) (*Tombstone, string) {
	t.Helper()
	var rec *Deletion
	for _, r := range in.pending {
		if r.ID == id {
			rec = r
		}
	}
	if rec == nil {
		t.Fatalf("no pending deletion of %s", id)
	}
	var tb *Tombstone
	if err := st.Apply(func(tx *storage.Tx) error {
		var err error
		tb, err = box.TombstoneOf(tx, rec)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(AuditBody{ID: id, Tombstone: tb})
	if err != nil {
		t.Fatal(err)
	}
	return tb, string(b)
}

// TestTombstoneOffsetSurvivesCrash: the position of a deletion's tombstone is stored in
// the transaction that acknowledges it, so an audit written after a crash states it: a
// crash right after the acknowledgement keeps it, and an acknowledgement that fails
// (the state file refuses the write, as faults.go's disk-full windows do) leaves the
// tombstone in the outbox, re-sent and stored at the next round, never acknowledged
// without its position. An audit written before any acknowledgement says why the
// position is unknown, in a field of its own, with no offset at all.
func TestTombstoneOffsetSurvivesCrash(t *testing.T) {
	cfg := testConfig()
	topic := cfg.Kafka.Topics.Train
	g := newGen(t, 21, 6)
	path := filepath.Join(t.TempDir(), "cairn.db")
	var full atomic.Bool // the disk is full: every commit fails
	open := func() *storage.Store {
		st, err := storage.Open(path, storage.Options{NoSync: true, Faults: func(site string) error {
			if full.Load() && site == "commit" {
				return errors.New("no space left on device")
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	in := newTestIngest(t, cfg, st)
	l := &topicLog{t: t, topic: topic}
	l.apply(in, l.add(stream.Message{Key: []byte("a"), Value: g.upsert("a").value}, stream.Message{Key: []byte("b"), Value: g.upsert("b").value},
		stream.Message{Key: []byte("a"), Value: g.del("a").value}))

	// Before the broker acknowledged it: unknown, and why.
	box := NewOutbox(st, topic, "compact", nil)
	tb, body := auditTombstone(t, st, box, in, "a")
	if tb.Unknown != TombstoneNotAcked || strings.Contains(body, `"offset"`) || !strings.Contains(body, `"unknown":`) {
		t.Errorf("audit before the acknowledgement: %+v, body %s; want the reason and no offset", tb, body)
	}

	// The acknowledgement fails (disk full): the tombstone stays in the outbox.
	full.Store(true)
	if err := publishRound(t, box, topic, 42); err == nil {
		t.Fatal("Ack succeeded on a full disk")
	}
	full.Store(false)
	// Crash: the outbox's memory is gone; after the restart the tombstone goes out
	// again, lands at 50, and its acknowledgement stores where.
	st.Close()
	st = open()
	defer st.Close()
	newTestIngest(t, cfg, st) // the restart opens the ingest state, as the daemon does
	box = NewOutbox(st, topic, "compact", nil)
	if err := publishRound(t, box, topic, 50); err != nil {
		t.Fatal(err)
	}
	// Crash right after the acknowledgement: the restarted daemon's audit states it.
	st.Close()
	st = open()
	in = newTestIngest(t, cfg, st)
	box = NewOutbox(st, topic, "compact", nil)
	if es, err := box.Pending(0); err != nil || len(es) != 0 {
		t.Fatalf("outbox after the acknowledgement: %d entries (%v), want none", len(es), err)
	}
	tb, body = auditTombstone(t, st, box, in, "a")
	if tb.Unknown != "" || tb.Offset != 50 || tb.Topic != topic || tb.Policy != "compact" {
		t.Errorf("audit after the restart: tombstone %+v, want offset 50", tb)
	}
	if want := `"tombstone":{"topic":"` + topic + `","partition":0,"offset":50,"policy":"compact"}`; !strings.Contains(body, want) {
		t.Errorf("audit body %s, want %s (the layout of every earlier audit)", body, want)
	}
}
