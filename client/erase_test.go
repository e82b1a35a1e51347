package client_test

import (
	"bytes"
	"context"
	"encoding/json"
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

// Send a data subject's request without waiting: here an unblock, which lifts the
// refusal of her upserts that an erasure leaves (and is audited at once even when there
// was none). Watch the audit topic first, so that its audit cannot be missed.
func ExampleClient_SendErasure() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	w, err := c.Watch(ctx, c.Topics().Audits, c.Topics().DLQ)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	s, err := c.SendErasure(ctx, stream.ErasureEvent{Op: stream.ErasureUnblock, Subject: "yan@example.org", Request: "unblock-yan"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Topic, "keyed by the subject:", string(s.Key) == "yan@example.org", "audit on", s.AnswerTopic)
	m, err := w.Await(ctx, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	var a stream.Audit
	if err := json.Unmarshal(m.Value, &a); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("audit:", a.Request, "subject named by a hash:", len(a.SubjectHash) == 64, !bytes.Contains(m.Value, []byte("yan@")))
	// Output:
	// cairn.erasures keyed by the subject: true audit on cairn.audits
	// audit: unblock-yan subject named by a hash: true true
}

// The receipt of a deletion: the request, when it was applied, what was erased, and
// each of its audit records checked against the pinned key.
func ExampleClient_Receipt() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Receipt(ctx, "forget-p6", nil, nil); errors.Is(err, client.ErrNoReceipt) {
		fmt.Println("before the deletion: no receipt")
	}
	if _, err := c.DeleteAndWait(ctx, "p6", "forget-p6"); err != nil {
		fmt.Println(err)
		return
	}
	keys, err := c.AuditKeys(ctx) // pin it: keep it outside the daemon
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := c.Receipt(ctx, "forget-p6", keys, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Kind, r.PointID, "records", len(r.Records), "verified", r.Verified, "chain ok", r.Chain.OK)
	fmt.Println("signature", r.Records[0].Signature, "model after", r.Erased.ModelAfter > r.Erased.ModelBefore)
	// Output:
	// before the deletion: no receipt
	// deletion p6 records 1 verified true chain ok true
	// signature verified model after true
}
