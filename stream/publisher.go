package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// OutboxEntry is one output event waiting in the caller's outbox. Seq is
// the outbox's own sequence number, increasing in commit order. Headers go out with
// the record (nil: none). Time is when the entry was committed, as stored with it (zero:
// not known); it is the record's ce_time (Events), so that every publication of the
// entry states the same time.
type OutboxEntry struct {
	Seq     uint64
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
	Time    time.Time
	// Partition, with Placed, is where the record must go (Message.Placed).
	Partition int
	Placed    bool
}

// Outbox is what the Publisher needs from the store that holds output
// events written in the same transaction as the state they describe.
// Pending returns up to limit entries in Seq order, oldest first, without
// removing them; Ack removes the named entries. Both are called from the
// Publisher's goroutine only.
//
// stream declares its own OutboxEntry rather than importing storage (stream
// knows nothing of bbolt). storage.OutboxEntry has the same fields but Headers, so
// an adapter of a *storage.Store copies Seq, Topic, Key, Value and Time per entry (see
// outboxAdapter in the end-to-end test).
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
	// RetryMin and RetryMax bound the exponential wait after a failed round (a write
	// the broker did not acknowledge, or an outbox read or ack that failed). Defaults
	// 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// OnError, if set, is called on Run's goroutine after every failed round with the
	// error, the number of consecutive failures and the wait before the next round.
	OnError func(err error, failures int, retryIn time.Duration)
	// First names fence topics: in every round, the entries for these topics are written,
	// and acknowledged by the brokers, before any other entry of the round is written. The
	// daemon names the models topic, so that a deletion's mask is on it before the
	// deletion's audit, committed later, goes out (internal/modelbus, "The deletion
	// fence"). Entries keep their outbox order within each group.
	First []string
}

// Publisher drains an Outbox to Kafka: it reads pending entries, writes them
// with the Writer (RequireAll, deterministic keys, bounded retries), and
// only then acks them. After a crash between the write and the ack the
// entries are written again, with the same keys: outputs are delivered at
// least once and never lost.
//
// Run never gives up: a broker outage or a failing outbox only delays the entries,
// which go out in outbox order once the fault clears. State says whether the last
// round failed, for readiness and metrics.
type Publisher struct {
	w    *Writer
	box  Outbox
	cfg  PublisherConfig
	wake chan struct{}

	mu    sync.Mutex
	state PublisherState
}

// PublisherState is a Publisher's health as of its last round.
type PublisherState struct {
	// Failing is true from a failed round until the next round that succeeds;
	// LastError is that round's error and Since when the failures began.
	Failing   bool
	LastError error
	Since     time.Time
	// Retries counts failed rounds since the Publisher was built.
	Retries uint64
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
	if cfg.RetryMin < 0 || cfg.RetryMax < 0 || (cfg.RetryMax != 0 && cfg.RetryMin > cfg.RetryMax) {
		errs = append(errs, fmt.Errorf("%w: publisher.retry [%v, %v]: want 0 <= min <= max", ErrConfig, cfg.RetryMin, cfg.RetryMax))
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
	if cfg.RetryMin == 0 {
		cfg.RetryMin = min(100*time.Millisecond, max(cfg.RetryMax, time.Millisecond))
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = max(10*time.Second, cfg.RetryMin)
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

// State returns the publisher's health as of its last round. It is safe to call from
// any goroutine.
func (p *Publisher) State() PublisherState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Run drains the outbox until ctx is done, and then returns nil. A failed round (the
// broker unreachable or refusing, the outbox unreadable or its ack not committed) is
// retried after a wait that doubles from RetryMin to RetryMax; the entries stay in the
// outbox meanwhile, so nothing is lost, and a round that was written but not acked is
// written again (at least once). Run starts no goroutines.
func (p *Publisher) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	failures, wait := 0, time.Duration(0)
	for {
		n, err := p.Drain(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			wait = min(max(2*wait, p.cfg.RetryMin), p.cfg.RetryMax)
			p.failed(err)
			if p.cfg.OnError != nil {
				p.cfg.OnError(err, failures, wait)
			}
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			continue
		}
		failures, wait = 0, 0
		p.succeeded()
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

func (p *Publisher) failed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.state.Failing {
		p.state.Failing, p.state.Since = true, time.Now()
	}
	p.state.LastError = err
	p.state.Retries++
}

func (p *Publisher) succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Failing, p.state.LastError, p.state.Since = false, nil, time.Time{}
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
		msgs[i] = Message{Topic: e.Topic, Key: e.Key, Value: e.Value, Headers: e.Headers, Time: e.Time, Partition: e.Partition, Placed: e.Placed}
		seqs[i] = e.Seq
	}
	for _, group := range p.fenced(msgs) {
		if err := p.w.Write(ctx, group...); err != nil {
			return 0, fmt.Errorf("stream: publish outbox seqs %d..%d: %w", seqs[0], seqs[len(seqs)-1], err)
		}
	}
	if err := p.box.Ack(seqs...); err != nil {
		return 0, fmt.Errorf("stream: outbox ack seqs %d..%d: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	return len(entries), nil
}

// fenced splits a round into the entries of the First topics and the others, in this
// order, each in outbox order (one group when the round has only one kind).
func (p *Publisher) fenced(msgs []Message) [][]Message {
	if len(p.cfg.First) == 0 {
		return [][]Message{msgs}
	}
	var first, rest []Message
	for _, m := range msgs {
		if slices.Contains(p.cfg.First, m.Topic) {
			first = append(first, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(first) == 0 || len(rest) == 0 {
		return [][]Message{msgs}
	}
	return [][]Message{first, rest}
}
