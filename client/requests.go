package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/stream"
)

// Point is one training point to upsert: its id, its input vector, an optional integer
// label and the data subject it is about ("": none), whose erasure request (Erase)
// removes it.
type Point struct {
	ID      string
	X       []float64
	Label   *int64
	Subject string
}

// limits are the client's limits for an event with a vector of width dim (0: none).
func (c *Client) limits(dim int) stream.Limits {
	lim := c.cfg.Limits
	if lim.InputDim == 0 {
		lim.InputDim = max(dim, 1)
	}
	return lim
}

// trainMessage validates ev as the daemon will (stream.EncodeTrain, and the key rule
// stream.CheckTrainKey) and returns it as a message of the training topic keyed by its id.
func (c *Client) trainMessage(ev stream.TrainEvent) (stream.Message, error) {
	body, err := stream.EncodeTrain(ev, c.limits(len(ev.X)))
	if err != nil {
		return stream.Message{}, err
	}
	key := []byte(ev.ID)
	if err := stream.CheckTrainKey(key, ev); err != nil {
		return stream.Message{}, err
	}
	return stream.Message{Topic: c.cfg.Topics.Train, Key: key, Value: body}, nil
}

// Upsert validates every point and then writes them all to the training topic as
// upserts keyed by their ids, in one acknowledged write. A point that does not validate
// is named by its index and id, and then nothing is sent; on a write error some of the
// points may have been written (a retry re-sends them, which the daemon applies as the
// same upserts again).
func (c *Client) Upsert(ctx context.Context, pts ...Point) error {
	if c.w == nil {
		return ErrNoBrokers
	}
	msgs := make([]stream.Message, len(pts))
	var err error
	for i, p := range pts {
		if msgs[i], err = c.trainMessage(stream.TrainEvent{Op: stream.OpUpsert, ID: p.ID, X: p.X, Label: p.Label, Subject: p.Subject}); err != nil {
			return fmt.Errorf("upsert %d of %d (id %q) not sent: %w", i, len(pts), p.ID, err)
		}
	}
	if err := c.write(ctx, msgs...); err != nil {
		return fmt.Errorf("writing %d upserts to %s: %w", len(pts), c.cfg.Topics.Train, err)
	}
	return nil
}

// prepareDelete is the delete of id for request (a fresh d-… id when empty), validated.
func (c *Client) prepareDelete(id, request string) (Sent, error) {
	if request == "" {
		var err error
		if request, err = NewRequestID("d"); err != nil {
			return Sent{}, err
		}
	}
	m, err := c.trainMessage(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: request})
	if err != nil {
		return Sent{}, fmt.Errorf("delete not sent: %w", err)
	}
	return Sent{Request: request, Topic: m.Topic, Key: m.Key, Value: m.Value, AnswerTopic: c.cfg.Topics.Audits}, nil
}

// prepareQuery is q (with a fresh q-… request id when it has none), validated.
func (c *Client) prepareQuery(q stream.QueryEvent) (Sent, error) {
	if q.Request == "" {
		var err error
		if q.Request, err = NewRequestID("q"); err != nil {
			return Sent{}, err
		}
	}
	body, err := stream.EncodeQuery(q, c.limits(len(q.X)))
	if err != nil {
		return Sent{}, fmt.Errorf("query not sent: %w", err)
	}
	return Sent{Request: q.Request, Topic: c.cfg.Topics.Queries, Key: []byte(q.Request), Value: body, AnswerTopic: c.cfg.Topics.Attributions}, nil
}

// send writes s.
func (c *Client) send(ctx context.Context, s Sent, what string) error {
	if err := c.write(ctx, stream.Message{Topic: s.Topic, Key: s.Key, Value: s.Value}); err != nil {
		return fmt.Errorf("sending %s %s to %s: %w", what, s.Request, s.Topic, err)
	}
	return nil
}

