package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// adoptState is a standby's progress through the leader's audit topic: the next
// offset per partition, and the records read but not yet adopted, by seq (partitions
// interleave the chain's order).
type adoptState struct {
	run     sync.Mutex // serializes adoptBuffered
	mu      sync.Mutex
	next    map[int]int64
	buf     map[uint64][]stream.Audit // candidates per seq: a forged record may share a seq
	advance chan struct{}
}

// runAdopt is a standby's reader of the audit topic: it adopts the leader's audit
// records into its own chain, in seq order, each once the deletion it reports has been
// applied here, so that when it takes over its chain continues the published one and
// no deletion is audited twice (ingest.State.AdoptAudit). It reads the topic from its
// start after every restart and skips what the chain already holds.
func (d *Daemon) runAdopt(ctx context.Context) error {
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: d.kafka, Topics: []string{d.cfg.Kafka.Topics.Audits},
		Start: func(_ string, part int) (int64, bool, error) {
			d.adopt.mu.Lock()
			defer d.adopt.mu.Unlock()
			n := d.adopt.next[part]
			return n - 1, n > 0, nil
		}, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	return d.faults.KeepReading(ctx, "adopt", r, d.handleAudits, nil)
}

// handleAudits buffers a batch of audit records and adopts what it can.
func (d *Daemon) handleAudits(ctx context.Context, batch []stream.Message) error {
	d.adopt.mu.Lock()
	for _, m := range batch {
		var a stream.Audit
		if m.Value != nil && !d.leading.Load() {
			if err := json.Unmarshal(m.Value, &a); err != nil || a.Seq == 0 {
				d.log.Warn().Err(err).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("audit topic: record not adoptable")
			} else {
				d.adopt.buf[a.Seq] = append(d.adopt.buf[a.Seq], a)
			}
		}
		d.adopt.next[m.Partition] = m.Offset + 1
	}
	d.adopt.mu.Unlock()
	err := d.adoptBuffered(ctx)
	select {
	case d.adopt.advance <- struct{}{}:
	default:
	}
	return err
}

// adoptBuffered adopts the buffered records that extend the chain, in order.
func (d *Daemon) adoptBuffered(ctx context.Context) error {
	d.adopt.run.Lock()
	defer d.adopt.run.Unlock()
	for !d.leading.Load() {
		var head storage.AuditLink
		if err := d.store.View(func(tx *storage.ReadTx) error {
			var err error
			head, _, err = tx.AuditHead()
			return err
		}); err != nil {
			return err
		}
		d.adopt.mu.Lock()
		for seq := range d.adopt.buf {
			if seq <= head.Seq {
				delete(d.adopt.buf, seq)
			}
		}
		cands := d.adopt.buf[head.Seq+1]
		delete(d.adopt.buf, head.Seq+1)
		d.adopt.mu.Unlock()
		if len(cands) == 0 {
			return nil
		}
		// The first candidate that extends the chain is the leader's; the others (or all,
		// when none does) are logged and dropped.
		adopted := false
		for _, a := range cands {
			err := d.adoptOne(ctx, a)
			if err == nil {
				adopted = true
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, errNotAdoptable) && !errors.Is(err, ingest.ErrAuditDiverged) {
				// A store failure: keep the candidates for the next try.
				d.adopt.mu.Lock()
				d.adopt.buf[head.Seq+1] = append(cands, d.adopt.buf[head.Seq+1]...)
				d.adopt.mu.Unlock()
				return err
			}
			d.metrics.AddReject("audit_not_adoptable", 1)
			d.log.Error().Err(err).Uint64("seq", a.Seq).Str("request", a.Request).Msg("audit topic: record not adopted")
		}
		if !adopted {
			return nil // no record extends the chain at this seq: wait for one
		}
	}
	return nil
}

// errNotAdoptable marks an audit record a standby cannot adopt: its body or source
// does not decode, its hashes are malformed, or its signature fails under this
// daemon's key.
var errNotAdoptable = errors.New("audit record not adoptable")

// adoptOne waits until the deletion audit a reports is applied here, checks its
// signature when it is signed with this daemon's key, and adopts it.
func (d *Daemon) adoptOne(ctx context.Context, a stream.Audit) error {
	var body ingest.AuditBody
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
		return fmt.Errorf("%w: %d: body: %v", errNotAdoptable, a.Seq, err)
	}
	topic, part, off, err := parseSource(body.Source)
	if err == nil && topic != d.cfg.Kafka.Topics.Train {
		err = fmt.Errorf("source %q is not on the training topic", body.Source)
	}
	if err != nil {
		return fmt.Errorf("%w: %d: %v", errNotAdoptable, a.Seq, err)
	}
	want, err := hex.DecodeString(a.Hash)
	prev, perr := hex.DecodeString(a.PrevHash)
	if err != nil || perr != nil || len(want) != 32 || len(prev) != 32 {
		return fmt.Errorf("%w: %d: hashes %q, %q", errNotAdoptable, a.Seq, a.PrevHash, a.Hash)
	}
	if a.KeyID == d.signer.KeyID() {
		sig, err := hex.DecodeString(a.Sig)
		if err != nil || !auditsig.VerifyRecord(d.signer.PublicKey(), a.Seq, [32]byte(prev), [32]byte(want), sig) {
			return fmt.Errorf("%w: %d: signed with our key id, and the signature fails", errNotAdoptable, a.Seq)
		}
	}
	for {
		d.train.mu.Lock()
		last, ok := d.train.ingest.Applied(topic, part)
		d.train.mu.Unlock()
		if ok && last >= off {
			break
		}
		if !fault.Sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	d.train.mu.Lock()
	_, err = d.train.ingest.AdoptAudit([]byte(a.Body), a.Request, a.ID, [32]byte(want))
	d.publishPool()
	d.train.mu.Unlock()
	if err != nil {
		return err
	}
	d.log.Debug().Uint64("seq", a.Seq).Str("request", a.Request).Msg("leader's audit adopted")
	return nil
}

// parseSource splits a deletion's source coordinates, "topic/partition/offset".
func parseSource(s string) (topic string, part int, off int64, err error) {
	i := strings.LastIndexByte(s, '/')
	j := strings.LastIndexByte(s[:max(i, 0)], '/')
	if i < 0 || j < 0 {
		return "", 0, 0, fmt.Errorf("source %q is not topic/partition/offset", s)
	}
	p, err1 := strconv.Atoi(s[j+1 : i])
	o, err2 := strconv.ParseInt(s[i+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, fmt.Errorf("source %q is not topic/partition/offset", s)
	}
	return s[:j], p, o, nil
}

// adoptAll waits until every audit record on the topic now has been read and every
// one that extends the chain adopted: the first step of a takeover.
func (d *Daemon) adoptAll(ctx context.Context) error {
	ends, err := stream.EndOffsets(ctx, d.kafka, d.cfg.Kafka.Topics.Audits)
	if err != nil {
		return err
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		d.adopt.mu.Lock()
		behind := false
		for p, end := range ends {
			if d.adopt.next[p] < end {
				behind = true
			}
		}
		d.adopt.mu.Unlock()
		if !behind {
			return d.adoptBuffered(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.adopt.advance:
		case <-t.C:
		}
	}
}
