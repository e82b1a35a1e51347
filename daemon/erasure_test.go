package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// The subjects of the erasure tests: their ids must not leave the daemon in plain text.
const (
	subjectA = "alice@example.org"
	subjectB = "bob@example.org"
)

// subjectUpserts is upserts of set's rows, each about subject[row] ("" or absent: none).
func subjectUpserts(t testing.TB, topic string, set *dataset.Set, rows []int, subject map[int]string) []stream.Message {
	t.Helper()
	var out []stream.Message
	for _, i := range rows {
		lab := int64(set.Labels[i])
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &lab, Subject: subject[i]},
			stream.Limits{InputDim: set.D})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stream.Message{Topic: topic, Key: []byte(set.IDs[i]), Value: v})
	}
	return out
}

// erasureMsg is a request of the erasures topic, keyed by its subject.
func erasureMsg(t testing.TB, op stream.ErasureOp, subject, request string) stream.Message {
	t.Helper()
	v, err := stream.EncodeErasure(stream.ErasureEvent{Op: op, Subject: subject, Request: request}, stream.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Topic: stream.DefaultErasuresTopic, Key: []byte(subject), Value: v}
}

// readTopic reads every record of topic now on the broker.
func readTopic(t testing.TB, brokers []string, topic string) []stream.Message {
	t.Helper()
	kc := stream.Config{Brokers: brokers}
	ends, err := stream.EndOffsets(context.Background(), kc, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := 0 // partitions not read to their end
	for _, e := range ends {
		if e > 0 {
			left++
		}
	}
	if left == 0 {
		return nil
	}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: kc, Topics: []string{topic},
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }, MaxWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A compacted topic holds fewer records than its end offset: the read ends at each
	// partition's last offset (the newest record of its key, which compaction keeps),
	// else after a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []stream.Message
	_ = r.Run(ctx, func(_ context.Context, batch []stream.Message) error {
		for _, m := range batch {
			if m.Offset < ends[m.Partition] {
				out = append(out, m)
			}
			if m.Offset == ends[m.Partition]-1 {
				left--
			}
		}
		if left <= 0 {
			cancel()
		}
		return nil
	})
	return out
}