// SendDelete sends the deletion of id to the training topic, keyed by id so that it is
// ordered after every earlier upsert of id, without waiting for its audit. request is
// the request id the audit will answer (a fresh d-… id when empty).
func (c *Client) SendDelete(ctx context.Context, id, request string) (Sent, error) {
	s, err := c.prepareDelete(id, request)
	if err != nil {
		return s, err
	}
	return s, c.send(ctx, s, fmt.Sprintf("delete of id %q as request", id))
}

// SendQuery sends q to the query topic, keyed by its request id (a fresh q-… id when
// q.Request is empty), without waiting for its answer. Exactly one of q.X and q.ID is
// set; q.K, q.Delta and q.Score are optional (0 and "": the daemon's defaults).
func (c *Client) SendQuery(ctx context.Context, q stream.QueryEvent) (Sent, error) {
	s, err := c.prepareQuery(q)
	if err != nil {
		return s, err
	}
	return s, c.send(ctx, s, "query")
}

// Answer is a query's attribution as the daemon wrote it: decoded, and its bytes with
// where they were read.
type Answer struct {
	stream.Attribution
	Raw       json.RawMessage
	Topic     string
	Partition int
	Offset    int64
}

// Audit is a deletion's audit as the daemon wrote it: decoded, and its bytes with
// where they were read.
type Audit struct {
	stream.Audit
	Raw       json.RawMessage
	Topic     string
	Partition int
	Offset    int64
}

// Ask sends q (as SendQuery) and waits for its attribution, or its dead letter
// (*DeadLetterError). An attribution that does not decode is returned in Raw, with an
// error matching ErrSchema.
func (c *Client) Ask(ctx context.Context, q stream.QueryEvent) (Answer, error) {
	s, err := c.prepareQuery(q)
	if err != nil {
		return Answer{}, err
	}
	m, err := c.sendAndWait(ctx, s, "query")
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Raw: m.Value, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	if err := json.Unmarshal(m.Value, &a.Attribution); err != nil {
		return a, fmt.Errorf("answer to request %s on %s/%d offset %d: %w: %w", s.Request, m.Topic, m.Partition, m.Offset, ErrSchema, err)
	}
	return a, nil
}

// DeleteAndWait sends the deletion of id (as SendDelete) and waits for its audit, which
// the daemon writes once the point is gone from the served model: after the refit
// without it. An audit that does not decode is returned in Raw, with an error matching
// ErrSchema.
func (c *Client) DeleteAndWait(ctx context.Context, id, request string) (Audit, error) {
	s, err := c.prepareDelete(id, request)
	if err != nil {
		return Audit{}, err
	}
	m, err := c.sendAndWait(ctx, s, fmt.Sprintf("delete of id %q as request", id))
	if err != nil {
		return Audit{}, err
	}
	a := Audit{Raw: m.Value, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	if err := json.Unmarshal(m.Value, &a.Audit); err != nil {
		return a, fmt.Errorf("audit of request %s on %s/%d offset %d: %w: %w", s.Request, m.Topic, m.Partition, m.Offset, ErrSchema, err)
	}
	return a, nil
}

// sendAndWait registers s with the client's answer reader, sends it and waits for its
// answer or dead letter, within Config.AnswerTimeout of the send.
func (c *Client) sendAndWait(ctx context.Context, s Sent, what string) (stream.Message, error) {
	if c.w == nil {
		return stream.Message{}, ErrNoBrokers
	}
	wt, err := c.ans.wait(ctx, c, s)
	if err != nil {
		return stream.Message{}, err
	}
	defer c.ans.forget(wt)
	if err := c.send(ctx, s, what); err != nil {
		return stream.Message{}, err
	}
	if c.cfg.AnswerTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.AnswerTimeout)
		defer cancel()
	}
	select {
	case r := <-wt.ch:
		return r.m, r.err
	case <-ctx.Done():
		return stream.Message{}, s.noAnswer(c.cfg.Topics.DLQ)
	}
}
