package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/stream"
)

// fakeDaemon plays the daemon's part of the Kafka contract, so the commands are
// tested without the daemon: it reads cairn.train and cairn.queries from the start,
// validates with the stream decoders, answers queries with an attribution keyed by
// the request, answers deletes with a hash-chained audit keyed by the request, and
// dead-letters what it rejects. Query ids "reject-me" are dead-lettered and
// "ignore-me" never answered; deletes of ids starting "dup" are audited twice (the
// same record re-sent, as after a crash between publish and ack).
type fakeDaemon struct {
	t      testing.TB
	topics config.Topics
	w      *stream.Writer
	lim    stream.Limits

	mu      sync.Mutex
	upserts map[string]stream.TrainEvent
	queries []stream.QueryEvent
	seq     uint64
	prev    [32]byte

	cancel context.CancelFunc
	done   chan error
}

func startFakeDaemon(t testing.TB, addr string, dim int) *fakeDaemon {
	t.Helper()
	topics := config.Default().Kafka.Topics
	kc := stream.Config{Brokers: []string{addr}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	r, err := stream.NewReader(stream.ReaderConfig{
		Kafka: kc, Topics: []string{topics.Train, topics.Queries}, MaxWait: 50 * time.Millisecond,
		Start: func(string, int) (int64, bool, error) { return 0, false, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDaemon{t: t, topics: topics, w: w, lim: stream.Limits{InputDim: dim}, upserts: map[string]stream.TrainEvent{}, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- r.Run(ctx, d.handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-d.done; err != nil {
			t.Errorf("fake daemon: %v", err)
		}
		w.Close()
	})
	return d
}

func (d *fakeDaemon) handle(ctx context.Context, batch []stream.Message) error {
	for _, m := range batch {
		var out []stream.Message
		var err error
		switch m.Topic {
		case d.topics.Train:
			out, err = d.train(m)
		case d.topics.Queries:
			out, err = d.query(m)
		}
		if err != nil {
			return err
		}
		if err := d.w.Write(ctx, out...); err != nil {
			return err
		}
	}
	return nil
}

func (d *fakeDaemon) dead(m stream.Message, rej error) ([]stream.Message, error) {
	dl, err := stream.DeadLetterMessage(d.topics.DLQ, m, rej, false)
	return []stream.Message{dl}, err
}

func (d *fakeDaemon) train(m stream.Message) ([]stream.Message, error) {
	ev, err := stream.DecodeTrain(m.Value, d.lim)
	if err != nil {
		return d.dead(m, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev.Op == stream.OpUpsert {
		d.upserts[ev.ID] = ev
		return nil, nil
	}
	_, was := d.upserts[ev.ID]
	delete(d.upserts, ev.ID)
	d.seq++
	// The body repeats the event's top-level fields, as the daemon's does (a verifier
	// rejects a copy whose fields disagree with the body the chain covers).
	body := fmt.Sprintf(`{"request":%q,"id":%q,"known":%v,"was_landmark":%v,"model_before":1,"model_after":2,"percentile":0.9,"p_value":0,"seq":%d}`,
		ev.Request, ev.ID, was, was, d.seq)
	h := sha256.Sum256(append(d.prev[:], body...))
	a := stream.Audit{Request: ev.Request, ID: ev.ID, Known: was, WasLandmark: was, ModelBefore: 1, ModelAfter: 2, Percentile: 0.9,
		Seq: d.seq, PrevHash: hex.EncodeToString(d.prev[:]), Hash: hex.EncodeToString(h[:]), Body: body}
	d.prev = h
	v, err := a.Encode()
	if err != nil {
		return nil, err
	}
	out := []stream.Message{{Topic: d.topics.Audits, Key: []byte(ev.Request), Value: v}}
	if strings.HasPrefix(ev.ID, "dup") {
		out = append(out, out[0])
	}
	return out, nil
}

func (d *fakeDaemon) query(m stream.Message) ([]stream.Message, error) {
	q, err := stream.DecodeQuery(m.Value, d.lim)
	if err == nil && q.ID == "reject-me" {
		err = &stream.RejectError{Reason: stream.ReasonBadID, Field: "id", Msg: `"reject-me": not stored`}
	}
	if err != nil {
		return d.dead(m, err)
	}
	d.mu.Lock()
	d.queries = append(d.queries, q)
	d.mu.Unlock()
	if q.ID == "ignore-me" {
		return nil, nil
	}
	k := q.K
	if k == 0 {
		k = 2
	}
	topk := make([]stream.Scored, k)
	for i := range topk {
		topk[i] = stream.Scored{ID: fmt.Sprintf("p%d", i), Score: 1 / float64(i+1), Radius: 0.01}
	}
	a := stream.Attribution{Request: q.Request, Model: 7, Verdict: stream.VerdictCertified, TopK: topk, Delta: 0.05}
	v, err := a.Encode()
	return []stream.Message{{Topic: d.topics.Attributions, Key: []byte(q.Request), Value: v}}, err
}

func (d *fakeDaemon) snapshot() (map[string]stream.TrainEvent, []stream.QueryEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.upserts), slices.Clone(d.queries)
}

// startTestBroker starts an embedded broker with the default topic names on a free port.
func startTestBroker(t testing.TB) *stream.Broker {
	t.Helper()
	tp := config.Default().Kafka.Topics
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3,
		Topics: []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// runCmd runs cairnctl with args and returns the exit code, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// writeCSV writes a small labelled data set of n rows and width dim.
func writeCSV(t *testing.T, n, dim int) string {
	t.Helper()
	var b strings.Builder
	for j := range dim {
		fmt.Fprintf(&b, "f%d,", j)
	}
	b.WriteString("label\n")
	for i := range n {
		for j := range dim {
			fmt.Fprintf(&b, "%g,", float64(i)+float64(j)/8)
		}
		fmt.Fprintf(&b, "%d\n", i%3)
	}
	path := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKafkaCommands drives produce, query, delete and audit verify through an
// embedded broker against the fake daemon, and checks what arrives on both sides.
func TestKafkaCommands(t *testing.T) {
	const n, dim = 37, 4
	b := startTestBroker(t)
	d := startFakeDaemon(t, b.Addr(), dim)
	brokers := "--brokers=" + b.Addr()

	// produce: every row arrives as an upsert with its id, x and label.
	path := writeCSV(t, n, dim)
	code, out, errs := runCmd("produce", brokers, "--data", "csv:"+path, "--batch", "10")
	if code != 0 {
		t.Fatalf("produce exit %d: %s", code, errs)
	}
	var prep produceReport
	if err := json.Unmarshal([]byte(out), &prep); err != nil || prep.Produced != n || prep.Topic != "cairn.train" || !(prep.EventsPerSecond > 0) {
		t.Fatalf("produce output %s (%v): want produced %d on cairn.train", out, err, n)
	}
	checkKeys(t, "produce", out, []string{"data", "events_per_second", "produced", "seconds", "split", "topic"})
	set, err := dataset.Open("csv:"+path, "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "upserts at the fake daemon", func() bool { u, _ := d.snapshot(); return len(u) == n })
	ups, _ := d.snapshot()
	for i := range set.N {
		ev, ok := ups[set.IDs[i]]
		if !ok {
			t.Fatalf("row %d id %q: not received", i, set.IDs[i])
		}
		if !slices.Equal(ev.X, set.Row(i)) || ev.Label == nil || *ev.Label != int64(set.Labels[i]) {
			t.Errorf("row %d: received x %v label %v, want %v label %d", i, ev.X, ev.Label, set.Row(i), set.Labels[i])
		}
	}

	// query --x --wait prints the attribution as the daemon wrote it.
	xfile := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(xfile, []byte("[1, 2, 3, 4.5]"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCmd("query", brokers, "--x", xfile, "--k", "3", "--score", "entk", "--request", "req-x", "--wait", "--timeout", "20s")
	if code != 0 {
		t.Fatalf("query --x --wait exit %d: %s", code, errs)
	}
	var att stream.Attribution
	if err := json.Unmarshal([]byte(out), &att); err != nil || att.Request != "req-x" || len(att.TopK) != 3 || att.Model != 7 {
		t.Fatalf("query output %s (%v): want the attribution of req-x with 3 landmarks", out, err)
	}
	_, qs := d.snapshot()
	if len(qs) != 1 || !slices.Equal(qs[0].X, []float64{1, 2, 3, 4.5}) || qs[0].K != 3 || qs[0].Score != "entk" {
		t.Errorf("fake daemon got queries %+v, want one with x [1 2 3 4.5], k 3 and score entk", qs)
	}

	// query --id --wait with a generated request id.
	code, out, errs = runCmd("query", brokers, "--id", set.IDs[5], "--wait")
	if code != 0 {
		t.Fatalf("query --id --wait exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &att); err != nil || !strings.HasPrefix(att.Request, "q-") || len(att.TopK) != 2 {
		t.Errorf("query --id output %s (%v): want an attribution for a generated q- request", out, err)
	}

	// A dead-lettered query prints {"request","rejected"} and fails.
	code, out, _ = runCmd("query", brokers, "--id", "reject-me", "--request", "req-bad", "--wait", "--timeout", "20s")
	var rej struct {
		Request  string            `json:"request"`
		Rejected stream.DeadLetter `json:"rejected"`
	}
	if code == 0 {
		t.Errorf("query of a rejected id: exit 0, want failure")
	}
	if err := json.Unmarshal([]byte(out), &rej); err != nil || rej.Request != "req-bad" || rej.Rejected.Reason != stream.ReasonBadID || rej.Rejected.Topic != "cairn.queries" {
		t.Errorf("rejected query output %s (%v): want request req-bad rejected with bad_id", out, err)
	}
	checkKeys(t, "rejected query", out, []string{"rejected", "request"})

	// An unanswered query times out with an error that says what to check.
	code, _, errs = runCmd("query", brokers, "--id", "ignore-me", "--wait", "--timeout", "1s")
	if code == 0 || !strings.Contains(errs, "no answer to request") || !strings.Contains(errs, "cairnctl status") {
		t.Errorf("unanswered query: exit %d, stderr %q; want failure naming the missing answer", code, errs)
	}

	// Without --wait the command only sends.
	code, out, errs = runCmd("query", brokers, "--id", set.IDs[0], "--request", "req-nowait")
	if code != 0 || !strings.Contains(out, `"req-nowait"`) || !strings.Contains(out, `"sent": true`) || !strings.Contains(out, `"cairn.queries"`) {
		t.Errorf("query without --wait: exit %d, out %s, stderr %s", code, out, errs)
	}
	checkKeys(t, "query without --wait", out, []string{"request", "sent", "topic"})

	// delete --wait prints the audit; a re-sent duplicate and a second deletion make
	// a chain that audit verify accepts.
	code, out, errs = runCmd("delete", brokers, "--id", set.IDs[3], "--request", "del-1", "--wait", "--timeout", "20s")
	if code != 0 {
		t.Fatalf("delete --wait exit %d: %s", code, errs)
	}
	var aud stream.Audit
	if err := json.Unmarshal([]byte(out), &aud); err != nil || aud.Request != "del-1" || aud.ID != set.IDs[3] || !aud.WasLandmark || aud.Seq != 1 {
		t.Fatalf("delete output %s (%v): want the audit of del-1 for %s, seq 1", out, err, set.IDs[3])
	}
	if code, out, errs = runCmd("delete", brokers, "--id", "dup-unknown", "--wait"); code != 0 || !strings.Contains(out, `"was_landmark": false`) {
		t.Fatalf("delete of an unknown id: exit %d, out %s, stderr %s", code, out, errs)
	}
	ups, _ = d.snapshot()
	if _, still := ups[set.IDs[3]]; still || len(ups) != n-1 {
		t.Errorf("after delete: fake daemon holds %d points (has %s: %v), want %d without it", len(ups), set.IDs[3], still, n-1)
	}
	code, out, errs = runCmd("audit", "verify", brokers)
	var rep cairn.ChainReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.OK || rep.Records != 2 || rep.Duplicates != 1 || rep.Source != "kafka:cairn.audits" {
		t.Fatalf("audit verify: exit %d, out %s (%v), stderr %s; want ok with 2 records and 1 duplicate", code, out, err, errs)
	}
	checkKeys(t, "audit verify", out, chainReportKeys)
	if want := cairn.NotChecked + " (pass --key FILE, or --http of the running daemon)"; rep.Signatures != want {
		t.Errorf("audit verify without a key: signatures %q, want %q", rep.Signatures, want)
	}

	// A forged second record for seq 2 breaks the chain.
	forged := stream.Audit{Request: "forged", ID: "x", Seq: 2, PrevHash: aud.Hash, Body: `{"forged":true}`}
	h := sha256.Sum256(append(mustHex(t, aud.Hash), forged.Body...))
	forged.Hash = hex.EncodeToString(h[:])
	v, err := forged.Encode()
	if err != nil {
		t.Fatal(err)
	}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(context.Background(), stream.Message{Topic: "cairn.audits", Key: []byte("forged"), Value: v}); err != nil {
		t.Fatal(err)
	}
	// It is reported as forged (its top-level fields disagree with its body), by where it
	// was read, and the genuine chain still verifies around it.
	code, out, _ = runCmd("audit", "verify", brokers)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 0 || rep.OK || len(rep.Forged) != 1 || rep.Forged[0].Seq != 2 ||
		rep.FirstBadSeq != nil || rep.Records != 2 {
		t.Errorf("audit verify after forgery: exit %d, out %s (%v); want failure naming the forged seq 2, the 2 genuine records verified", code, out, err)
	}

	// delete without --wait only sends.
	code, out, errs = runCmd("delete", brokers, "--id", "dup-nowait", "--request", "del-nowait")
	if code != 0 || !strings.Contains(out, `"del-nowait"`) || !strings.Contains(out, `"cairn.train"`) || !strings.Contains(out, `"dup-nowait"`) {
		t.Errorf("delete without --wait: exit %d, out %s, stderr %s", code, out, errs)
	}
	checkKeys(t, "delete without --wait", out, []string{"id", "request", "sent", "topic"})
}

// TestProduceRejectsBadFlags checks the input errors name the flag and value.
func TestProduceRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--n", "-1"}, "--n -1"},
		{[]string{"produce", "--batch", "0"}, "--batch 0"},
		{[]string{"produce", "--data", "nope", "--brokers", "127.0.0.1:1"}, "--data"},
		{[]string{"query", "--brokers", "127.0.0.1:1"}, "exactly one of --id ID and --x FILE"},
		{[]string{"query", "--id", "a", "--x", "f"}, "exactly one of --id ID and --x FILE"},
		{[]string{"query", "--id", "a", "--k", "100000", "--brokers", "127.0.0.1:1"}, `field "k"`},
		{[]string{"query", "--id", "a", "--delta", "2", "--brokers", "127.0.0.1:1"}, `field "delta"`},
		{[]string{"query", "--id", "a", "--score", "best", "--brokers", "127.0.0.1:1"}, `ranking "best", want one of gradient_cosine, gradient, entk`},
		{[]string{"delete"}, "--id: required"},
		{[]string{"delete", "--id", "a", "--brokers", "nohost"}, "nohost"},
		{[]string{"status", "--http", "127.0.0.1:1", "--timeout", "2s"}, "daemon not reachable at http://127.0.0.1:1/status"},
	} {
		code, _, errs := runCmd(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want failure containing %q", tc.args, code, errs, tc.want)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
