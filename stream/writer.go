package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Message is one Kafka record as stream hands it out and takes it in.
// Partition and Offset are set on consumed messages; on write Offset is ignored, and
// Partition too unless WriterConfig.Partitioned or Placed is set.
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Time      time.Time
	// Headers are the record's headers, in order (nil: none).
	Headers []Header
	// Placed (writes only) sends the message to Partition rather than to its key's
	// partition, when the topic has it: a tombstone or a republication follows the
	// record it is about, which a producer with another partitioner (librdkafka's
	// default hashes keys with CRC32, cairn's writer with murmur2 as the Java client)
	// may have put elsewhere.
	Placed bool
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Header returns the value of the first header named key and whether there is one.
func (m Message) Header(key string) ([]byte, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// toKafka and fromKafka convert headers; nil stays nil.
func toKafka(hs []Header) []kafka.Header {
	if hs == nil {
		return nil
	}
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func fromKafka(hs []kafka.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// WriterConfig configures a Writer.
type WriterConfig struct {
	Kafka Config
	// Attempts bounds the tries per Write call before ErrWriteFailed.
	// Default 10.
	Attempts int
	// BackoffMin and BackoffMax bound the exponential wait between attempts.
	// Defaults 50ms and 2s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Linger is how long the client waits to fill a batch. Default 1ms: the
	// Publisher hands whole batches to Write, so waiting buys nothing.
	Linger time.Duration
	// Timeout bounds one produce round trip. Default 10s.
	Timeout time.Duration
	// OnWritten, if set, is called with the messages the brokers acknowledged, their
	// Partition and Offset set, before the Write that sent them returns. It must be
	// quick and safe for concurrent use.
	OnWritten func(msgs []Message)
	// Events, if set, stamps the records of its topics with their CloudEvents headers
	// (Events.Stamp) as Write sends them; nil: records go out with their own headers.
	Events *Events
	// Partitioned writes each message to its own Partition (when the topic has it;
	// otherwise to its key's partition, as without it), not to its key's: for records
	// that must sit beside the record they derive from on a topic of another key space.
	Partitioned bool
}

func (c WriterConfig) withDefaults() WriterConfig {
	if c.Attempts == 0 {
		c.Attempts = 10
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 2 * time.Second
	}
	if c.Linger == 0 {
		c.Linger = time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Validate reports every problem at once.
func (c WriterConfig) Validate() error {
	errs := []error{c.Kafka.Validate()}
	if c.Attempts < 0 {
		errs = append(errs, fmt.Errorf("%w: writer.attempts %d: must not be negative", ErrConfig, c.Attempts))
	}
	if c.BackoffMin < 0 || c.BackoffMax < 0 || (c.BackoffMax != 0 && c.BackoffMin > c.BackoffMax) {
		errs = append(errs, fmt.Errorf("%w: writer.backoff [%v, %v]: want 0 <= min <= max", ErrConfig, c.BackoffMin, c.BackoffMax))
	}
	if c.Linger < 0 || c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: writer.linger %v / timeout %v: must not be negative", ErrConfig, c.Linger, c.Timeout))
	}
	if c.Events != nil {
		errs = append(errs, c.Events.Validate())
	}
	return errors.Join(errs...)
}

// maxBatchBytes bounds one record batch: below the 1 MiB message.max.bytes default of
// Kafka brokers, with room for the batch and request headers.
const maxBatchBytes = 1<<20 - 64<<10

// Writer produces messages to any topic with acknowledgement from all
// in-sync replicas (RequireAll). A message's partition is a function of its
// key only (murmur2, as the Java client), so a re-sent output lands next to
// its first copy. Write retries with exponential backoff and either returns
// nil, meaning every message was acknowledged, or an error naming the
// messages that were not; it never drops one silently.
//
// Write is safe for concurrent use. Close must be called once writes have
// stopped.
type Writer struct {
	cfg    WriterConfig
	w      *kafka.Writer
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// NewWriter builds a Writer. It does not contact the brokers.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := cfg.Kafka.transport(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.Kafka.Brokers...),
		Balancer:     explicitBalancer{},
		RequiredAcks: kafka.RequireAll,
		// One attempt inside kafka-go: the retry loop is ours, so that
		// the attempt count, the backoff and the per-message outcome are
		// visible and bounded here.
		MaxAttempts: 1,
		// kafka-go allocates a batch's message slice at full BatchSize capacity on its
		// first message (writeBatch.add): at 10,000 that was 1.5 MB per batch, so every
		// published answer (a batch of one) allocated 1.5 MB, half of a serving
		// daemon's allocation rate and a collection every ~1.2 s under a 30 queries/s
		// load. BatchBytes bounds the batches of large records anyway.
		BatchSize: 1024,
		// A produce request carries one record batch per partition; brokers refuse
		// batches over message.max.bytes (1 MiB by default, kfake included), so
		// kafka-go must cut large writes below that.
		BatchBytes:   maxBatchBytes,
		BatchTimeout: cfg.Linger,
		ReadTimeout:  cfg.Timeout,
		WriteTimeout: cfg.Timeout,
		Transport:    tr,
	}
	if on := cfg.OnWritten; on != nil {
		w.Completion = func(ms []kafka.Message, err error) {
			if err != nil {
				return
			}
			out := make([]Message, len(ms))
			for i, m := range ms {
				out[i] = Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time,
					Headers: fromKafka(m.Headers)}
			}
			on(out)
		}
	}
	return &Writer{cfg: cfg, w: w, cancel: cancel}, nil
}

// Write sends msgs (with the CloudEvents headers of WriterConfig.Events; a message's
// Time is its ce_time, not its Kafka timestamp, which the client sets) and returns when
// all are acknowledged, when the attempts
// are exhausted (ErrWriteFailed), or when ctx is done (ctx's error). Only
// the messages that failed are re-sent, so on success each message was
// written at least once and, barring an acknowledgement lost in transit,
// exactly once. Order within a partition is kept when no attempt fails;
// a retried message may land after messages of a later Write.
func (w *Writer) Write(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	pending := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		if m.Topic == "" {
			return fmt.Errorf("stream: write message %d: empty topic", i)
		}
		hs := m.Headers
		if w.cfg.Events != nil {
			var err error
			if hs, err = w.cfg.Events.Stamp(m); err != nil {
				return fmt.Errorf("stream: write message %d to %s: %w", i, m.Topic, err)
			}
		}
		// kafka-go reads Partition only through the Balancer, and sets it itself once
		// the message is written; -1 asks the balancer for the key's partition.
		pending[i] = kafka.Message{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: toKafka(hs), Partition: -1}
		if w.cfg.Partitioned || m.Placed {
			pending[i].Partition = m.Partition
		}
	}
	backoff := w.cfg.BackoffMin
	var lastErr error
	for attempt := 1; ; attempt++ {
		err := w.w.WriteMessages(ctx, pending...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stream: write %d messages (attempt %d): %w", len(pending), attempt, ctx.Err())
		}
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) && len(werrs) == len(pending) {
			failed := pending[:0:0]
			for i, e := range werrs {
				if e != nil {
					failed = append(failed, pending[i])
				}
			}
			pending = failed
		}
		lastErr = err
		if attempt >= w.cfg.Attempts {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stream: write %d messages (attempt %d, last error %v): %w", len(pending), attempt, lastErr, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, w.cfg.BackoffMax)
	}
	first := pending[0]
	return fmt.Errorf("%w: %d messages not acknowledged after %d attempts (first: topic %q key %q): %s",
		ErrWriteFailed, len(pending), w.cfg.Attempts, first.Topic, truncate(string(first.Key), 64), truncate(lastErr.Error(), 512))
}

// Close flushes nothing (Write is synchronous), releases connections and
// stops the transport's goroutines. It is idempotent.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.closeErr = w.w.Close()
		w.cancel()
	})
	return w.closeErr
}

