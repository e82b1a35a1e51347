package standby

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

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Chain is this daemon's own audit chain and training state, as an Adopter reads and
// extends them (the daemon implements it over its store and ingest).
type Chain interface {
	// Head is the chain's last record (seq 0 for an empty chain).
	Head() (storage.AuditLink, error)
	// Applied is the last offset of the training topic's partition applied here.
	Applied(topic string, part int) (int64, bool)
	// Adopt appends the leader's record (its canonical body, request, point id and hash)
	// to the chain and drops the deletion's pending record (ingest.State.AdoptAudit,
	// which returns ingest.ErrAuditDiverged for a record that does not extend the chain).
	Adopt(body []byte, request, id string, hash [32]byte) error
}

// AdopterConfig is what an Adopter needs.
type AdopterConfig struct {
	Kafka stream.Config
	// Topic is the audit topic; Train the training topic, where every deletion an
	// adopted record reports must come from.
	Topic, Train string
	// Key is this daemon's audit key: a record under its key id must verify under it.
	Key   *auditsig.Signer
	Chain Chain
	// Leading says whether this daemon leads now: a leader adopts nothing.
	Leading func() bool
	Faults  *fault.Tracker
	Metrics *metrics.Set
	Log     zerolog.Logger
}

// Adopter is a standby's progress through the leader's audit topic: the next offset per
// partition, and the records read but not yet adopted, by seq (partitions interleave
// the chain's order).
type Adopter struct {
	cfg     AdopterConfig
	run     sync.Mutex // serializes adoptBuffered
	mu      sync.Mutex
	next    map[int]int64
	buf     map[uint64][]stream.Audit // candidates per seq: a forged record may share a seq
	advance chan struct{}
}

// NewAdopter returns an Adopter that has read nothing.
func NewAdopter(c AdopterConfig) *Adopter {
	return &Adopter{cfg: c, next: map[int]int64{}, buf: map[uint64][]stream.Audit{}, advance: make(chan struct{}, 1)}
}

// errNotAdoptable marks an audit record a standby cannot adopt: its body or source
// does not decode, its hashes are malformed, or its signature fails under this
// daemon's key.
var errNotAdoptable = errors.New("audit record not adoptable")

// Run is a standby's reader of the audit topic: it adopts the leader's audit records
// into its own chain, in seq order, each once the deletion it reports has been applied
// here, so that when it takes over its chain continues the published one and no
// deletion is audited twice (ingest.State.AdoptAudit). It reads the topic from its
// start after every restart and skips what the chain already holds. It returns nil
// when ctx ends.
func (a *Adopter) Run(ctx context.Context) error {
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: a.cfg.Kafka, Topics: []string{a.cfg.Topic},
		Start: func(_ string, part int) (int64, bool, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			n := a.next[part]
			return n - 1, n > 0, nil
		}, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	return a.cfg.Faults.KeepReading(ctx, "adopt", r, a.Handle, nil)
}

// Handle buffers a batch of the audit topic and adopts what it can (Run's handler).
func (a *Adopter) Handle(ctx context.Context, batch []stream.Message) error {
	a.mu.Lock()
	for _, m := range batch {
		var rec stream.Audit
		if m.Value != nil && !a.cfg.Leading() {
			if err := json.Unmarshal(m.Value, &rec); err != nil || rec.Seq == 0 {
				a.cfg.Log.Warn().Err(err).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("audit topic: record not adoptable")
			} else {
				a.buf[rec.Seq] = append(a.buf[rec.Seq], rec)
			}
		}
		a.next[m.Partition] = m.Offset + 1
	}
	a.mu.Unlock()
	err := a.adoptBuffered(ctx)
	select {
	case a.advance <- struct{}{}:
	default:
	}
	return err
}

