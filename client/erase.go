package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/stream"
)

// prepareErasure is the request ev (with a fresh e-… request id when it has none) as a
// message of the erasures topic keyed by its subject, validated as the daemon will
// (stream.EncodeErasure).
func (c *Client) prepareErasure(ev stream.ErasureEvent) (Sent, error) {
	if ev.Request == "" {
		var err error
		if ev.Request, err = NewRequestID("e"); err != nil {
			return Sent{}, err
		}
	}
	body, err := stream.EncodeErasure(ev, c.limits(0))
	if err != nil {
		return Sent{}, fmt.Errorf("%s request not sent: %w", ev.Op, err)
	}
	return Sent{Request: ev.Request, Topic: stream.DefaultErasuresTopic, Key: []byte(ev.Subject), Value: body,
		AnswerTopic: c.cfg.Topics.Audits}, nil
}

// SendErasure sends a data subject's request ev (stream.ErasureErase: erase every
// point whose upsert named ev.Subject and refuse the subject's later upserts;
// stream.ErasureUnblock: lift that refusal) to the erasures topic, keyed by the
// subject, without waiting for its audit. ev.Request is the request id the audit will
// answer (a fresh e-… id when empty). The subject leaves this process only in the
// request itself: errors name the request, never the subject.
func (c *Client) SendErasure(ctx context.Context, ev stream.ErasureEvent) (Sent, error) {
	s, err := c.prepareErasure(ev)
	if err != nil {
		return s, err
	}
	return s, c.send(ctx, s, string(ev.Op)+" request")
}

// Erase sends ev (as SendErasure) and waits for its audit: for an erasure, the one
// signed audit that lists every point it removed with where its tombstone landed, which
// the daemon writes after the refit without them (stream.Audit's SubjectHash and
// Points; the body says more, ingest.SubjectAuditBody); for an unblock, its audit,
// written at once. A request the daemon refuses comes back as a *DeadLetterError. An
// audit that does not decode is returned in Raw, with an error matching ErrSchema.
func (c *Client) Erase(ctx context.Context, ev stream.ErasureEvent) (Audit, error) {
	s, err := c.prepareErasure(ev)
	if err != nil {
		return Audit{}, err
	}
	m, err := c.sendAndWait(ctx, s, string(ev.Op)+" request")
	if err != nil {
		return Audit{}, err
	}
	a := Audit{Raw: m.Value, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	if err := json.Unmarshal(m.Value, &a.Audit); err != nil {
		return a, fmt.Errorf("audit of request %s on %s/%d offset %d: %w: %w", s.Request, m.Topic, m.Partition, m.Offset, ErrSchema, err)
	}
	return a, nil
}
