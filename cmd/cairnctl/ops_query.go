package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/stream"
)

// queryCmd is `cairnctl query --id ID | --x FILE [--k K] [--delta D] [--request R]
// [--wait] [--timeout 60s]`: it sends one query to cairn.queries, keyed by its request
// id. Without --wait it prints {"request":…,"topic":…,"sent":true}. With --wait it
// prints the attribution event exactly as the daemon wrote it; if the daemon
// dead-letters the query instead it prints {"request":…,"rejected":<dead letter>} and
// fails.
func queryCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesConfig)
	id := fs.String("id", "", "id of a stored training point to explain")
	xfile := fs.String("x", "", "file holding the query vector: a JSON array of numbers or one CSV line")
	k := fs.Int("k", 0, "top-K size (0: the daemon's default)")
	delta := fs.Float64("delta", 0, "failure probability δ in (0, 1) (0: the daemon's default)")
	request := fs.String("request", "", "request id (default: q-<16 random hex digits>)")
	wait := fs.Bool("wait", false, "wait for the attribution and print it")
	timeout := fs.Duration("timeout", 60*time.Second, "with --wait: how long to wait for the answer")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if (*id == "") == (*xfile == "") {
			return errors.New("give exactly one of --id ID and --x FILE")
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		cfg, kc, err := kf.load(fs)
		if err != nil {
			return err
		}
		q := stream.QueryEvent{Request: *request, ID: *id, K: *k, Delta: *delta}
		if *xfile != "" {
			if q.X, err = readVector(*xfile); err != nil {
				return err
			}
			warnInputDim(stdio.Err, cfg, len(q.X))
		}
		if q.Request == "" {
			if q.Request, err = newRequestID("q"); err != nil {
				return err
			}
		}
		lim := inputLimits(cfg, len(q.X))
		if _, err := stream.EncodeQuery(q, lim); err != nil {
			return fmt.Errorf("query not sent: %w", err)
		}
		c := client{kc: kc, topics: cfg.Kafka.Topics, stderr: stdio.Err}
		ctx, cancel := context.WithTimeout(ctx, *timeout+15*time.Second)
		defer cancel()
		if !*wait {
			if err := c.sendOnly(func(w *stream.Writer) ([]byte, error) { return c.sendQuery(ctx, w, q, lim) }); err != nil {
				return err
			}
			return writeJSON(stdio.Out, sentReport{Request: q.Request, Topic: cfg.Kafka.Topics.Queries, Sent: true})
		}
		fmt.Fprintf(stdio.Err, "cairnctl: query request %s; waiting up to %v for its attribution\n", q.Request, *timeout)
		m, err := c.ask(ctx, *timeout, q, lim)
		return printAnswer(stdio.Out, q.Request, m, err)
	}
}

// deleteCmd is `cairnctl delete --id ID [--request R] [--wait] [--timeout 120s]`: it
// sends {"v":1,"op":"delete","id":…,"request":…} to cairn.train keyed by the id, so it
// is ordered after every earlier upsert of that id. Without --wait it prints
// {"request":…,"id":…,"topic":…,"sent":true}; with --wait it prints the audit event
// exactly as the daemon wrote it (it arrives after the refit without the point).
func deleteCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesConfig)
	id := fs.String("id", "", "id of the training point to delete (required)")
	request := fs.String("request", "", "request id the audit answers (default: d-<16 random hex digits>)")
	wait := fs.Bool("wait", false, "wait for the deletion's audit and print it")
	timeout := fs.Duration("timeout", 120*time.Second, "with --wait: how long to wait for the audit")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *id == "" {
			return errors.New("--id: required")
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		cfg, kc, err := kf.load(fs)
		if err != nil {
			return err
		}
		req := *request
		if req == "" {
			if req, err = newRequestID("d"); err != nil {
				return err
			}
		}
		lim := inputLimits(cfg, 0)
		ev := stream.TrainEvent{Op: stream.OpDelete, ID: *id, Request: req}
		if _, err := stream.EncodeTrain(ev, lim); err != nil {
			return fmt.Errorf("delete not sent: %w", err)
		}
		c := client{kc: kc, topics: cfg.Kafka.Topics, stderr: stdio.Err}
		ctx, cancel := context.WithTimeout(ctx, *timeout+15*time.Second)
		defer cancel()
		if !*wait {
			if err := c.sendOnly(func(w *stream.Writer) ([]byte, error) { return c.sendDelete(ctx, w, ev, lim) }); err != nil {
				return err
			}
			return writeJSON(stdio.Out, sentReport{Request: req, ID: *id, Topic: cfg.Kafka.Topics.Train, Sent: true})
		}
		fmt.Fprintf(stdio.Err, "cairnctl: delete request %s for id %q; waiting up to %v for its audit\n", req, *id, *timeout)
		m, err := c.deleteAndWait(ctx, *timeout, ev, lim)
		return printAnswer(stdio.Out, req, m, err)
	}
}