// inputBytes is row i of set as storage writes it (float64 little-endian).
func inputBytes(set *dataset.Set, i int) []byte {
	var b []byte
	for _, v := range set.Row(i) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// TestErasureEndToEnd drives a data subject's erasure through the embedded broker: the
// subject's points among others, one erasure request, one signed audit that lists every
// point with its tombstone; the points' inputs then gone from the state file, the slot
// files and the broker's files; the subject's later upsert dead-lettered
// (subject_erased), and its bytes gone from the broker's files too, until an unblock
// lets the subject in again; malformed requests dead-lettered; and the subject's id in
// none of the daemon's outputs, logs, /status or /metrics.
func TestErasureEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end daemon test")
	}
	const n = 120
	set, err := dataset.Open("mnist", "train", n+2)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	dir := t.TempDir()
	cfg := e2eConfig(dir)
	tp := cfg.Kafka.Topics
	logs := &syncBuffer{}
	r := startDaemonWith(t, cfg, func(d *Daemon) { d.log = zerolog.New(logs).Level(zerolog.DebugLevel) })
	subject := map[int]string{}
	var alice []int
	for i := 10; i < 20; i++ {
		subject[i], alice = subjectA, append(alice, i)
	}
	for i := 20; i < 25; i++ {
		subject[i] = subjectB
	}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	ups := subjectUpserts(t, tp.Train, set, rows, subject)
	produceMsgs(t, r.d.Brokers(), ups)
	waitFor(t, "the first model on all points", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && s.ModelPoints == n && !s.RefitRunning
	})
	key, err := ingest.ReadSubjectKey(filepath.Join(dir, ingest.SubjectKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	hashA := ingest.SubjectHex(key.Hash(subjectA))
	var filed []string
	if err := r.d.store.View(func(tx *storage.ReadTx) error {
		filed, err = tx.SubjectPoints(key.Hash(subjectA))
		return err
	}); err != nil || len(filed) != len(alice) {
		t.Fatalf("the store files %v under the subject (%v), want %d points", filed, err, len(alice))
	}

	// The erasure, and two requests the daemon must refuse.
	before := r.d.Status().Model
	bad := erasureMsg(t, stream.ErasureErase, subjectB, "gdpr-bad-key")
	bad.Key = []byte("carol@example.org")
	produceMsgs(t, r.d.Brokers(), []stream.Message{erasureMsg(t, stream.ErasureErase, subjectA, "gdpr-1"), bad,
		{Topic: stream.DefaultErasuresTopic, Key: []byte(subjectA), Value: []byte(`{"v":1,"op":"forget","subject":"` + subjectA + `","request":"r"}`)}})
	waitFor(t, "the erasure's audit", 60*time.Second, func() bool { _, ok := keyed[stream.Audit](t, r, tp.Audits)["gdpr-1"]; return ok })
	a := keyed[stream.Audit](t, r, tp.Audits)["gdpr-1"]
	var body ingest.SubjectAuditBody
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
		t.Fatal(err)
	}
	if a.SubjectHash != hashA || a.ID != hashA || !a.Known || a.ModelBefore != before || a.ModelAfter <= before ||
		body.Kind != ingest.KindErasure || len(body.Points) != len(alice) || len(a.Points) != len(alice) {
		t.Fatalf("erasure audit %+v\nbody %+v", a, body)
	}
	for i, p := range body.Points {
		tb := p.Tombstone
		if p.ID != set.IDs[alice[i]] || tb == nil || tb.Topic != tp.Train || tb.Partition < 0 || tb.Offset < 0 || tb.Policy != "compact" {
			t.Errorf("erased point %d: %+v, tombstone %+v", i, p, tb)
		}
	}
	t.Logf("erasure audit: %d points, model %d → %d, body %d bytes", len(body.Points), a.ModelBefore, a.ModelAfter, len(a.Body))
	checkSignedAudits(t, r, tp.Audits, tp.Status)
	waitFor(t, "2 dead letters of requests", 10*time.Second, func() bool { return len(r.messages(tp.DLQ)) == 2 })
	var reasons []stream.Reason
	for _, m := range r.messages(tp.DLQ) {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil || dl.Topic != stream.DefaultErasuresTopic || dl.Key != nil {
			t.Errorf("dead letter %s: %v", m.Value, err)
		}
		reasons = append(reasons, dl.Reason)
	}
	slices.Sort(reasons)
	if !slices.Equal(reasons, []stream.Reason{stream.ReasonKeyMismatch, stream.ReasonUnknownOp}) {
		t.Errorf("request dead letters %v", reasons)
	}

	// A later upsert of the subject is refused; unblocked, the next one is stored.
	late := subjectUpserts(t, tp.Train, set, []int{n}, map[int]string{n: subjectA})
	produceMsgs(t, r.d.Brokers(), late)
	waitFor(t, "the refused upsert's dead letter", 30*time.Second, func() bool { return len(r.messages(tp.DLQ)) == 3 })
	var dl stream.DeadLetter
	if err := json.Unmarshal(r.messages(tp.DLQ)[2].Value, &dl); err != nil || dl.Reason != stream.ReasonSubjectErased || dl.Raw != nil {
		t.Errorf("dead letter of the subject's later upsert: %+v (%v)", dl, err)
	}
	produceMsgs(t, r.d.Brokers(), []stream.Message{erasureMsg(t, stream.ErasureUnblock, subjectA, "gdpr-2")})
	waitFor(t, "the unblock's audit", 30*time.Second, func() bool { _, ok := keyed[stream.Audit](t, r, tp.Audits)["gdpr-2"]; return ok })
	if u := keyed[stream.Audit](t, r, tp.Audits)["gdpr-2"]; !u.Known || u.SubjectHash != hashA {
		t.Errorf("unblock audit %+v", u)
	}
	produceMsgs(t, r.d.Brokers(), subjectUpserts(t, tp.Train, set, []int{n + 1}, map[int]string{n + 1: subjectA}))
	waitFor(t, "the subject's upsert after the unblock", 30*time.Second, func() bool { return r.d.Status().Points == n-len(alice)+1 })

	// /status and /metrics show the erasure by its hash.
	get := func(path string) string {
		resp, err := http.Get("http://" + r.d.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var st StatusReport
	status := get("/status")
	if err := json.Unmarshal([]byte(status), &st); err != nil || st.Erasures == nil || st.Erasures.Last == nil ||
		st.Ingest.Erasures != 1 || st.Ingest.ErasedPoints != uint64(len(alice)) {
		t.Errorf("/status %s (%v)", status, err)
	}
	if st.Erasures != nil && st.Erasures.Last != nil {
		t.Logf("last published request: %+v", *st.Erasures.Last)
	}
	metrics := get("/metrics")
	for _, want := range []string{"cairn_erasure_seconds_count 1\n", `cairn_erasure_requests_total{op="erase"} 1`,
		`cairn_erasure_requests_total{op="unblock"} 1`, "cairn_erased_points_total 10\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	waitFor(t, "quiescence", 60*time.Second, func() bool {
		s := r.d.Status()
		return !s.RefitRunning && s.PendingDeletions == 0 && len(s.Erasures.Pending) == 0
	})

	// No output names a subject: the topics cairnd writes (and its own records on the
	// training topic), its logs, /status, /metrics and the UI.
	brokers := r.d.Brokers()
	var outputs [][]byte
	var models []stream.Message
	for _, topic := range []string{tp.Audits, tp.DLQ, tp.Status, tp.Attributions, tp.Models} {
		ms := readTopic(t, brokers, topic)
		for _, m := range ms {
			outputs = append(outputs, m.Key, m.Value)
		}
		if topic == tp.Models {
			models = ms
		}
	}
	// The erased points' records left the models topic (their inputs are deflated there,
	// out of the byte scans' sight), while the surviving points' are on it.
	erased, points := map[string]bool{}, 0
	for _, i := range alice {
		erased[set.IDs[i]] = true
	}
	for _, m := range models {
		if id, ok := strings.CutPrefix(string(m.Key), "p/"); ok && m.Value != nil {
			points++
			if erased[id] {
				t.Errorf("the models topic still holds the point record of erased %s", id)
			}
		}
	}
	if points == 0 {
		t.Error("no point records on the models topic: the check above saw nothing")
	}
	claims := 0
	for _, m := range readTopic(t, brokers, tp.Train) {
		if _, ok := m.Header(ingest.VersionHeader); ok || m.Value == nil {
			outputs, claims = append(outputs, m.Key, m.Value), claims+1
		}
	}
	if claims < len(alice) {
		t.Errorf("%d of cairnd's records on the training topic, want at least a tombstone per erased point", claims)
	}
	outputs = append(outputs, []byte(logs.String()), []byte(status), []byte(metrics), []byte(get("/ui/")))
	for _, b := range outputs {
		for _, s := range []string{subjectA, subjectB, base64.StdEncoding.EncodeToString([]byte(subjectA)),
			base64.StdEncoding.EncodeToString([]byte(subjectB))} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("subject %q in plain text in %.300q", s, b)
			}
		}
	}
	if !strings.Contains(logs.String(), hashA) {
		t.Errorf("the logs do not name the erasure by the subject's hash")
	}
	r.stop(t)

	// The erased inputs are gone from the state file, the slot files and the broker's
	// files, while a surviving point's are there.
	raw, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	gone, goneUps := map[string][]byte{}, map[string][]byte{}
	for _, i := range alice {
		gone[set.IDs[i]], goneUps[set.IDs[i]] = inputBytes(set, i), ups[i].Value
		if bytes.Contains(raw, gone[set.IDs[i]]) {
			t.Errorf("the input of erased point %s is still in the bbolt file", set.IDs[i])
		}
	}
	scanFiles(t, filepath.Join(dir, StateFile+".slots"), gone, inputBytes(set, 0))
	goneUps["refused "+set.IDs[n]] = late[0].Value // the refused upsert's bytes too
	scanFiles(t, filepath.Join(dir, "kafka"), goneUps, ups[0].Value)
}