// DeadLetterWriter writes rejected inputs to the dead-letter topic.
type DeadLetterWriter struct {
	w     *Writer
	topic string
}

// NewDeadLetterWriter returns a writer of dead letters to topic through w.
// It does not own w.
func NewDeadLetterWriter(w *Writer, topic string) (*DeadLetterWriter, error) {
	if err := validTopicName(topic); err != nil {
		return nil, fmt.Errorf("%w: dead-letter topic %q: %v", ErrConfig, topic, err)
	}
	return &DeadLetterWriter{w: w, topic: topic}, nil
}

// Message builds the dead-letter message for src rejected with err, keyed
// by src's coordinates. A daemon that writes outputs through its outbox
// stores this message in the same transaction as the consumed offset.
func (d *DeadLetterWriter) Message(src Message, err error) (Message, error) {
	return DeadLetterMessage(d.topic, src, err, true)
}

// Send writes the dead letter for src directly, with the Writer's retries.
func (d *DeadLetterWriter) Send(ctx context.Context, src Message, err error) error {
	m, eerr := d.Message(src, err)
	if eerr != nil {
		return eerr
	}
	return d.w.Write(ctx, m)
}

// DeadLetterMessage builds the message for topic that records src's
// rejection with err, with src's first bytes only when keepRaw.
func DeadLetterMessage(topic string, src Message, err error, keepRaw bool) (Message, error) {
	dl := NewDeadLetter(src, err)
	if !keepRaw {
		dl = dl.WithoutRaw()
	}
	body, eerr := dl.Encode()
	if eerr != nil {
		return Message{}, eerr
	}
	return Message{Topic: topic, Key: DeadLetterKey(src.Topic, src.Partition, src.Offset), Value: body}, nil
}

// explicitBalancer is the Writer's partitioner: a message on its own Partition when
// Write set one (WriterConfig.Partitioned, Message.Placed) that the topic has, else by
// key (murmur2, as the Java client). Write sets -1 for by key.
type explicitBalancer struct{ byKey kafka.Murmur2Balancer }

// Balance implements kafka.Balancer.
func (b explicitBalancer) Balance(m kafka.Message, partitions ...int) int {
	if m.Partition >= 0 && slices.Contains(partitions, m.Partition) {
		return m.Partition
	}
	return b.byKey.Balance(m, partitions...)
}
