package stream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OutboxEntry is one output event waiting in the caller's outbox. Seq is
// the outbox's own sequence number, increasing in commit order.
type OutboxEntry struct {
	Seq   uint64
	Topic string
	Key   []byte
	Value []byte
}

// Outbox is what the Publisher needs from the store that holds output
// events written in the same transaction as the state they describe.
// Pending returns up to limit entries in Seq order, oldest first, without
// removing them; Ack removes the named entries. Both are called from the
// Publisher's goroutine only.
//
// stream declares its own OutboxEntry rather than importing storage (stream
// knows nothing of bbolt). storage.OutboxEntry has the same fields, so the
// daemon adapts a *storage.Store with a plain struct conversion,
// stream.OutboxEntry(e), per entry (see outboxAdapter in the end-to-end test).
type Outbox interface {
	Pending(limit int) ([]OutboxEntry, error)
	Ack(seqs ...uint64) error
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Batch bounds the entries taken from the outbox per round. Default 512.
	Batch int
	// Poll is how often an idle publisher looks at the outbox when nobody
	// calls Notify. Default 200ms.
	Poll time.Duration
	// Ready, if set, wakes the publisher when the outbox gains entries
	// (storage.Store.OutboxReady fits). Notify does the same by call.
	Ready <-chan struct{}
}

// Publisher drains an Outbox to Kafka: it reads pending entries, writes them
// with the Writer (RequireAll, deterministic keys, bounded retries), and
// only then acks them. After a crash between the write and the ack the
// entries are written again, with the same keys: outputs are delivered at
// least once and never lost.
type Publisher struct {
	w    *Writer
	box  Outbox
	cfg  PublisherConfig
	wake chan struct{}
}

// NewPublisher returns a Publisher. It does not own w or box.
func NewPublisher(w *Writer, box Outbox, cfg PublisherConfig) (*Publisher, error) {
	var errs []error
	if w == nil {
		errs = append(errs, fmt.Errorf("%w: publisher: nil writer", ErrConfig))
	}
	if box == nil {
		errs = append(errs, fmt.Errorf("%w: publisher: nil outbox", ErrConfig))
	}
	if cfg.Batch < 0 || cfg.Poll < 0 {
		errs = append(errs, fmt.Errorf("%w: publisher.batch %d / poll %v: must not be negative", ErrConfig, cfg.Batch, cfg.Poll))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Batch == 0 {
		cfg.Batch = 512
	}
	if cfg.Poll == 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	return &Publisher{w: w, box: box, cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Notify tells the publisher that new entries were committed. It never
// blocks and is safe to call from any goroutine.
func (p *Publisher) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run drains the outbox until ctx is done (returning nil) or an outbox
// operation or a write fails (returning the error; the entries stay in the
// outbox, so nothing is lost, and the caller decides whether to restart).
// Run starts no goroutines.
func (p *Publisher) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		n, err := p.Drain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if n == p.cfg.Batch {
			continue // probably more waiting
		}
		t.Reset(p.cfg.Poll)
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		case <-p.cfg.Ready: // nil channel: never ready
		case <-t.C:
		}
	}
}

// Drain publishes one round of at most Batch entries and returns how many
// it published and acked. It is exported for tests and for a daemon that
// wants to flush before shutting down.
func (p *Publisher) Drain(ctx context.Context) (int, error) {
	entries, err := p.box.Pending(p.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("stream: outbox pending: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	msgs := make([]Message, len(entries))
	seqs := make([]uint64, len(entries))
	for i, e := range entries {
		msgs[i] = Message{Topic: e.Topic, Key: e.Key, Value: e.Value}
		seqs[i] = e.Seq
	}
	if err := p.w.Write(ctx, msgs...); err != nil {
		return 0, fmt.Errorf("stream: publish outbox seqs %d..%d: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	if err := p.box.Ack(seqs...); err != nil {
		return 0, fmt.Errorf("stream: outbox ack seqs %d..%d: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	return len(entries), nil
}
