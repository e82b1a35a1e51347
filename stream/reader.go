package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// StartFunc returns the offset of the last message of (topic, partition)
// that the caller has applied, and ok=false when it has applied none. The
// reader starts that partition at last+1, or at the earliest retained
// offset when ok is false. This is how offsets stored in bbolt, not in
// Kafka, decide where reading resumes.
type StartFunc func(topic string, partition int) (last int64, ok bool, err error)

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	Kafka  Config
	Topics []string
	Start  StartFunc
	// MaxBatch bounds the messages handed to one call of the handler.
	// Default 512.
	MaxBatch int
	// MaxWait bounds how long the broker holds a fetch open when no data
	// is available. Default 250ms.
	MaxWait time.Duration
	// FetchMaxBytes bounds one fetch response per partition. Default 8 MiB;
	// it must exceed the largest message.
	FetchMaxBytes int
	// OnError, if set, is told of fetch errors. kafka-go keeps retrying a
	// partition with backoff after reporting one (broker restart, leader
	// change, timeouts), so a fetch error does not stop Run; it is passed
	// here for logs and metrics. OnError is called from partition
	// goroutines and must be safe for concurrent use.
	OnError func(topic string, partition int, err error)
	// Ahead, if set, is called with each batch before the handler is, on a goroutine
	// of Run's own, while the handler still applies the batch before it: work that
	// depends on the messages alone (decoding them, computing their features) then
	// overlaps the handler's serial work (its transaction's fsync). It returns before
	// its batch goes to the handler, so what it prepared is complete when the handler
	// runs; it may keep the messages but not the slice. Run joins it before returning;
	// a batch prepared ahead of a failed handler call is never handled (Run stops).
	Ahead func(ctx context.Context, batch []Message)
	// Independent, if set, delivers each partition on a goroutine of its own: the
	// handler is called concurrently, each call with one partition's messages, so a
	// call that blocks holds back its partition alone (a bounded buffer per partition,
	// as internal/featsource keeps). The handler must then be safe for concurrent
	// use. Not with Ahead.
	Independent bool
}

func (c ReaderConfig) withDefaults() ReaderConfig {
	if c.MaxBatch == 0 {
		c.MaxBatch = 512
	}
	if c.MaxWait == 0 {
		c.MaxWait = 250 * time.Millisecond
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 8 << 20
	}
	return c
}

// Validate reports every problem at once.
func (c ReaderConfig) Validate() error {
	errs := []error{c.Kafka.Validate()}
	if len(c.Topics) == 0 {
		errs = append(errs, fmt.Errorf("%w: reader.topics: at least one topic", ErrConfig))
	}
	for i, t := range c.Topics {
		if err := validTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("%w: reader.topics[%d] %q: %v", ErrConfig, i, t, err))
		}
	}
	if c.Start == nil {
		errs = append(errs, fmt.Errorf("%w: reader.start: nil; offsets must come from the caller's store", ErrConfig))
	}
	if c.Independent && c.Ahead != nil {
		errs = append(errs, fmt.Errorf("%w: reader.independent with reader.ahead: a batch is prepared ahead of one handler only", ErrConfig))
	}
	if c.MaxBatch < 0 || c.MaxWait < 0 || c.FetchMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: reader.max_batch %d / max_wait %v / fetch_max_bytes %d: must not be negative", ErrConfig, c.MaxBatch, c.MaxWait, c.FetchMaxBytes))
	}
	return errors.Join(errs...)
}

// Handler applies one batch. Messages of one partition appear in offset
// order, within a batch and across batches; partitions interleave. The
// handler may keep the messages (their bytes are not reused) but not the
// slice. A non-nil error stops Run, which returns it; the batch counts as
// not consumed, and since offsets live in the caller's store, a restarted
// reader delivers it again.
type Handler func(ctx context.Context, batch []Message) error

// Reader reads every partition of its topics from offsets the caller
// stores, and never commits offsets to Kafka (no consumer group). One
// kafka-go partition reader runs per partition; the partition list comes
// from the broker metadata when Run starts (partitions added later are not
// read until the next Run).
type Reader struct {
	cfg    ReaderConfig
	dialer *kafka.Dialer
}

// NewReader validates cfg. It does not contact the brokers.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d, err := cfg.Kafka.dialer()
	if err != nil {
		return nil, err
	}
	return &Reader{cfg: cfg, dialer: d}, nil
}

