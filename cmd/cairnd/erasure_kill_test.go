package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// TestErasureKill9: cairnd is killed with SIGKILL after it applied a data subject's
// erasure (the points gone, the record pending) and before the refit that audits it
// (refit.delete_debounce holds the refit back). The restarted daemon finishes the job:
// exactly one audit of the request on the audit topic, listing every point of the
// subject with where its tombstone landed; the subject stays blocked; the erased
// inputs are not in the state file.
func TestErasureKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairnd and kills it")
	}
	const n, subjectPoints = 200, 20
	set, err := dataset.Open("mnist", "train", n+1)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "cairnd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx := context.Background()
	tp := config.Default().Kafka.Topics
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2,
		Topics: []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}, TopicConfigs: daemon.TopicConfigs(config.Default())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const subject = "erin@example.org"
	lim := stream.Limits{InputDim: set.D}
	upsert := func(i int, s string) stream.Message {
		lab := int64(set.Labels[i])
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &lab, Subject: s}, lim)
		if err != nil {
			t.Fatal(err)
		}
		return stream.Message{Topic: tp.Train, Key: []byte(set.IDs[i]), Value: v}
	}
	var msgs []stream.Message
	for i := range n {
		s := ""
		if i%(n/subjectPoints) == 3 {
			s = subject
		}
		msgs = append(msgs, upsert(i, s))
	}
	write := func(ms ...stream.Message) {
		w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Write(ctx, ms...); err != nil {
			t.Fatal(err)
		}
	}
	write(msgs...)

	dir := t.TempDir()
	cfgPath, httpK := filepath.Join(dir, "erasure.yaml"), freeAddr(t)
	yaml := strings.Replace(killConfig(filepath.Join(dir, "data"), b.Addr(), httpK), "delete_debounce: 100ms", "delete_debounce: 4s", 1)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCairnd(t, bin, cfgPath, httpK)
	waitQuiet(t, p, n)
	ev, err := stream.EncodeErasure(stream.ErasureEvent{Op: stream.ErasureErase, Subject: subject, Request: "gdpr-kill"}, stream.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	write(stream.Message{Topic: stream.DefaultErasuresTopic, Key: []byte(subject), Value: ev})
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, ok := p.status()
		if ok && s.Erasures != nil && len(s.Erasures.Pending) == 1 && s.Points == n-subjectPoints {
			break // applied, not audited
		}
		if time.Now().After(deadline) {
			t.Fatalf("the erasure was not applied: %+v\n%s", s, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if audits := readTopics(t, b.Addr(), tp.Audits)[tp.Audits]; len(audits) != 0 {
		t.Fatalf("an audit was published before the kill: the kill came too late to test anything (%d records)", len(audits))
	}

	p = startCairnd(t, bin, cfgPath, httpK)
	waitQuiet(t, p, n-subjectPoints)
	write(upsert(n, subject)) // still blocked after the restart
	deadline = time.Now().Add(30 * time.Second)
	for s, _ := p.status(); s.Ingest.DeadLetters < 1; s, _ = p.status() {
		if time.Now().After(deadline) {
			t.Fatalf("the subject's upsert after the restart was not refused: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopGracefully(t, p)
	topics := readTopics(t, b.Addr(), tp.Audits, tp.DLQ)
	var copies []stream.Audit
	for _, m := range topics[tp.Audits] {
		var a stream.Audit
		if err := json.Unmarshal(m.Value, &a); err != nil {
			t.Fatal(err)
		}
		if a.Request == "gdpr-kill" {
			copies = append(copies, a)
		}
	}
	if len(copies) != 1 {
		t.Fatalf("%d audits of the erasure after the restart, want exactly one", len(copies))
	}
	var body ingest.SubjectAuditBody
	if err := json.Unmarshal([]byte(copies[0].Body), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Points) != subjectPoints || !body.Known || body.ModelAfter <= body.ModelBefore {
		t.Errorf("audit after the restart: %+v", body)
	}
	for _, pt := range body.Points {
		if tb := pt.Tombstone; tb == nil || tb.Unknown != "" || tb.Offset < 0 {
			t.Errorf("point %s: tombstone %+v", pt.ID, tb)
		}
	}
	// Outputs are at least once: a dead letter may be re-sent after a restart, and a
	// producer retry may put the refused upsert on the topic twice. Every dead letter
	// must be the refused upsert's.
	dls := topics[tp.DLQ]
	if len(dls) == 0 {
		t.Errorf("no dead letter; want the refused upsert's")
	}
	for i, m := range dls {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil || dl.Reason != stream.ReasonSubjectErased || dl.Topic != tp.Train {
			t.Errorf("dead letter %d of %d: %+v (%v); want the refused upsert's", i, len(dls), dl, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "data", daemon.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if i%(n/subjectPoints) != 3 {
			continue
		}
		var x []byte
		for _, v := range set.Row(i) {
			x = binary.LittleEndian.AppendUint64(x, math.Float64bits(v))
		}
		if bytes.Contains(raw, x) {
			t.Errorf("the input of erased point %s is in the state file", set.IDs[i])
		}
	}
}
