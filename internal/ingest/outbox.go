package ingest

import (
	"fmt"
	"sync"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Outbox adapts the store to stream.Outbox (the entry types have equal fields) and
// publishes the deletions' tombstones: an outbox entry on the training topic with an
// empty value is a tombstone, published with a null value. It also records where each
// tombstone landed (Written, the writer's OnWritten), for the audits (TombstoneOf).
// Pending and Ack are called from the publisher's goroutine only; Written and
// TombstoneOf are safe for concurrent use.
type Outbox struct {
	store  *storage.Store
	train  string
	policy string
	// erase, when set (the embedded broker), runs after tombstones were written and
	// before they are acknowledged: it writes each tombstone's key once more (so that the
	// first copy leaves the partition's last batch, which compaction never cleans) and
	// compacts the broker, so the deleted points' upserts are gone from its files before
	// any later output, their audits included, goes out.
	erase func(keys [][]byte) error
	// keys are the tombstone keys by seq of the last Pending call.
	keys map[uint64][]byte

	mu sync.Mutex
	at map[string]Tombstone // where tombstones landed, until their audits take them
}

// NewOutbox is the outbox of st; train is the training topic and policy its
// cleanup.policy, erase the embedded broker's erasure (nil with an external one).
func NewOutbox(st *storage.Store, train, policy string, erase func(keys [][]byte) error) *Outbox {
	return &Outbox{store: st, train: train, policy: policy, erase: erase, keys: map[uint64][]byte{}, at: map[string]Tombstone{}}
}

// Pending is stream.Outbox's: the store's entries, tombstones with a null value.
func (o *Outbox) Pending(limit int) ([]stream.OutboxEntry, error) {
	es, err := o.store.Pending(limit)
	if err != nil {
		return nil, err
	}
	clear(o.keys)
	out := make([]stream.OutboxEntry, len(es))
	for i, e := range es {
		out[i] = stream.OutboxEntry{Seq: e.Seq, Topic: e.Topic, Key: e.Key, Value: e.Value}
		if e.Topic == o.train && len(e.Value) == 0 {
			out[i].Value = nil
			o.keys[e.Seq] = e.Key
		}
	}
	return out, nil
}

// Ack is stream.Outbox's, after the erasure of the acknowledged tombstones' points.
func (o *Outbox) Ack(seqs ...uint64) error {
	if o.erase != nil {
		var keys [][]byte
		for _, s := range seqs {
			if k, ok := o.keys[s]; ok {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			if err := o.erase(keys); err != nil {
				return fmt.Errorf("ingest: erase deleted points from the broker: %w", err)
			}
		}
	}
	return o.store.Ack(seqs...)
}

// Written records where the acknowledged tombstones among msgs landed, in memory and
// in their pending deletion records (RecordTombstones), so that an audit written after
// a restart states it too. A failure to store them is returned; the memory copy
// serves this process anyway.
func (o *Outbox) Written(msgs []stream.Message) error {
	at := map[string]Tombstone{}
	o.mu.Lock()
	for _, m := range msgs {
		if m.Topic == o.train && m.Value == nil {
			if _, dup := o.at[string(m.Key)]; !dup { // the first copy is the one compaction keeps
				t := Tombstone{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Policy: o.policy}
				o.at[string(m.Key)], at[string(m.Key)] = t, t
			}
		}
	}
	o.mu.Unlock()
	if len(at) == 0 {
		return nil
	}
	return o.store.Apply(func(tx *storage.Tx) error { return RecordTombstones(tx, at) })
}

// TombstoneOf is the tombstone of a deleted id for its audit (offset -1 when its
// position is not known), and forgets it.
func (o *Outbox) TombstoneOf(id string) *Tombstone {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.at[id]
	if !ok {
		t = Tombstone{Topic: o.train, Partition: -1, Offset: -1, Policy: o.policy}
	}
	delete(o.at, id)
	return &t
}
