package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// eraseDaemon runs a tiny daemon in process (embedded broker and HTTP on free ports, an
// untrained mlp:4-16-4) serving a model on 24 points, the first four about subject,
// until the test ends; it returns the broker address, the data directory and the HTTP
// address.
func eraseDaemon(t *testing.T, subject string) (string, string, string) {
	t.Helper()
	dir := t.TempDir()
	c := config.Default()
	c.DataDir, c.HTTP, c.Kafka.EmbeddedBroker, c.Kafka.Partitions = dir, "127.0.0.1:0", "127.0.0.1:0", 2
	c.Model = config.Backbone{Arch: "mlp:4-16-4", Seed: 3, ViewSeed: 3, Untrained: true}
	c.Sketch, c.Pool.M = config.Sketch{H: 2, S: 32}, 8
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 8, 3, 32, 2
	c.Refit.Idle, c.Refit.DeleteDebounce, c.Refit.MinPoints = 200*time.Millisecond, 50*time.Millisecond, 16
	c.Audit = config.Audit{Random: 10, Reference: 20, Test: 10}
	d, err := daemon.New(c, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	}
	cl, err := cairn.New(cairn.Config{Kafka: stream.Config{Brokers: d.Brokers()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var pts []cairn.Point
	for i := range 24 {
		l, f := int64(i%3), float64(i)
		p := cairn.Point{ID: fmt.Sprintf("p%d", i), X: []float64{math.Sin(f), math.Cos(f), f / 24, float64(l)}, Label: &l}
		if i < 4 {
			p.Subject = subject
		}
		pts = append(pts, p)
	}
	if err := cl.Upsert(t.Context(), pts...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for s := d.Status(); s.ModelPoints != len(pts) || s.RefitRunning; s = d.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("no model on %d points: %+v", len(pts), s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d.Brokers()[0], dir, d.HTTPAddr()
}

// TestEraseCommand: `cairnctl erase --wait` prints the erasure's one audit, which lists
// the subject's four points and names the subject by the hash `cairnctl subject hash`
// recomputes from the daemon's key; `audit verify` verifies the chain with it; neither
// command prints the subject, which the second reads from stdin; `--unblock` without
// --wait only reports the request sent.
func TestEraseCommand(t *testing.T) {
	const subject = "mallory@example.org"
	brokers, dir, httpAddr := eraseDaemon(t, subject)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"erase", "--brokers", brokers, "--subject", subject, "--request", "gdpr-7", "--wait", "--timeout", "60s"},
		nil, &out, &errb)
	if code != 0 {
		t.Fatalf("erase: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var a stream.Audit
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("erase printed %s: %v", out.String(), err)
	}
	if a.Request != "gdpr-7" || len(a.Points) != 4 || !a.Known || len(a.SubjectHash) != 64 {
		t.Errorf("audit %+v", a)
	}
	var hout, herr bytes.Buffer
	code = run(t.Context(), []string{"subject", "hash", "--data-dir", dir, "--subject", "-"}, strings.NewReader(subject+"\n"), &hout, &herr)
	var h struct {
		SubjectHash string `json:"subject_hash"`
	}
	if code != 0 || json.Unmarshal(hout.Bytes(), &h) != nil || h.SubjectHash != a.SubjectHash {
		t.Errorf("subject hash: exit %d, %s %s; want %s", code, hout.String(), herr.String(), a.SubjectHash)
	}
	key, err := ingest.ReadSubjectKey(dir + "/" + ingest.SubjectKeyFile)
	if err != nil || ingest.SubjectHex(key.Hash(subject)) != h.SubjectHash {
		t.Errorf("the printed hash is not the key's (%v)", err)
	}
	var vout, verr bytes.Buffer
	code = run(t.Context(), []string{"audit", "verify", "--brokers", brokers, "--http", httpAddr}, nil, &vout, &verr)
	var rep cairn.ChainReport
	if code != 0 || json.Unmarshal(vout.Bytes(), &rep) != nil || !rep.OK || rep.Records != 1 || rep.Signatures != "verified" {
		t.Errorf("audit verify: exit %d, %s %s", code, vout.String(), verr.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"erase", "--brokers", brokers, "--subject", subject, "--unblock"}, nil, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), `"sent": true`) {
		t.Errorf("erase --unblock: exit %d, %s %s", code, out.String(), errb.String())
	}
	for _, s := range []string{out.String(), errb.String(), hout.String(), herr.String()} {
		if strings.Contains(s, subject) {
			t.Errorf("cairnctl printed the subject: %s", s)
		}
	}
}

// TestEraseUsage: the commands refuse a missing subject, and subject hash a key it
// cannot read, before anything is sent.
func TestEraseUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"erase"}, "--subject: required"},
		{[]string{"erase", "--subject", "s", "--timeout", "0s"}, "--timeout"},
		{[]string{"subject", "hash", "--subject", "s", "--key-file", t.TempDir() + "/none.key"}, "subject key"},
		{[]string{"subject", "hash", "--subject", "-"}, "--subject -"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), tc.args, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want it to mention %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