// TestErasureDeadline measures the erasure deadline at scale (CAIRN_ERASURE_BENCH=1;
// CAIRN_ERASURE_N points, 10,000 by default): three subjects of 100 MNIST points each
// among n, erased one after the other on the embedded broker. For each it logs the
// time from the request's Kafka timestamp to the acknowledgement of its audit (what
// cairn_erasure_seconds observes), split into the request's application, the refit
// after it and the audit's publication after the refit.
func TestErasureDeadline(t *testing.T) {
	if os.Getenv("CAIRN_ERASURE_BENCH") == "" {
		t.Skip("a measurement: set CAIRN_ERASURE_BENCH=1")
	}
	n := 10000
	if v := os.Getenv("CAIRN_ERASURE_N"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatal(err)
		}
	}
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	dir := t.TempDir()
	cfg := e2eConfig(dir)
	cfg.Refit.Idle = 2 * time.Second
	tp := cfg.Kafka.Topics
	r := startDaemon(t, cfg)
	subjects := []string{"s1@example.org", "s2@example.org", "s3@example.org"}
	subject := map[int]string{}
	for k, s := range subjects {
		for j := range 100 {
			subject[(k*100+j)*(n/300)] = s // spread over the data
		}
	}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	t0 := time.Now()
	produceMsgs(t, r.d.Brokers(), subjectUpserts(t, tp.Train, set, rows, subject))
	waitFor(t, "the first model on all points", 30*time.Minute, func() bool {
		s := r.d.Status()
		return s.ModelPoints == n && !s.RefitRunning
	})
	t.Logf("n = %d: ingested and first model in %v (refit %.2f s)", n, time.Since(t0), r.d.Status().RefitSeconds)
	for k, s := range subjects {
		req := fmt.Sprintf("deadline-%d", k)
		produceMsgs(t, r.d.Brokers(), []stream.Message{erasureMsg(t, stream.ErasureErase, s, req)})
		waitFor(t, "the erasure's audit", 30*time.Minute, func() bool {
			st := r.d.Status()
			return st.Erasures != nil && st.Erasures.Last != nil && st.Erasures.Last.Request == req
		})
		st := r.d.Status()
		last := st.Erasures.Last
		var body ingest.SubjectAuditBody
		if err := json.Unmarshal([]byte(keyed[stream.Audit](t, r, tp.Audits)[req].Body), &body); err != nil {
			t.Fatal(err)
		}
		if last.Points != 100 {
			t.Errorf("%s erased %d points, want 100", req, last.Points)
		}
		t.Logf("%s: %d points, request → audit acknowledged %.3f s = applied after %.3f s + refit done after %.3f s + published after %.3f s (refit %.2f s)",
			req, last.Points, last.Seconds, body.Applied.Sub(body.Requested).Seconds(), body.RefitDone.Sub(body.Applied).Seconds(),
			last.AfterRefitSeconds, st.RefitSeconds)
	}
}