// Run reads until ctx is done or handle fails, calling handle from the
// calling goroutine only, so the handler needs no locking (with Independent, from
// one goroutine per partition instead, which Run joins). It returns nil
// after ctx is cancelled, else the first error; all goroutines it started
// have exited when it returns.
func (r *Reader) Run(ctx context.Context, handle Handler) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	tctx, tcancel := context.WithCancel(context.Background())
	defer tcancel()
	tr, err := r.cfg.Kafka.transport(tctx)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(r.cfg.Kafka.Brokers...), Transport: tr}

	parts, err := r.plan(ctx, cl)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	// Each partition has a channel of its own (one sender: its order is kept), and a
	// batch takes from them in turn (inbox), whether one deliver goroutine reads them all
	// or, Independent, one per partition.
	all := newInbox(len(parts), r.cfg.MaxBatch)
	var each []*inbox
	if r.cfg.Independent {
		each = all.split()
	}
	var wg sync.WaitGroup
	readers := make([]*kafka.Reader, 0, len(parts))
	defer func() {
		cancel()
		wg.Wait()
		for _, kr := range readers {
			if cerr := kr.Close(); cerr != nil && err == nil && ctx.Err() == nil {
				err = cerr
			}
		}
	}()
	for i, p := range parts {
		kr := r.partitionReader(p)
		readers = append(readers, kr)
		if err := kr.SetOffset(p.start); err != nil {
			return fmt.Errorf("stream: seek %s/%d to %d: %w", p.topic, p.id, p.start, err)
		}
		wg.Go(func() { r.fetch(ctx, kr, p, all, i) })
	}
	if r.cfg.Independent {
		return r.deliverEach(ctx, cancel, each, handle)
	}
	return r.deliver(ctx, all, handle)
}

// deliverEach is deliver for Independent: each partition's channel on a goroutine of
// its own, all joined before it returns. The first handler error cancels the others
// (through cancel, Run's) and is returned.
func (r *Reader) deliverEach(ctx context.Context, cancel context.CancelFunc, ins []*inbox, handle Handler) error {
	errs := make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() {
			if errs[i] = r.deliver(ctx, in, handle); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// plan lists the partitions of the configured topics with the offset each starts at
// (the stored offset + 1, or the first offset), and checks that no stored offset is
// ahead of its partition (checkAhead).
func (r *Reader) plan(ctx context.Context, cl *kafka.Client) ([]part, error) {
	var parts []part
	for _, t := range r.cfg.Topics {
		ids, err := partitions(ctx, cl, t)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			last, ok, err := r.cfg.Start(t, id)
			if err != nil {
				return nil, fmt.Errorf("stream: start offset of %s/%d: %w", t, id, err)
			}
			start := kafka.FirstOffset
			if ok {
				if last < 0 {
					return nil, fmt.Errorf("stream: start offset of %s/%d: stored offset %d is negative", t, id, last)
				}
				start = last + 1
			}
			parts = append(parts, part{t, id, start, ok})
		}
	}
	if err := checkAhead(ctx, cl, parts); err != nil {
		return nil, err
	}
	return parts, nil
}

// partitionReader is the kafka-go reader of one partition.
func (r *Reader) partitionReader(p part) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:   r.cfg.Kafka.Brokers,
		Topic:     p.topic,
		Partition: p.id,
		Dialer:    r.dialer,
		MinBytes:  1,
		MaxBytes:  r.cfg.FetchMaxBytes,
		MaxWait:   r.cfg.MaxWait,
		// Lag reporting is a second goroutine per partition we do
		// not need.
		ReadLagInterval: -1,
		MaxAttempts:     3,
		// kafka-go sets the fetch's read deadline to exactly MaxWait; an idle
		// partition's fetch then often ends in a client-side timeout, which
		// kafka-go treats as a broken connection: it reconnects after
		// backoff(1) = ReadBackoffMin, 100 ms by default. That was the whole of a
		// query's latency through Kafka (p50 107 ms against 0.8 ms of compute), so
		// the reconnect waits 1 ms (errors still back off quadratically to 250 ms).
		ReadBackoffMin: time.Millisecond,
		ReadBackoffMax: 250 * time.Millisecond,
	})
}

