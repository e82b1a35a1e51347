package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/lineage"
	"github.com/cairnhq/cairn/internal/receipt"
	"github.com/cairnhq/cairn/schemas"
	"github.com/cairnhq/cairn/schemas/schematest"
	"github.com/cairnhq/cairn/stream"
)

// ceConfig is a small daemon on its own embedded broker: six inputs, quick refits.
func ceConfig(dir, broker, http string) string {
	return fmt.Sprintf(`data_dir: %s
http: %s
shutdown_timeout: 5s
kafka: {embedded_broker: %s, partitions: 2}
model: {arch: "mlp:6-16-4", seed: 5, untrained: true}
sketch: {h: 2, s: 32}
pool: {m: 8}
fit: {k: 8, epochs: 2, batch: 32, fits: 2}
refit: {idle: 300ms, min_points: 16, delete_debounce: 100ms}
audit: {random: 5, reference: 40, test: 20}
cloudevents: {source: "urn:cairn:test-deployment"}
lineage: {namespace: "cairn-test", job: "cairnd"}
`, dir, http, broker)
}

// kcatRecord is one record as kcat printed it: its coordinates and headers (in order,
// repeats kept) from -f, its key and value from -J.
type kcatRecord struct {
	Topic     string
	Partition int
	Offset    int64
	Headers   []stream.Header
	Key       string
	Value     []byte // nil for a tombstone
}

// kcatTopic reads every record of topic with kcat, over TCP like any consumer: once with
// -f for the headers (kcat's "%h": name=value, comma-separated) and once with -J for
// keys and values, joined by partition and offset.
func kcatTopic(t *testing.T, broker, topic string, binary bool) []kcatRecord {
	t.Helper()
	run := func(args ...string) []byte {
		cmd := exec.Command("kcat", append([]string{"-C", "-b", broker, "-t", topic, "-e", "-q"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat %s %v: %v\n%s", topic, args, err, stderr.String())
		}
		return out
	}
	var recs []kcatRecord
	at := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(run("-f", "%p\t%o\t%h\n")), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		r := kcatRecord{Topic: topic}
		fmt.Sscan(f[0], &r.Partition)
		fmt.Sscan(f[1], &r.Offset)
		if len(f) == 3 && f[2] != "" {
			for kv := range strings.SplitSeq(f[2], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers = append(r.Headers, stream.Header{Key: k, Value: []byte(v)})
			}
		}
		at[f[0]+"/"+f[1]] = len(recs)
		recs = append(recs, r)
	}
	if binary {
		return recs
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(run("-J")), "\n"), "\n") {
		if line == "" {
			continue
		}
		var j struct {
			Partition int     `json:"partition"`
			Offset    int64   `json:"offset"`
			Key       *string `json:"key"`
			Payload   *string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("kcat -J %s: %v: %s", topic, err, line)
		}
		i, ok := at[fmt.Sprintf("%d/%d", j.Partition, j.Offset)]
		if !ok {
			t.Fatalf("kcat -J %s: record %d/%d not printed with -f", topic, j.Partition, j.Offset)
		}
		if j.Key != nil {
			recs[i].Key = *j.Key
		}
		if j.Payload != nil {
			recs[i].Value = []byte(*j.Payload)
		}
	}
	return recs
}

