package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/stream"
)

// Watcher delivers every message written to its topics after Watch returned. Its one
// reader goroutine runs until Close, which joins it. Next and Await are meant for one
// goroutine at a time.
type Watcher struct {
	topics []string
	msgs   chan stream.Message
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	runErr error
}

// Watch captures the end offsets of topics (with ctx) and starts reading from there.
// Open it before sending the request whose answer it should see.
func (c *Client) Watch(ctx context.Context, topics ...string) (*Watcher, error) {
	if len(c.cfg.Kafka.Brokers) == 0 {
		return nil, ErrNoBrokers
	}
	from := map[string]map[int]int64{}
	for _, t := range topics {
		ends, err := stream.EndOffsets(ctx, c.cfg.Kafka, t)
		if err != nil {
			return nil, fmt.Errorf("reading the end of topic %q (is the broker at %s up?): %w", t, strings.Join(c.cfg.Kafka.Brokers, ","), err)
		}
		from[t] = ends
	}
	r, err := stream.NewReader(stream.ReaderConfig{
		Kafka:  c.cfg.Kafka,
		Topics: topics,
		Start:  stream.StartAt(from),
		// Answers are small and wanted at once: do not let a fetch idle long when the
		// broker holds no data yet (kafka-go returns as soon as MinBytes arrive, so
		// this only bounds shutdown).
		MaxWait: 100 * time.Millisecond,
		OnError: c.cfg.OnReadError,
	})
	if err != nil {
		return nil, fmt.Errorf("client: watching %v: %w", topics, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{topics: slices.Clone(topics), msgs: make(chan stream.Message, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		err := r.Run(rctx, func(ctx context.Context, batch []stream.Message) error {
			for _, m := range batch {
				select {
				case w.msgs <- m:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		w.mu.Lock()
		w.runErr = err
		w.mu.Unlock()
	}()
	return w, nil
}

// Next returns the next message, or an error when ctx ends or the reader failed.
// Messages delivered before the reader stopped come first.
func (w *Watcher) Next(ctx context.Context) (stream.Message, error) {
	select {
	case m := <-w.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-w.msgs:
		return m, nil
	case <-w.done:
		select {
		case m := <-w.msgs:
			return m, nil
		default:
		}
		w.mu.Lock()
		err := w.runErr
		w.mu.Unlock()
		if err == nil {
			err = errors.New("reader stopped")
		}
		return stream.Message{}, fmt.Errorf("reading %s: %w", strings.Join(w.topics, ", "), err)
	case <-ctx.Done():
		return stream.Message{}, ctx.Err()
	}
}

// Close stops the reader and waits for it. It is idempotent and returns the reader's
// error, if it failed before Close.
func (w *Watcher) Close() error {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runErr
}

// Sent is a request as it was written: what its answer and a dead letter of it are
// matched against.
type Sent struct {
	// Request is the request id the answer carries (key and "request" field).
	Request string
	// Topic, Key and Value are the message written.
	Topic      string
	Key, Value []byte
	// AnswerTopic is where the daemon answers it.
	AnswerTopic string
}

// Await reads w until the answer to s arrives (returned as received) or its dead
// letter does (*DeadLetterError), or ctx ends (ErrNoAnswer). Messages read meanwhile
// are dropped, so await one request at a time on a Watcher (Ask opens one per
// request). w must watch s.AnswerTopic, and the dead-letter topic for rejections to
// be seen.
func (w *Watcher) Await(ctx context.Context, s Sent) (stream.Message, error) {
	for {
		m, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				others := slices.DeleteFunc(slices.Clone(w.topics), func(t string) bool { return t == s.AnswerTopic })
				return stream.Message{}, s.noAnswer(strings.Join(others, ", "))
			}
			return stream.Message{}, err
		}
		if m.Topic == s.AnswerTopic {
			if s.answeredBy(m) {
				return m, nil
			}
			continue
		}
		var dl stream.DeadLetter
		if json.Unmarshal(m.Value, &dl) == nil && deadLetterOf(dl, s.Topic, s.Key, s.Value) {
			return stream.Message{}, &DeadLetterError{Request: s.Request, DeadLetter: dl, Raw: m.Value}
		}
	}
}

// answeredBy reports whether m is the answer to s: on s.AnswerTopic, keyed by the
// request id, with that id in its "request" field.
func (s Sent) answeredBy(m stream.Message) bool {
	var body struct {
		Request string `json:"request"`
	}
	return m.Topic == s.AnswerTopic && string(m.Key) == s.Request &&
		json.Unmarshal(m.Value, &body) == nil && body.Request == s.Request
}

// noAnswer is the ErrNoAnswer of s, whose dead letter would have come on dlq.
func (s Sent) noAnswer(dlq string) error {
	return fmt.Errorf("%w to request %s on %s (nor a dead letter on %s) in time: is the daemon running and consuming %s?",
		ErrNoAnswer, s.Request, s.AnswerTopic, dlq, s.Topic)
}

// deadLetterOf reports whether dl records the rejection of the message (key, sent)
// written to topic src: by its SHA-256, or, from a daemon that does not record one, by
// the raw bytes it copied (at most stream.MaxDeadLetterRaw of key and value, so a
// truncated copy must be a prefix of the sent bytes, with the recorded full length equal
// to ours). A dead letter of the erasures topic has no key (the key is the subject,
// which the daemon does not copy) and is matched by the digest alone.
func deadLetterOf(dl stream.DeadLetter, src string, key, sent []byte) bool {
	if dl.Topic != src || dl.RawLen != len(sent) {
		return false
	}
	keyless := dl.Key == nil && src == stream.DefaultErasuresTopic && dl.SHA256 != ""
	if !keyless && !bytes.Equal(dl.Key, key) && !(len(key) > stream.MaxDeadLetterRaw && bytes.HasPrefix(key, dl.Key)) {
		return false
	}
	if dl.SHA256 != "" { // without raw bytes (the daemon's default): match the digest
		sum := sha256.Sum256(sent)
		return hex.EncodeToString(sum[:]) == dl.SHA256
	}
	if dl.Truncated {
		return len(dl.Raw) > 0 && bytes.HasPrefix(sent, dl.Raw)
	}
	return bytes.Equal(dl.Raw, sent)
}