// fetch is one partition's goroutine: it sends every fetched message to its channel in
// the inbox (the i-th) until ctx ends, reporting fetch errors to OnError and retrying.
func (r *Reader) fetch(ctx context.Context, kr *kafka.Reader, p part, in *inbox, i int) {
	for {
		km, err := kr.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if r.cfg.OnError != nil {
				r.cfg.OnError(p.topic, p.id, err)
			}
			continue
		}
		m := Message{Topic: km.Topic, Partition: km.Partition, Offset: km.Offset, Key: km.Key, Value: km.Value, Time: km.Time,
			Headers: fromKafka(km.Headers)}
		if !in.send(ctx, i, m) {
			return
		}
	}
}

// deliver hands batches from ch to handle on the calling goroutine: it waits for one
// message, takes what else is waiting up to MaxBatch, and calls handle. With Ahead set,
// a second goroutine (deliverAhead) collects the next batch and prepares it while handle
// runs. It returns nil when ctx ends (or handle returns ctx's error), else handle's
// error.
func (r *Reader) deliver(ctx context.Context, in *inbox, handle Handler) error {
	if r.cfg.Ahead != nil {
		return r.deliverAhead(ctx, in, handle)
	}
	batch := make([]Message, 0, r.cfg.MaxBatch)
	for {
		var ok bool
		if batch, ok = in.collect(ctx, batch[:0]); !ok {
			return nil
		}
		if err := handled(ctx, handle(ctx, batch)); err != nil {
			return err
		}
	}
}

// deliverAhead is deliver with Ahead: one goroutine collects a batch, calls Ahead on it
// and hands it over, then collects the next while handle applies the first; the two
// batch buffers alternate, so a buffer is refilled only after handle returned from it.
// The goroutine is joined before deliverAhead returns.
func (r *Reader) deliverAhead(ctx context.Context, in *inbox, handle Handler) error {
	actx, cancel := context.WithCancel(ctx)
	next := make(chan []Message)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() {
		bufs := [2][]Message{make([]Message, 0, r.cfg.MaxBatch), make([]Message, 0, r.cfg.MaxBatch)}
		for k := 0; ; k ^= 1 {
			batch, ok := in.collect(actx, bufs[k][:0])
			if !ok {
				return
			}
			bufs[k] = batch
			r.cfg.Ahead(actx, batch)
			select {
			case next <- batch:
			case <-actx.Done():
				return
			}
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case batch := <-next:
			if err := handled(ctx, handle(ctx, batch)); err != nil {
				return err
			}
		}
	}
}

// handled is the error deliver returns for handle's err: none when ctx ended and err
// is ctx's.
func handled(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

type part struct {
	topic  string
	id     int
	start  int64
	stored bool // start came from a stored offset
}

// checkAhead refuses to start a partition whose stored offset lies beyond
// the partition's end. That happens when the topic was deleted and
// re-created (an embedded broker restarted without a DataDir, or an
// operator's mistake): the new messages get offsets the stored position
// has already passed, and reading on would skip them silently.
func checkAhead(ctx context.Context, cl *kafka.Client, parts []part) error {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, p := range parts {
		if p.stored {
			req.Topics[p.topic] = append(req.Topics[p.topic], kafka.LastOffsetOf(p.id))
		}
	}
	if len(req.Topics) == 0 {
		return nil
	}
	resp, err := cl.ListOffsets(ctx, req)
	if err != nil {
		return fmt.Errorf("stream: list offsets: %w", err)
	}
	end := map[string]map[int]int64{}
	for t, ps := range resp.Topics {
		end[t] = map[int]int64{}
		for _, po := range ps {
			if po.Error != nil {
				return fmt.Errorf("stream: list offsets of %s/%d: %w", t, po.Partition, po.Error)
			}
			end[t][po.Partition] = po.LastOffset
		}
	}
	var errs []error
	for _, p := range parts {
		if !p.stored {
			continue
		}
		e, ok := end[p.topic][p.id]
		if !ok {
			errs = append(errs, fmt.Errorf("stream: list offsets: no answer for %s/%d", p.topic, p.id))
		} else if p.start > e {
			errs = append(errs, fmt.Errorf("%w: %s/%d: stored offset %d, partition ends at %d (topic re-created?)", ErrOffsetAhead, p.topic, p.id, p.start-1, e))
		}
	}
	return errors.Join(errs...)
}