// checkCloudEvent says what is wrong with r's CloudEvents headers ("" nothing): a valid
// binary-mode set (stream.ParseCloudEvent, content-type aside for the binary models
// topic), cairn's type for the topic, the deployment's source, the schema of the type,
// ce_time (but on a model version's records, which keep no time: stream.Events), and
// (JSON topics) ce_id the record's content id and ce_subject its key.
func checkCloudEvent(r kcatRecord, want stream.EventType) string {
	hs := slices.Clone(r.Headers)
	ct := ""
	for i, h := range hs {
		if h.Key == stream.HeaderContentType {
			ct = string(h.Value)
			hs[i].Value = []byte("application/json") // ParseCloudEvent reads JSON inputs
		}
	}
	ev, ok, err := stream.ParseCloudEvent(stream.Message{Headers: hs}, stream.Limits{MaxIDBytes: 1024})
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return "no CloudEvents headers"
	case ev.Type != want || ev.Source != "urn:cairn:test-deployment" || (ev.Time.IsZero() && want != stream.TypeModel):
		return fmt.Sprintf("type %q, source %q, time %v", ev.Type, ev.Source, ev.Time)
	case ct != want.ContentType():
		return fmt.Sprintf("content-type %q, want %q", ct, want.ContentType())
	case want.Schema() != "" && ev.DataSchema != schemas.URI(want.Schema()):
		return fmt.Sprintf("dataschema %q", ev.DataSchema)
	}
	if r.Value != nil {
		m := stream.Message{Topic: r.Topic, Key: []byte(r.Key), Value: r.Value}
		if ev.ID != stream.ContentID(m) {
			return fmt.Sprintf("ce_id %s is not the record's content id %s", ev.ID, stream.ContentID(m))
		}
		if ev.Subject != r.Key {
			return fmt.Sprintf("ce_subject %q, key %q", ev.Subject, r.Key)
		}
	}
	return ""
}

// ceInput is an input record with a producer's CloudEvents headers.
func ceInput(topic, key, id string, value []byte) stream.Message {
	return stream.Message{Topic: topic, Key: []byte(key), Value: value, Headers: []stream.Header{
		{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte(id)},
		{Key: "ce_source", Value: []byte("urn:example:producer")}, {Key: "ce_type", Value: []byte("com.example.cairn.input")},
		{Key: "content-type", Value: []byte("application/json")}}}
}

