package main

import (
	"bytes"
	"context"
	"encoding/csv"
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

	"github.com/cairnhq/cairn/certify"
	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/stream"
)

// queryCmd is `cairnctl query --id ID | --x FILE [--k K] [--delta D] [--score NAME]
// [--request R] [--wait] [--timeout 60s]`: it sends one query to cairn.queries, keyed by its request
// id (client.Client.SendQuery, or Ask with --wait). Without --wait it prints
// {"request":…,"topic":…,"sent":true}. With --wait it prints the attribution event
// exactly as the daemon wrote it; if the daemon dead-letters the query instead it
// prints {"request":…,"rejected":<dead letter>} and fails.
func queryCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesConfig)
	id := fs.String("id", "", "id of a stored training point to explain")
	xfile := fs.String("x", "", "file holding the query vector: a JSON array of numbers or one CSV line")
	k := fs.Int("k", 0, "top-K size (0: the daemon's default)")
	delta := fs.Float64("delta", 0, "failure probability δ in (0, 1) (0: the daemon's default)")
	score := fs.String("score", "", "ranking: gradient, entk, displacement or representer (empty: the daemon's query.score)")
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
		if *score != "" {
			if _, err := certify.ParseRanking(*score); err != nil {
				return fmt.Errorf("--score: %w", err)
			}
		}
		q := stream.QueryEvent{Request: *request, ID: *id, K: *k, Delta: *delta, Score: *score}
		var err error
		if *xfile != "" {
			if q.X, err = readVector(*xfile); err != nil {
				return err
			}
		}
		cfg, c, err := kf.load(fs, stdio.Err, *timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		if q.X != nil {
			warnInputDim(stdio.Err, cfg, len(q.X))
		}
		if q.Request == "" {
			if q.Request, err = cairn.NewRequestID("q"); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout+15*time.Second)
		defer cancel()
		if !*wait {
			s, err := c.SendQuery(ctx, q)
			if err != nil {
				return err
			}
			return writeJSON(stdio.Out, sentReport{Request: s.Request, Topic: s.Topic, Sent: true})
		}
		fmt.Fprintf(stdio.Err, "cairnctl: query request %s; waiting up to %v for its attribution\n", q.Request, *timeout)
		a, err := c.Ask(ctx, q)
		return printAnswer(stdio.Out, q.Request, a.Raw, err)
	}
}

// deleteCmd is `cairnctl delete --id ID [--request R] [--wait] [--timeout 120s]`: it
// sends {"v":1,"op":"delete","id":…,"request":…} to cairn.train keyed by the id, so it
// is ordered after every earlier upsert of that id (client.Client.SendDelete, or
// DeleteAndWait with --wait). Without --wait it prints {"request":…,"id":…,"topic":…,
// "sent":true}; with --wait it prints the audit event exactly as the daemon wrote it
// (it arrives after the refit without the point).
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
		_, c, err := kf.load(fs, stdio.Err, *timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		req := *request
		if req == "" {
			if req, err = cairn.NewRequestID("d"); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout+15*time.Second)
		defer cancel()
		if !*wait {
			s, err := c.SendDelete(ctx, *id, req)
			if err != nil {
				return err
			}
			return writeJSON(stdio.Out, sentReport{Request: req, ID: *id, Topic: s.Topic, Sent: true})
		}
		fmt.Fprintf(stdio.Err, "cairnctl: delete request %s for id %q; waiting up to %v for its audit\n", req, *id, *timeout)
		a, err := c.DeleteAndWait(ctx, *id, req)
		return printAnswer(stdio.Out, req, a.Raw, err)
	}
}

// sentReport is the output of query and delete without --wait.
type sentReport struct {
	Request string `json:"request"`
	ID      string `json:"id,omitempty"` // delete only
	Topic   string `json:"topic"`
	Sent    bool   `json:"sent"`
}

// printAnswer writes the answer event as received (also one of a schema this cairnctl
// does not know), or the dead letter that rejected the request (and then fails), or
// returns err.
func printAnswer(stdout io.Writer, request string, raw json.RawMessage, err error) error {
	var rej *cairn.DeadLetterError
	if errors.As(err, &rej) {
		out := struct {
			Request  string          `json:"request"`
			Rejected json.RawMessage `json:"rejected"`
		}{request, rej.Raw}
		if werr := writeJSON(stdout, out); werr != nil {
			return werr
		}
		return err
	}
	if err != nil && !(errors.Is(err, cairn.ErrSchema) && raw != nil) {
		if errors.Is(err, cairn.ErrNoAnswer) {
			return fmt.Errorf("%w (try `cairnctl status`)", err)
		}
		return err
	}
	return writeJSON(stdout, raw)
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
