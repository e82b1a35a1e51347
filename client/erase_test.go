package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/stream"
)

// A data subject's erasure: points about a person stream in; her erasure request
// removes every one of them in one signed audit, which names her only by a keyed hash;
// the audit chain still verifies.
func ExampleClient_Erase() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := client.FromDaemon(config.Default(), brokers())
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.HTTP.Addr = httpAddr()
	c, err := client.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	const subject = "zoe@example.org"
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var pts []client.Point
	for i := range 3 {
		l := int64(i)
		pts = append(pts, client.Point{ID: fmt.Sprintf("zoe-%d", i), X: []float64{0.1 * float64(i), 0.2, 0.3, float64(l)}, Label: &l, Subject: subject})
	}
	if err := c.Upsert(ctx, pts...); err != nil {
		fmt.Println(err)
		return
	}
	// The erasure covers the points stored when it is applied (the erasures topic is
	// read beside the training topic, not after it), so wait for them here; any upsert
	// of hers applied after it is refused all the same.
	for s := st; s.Points < st.Points+len(pts); time.Sleep(50 * time.Millisecond) {
		if s, err = c.Status(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	audit, err := c.Erase(ctx, stream.ErasureEvent{Op: stream.ErasureErase, Subject: subject, Request: "gdpr-zoe"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("audit:", audit.Request, "points", len(audit.Points), "known", audit.Known)
	fmt.Println("subject named by a hash:", len(audit.SubjectHash) == 64, !bytes.Contains(audit.Raw, []byte(subject)))

	keys, err := c.AuditKeys(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := c.VerifyAudits(ctx, keys)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("chain ok:", rep.OK, "signatures", rep.Signatures)
	// Output:
	// audit: gdpr-zoe points 3 known true
	// subject named by a hash: true true
	// chain ok: true signatures verified
}

// TestEraseRefused: a request the daemon refuses comes back as its dead letter (matched
// by digest: the daemon does not copy the key, which is the subject), and one that
// does not validate is not sent.
func TestEraseRefused(t *testing.T) {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Erase(t.Context(), stream.ErasureEvent{Op: stream.ErasureErase, Subject: "x\x01", Request: "r"})
	if !errors.Is(err, stream.ErrRejected) || bytes.Contains([]byte(err.Error()), []byte("x\x01")) {
		t.Errorf("invalid subject: %v", err)
	}
	long := string(bytes.Repeat([]byte("s"), 200))
	// A subject the daemon's limits refuse but the client's (default 256 bytes) allow.
	cfg, err := client.FromDaemon(config.Default(), brokers())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Limits.MaxIDBytes, cfg.AnswerTimeout = 1024, 30*time.Second
	c2, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.Erase(t.Context(), stream.ErasureEvent{Op: stream.ErasureErase, Subject: long + long, Request: "too-long"})
	var dl *client.DeadLetterError
	if !errors.As(err, &dl) || dl.DeadLetter.Reason != stream.ReasonBadID || dl.DeadLetter.Key != nil {
		t.Errorf("refused request: %v", err)
	}
}