// TestCloudEventsOverTCP runs cairnd (the binary) on its embedded broker, drives
// upserts (a third of them with a producer's CloudEvents headers, one with invalid
// ones), a data subject's points, two queries (one without a request, answered under its
// ce_id), a deletion and a subject's erasure, and reads every topic with kcat: every
// record of the output topics carries a valid set of CloudEvents headers, every JSON
// record is valid under its schema, and every lineage event under OpenLineage's; each
// refit and the erasure have a START and a COMPLETE. Then the erasure receipt, from the
// daemon's page and from cairnctl, verifies; an altered copy of the audit record written
// to the topic makes the page, cairnctl audit receipt and cairnctl audit verify flag it.
func TestCloudEventsOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairnd and cairnctl and runs the daemon")
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not on PATH")
	}
	t0 := time.Now()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, name := range []string{"cairnd", "cairnctl"} {
		bins[name] = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bins[name], "../"+name).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	broker, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(dir, "cairnd.yaml")
	if err := os.WriteFile(cfgPath, []byte(ceConfig(filepath.Join(dir, "data"), broker, httpAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCairnd(t, bins["cairnd"], cfgPath, httpAddr)
	waitFor(t, p, "the daemon answers", func(s statusView) bool { return s.ok })
	built := time.Since(t0)

	tp := config.Default().Kafka.Topics
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{broker}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	send := func(msgs ...stream.Message) {
		t.Helper()
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	send(ceInputs(t, tp.Train)...)
	waitFor(t, p, "a model", func(s statusView) bool { return s.Model > 0 && !s.RefitRunning })

	lim := stream.Limits{InputDim: 6}
	q1, _ := stream.EncodeQuery(stream.QueryEvent{Request: "q-plain", ID: "p01"}, lim)
	send(stream.Message{Topic: tp.Queries, Key: []byte("q-plain"), Value: q1},
		ceInput(tp.Queries, "ce-q-1", "ce-q-1", []byte(`{"v":1,"x":[0.1,0.2,0.3,0.4,0.5,0.6]}`)))
	del, _ := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: "p07", Request: "del-1"}, lim)
	er, _ := stream.EncodeErasure(stream.ErasureEvent{Op: stream.ErasureErase, Subject: "alice", Request: "erase-1"}, lim)
	send(stream.Message{Topic: tp.Train, Key: []byte("p07"), Value: del}, ceInput(stream.DefaultErasuresTopic, "alice", "erase-ev-1", er))
	waitFor(t, p, "the deletion and the erasure audited", func(s statusView) bool {
		return s.Points == 60-1-3 && s.PendingDeletions == 0 && s.Queries >= 2 && !s.RefitRunning && s.erasuresDone
	})
	time.Sleep(time.Second) // the outbox publishes the last commit's records
	driven := time.Since(t0)

	checkTopics(t, broker, tp)
	checked := time.Since(t0)
	checkReceipts(t, bins["cairnctl"], broker, httpAddr, tp.Audits, w)
	stopGracefully(t, p)
	t.Logf("times: built and started %v, driven %v, topics checked %v, receipts and tampering %v",
		built.Round(time.Millisecond), (driven - built).Round(time.Millisecond), (checked - driven).Round(time.Millisecond),
		(time.Since(t0) - checked).Round(time.Millisecond))
}

// ceInputs are the training inputs: 57 upserts p00..p56 (every third with a producer's
// CloudEvents headers), 3 about the data subject alice, one with invalid CloudEvents
// headers (a dead letter, bad_header) and one that is not JSON.
func ceInputs(t *testing.T, topic string) []stream.Message {
	r := rand.New(rand.NewPCG(3, 3))
	lim := stream.Limits{InputDim: 6}
	var msgs []stream.Message
	for i := range 60 {
		x := make([]float64, 6)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		lab := int64(i % 4)
		ev := stream.TrainEvent{Op: stream.OpUpsert, ID: fmt.Sprintf("p%02d", i), X: x, Label: &lab}
		if i >= 57 {
			ev.ID, ev.Subject = fmt.Sprintf("a%d", i-57), "alice"
		}
		v, err := stream.EncodeTrain(ev, lim)
		if err != nil {
			t.Fatal(err)
		}
		m := stream.Message{Topic: topic, Key: []byte(ev.ID), Value: v}
		if i%3 == 0 {
			m = ceInput(topic, ev.ID, "up-"+ev.ID, v)
		}
		msgs = append(msgs, m)
	}
	bad := ceInput(topic, "bad-ce", "up-bad", []byte(`{"v":1,"op":"delete","id":"bad-ce"}`))
	bad.Headers[0].Value = []byte("0.3")
	return append(msgs, bad, stream.Message{Topic: topic, Key: []byte("junk"), Value: []byte("not json")})
}

// statusView is what the test waits on in /status.
type statusView struct {
	ok                       bool
	Model                    uint64
	Points, PendingDeletions int
	Queries                  uint64
	RefitRunning             bool
	erasuresDone             bool
}

func waitFor(t *testing.T, p *proc, what string, done func(statusView) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s, ok := p.status()
		v := statusView{ok: ok, Model: s.Model, Points: s.Points, PendingDeletions: s.PendingDeletions, Queries: s.Queries,
			RefitRunning: s.RefitRunning}
		v.erasuresDone = s.Erasures != nil && len(s.Erasures.Pending) == 0 && s.Erasures.Last != nil
		if done(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %+v; the end of the daemon's log:\n%s", what, v, p.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkTopics reads every topic with kcat and checks the output topics' headers and
// records, and the inputs' answers.
func checkTopics(t *testing.T, broker string, tp config.Topics) {
	t.Helper()
	outputs := []struct {
		topic  string
		typ    stream.EventType
		binary bool
	}{{tp.Attributions, stream.TypeAttribution, false}, {tp.Audits, stream.TypeAudit, false}, {tp.DLQ, stream.TypeDeadLetter, false},
		{tp.Status, stream.TypeStatus, false}, {tp.Lineage, stream.TypeLineage, false}, {tp.Models, stream.TypeModel, true}}
	total, withCE := 0, 0
	byTopic := map[string][]kcatRecord{}
	for _, o := range outputs {
		recs := kcatTopic(t, broker, o.topic, o.binary)
		byTopic[o.topic] = recs
		good := 0
		for _, r := range recs {
			if why := checkCloudEvent(r, o.typ); why != "" {
				t.Errorf("%s/%d@%d: %s", o.topic, r.Partition, r.Offset, why)
				continue
			}
			good++
			if o.binary || r.Value == nil {
				continue
			}
			var err error
			if o.typ == stream.TypeLineage {
				err = schematest.ValidateRunEvent(r.Value)
			} else {
				err = schematest.Validate(o.typ.Schema(), r.Value)
			}
			if err != nil {
				t.Errorf("%s/%d@%d is not valid under its schema: %v\n%s", o.topic, r.Partition, r.Offset, err, r.Value)
			}
		}
		total, withCE = total+len(recs), withCE+good
		t.Logf("%-18s %4d records, %4d with valid CloudEvents headers (%.0f%%)", o.topic, len(recs), good, 100*float64(good)/float64(max(len(recs), 1)))
		if len(recs) == 0 {
			t.Errorf("%s: no records", o.topic)
		}
	}
	t.Logf("output topics: %d of %d records carry valid CloudEvents headers (%.1f%%)", withCE, total, 100*float64(withCE)/float64(total))
	for _, in := range []string{tp.Train, tp.Queries, stream.DefaultErasuresTopic} {
		recs := kcatTopic(t, broker, in, false)
		n := 0
		for _, r := range recs {
			if len(r.Headers) > 0 && strings.HasPrefix(r.Headers[0].Key, "ce_") {
				n++
			}
		}
		t.Logf("%-18s %4d records (inputs and claims), %d with a producer's CloudEvents headers", in, len(recs), n)
	}
	checkAnswers(t, byTopic, tp)
	checkLineage(t, byTopic[tp.Lineage])
}

// checkAnswers: the query without a request is answered under its ce_id, the upsert
// with invalid CloudEvents headers is a dead letter bad_header.
func checkAnswers(t *testing.T, byTopic map[string][]kcatRecord, tp config.Topics) {
	t.Helper()
	var answered []string
	for _, r := range byTopic[tp.Attributions] {
		var a stream.Attribution
		if json.Unmarshal(r.Value, &a) == nil {
			answered = append(answered, a.Request)
		}
	}
	if !slices.Contains(answered, "q-plain") || !slices.Contains(answered, "ce-q-1") {
		t.Errorf("answered %v: want q-plain and ce-q-1 (the ce_id of a query without a request)", answered)
	}
	reasons := map[string]string{}
	for _, r := range byTopic[tp.DLQ] {
		var d stream.DeadLetter
		if json.Unmarshal(r.Value, &d) == nil {
			reasons[string(d.Key)] = string(d.Reason)
		}
	}
	if reasons["bad-ce"] != string(stream.ReasonBadHeader) || reasons["junk"] != string(stream.ReasonBadJSON) {
		t.Errorf("dead letters %v: want bad-ce bad_header and junk bad_json", reasons)
	}
}

// checkLineage: every run has a START, the refits and the erasure a COMPLETE with the
// same run id, and each event is keyed by its run id.
func checkLineage(t *testing.T, recs []kcatRecord) {
	t.Helper()
	type run struct {
		job    string
		events []string
	}
	runs := map[string]*run{}
	var order []string
	for _, r := range recs {
		var ev lineage.RunEvent
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("lineage %d@%d: %v", r.Partition, r.Offset, err)
		}
		if r.Key != ev.Run.RunID {
			t.Errorf("lineage event keyed %q, run id %q", r.Key, ev.Run.RunID)
		}
		if runs[ev.Run.RunID] == nil {
			runs[ev.Run.RunID] = &run{job: ev.Job.Namespace + "/" + ev.Job.Name}
			order = append(order, ev.Run.RunID)
		}
		runs[ev.Run.RunID].events = append(runs[ev.Run.RunID].events, string(ev.EventType))
	}
	jobs := map[string]int{}
	for _, id := range order {
		r := runs[id]
		jobs[r.job]++
		if !slices.Contains(r.events, "START") || !slices.Contains(r.events, "COMPLETE") {
			t.Errorf("run %s of %s: events %v, want START and COMPLETE", id, r.job, r.events)
		}
	}
	if jobs["cairn-test/cairnd.refit"] < 1 || jobs["cairn-test/cairnd.erasure"] != 1 {
		t.Errorf("runs per job %v: want refits and one erasure", jobs)
	}
	t.Logf("lineage: %d events, runs per job %v", len(recs), jobs)
}

// checkReceipts: the erasure's and the deletion's receipts verify on the daemon's page
// and from cairnctl; then an altered copy of the erasure's audit record on the topic is
// flagged by the page, by cairnctl audit receipt and by cairnctl audit verify.
func checkReceipts(t *testing.T, cairnctl, broker, httpAddr, audits string, w *stream.Writer) {
	t.Helper()
	ctl := func(args ...string) (string, error) {
		cmd := exec.Command(cairnctl, append(args, "--brokers", broker, "--http", httpAddr)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return out.String(), err
	}
	page := func(req string) string {
		resp, err := http.Get("http://" + httpAddr + "/ui/erasure/" + req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /ui/erasure/%s: %d %s", req, resp.StatusCode, b)
		}
		return string(b)
	}
	var er receipt.Receipt
	for _, req := range []string{"erase-1", "del-1"} {
		out, err := ctl("audit", "receipt", "--request", req, "--format", "json")
		var r receipt.Receipt
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || !r.Verified {
			t.Fatalf("cairnctl audit receipt --request %s: %v\n%s", req, err, out)
		}
		if !strings.Contains(page(req), "Verified:") {
			t.Errorf("/ui/erasure/%s does not say verified", req)
		}
		if req == "erase-1" {
			er = r
		}
	}
	if len(er.SubjectHash) != 64 || len(er.Erased.Points) != 3 || len(er.Erased.Topics) == 0 || er.Erased.ModelAfter == 0 {
		t.Errorf("erasure receipt: subject hash %q, %d points, tombstones %v, model after %d; want 3 points with their tombstones",
			er.SubjectHash, len(er.Erased.Points), er.Erased.Topics, er.Erased.ModelAfter)
	}
	// The tampering: a copy of the erasure's record whose body leaves out a point (the
	// hash and the signature kept), keyed like it.
	msgs, err := stream.ReadAll(context.Background(), stream.Config{Brokers: []string{broker}}, audits)
	if err != nil {
		t.Fatal(err)
	}
	var forged []byte
	for _, m := range msgs {
		var a stream.Audit
		if string(m.Key) == "erase-1" && json.Unmarshal(m.Value, &a) == nil {
			a.Body = strings.Replace(a.Body, `"id":"a1"`, `"id":"zz"`, 1)
			forged, _ = json.Marshal(a)
		}
	}
	if forged == nil {
		t.Fatal("the erasure's audit record is not on the topic")
	}
	if err := w.Write(context.Background(), stream.Message{Topic: audits, Key: []byte("erase-1"), Value: forged}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page("erase-1"), "Does not verify") {
		t.Error("/ui/erasure/erase-1 does not flag the altered record")
	}
	out, err := ctl("audit", "receipt", "--request", "erase-1", "--format", "json")
	var r receipt.Receipt
	if err == nil || json.Unmarshal([]byte(out), &r) != nil || r.Verified || len(r.Records) != 2 {
		t.Errorf("cairnctl audit receipt after tampering: %v, verified %v, %d records\n%s", err, r.Verified, len(r.Records), out)
	}
	out, err = ctl("audit", "verify")
	var rep struct {
		OK bool `json:"ok"`
	}
	if err == nil || json.Unmarshal([]byte(out), &rep) != nil || rep.OK {
		t.Errorf("cairnctl audit verify after tampering: %v\n%s", err, out)
	}
	t.Logf("after tampering: receipt problems %q", r.Problems)
}
