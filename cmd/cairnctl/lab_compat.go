package main

// What the lab commands (bench, bench-scale) still take from the operator commands'
// files, in the shapes they call, as adapters over package client. They go when those
// commands leave cmd/cairnctl or call package client themselves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/stream"
)

// inputLimits are the limits the daemon applies to input events under cfg, with
// InputDim set by the caller (the data's width; a delete carries no vector).
func inputLimits(cfg config.Config, inputDim int) stream.Limits {
	return stream.Limits{
		InputDim:   max(inputDim, 1),
		MaxBytes:   cfg.Limits.MaxMessageBytes,
		MaxIDBytes: cfg.Limits.MaxIDBytes,
		MaxK:       cfg.Limits.MaxK,
	}
}

// newRequestID is client.NewRequestID.
func newRequestID(prefix string) (string, error) { return cairn.NewRequestID(prefix) }

// openWriter returns a writer for kc with the ordinary retry settings.
func openWriter(kc stream.Config) (*stream.Writer, error) {
	return stream.NewWriter(stream.WriterConfig{Kafka: kc})
}

// tail is a client.Watcher with the client it was opened by (both closed by Close).
type tail struct {
	*cairn.Watcher
	c *cairn.Client
}

// newTail watches topics from their end offsets now (client.Client.Watch), reporting
// read errors on stderr.
func newTail(ctx context.Context, kc stream.Config, stderr io.Writer, topics ...string) (*tail, error) {
	c, err := cairn.New(cairn.Config{Kafka: kc, OnReadError: func(topic string, partition int, err error) {
		fmt.Fprintf(stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
	}})
	if err != nil {
		return nil, err
	}
	w, err := c.Watch(ctx, topics...)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &tail{Watcher: w, c: c}, nil
}

func (t *tail) next(ctx context.Context) (stream.Message, error) { return t.Next(ctx) }

// Close closes the watcher and its client; it is idempotent.
func (t *tail) Close() error { return errors.Join(t.Watcher.Close(), t.c.Close()) }

// client sends requests through a writer of the caller's and awaits their answers on a
// tail of the caller's.
type client struct {
	kc     stream.Config
	topics config.Topics
	stderr io.Writer
}

// answer is what await waits for: the answer on topic to request, sent to src as (key,
// sent).
type answer struct {
	topic   string
	request string
	src     string
	key     []byte
	sent    []byte
}

// sendQuery writes q keyed by its request id through w and returns the bytes sent.
func (c client) sendQuery(ctx context.Context, w *stream.Writer, q stream.QueryEvent, lim stream.Limits) ([]byte, error) {
	body, err := stream.EncodeQuery(q, lim)
	if err != nil {
		return nil, fmt.Errorf("query not sent: %w", err)
	}
	if err := w.Write(ctx, stream.Message{Topic: c.topics.Queries, Key: []byte(q.Request), Value: body}); err != nil {
		return nil, fmt.Errorf("sending query %s to %s: %w", q.Request, c.topics.Queries, err)
	}
	return body, nil
}

// await is client.Watcher.Await of a.
func (c client) await(ctx context.Context, t *tail, a answer) (stream.Message, error) {
	return t.Await(ctx, cairn.Sent{Request: a.request, Topic: a.src, Key: a.key, Value: a.sent, AnswerTopic: a.topic})
}

// deleteAndWait is client.Client.DeleteAndWait of ev, its audit returned as a message.
func (c client) deleteAndWait(ctx context.Context, timeout time.Duration, ev stream.TrainEvent, lim stream.Limits) (stream.Message, error) {
	k, err := cairn.New(cairn.Config{Kafka: c.kc, Topics: c.topics, Limits: lim, AnswerTimeout: timeout})
	if err != nil {
		return stream.Message{}, err
	}
	defer k.Close()
	a, err := k.DeleteAndWait(ctx, ev.ID, ev.Request)
	return stream.Message{Topic: a.Topic, Partition: a.Partition, Offset: a.Offset, Key: []byte(ev.Request), Value: a.Raw}, err
}

// producer writes a data set's rows as upserts to topic through w, batch rows per
// acknowledged write, each validated by stream.EncodeTrain under lim.
type producer struct {
	w     *stream.Writer
	topic string
	lim   stream.Limits // InputDim is the data's width
	batch int
}

// produce sends rows [from, to) of set and returns how many were acknowledged.
func (p producer) produce(ctx context.Context, set *dataset.Set, from, to int, prog *progress) (int, error) {
	return produceRows(ctx, set, from, to, p.batch, prog, func(ctx context.Context, pts ...cairn.Point) error {
		msgs := make([]stream.Message, len(pts))
		for i, pt := range pts {
			body, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: pt.ID, X: pt.X, Label: pt.Label}, p.lim)
			if err != nil {
				return fmt.Errorf("id %q: %w", pt.ID, err)
			}
			msgs[i] = stream.Message{Topic: p.topic, Key: []byte(pt.ID), Value: body}
		}
		return p.w.Write(ctx, msgs...)
	})
}

// fetchModelExport returns the JSON body of GET /model[?model=V] at addr over plain
// HTTP without credentials (bench's own daemon, on loopback).
func fetchModelExport(ctx context.Context, addr string, version uint64) ([]byte, error) {
	c, err := cairn.New(cairn.Config{HTTP: cairn.HTTP{Addr: addr}})
	if err != nil {
		return nil, err
	}
	m, err := c.Model(ctx, version)
	return m.Raw, err
}
