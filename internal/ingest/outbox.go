package ingest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Outbox adapts the store to stream.Outbox and publishes the training topic's claims
// (claims.go): an outbox entry on the training topic is a claim, published with its
// version header, a tombstone with a null value. It also records where each tombstone
// landed (Written, the writer's OnWritten) and stores it in the deletion's pending
// record in the transaction that acknowledges the tombstone (Ack), so that an audit
// states it after any crash (TombstoneOf). Pending and Ack are called from the
// publisher's goroutine only; Written and TombstoneOf are safe for concurrent use.
type Outbox struct {
	store  *storage.Store
	train  string
	policy string
	// erase, when set (the embedded broker), runs after tombstones were written and
	// before they are acknowledged, with a copy of each (its key and headers): it writes
	// each once more (so that the first copy leaves the partition's last batch, which
	// compaction never cleans) and compacts the broker, so the deleted points' upserts
	// are gone from its files before any later output, their audits included, goes out.
	erase func(copies []stream.Message) error
	// stones are the tombstones of the last Pending call, by seq.
	stones map[uint64]stream.Message

	mu sync.Mutex
	at map[string]Tombstone // where tombstones landed, until their acknowledgement stores it
}

// NewOutbox is the outbox of st; train is the training topic and policy its
// cleanup.policy, erase the embedded broker's erasure (nil with an external one).
func NewOutbox(st *storage.Store, train, policy string, erase func(copies []stream.Message) error) *Outbox {
	return &Outbox{store: st, train: train, policy: policy, erase: erase, stones: map[uint64]stream.Message{}, at: map[string]Tombstone{}}
}

// Pending is stream.Outbox's: the store's entries with the time each was committed
// (their ce_time), claims with their header.
func (o *Outbox) Pending(limit int) ([]stream.OutboxEntry, error) {
	es, err := o.store.Pending(limit)
	if err != nil {
		return nil, err
	}
	clear(o.stones)
	out := make([]stream.OutboxEntry, len(es))
	for i, e := range es {
		out[i] = stream.OutboxEntry{Seq: e.Seq, Topic: e.Topic, Key: e.Key, Value: e.Value, Time: e.Time}
		if e.Topic != o.train {
			continue
		}
		if v, hs, p, ok := decodePlaced(e.Value); ok {
			out[i].Value, out[i].Headers = v, hs
			out[i].Partition, out[i].Placed = p, p >= 0
			if v == nil {
				o.stones[e.Seq] = stream.Message{Topic: e.Topic, Key: e.Key, Headers: hs, Partition: p, Placed: p >= 0}
			}
		}
	}
	return out, nil
}

// Ack is stream.Outbox's, after the erasure of the acknowledged tombstones' points: it
// removes the entries and stores where their tombstones landed (RecordTombstones) in
// one transaction, so that an acknowledged tombstone's position is never lost.
func (o *Outbox) Ack(seqs ...uint64) error {
	var copies []stream.Message
	for _, s := range seqs {
		if m, ok := o.stones[s]; ok {
			copies = append(copies, m)
		}
	}
	if o.erase != nil && len(copies) > 0 {
		if err := o.erase(copies); err != nil {
			return fmt.Errorf("ingest: erase deleted points from the broker: %w", err)
		}
	}
	at := map[string]Tombstone{}
	o.mu.Lock()
	for _, m := range copies {
		if t, ok := o.at[string(m.Key)]; ok {
			at[string(m.Key)] = t
		}
	}
	o.mu.Unlock()
	if len(at) == 0 {
		return o.store.Ack(seqs...)
	}
	err := o.store.Apply(func(tx *storage.Tx) error {
		if err := RecordTombstones(tx, at); err != nil {
			return err
		}
		return tx.Ack(seqs...)
	})
	if err != nil {
		return err
	}
	o.mu.Lock()
	for k, t := range at {
		if o.at[k] == t {
			delete(o.at, k) // stored in its pending record (or audited already)
		}
	}
	o.mu.Unlock()
	return nil
}

// Written records, in memory, where the acknowledged tombstones among msgs landed: the
// first copy of each in this process (a re-sent or erasure copy lands later; any copy
// is a tombstone of the id). Ack stores it.
func (o *Outbox) Written(msgs []stream.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		if m.Topic == o.train && m.Value == nil {
			if _, dup := o.at[string(m.Key)]; !dup {
				o.at[string(m.Key)] = Tombstone{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Policy: o.policy}
			}
		}
	}
}

// TombstoneOf is where the tombstone of rec (a pending deletion of a stored id) landed,
// for its audit written in tx: as stored in its pending record with the tombstone's
// acknowledgement, else as this process saw it written, else unknown, with the reason.
// Call it before tx removes the pending record.
func (o *Outbox) TombstoneOf(tx *storage.Tx, rec *Deletion) (*Tombstone, error) {
	if rec.Seq > 0 {
		body, ok, err := tx.Pending(rec.Seq)
		if err != nil {
			return nil, err
		}
		if ok {
			if stored, err := decodeDeletion(body); err == nil && stored.Tombstone != nil {
				return stored.Tombstone, nil
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.at[rec.ID]; ok {
		return &t, nil
	}
	return &Tombstone{Topic: o.train, Partition: -1, Offset: -1, Policy: o.policy, Unknown: TombstoneNotAcked}, nil
}

// TombstoneNotAcked is the Unknown reason of an audit written before the broker
// acknowledged the deletion's tombstone.
const TombstoneNotAcked = "the broker had not acknowledged the tombstone when this audit was written: " +
	"it was still in the outbox, which publishes it before this audit"

// WithTombstones is rec as its audit in tx states it: with where the tombstone of each
// id it removed landed (TombstoneOf), for a deletion of a stored id or an erasure's
// points that do not say yet. rec is not modified, so that a transaction that fails and
// runs again looks again. Call it before tx removes the pending record.
func (o *Outbox) WithTombstones(tx *storage.Tx, rec *Deletion) (*Deletion, error) {
	switch {
	case rec.Kind == KindErasure:
		return o.erasureTombstones(tx, rec)
	case rec.Kind != "" || !rec.Known || rec.Tombstone != nil:
		return rec, nil
	}
	t, err := o.TombstoneOf(tx, rec)
	if err != nil {
		return nil, err
	}
	c := *rec
	c.Tombstone = t
	return &c, nil
}

// erasureTombstones is WithTombstones of an erasure's record: each point's tombstone as
// stored with its acknowledgement, else as this process saw it written, else unknown.
func (o *Outbox) erasureTombstones(tx *storage.Tx, rec *Deletion) (*Deletion, error) {
	stored := map[string]*Tombstone{}
	if rec.Seq > 0 {
		body, ok, err := tx.Pending(rec.Seq)
		if err != nil {
			return nil, err
		}
		if s, err := decodeDeletion(body); ok && err == nil {
			for _, p := range s.Points {
				stored[p.ID] = p.Tombstone
			}
		}
	}
	c := *rec
	c.Points = slices.Clone(rec.Points)
	o.mu.Lock()
	defer o.mu.Unlock()
	for j := range c.Points {
		p := &c.Points[j]
		if p.Tombstone != nil {
			continue
		}
		if t := stored[p.ID]; t != nil {
			p.Tombstone = t
		} else if t, ok := o.at[p.ID]; ok {
			p.Tombstone = &t
		} else {
			p.Tombstone = &Tombstone{Topic: o.train, Partition: -1, Offset: -1, Policy: o.policy, Unknown: TombstoneNotAcked}
		}
	}
	return &c, nil
}