// adoptBuffered adopts the buffered records that extend the chain, in order.
func (a *Adopter) adoptBuffered(ctx context.Context) error {
	a.run.Lock()
	defer a.run.Unlock()
	for !a.cfg.Leading() {
		head, err := a.cfg.Chain.Head()
		if err != nil {
			return err
		}
		a.mu.Lock()
		for seq := range a.buf {
			if seq <= head.Seq {
				delete(a.buf, seq)
			}
		}
		cands := a.buf[head.Seq+1]
		delete(a.buf, head.Seq+1)
		a.mu.Unlock()
		if len(cands) == 0 {
			return nil
		}
		if adopted, err := a.adoptFirst(ctx, head.Seq+1, cands); err != nil || !adopted {
			return err // !adopted: no record extends the chain at this seq: wait for one
		}
	}
	return nil
}

// adoptFirst adopts the first of the candidates for seq that extends the chain: it is
// the leader's; the others (or all, when none does) are logged and dropped. A store
// failure keeps the candidates for the next try.
func (a *Adopter) adoptFirst(ctx context.Context, seq uint64, cands []stream.Audit) (bool, error) {
	for _, rec := range cands {
		err := a.adoptOne(ctx, rec)
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !errors.Is(err, errNotAdoptable) && !errors.Is(err, ingest.ErrAuditDiverged) {
			a.mu.Lock()
			a.buf[seq] = append(cands, a.buf[seq]...)
			a.mu.Unlock()
			return false, err
		}
		a.cfg.Metrics.AddReject("audit_not_adoptable", 1)
		a.cfg.Log.Error().Err(err).Uint64("seq", rec.Seq).Str("request", rec.Request).Msg("audit topic: record not adopted")
	}
	return false, nil
}

// adoptOne waits until the deletion the audit record reports is applied here, checks
// its signature when it is signed with this daemon's key, and adopts it.
func (a *Adopter) adoptOne(ctx context.Context, rec stream.Audit) error {
	var body ingest.AuditBody
	if err := json.Unmarshal([]byte(rec.Body), &body); err != nil {
		return fmt.Errorf("%w: %d: body: %v", errNotAdoptable, rec.Seq, err)
	}
	topic, part, off, err := parseSource(body.Source)
	if err == nil && topic != a.cfg.Train && topic != stream.DefaultErasuresTopic {
		err = fmt.Errorf("source %q is on neither the training topic nor the erasures topic", body.Source)
	}
	if err != nil {
		return fmt.Errorf("%w: %d: %v", errNotAdoptable, rec.Seq, err)
	}
	want, err := hex.DecodeString(rec.Hash)
	prev, perr := hex.DecodeString(rec.PrevHash)
	if err != nil || perr != nil || len(want) != 32 || len(prev) != 32 {
		return fmt.Errorf("%w: %d: hashes %q, %q", errNotAdoptable, rec.Seq, rec.PrevHash, rec.Hash)
	}
	if key := a.cfg.Key; rec.KeyID == key.KeyID() {
		sig, err := hex.DecodeString(rec.Sig)
		if err != nil || !auditsig.VerifyRecord(key.PublicKey(), rec.Seq, [32]byte(prev), [32]byte(want), sig) {
			return fmt.Errorf("%w: %d: signed with our key id, and the signature fails", errNotAdoptable, rec.Seq)
		}
	}
	for {
		if last, ok := a.cfg.Chain.Applied(topic, part); ok && last >= off {
			break
		}
		if !fault.Sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	if err := a.cfg.Chain.Adopt([]byte(rec.Body), rec.Request, rec.ID, [32]byte(want)); err != nil {
		return err
	}
	a.cfg.Log.Debug().Uint64("seq", rec.Seq).Str("request", rec.Request).Msg("leader's audit adopted")
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

// All waits until every audit record on the topic now has been read and every one
// that extends the chain adopted: the first step of a takeover.
func (a *Adopter) All(ctx context.Context) error {
	ends, err := stream.EndOffsets(ctx, a.cfg.Kafka, a.cfg.Topic)
	if err != nil {
		return err
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		a.mu.Lock()
		behind := false
		for p, end := range ends {
			if a.next[p] < end {
				behind = true
			}
		}
		a.mu.Unlock()
		if !behind {
			return a.adoptBuffered(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.advance:
		case <-t.C:
		}
	}
}