// sentReport is the output of query and delete without --wait.
type sentReport struct {
	Request string `json:"request"`
	ID      string `json:"id,omitempty"` // delete only
	Topic   string `json:"topic"`
	Sent    bool   `json:"sent"`
}

// printAnswer writes the answer event as received, or the dead letter that rejected
// the request (and then fails), or returns err.
func printAnswer(stdout io.Writer, request string, m stream.Message, err error) error {
	var rej *rejectedError
	if errors.As(err, &rej) {
		out := struct {
			Request  string          `json:"request"`
			Rejected json.RawMessage `json:"rejected"`
		}{request, rej.raw}
		if werr := writeJSON(stdout, out); werr != nil {
			return werr
		}
		return err
	}
	if err != nil {
		return err
	}
	if !json.Valid(m.Value) {
		return fmt.Errorf("answer to request %s on %s/%d offset %d is not JSON: %.200q", request, m.Topic, m.Partition, m.Offset, m.Value)
	}
	return writeJSON(stdout, json.RawMessage(m.Value))
}

// client sends requests to a daemon through Kafka and waits for their answers.
type client struct {
	kc     stream.Config
	topics config.Topics
	stderr io.Writer
}

// sendQuery writes q keyed by its request id and returns the bytes sent.
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

// sendDelete writes the delete event keyed by the point id and returns the bytes sent.
func (c client) sendDelete(ctx context.Context, w *stream.Writer, ev stream.TrainEvent, lim stream.Limits) ([]byte, error) {
	body, err := stream.EncodeTrain(ev, lim)
	if err != nil {
		return nil, fmt.Errorf("delete not sent: %w", err)
	}
	if err := w.Write(ctx, stream.Message{Topic: c.topics.Train, Key: []byte(ev.ID), Value: body}); err != nil {
		return nil, fmt.Errorf("sending delete %s of id %q to %s: %w", ev.Request, ev.ID, c.topics.Train, err)
	}
	return body, nil
}

// ask sends q and waits up to timeout for its attribution.
func (c client) ask(ctx context.Context, timeout time.Duration, q stream.QueryEvent, lim stream.Limits) (stream.Message, error) {
	return c.sendAndWait(ctx, timeout, func(w *stream.Writer) ([]byte, error) { return c.sendQuery(ctx, w, q, lim) },
		answer{topic: c.topics.Attributions, request: q.Request, src: c.topics.Queries, key: []byte(q.Request)})
}

// deleteAndWait sends the delete event and waits up to timeout for its audit.
func (c client) deleteAndWait(ctx context.Context, timeout time.Duration, ev stream.TrainEvent, lim stream.Limits) (stream.Message, error) {
	return c.sendAndWait(ctx, timeout, func(w *stream.Writer) ([]byte, error) { return c.sendDelete(ctx, w, ev, lim) },
		answer{topic: c.topics.Audits, request: ev.Request, src: c.topics.Train, key: []byte(ev.ID)})
}

// sendOnly sends with send through a writer of its own, without waiting for an answer.
func (c client) sendOnly(send func(*stream.Writer) ([]byte, error)) error {
	w, err := openWriter(c.kc)
	if err != nil {
		return err
	}
	defer w.Close()
	_, err = send(w)
	return err
}

// sendAndWait opens a tail on want.topic and the dead-letter topic before sending (so
// the answer cannot be missed however fast it comes), sends with send, and waits up to
// timeout for the answer want describes (want.sent is filled with what was sent).
func (c client) sendAndWait(ctx context.Context, timeout time.Duration, send func(*stream.Writer) ([]byte, error), want answer) (stream.Message, error) {
	t, err := newTail(ctx, c.kc, c.stderr, want.topic, c.topics.DLQ)
	if err != nil {
		return stream.Message{}, err
	}
	defer t.Close()
	w, err := openWriter(c.kc)
	if err != nil {
		return stream.Message{}, err
	}
	defer w.Close()
	if want.sent, err = send(w); err != nil {
		return stream.Message{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.await(wctx, t, want)
}

// answer describes what a request's answer looks like: a message on topic keyed by
// request whose "request" field is request; or a dead letter of the message sent to
// src with key and value sent.
type answer struct {
	topic   string
	request string
	src     string
	key     []byte
	sent    []byte
}

// rejectedError is a request the daemon dead-lettered; raw is the dead-letter event.
type rejectedError struct {
	request string
	reason  stream.Reason
	message string
	raw     []byte
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("request %s rejected by the daemon (%s): %s", e.request, e.reason, e.message)
}

// await reads t until the answer described by a arrives (returned as received), its
// dead letter arrives (*rejectedError), or ctx ends. Other messages are skipped.
func (c client) await(ctx context.Context, t *tail, a answer) (stream.Message, error) {
	for {
		m, err := t.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return stream.Message{}, fmt.Errorf("no answer to request %s on %s (nor a dead letter on %s) in time: "+
					"is the daemon running and consuming %s? (try `cairnctl status`)", a.request, a.topic, c.topics.DLQ, a.src)
			}
			return stream.Message{}, err
		}
		switch {
		case m.Topic == a.topic && string(m.Key) == a.request:
			var body struct {
				Request string `json:"request"`
			}
			if json.Unmarshal(m.Value, &body) == nil && body.Request == a.request {
				return m, nil
			}
		case m.Topic == c.topics.DLQ:
			var dl stream.DeadLetter
			if json.Unmarshal(m.Value, &dl) != nil {
				continue
			}
			if deadLetterOf(dl, a.src, a.key, a.sent) {
				return stream.Message{}, &rejectedError{request: a.request, reason: dl.Reason, message: dl.Message, raw: m.Value}
			}
		}
	}
}

// deadLetterOf reports whether dl records the rejection of the message (key, sent)
// written to topic src: by its SHA-256, or, from a daemon that does not record one, by
// the raw bytes it copied (at most stream.MaxDeadLetterRaw of key and value, so a
// truncated copy must be a prefix of the sent bytes, with the recorded full length equal
// to ours).
func deadLetterOf(dl stream.DeadLetter, src string, key, sent []byte) bool {
	if dl.Topic != src || dl.RawLen != len(sent) {
		return false
	}
	if !bytes.Equal(dl.Key, key) && !(len(key) > stream.MaxDeadLetterRaw && bytes.HasPrefix(key, dl.Key)) {
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

// readVector reads one query vector from path: a JSON array of numbers, or one CSV
// line of numbers. Every value must be finite; errors name the file and the element.
func readVector(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--x: %w", err)
	}
	x, err := parseVector(b)
	if err != nil {
		return nil, fmt.Errorf("--x %s: %w", path, err)
	}
	return x, nil
}

// parseVector parses the contents of an --x file; see readVector.
func parseVector(b []byte) ([]float64, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark some editors write
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, errors.New("empty; want a JSON array of numbers or one CSV line")
	}
	var x []float64
	if s[0] == '{' {
		return nil, errors.New("a JSON object; want a JSON array of numbers or one CSV line")
	}
	if s[0] == '[' {
		dec := json.NewDecoder(strings.NewReader(s))
		// Pointers tell a null (which encoding/json would leave as 0) from a number.
		var raw []*float64
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("not a JSON array of numbers: %v", err)
		}
		if dec.More() {
			return nil, errors.New("text after the JSON array; want one vector")
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, errors.New("text after the JSON array; want one vector")
		}
		x = make([]float64, len(raw))
		for i, p := range raw {
			if p == nil {
				return nil, fmt.Errorf("element %d is null; want a number", i)
			}
			x[i] = *p
		}
	} else {
		r := csv.NewReader(strings.NewReader(s))
		r.TrimLeadingSpace = true
		recs, err := r.ReadAll()
		if err != nil {
			return nil, fmt.Errorf("not one CSV line: %v", err)
		}
		if len(recs) != 1 {
			return nil, fmt.Errorf("%d CSV lines; want one vector", len(recs))
		}
		x = make([]float64, len(recs[0]))
		for i, f := range recs[0] {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if errors.Is(err, strconv.ErrRange) && !(v > -1 && v < 1) {
				return nil, fmt.Errorf("element %d: %q overflows float64", i, f)
			}
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Errorf("element %d: %q is not a number", i, f)
			}
			x[i] = v
		}
	}
	if len(x) == 0 {
		return nil, errors.New("no values")
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("element %d: %v is not finite", i, v)
		}
	}
	return x, nil
}
