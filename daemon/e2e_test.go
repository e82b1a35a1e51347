package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/serving/gradref"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// e2eConfig is a small MNIST daemon: mlp:784-32-10, h = 2, s = 128, m = 16 per view,
// k = 16, short fits, quick idle refits; data in dir, broker and HTTP on free ports.
func e2eConfig(dir string) config.Config {
	c := config.Default()
	c.DataDir = dir
	c.HTTP = "127.0.0.1:0"
	c.Kafka.EmbeddedBroker = "127.0.0.1:0"
	c.Kafka.Partitions = 2
	c.Model = config.Backbone{Arch: "mlp:784-32-10", Seed: 3, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 128}
	c.Pool.M = 16
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 16, 3, 64, 2
	c.Refit.Idle = 300 * time.Millisecond
	c.Refit.DeleteDebounce = 100 * time.Millisecond
	c.Refit.MinPoints = 32
	c.Audit = config.Audit{Random: 10, Reference: 100, Test: 30}
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// running is one daemon under test with a reader collecting its output topics.
type running struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	out    map[string][]stream.Message // by topic
	stopR  context.CancelFunc
	wg     sync.WaitGroup
}

func startDaemon(t testing.TB, cfg config.Config) *running {
	t.Helper()
	return startDaemonWith(t, cfg, nil)
}

// startDaemonWith is startDaemon with setup applied to the daemon before Run.
func startDaemonWith(t testing.TB, cfg config.Config, setup func(*Daemon)) *running {
	t.Helper()
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, done: make(chan error, 1), out: map[string][]stream.Message{}}
	go func() { r.done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-r.done:
		t.Fatalf("daemon stopped before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon not ready after 30 s")
	}
	topics := cfg.Kafka.Topics
	rd, err := stream.NewReader(stream.ReaderConfig{Kafka: stream.Config{Brokers: d.Brokers()},
		Topics: []string{topics.Attributions, topics.Audits, topics.DLQ, topics.Status, topics.Lineage},
		Start:  func(string, int) (int64, bool, error) { return 0, false, nil }, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopR := context.WithCancel(context.Background())
	r.stopR = stopR
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = rd.Run(rctx, func(_ context.Context, batch []stream.Message) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, m := range batch {
				r.out[m.Topic] = append(r.out[m.Topic], m)
			}
			return nil
		})
	}()
	t.Cleanup(func() { checkRecords(t, cfg, r) }) // after stop (cleanups run last first)
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop shuts the daemon down gracefully and checks Run's error.
func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.stopR()
	r.wg.Wait()
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("Run did not return within 30 s of cancel")
	}
}

// messages returns a copy of what arrived on topic.
func (r *running) messages(topic string) []stream.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.out[topic])
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceMsgs writes raw messages to topic through a stream.Writer.
func produceMsgs(t testing.TB, brokers []string, msgs []stream.Message) {
	t.Helper()
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: brokers}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// upserts encodes the rows of set as upsert messages.
func upserts(t testing.TB, topic string, set *dataset.Set, rows []int) []stream.Message {
	t.Helper()
	lim := stream.Limits{InputDim: set.D}
	var out []stream.Message
	for _, i := range rows {
		lab := int64(set.Labels[i])
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &lab}, lim)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stream.Message{Topic: topic, Key: []byte(set.IDs[i]), Value: v})
	}
	return out
}

func deleteMsg(t testing.TB, topic, id, request string) stream.Message {
	v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: request}, stream.Limits{InputDim: 1})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Topic: topic, Key: []byte(id), Value: v}
}

func queryMsg(t testing.TB, topic string, ev stream.QueryEvent, dim int) stream.Message {
	v, err := stream.EncodeQuery(ev, stream.Limits{InputDim: dim})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Topic: topic, Key: []byte(ev.Request), Value: v}
}

// keyed returns the decoded events of topic keyed by request (the last one wins).
func keyed[T any](t testing.TB, r *running, topic string) map[string]T {
	out := map[string]T{}
	for _, m := range r.messages(topic) {
		var v T
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatalf("%s: %v in %s", topic, err, m.Value)
		}
		out[string(m.Key)] = v
	}
	return out
}

// storedModel reads the latest model of the store at dir (the daemon must be stopped).
func storedModel(t *testing.T, dir string) storage.Model {
	t.Helper()
	st := openStore(t, filepath.Join(dir, StateFile))
	defer st.Close()
	var m storage.Model
	err := st.View(func(tx *storage.ReadTx) error {
		var ok bool
		var err error
		m, ok, err = tx.LatestModel()
		if !ok && err == nil {
			err = fmt.Errorf("no model stored")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEndToEnd drives a daemon through the embedded broker over TCP: MNIST upserts with
// bad events mixed in (dead-lettered while the good ones flow), the first fit, queries
// by id and by input (certified top-K answers naming serving landmarks), deletions of a
// landmark, of a non-landmark and of an unknown id with their hash-chained audits, and
// then exact unlearning: a fresh daemon fed the surviving points serves a byte-identical
// model. It also checks that the deleted landmark is never named after its deletion and
// that its raw input bytes are gone from the bbolt file.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end daemon test")
	}
	const n = 240
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	test, err := dataset.Open("mnist", "test", 5)
	if err != nil {
		t.Fatal(err)
	}
	dirA := t.TempDir()
	cfg := e2eConfig(dirA)
	tp := cfg.Kafka.Topics
	r := startDaemon(t, cfg)
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	msgs := upserts(t, tp.Train, set, rows)
	bad := []stream.Message{
		{Topic: tp.Train, Key: []byte("bad1"), Value: []byte(`{"v":1,"op":"upsert","id":"bad1","x":[1,2]}`)},
		{Topic: tp.Train, Key: []byte("bad2"), Value: []byte(`not json`)},
		{Topic: tp.Train, Key: []byte("bad3"), Value: []byte(`{"v":1,"op":"drop","id":"x"}`)},
	}
	produceMsgs(t, r.d.Brokers(), slices.Concat(msgs[:100], bad, msgs[100:]))
	waitFor(t, "the first model on all points", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && s.ModelPoints == n && !s.RefitRunning
	})
	waitFor(t, "3 dead letters", 10*time.Second, func() bool { return len(r.messages(tp.DLQ)) == 3 })
	for _, m := range r.messages(tp.DLQ) {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil || dl.Reason == "" || dl.Topic != tp.Train {
			t.Errorf("dead letter %s: %v", m.Value, err)
		}
	}
	waitFor(t, "model and drift status events", 10*time.Second, func() bool {
		kinds := map[string]bool{}
		for _, m := range r.messages(tp.Status) {
			var s stream.Status
			if json.Unmarshal(m.Value, &s) == nil && string(m.Key) == s.Kind {
				kinds[s.Kind] = true
			}
		}
		return kinds["model"] && kinds["drift"]
	})
	st := r.d.Status()
	if st.Points != n || st.Ingest.DeadLetters != 3 {
		t.Fatalf("status points %d dead letters %d, want %d and 3", st.Points, st.Ingest.DeadLetters, n)
	}
	// HTTP: ready, the status JSON, and metrics that agree with it.
	get := func(path string) string {
		resp, err := http.Get("http://" + r.d.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	get("/readyz")
	var hs StatusReport
	if err := json.Unmarshal([]byte(get("/status")), &hs); err != nil || hs.Points != n || hs.Model != st.Model ||
		hs.GradientRows != n || hs.GradientRowsError != "" {
		t.Errorf("/status %+v (%v), want %d points, model %d and %d gradient rows", hs, err, n, st.Model, n)
	}
	// Per-label counts: every stored point and every landmark under its label, the same
	// numbers on /metrics, and a row per label on the UI's overview.
	var lp, ll int
	for _, c := range hs.Labels {
		lp, ll = lp+c.Points, ll+c.Landmarks
	}
	if len(hs.Labels) < 2 || lp != hs.Points || ll != hs.Landmarks {
		t.Errorf("/status labels %v: %d points and %d landmarks, want %d and %d", hs.Labels, lp, ll, hs.Points, hs.Landmarks)
	}
	metrics := get("/metrics")
	for l, c := range hs.Labels {
		for _, want := range []string{fmt.Sprintf("cairn_points_by_label{label=%q} %d\n", l, c.Points),
			fmt.Sprintf("cairn_landmarks_by_label{label=%q} %d\n", l, c.Landmarks)} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	if ov := get("/ui/"); !strings.Contains(ov, "Landmarks by label") {
		t.Errorf("the UI overview has no per-label table")
	}
	for _, want := range []string{
		fmt.Sprintf("cairn_pool_points %d\n", n),
		fmt.Sprintf("cairn_model_version %d\n", st.Model),
		`cairn_events_total{result="dead_letter",topic="cairn.train"} 3`,
		fmt.Sprintf(`cairn_events_total{result="applied",topic="cairn.train"} %d`, n),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Queries: by stored id, by input, one invalid, one unknown id.
	qs := []stream.Message{
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-id", ID: set.IDs[5], K: 5}, set.D),
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-x", X: test.Row(0), Score: "entk"}, set.D),
		{Topic: tp.Queries, Key: []byte("q-bad"), Value: []byte(`{"v":1,"request":"q-bad","x":[1]}`)},
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-unknown", ID: "no-such-id"}, set.D),
	}
	produceMsgs(t, r.d.Brokers(), qs)
	waitFor(t, "2 attributions and 5 dead letters", 30*time.Second, func() bool {
		return len(r.messages(tp.Attributions)) == 2 && len(r.messages(tp.DLQ)) == 5
	})
	atts := keyed[stream.Attribution](t, r, tp.Attributions)
	s := r.d.serve.model.Load()
	for req, want := range map[string]int{"q-id": 5, "q-x": cfg.Query.K} {
		a, ok := atts[req]
		if !ok {
			t.Fatalf("no attribution for %s", req)
		}
		if a.Model != s.Version || len(a.TopK) != want {
			t.Errorf("%s: model %d topk %d, want model %d and %d entries", req, a.Model, len(a.TopK), s.Version, want)
		}
		switch a.Verdict {
		case "certified", "uncertified", "fit_limited", "unstable":
		default:
			t.Errorf("%s: verdict %q", req, a.Verdict)
		}
		// q-id takes the default ranking (a gradient ranking: every stored point), q-x names entk.
		wantScore := map[string]string{"q-id": cfg.Query.Score, "q-x": "entk"}[req]
		if a.Score != wantScore || a.Stability == nil || a.Stable != (*a.Stability >= cfg.Query.StableJaccard) {
			t.Errorf("%s: score %q stable %v stability %v, want the ranking %q with a known stability", req, a.Score, a.Stable, a.Stability, wantScore)
		}
		if f := a.ResidualFraction; f == nil || !(*f >= 0 && *f <= 1) {
			t.Errorf("%s: residual fraction %v, want one in [0, 1]", req, f)
		}
		for i, e := range a.TopK {
			landmark := slices.Contains(s.LandmarkIDs, e.ID) && (e.View == "A" || e.View == "B")
			point := slices.Contains(set.IDs, e.ID) && e.View == "" && certify.Ranking(a.Score).AllPoints()
			if !(landmark || point) || !(e.Radius >= 0) {
				t.Errorf("%s: topk[%d] = %+v is neither a serving landmark nor (gradient) a stored point, with a radius", req, i, e)
			}
			if i > 0 && e.Score > a.TopK[i-1].Score {
				t.Errorf("%s: topk not sorted by score", req)
			}
		}
		if a.Lower-a.Upper > 0 != (a.Verdict == "certified" || a.Verdict == "unstable") {
			t.Errorf("%s: separation %v vs verdict %s", req, a.Lower-a.Upper, a.Verdict)
		}
	}
	checkExactAnswer(t, s, atts["q-x"], test.Row(0))
	checkGradientAnswer(t, s, atts["q-id"], set, set.Row(5))
	// GET /model alone reproduces the answer's scores: the exported x and ω with the
	// backbone the export names.
	var ex serving.ModelExport
	if err := json.Unmarshal([]byte(get("/model")), &ex); err != nil {
		t.Fatal(err)
	}
	if ex.Model != s.Version || len(ex.Landmarks) != len(s.ActiveLandmarks()) || ex.Weights != "seeded:3" || ex.Arch != cfg.Model.Arch {
		t.Fatalf("/model: version %d, %d landmarks, weights %q, arch %q; want %d, %d, seeded:3, %s",
			ex.Model, len(ex.Landmarks), ex.Weights, ex.Arch, s.Version, len(s.ActiveLandmarks()), cfg.Model.Arch)
	}
	eb, _ := entk.NewBackbone(ex.Arch, 3)
	ews := eb.NewWorkspace()
	for _, e := range atts["q-x"].TopK {
		found := false
		for _, l := range ex.Landmarks {
			if l.ID == e.ID && l.View == e.View {
				found = true
				want := entk.ExactKernel(eb, l.X, test.Row(0), ews)
				if atts["q-x"].Score == string(certify.Displacement) {
					want *= l.Omega
				}
				if math.Abs(want-e.Score) > e.Radius {
					t.Errorf("/model recomputes %s/%s as %v, the answer says %v ± %v", e.ID, e.View, want, e.Score, e.Radius)
				}
			}
		}
		if !found {
			t.Errorf("/model lacks the answer's landmark %s/%s", e.ID, e.View)
		}
	}
	// The in-process answer equals the Kafka one for a query by id (same draw).
	inproc, err := r.d.Answer(stream.QueryEvent{Request: "q-id", ID: set.IDs[5], K: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inproc.TopK, atts["q-id"].TopK) {
		t.Errorf("in-process answer %v differs from the Kafka answer %v", inproc.TopK, atts["q-id"].TopK)
	}

	// Deletions: a landmark named by the first answer, a non-landmark, an unknown id.
	victim := atts["q-x"].TopK[0].ID
	var plain string
	for _, id := range set.IDs {
		if !slices.Contains(s.LandmarkIDs, id) {
			plain = id
			break
		}
	}
	victimX := slices.Clone(r.d.train.cache.Load().Get(victim).X)
	before := r.d.Status().Model
	produceMsgs(t, r.d.Brokers(), []stream.Message{
		deleteMsg(t, tp.Train, victim, "del-landmark"),
		deleteMsg(t, tp.Train, plain, "del-plain"),
		deleteMsg(t, tp.Train, "never-stored", "del-unknown"),
	})
	// As soon as the deletion is applied, answers stop naming the landmark.
	waitFor(t, "the deletion applied", 30*time.Second, func() bool { return r.d.Status().Points == n-2 })
	after, err := r.d.Answer(stream.QueryEvent{Request: "q-after", X: test.Row(0)})
	if err != nil {
		t.Fatal(err)
	}
	var exAfter serving.ModelExport
	if err := json.Unmarshal([]byte(get("/model")), &exAfter); err != nil {
		t.Fatal(err)
	}
	for _, l := range exAfter.Landmarks {
		if l.ID == victim {
			t.Fatalf("/model lists the deleted landmark %q", victim)
		}
	}
	for _, e := range after.TopK {
		if e.ID == victim {
			t.Fatalf("answer after the deletion names the deleted landmark %q", victim)
		}
	}
	waitFor(t, "3 audits", 60*time.Second, func() bool { return len(r.messages(tp.Audits)) >= 3 })
	audits := keyed[stream.Audit](t, r, tp.Audits)
	la, pa, ua := audits["del-landmark"], audits["del-plain"], audits["del-unknown"]
	if !la.Known || !pa.Known {
		t.Errorf("audits of stored points say known=false: %+v, %+v", la, pa)
	}
	if !la.WasLandmark || la.ModelBefore != before || la.ModelAfter <= before || la.ID != victim {
		t.Errorf("landmark audit %+v: want was_landmark, model %d → later", la, before)
	}
	if !(la.Percentile >= 0 && la.Percentile <= 1) || !(la.PValue > 0 && la.PValue <= 1) {
		t.Errorf("landmark audit percentile %v p %v", la.Percentile, la.PValue)
	}
	if pa.WasLandmark || pa.ModelAfter <= before {
		t.Errorf("non-landmark audit %+v", pa)
	}
	var ub ingest.AuditBody
	if err := json.Unmarshal([]byte(ua.Body), &ub); err != nil || ub.Known || ua.Known || ua.ModelAfter != ua.ModelBefore {
		t.Errorf("unknown-id audit %+v (body %v): want known=false and no refit", ua, err)
	}
	if ub.Tombstone != nil {
		t.Errorf("unknown-id audit names a tombstone %+v", ub.Tombstone)
	}
	// The audits of stored points say where their tombstones landed, and the policy.
	for _, a := range []stream.Audit{la, pa} {
		var body ingest.AuditBody
		if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
			t.Fatal(err)
		}
		tb := body.Tombstone
		if tb == nil || tb.Topic != tp.Train || tb.Partition < 0 || tb.Offset < 0 || tb.Policy != "compact" {
			t.Errorf("audit of %s: tombstone %+v, want its topic, partition, offset and policy compact", a.ID, tb)
		}
	}
	checkSignedAudits(t, r, tp.Audits, tp.Status)
	// The chain verifies from the events alone: hash = SHA-256(prev_hash ‖ body).
	evs := r.messages(tp.Audits)
	prev := make([]byte, 32)
	for i, m := range evs {
		var a stream.Audit
		if err := json.Unmarshal(m.Value, &a); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(append(slices.Clone(prev), a.Body...))
		if a.Seq != uint64(i+1) || a.PrevHash != hex.EncodeToString(prev) || a.Hash != hex.EncodeToString(h[:]) {
			t.Fatalf("audit %d: seq %d prev %s hash %s, want seq %d prev %x hash %x", i, a.Seq, a.PrevHash, a.Hash, i+1, prev, h)
		}
		prev = h[:]
	}
	waitFor(t, "quiescence after the deletions", 60*time.Second, func() bool {
		s := r.d.Status()
		return !s.RefitRunning && s.PendingDeletions == 0 && s.ModelPoints == n-2
	})
	gotID := r.d.Status().ModelID
	r.stop(t)

	// The deleted point's raw input is not in the file.
	raw, err := os.ReadFile(filepath.Join(dirA, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	pat := make([]byte, 0, 8*len(victimX))
	for _, v := range victimX {
		pat = binary.LittleEndian.AppendUint64(pat, math.Float64bits(v))
	}
	if bytes.Contains(raw, pat) {
		t.Errorf("the deleted point's input bytes are still in the bbolt file")
	}
	// Nor in a slot file (storage keeps the inputs there), while a surviving point's are.
	slots := filepath.Join(dirA, StateFile+".slots")
	scanFiles(t, slots, map[string][]byte{victim: pat}, slotBytesOf(r.d, set, victim, plain))
	// Nor in the embedded broker's files: the deletions' tombstones and a compaction
	// before their audits went out erased both deleted points' upserts, while a
	// surviving point's upsert is still there (so the scan does find upserts).
	scanFiles(t, filepath.Join(dirA, "kafka"), map[string][]byte{
		victim: msgs[slices.Index(set.IDs, victim)].Value, plain: msgs[slices.Index(set.IDs, plain)].Value,
	}, msgs[slices.IndexFunc(set.IDs, func(id string) bool { return id != victim && id != plain })].Value)
	modelA := storedModel(t, dirA)

	// Exact unlearning: a fresh daemon fed the surviving points.
	var surv []int
	for i, id := range set.IDs {
		if id != victim && id != plain {
			surv = append(surv, i)
		}
	}
	dirB := t.TempDir()
	rb := startDaemon(t, e2eConfig(dirB))
	produceMsgs(t, rb.d.Brokers(), upserts(t, tp.Train, set, surv))
	waitFor(t, "the fresh daemon's model", 120*time.Second, func() bool {
		s := rb.d.Status()
		return s.ModelPoints == len(surv) && !s.RefitRunning
	})
	if got := rb.d.Status().ModelID; got != gotID {
		t.Errorf("fresh daemon model %s, deleting daemon %s", got, gotID)
	}
	rb.stop(t)
	modelB := storedModel(t, dirB)
	modelA.Version, modelB.Version = 0, 0
	if !slices.Equal(modelA.Landmarks, modelB.Landmarks) || !slices.Equal(modelA.A.Data, modelB.A.Data) ||
		!slices.Equal(modelA.A0.Data, modelB.A0.Data) || !slices.Equal(modelA.B.Data, modelB.B.Data) ||
		!bytes.Equal(modelA.Meta, modelB.Meta) {
		t.Errorf("stored models differ: exact unlearning failed")
	}
}

// checkExactAnswer checks an attribution of the exact variance model against the slow
// reference: every active landmark's score k*(x_ℓ, x)·ω_ℓ from full Jacobians
// (entk.ExactKernel), each reported score within its radius of it, and, when certified,
// the top-K set equal to the reference top-K. It then answers the same query on the
// sketched path (the same model without exact rows) and checks that it splits δ over the
// landmarks only and commits to its draw's seed by hash.
func checkExactAnswer(t *testing.T, s *serving.Model, a stream.Attribution, x []float64) {
	t.Helper()
	if a.VarianceModel != certify.VarianceExactKernel || s.Exact == nil {
		t.Fatalf("answer variance model %q (exact rows %v), want %q at the default memory budget", a.VarianceModel, s.Exact != nil, certify.VarianceExactKernel)
	}
	if a.Seed != 0 || a.SeedHash != "" {
		t.Errorf("exact answer carries seed %d / hash %q; it uses no draw", a.Seed, a.SeedHash)
	}
	ws := s.Backbone.NewWorkspace()
	in := s.Backbone.InDim()
	ref := map[string]float64{}
	active := s.ActiveLandmarks()
	scores := make([]float64, len(active))
	for i, l := range active {
		k := entk.ExactKernel(s.Backbone, s.LandmarkX[l*in:(l+1)*in], x, ws)
		scores[i] = k * s.Omega[l]
		if a.Score == string(certify.Similarity) {
			scores[i] = k
		}
		ref[s.LandmarkIDs[l]+"/"+string(s.Views[l])] = scores[i]
	}
	for _, e := range a.TopK {
		want := ref[e.ID+"/"+e.View]
		if math.Abs(e.Score-want) > e.Radius || e.Radius > 1e-6*math.Abs(want) {
			t.Errorf("landmark %s/%s: score %v, exact %v, radius %v", e.ID, e.View, e.Score, want, e.Radius)
		}
	}
	top := make([]int, len(a.TopK))
	certify.TopKTo(top, scores)
	want := map[string]bool{}
	for _, i := range top {
		l := active[i]
		want[s.LandmarkIDs[l]+"/"+string(s.Views[l])] = true
	}
	if a.Verdict == string(certify.Certified) {
		for _, e := range a.TopK {
			if !want[e.ID+"/"+e.View] {
				t.Errorf("certified top-%d holds %s/%s, not in the exact top-%d", len(top), e.ID, e.View, len(top))
			}
		}
	}
	// The exact model uses no evaluation draw; the sketched copy gets one, as New makes
	// when the rows do not fit.
	sk, err := s.Sketched(1, "test/eval", 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sk.AnswerRanked(new(serving.Workspace), x, len(a.TopK), 0.05, certify.Ranking(a.Score))
	if err != nil {
		t.Fatal(err)
	}
	// With exact rows for the crossing landmarks the verdict can only improve, and a
	// certified set is still the exact top-K.
	skr, err := s.Sketched(1, "test/eval", len(active))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := skr.AnswerRanked(new(serving.Workspace), x, len(a.TopK), 0.05, certify.Ranking(a.Score))
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict == certify.Certified && cr.Verdict != certify.Certified {
		t.Errorf("refining the crossing landmarks lost a certificate")
	}
	if cr.Verdict == certify.Certified {
		for _, e := range cr.TopK {
			l := e.Index
			if !want[s.LandmarkIDs[l]+"/"+string(s.Views[l])] {
				t.Errorf("refined sketched answer certifies %s/%c, not in the exact top-K", s.LandmarkIDs[l], s.Views[l])
			}
		}
	}
	t.Logf("exact answer %s; sketched %s, with crossing rows exact %s", a.Verdict, c.Verdict, cr.Verdict)
	if c.VarianceModel != certify.VarianceConservative || c.Allocation.PerLandmark != 0.05/float64(len(active)) {
		t.Errorf("sketched answer: variance model %q, δ_ℓ %v, want conservative and δ/M = %v", c.VarianceModel,
			c.Allocation.PerLandmark, 0.05/float64(len(active)))
	}
}

// checkGradientAnswer checks an answer a to the query x under either gradient ranking
// against the slow reference (gradref.Score, and its norms for gradient_cosine) over
// every labelled stored point of set: the model's rows are those points, every score is
// the reference's within its radius (float32 rounding: relative 1e-6; a cosine's 1e-6
// absolute), a certified top-K is the reference's, and the stability is 1.
func checkGradientAnswer(t *testing.T, s *serving.Model, a stream.Attribution, set *dataset.Set, x []float64) {
	t.Helper()
	cosine := a.Score == string(certify.GradientCosine)
	if !certify.Ranking(a.Score).AllPoints() || s.Grad == nil || len(s.Grad.IDs) != set.N {
		t.Fatalf("answer ranking %q; model gradient rows %v (%v), want %d", a.Score, s.Grad != nil, s.GradErr, set.N)
	}
	if a.Stability == nil || *a.Stability != 1 || !a.Stable || a.VarianceModel != certify.VarianceExactKernel {
		t.Errorf("gradient answer: stability %v stable %v variance %q, want 1, true, %q", a.Stability, a.Stable, a.VarianceModel, certify.VarianceExactKernel)
	}
	row := map[string]int{}
	for i, id := range set.IDs {
		row[id] = i
	}
	ref := make([]float64, len(s.Grad.IDs))
	for j, id := range s.Grad.IDs {
		i := row[id]
		sc, vn, rn := gradref.Score(s.Backbone, x, set.Row(i), set.Labels[i], s.Grad.Classes())
		if ref[j] = sc; cosine {
			ref[j] = sc / (vn * rn)
		}
	}
	for _, e := range a.TopK {
		j := slices.Index(s.Grad.IDs, e.ID)
		tol := 1e-6 * math.Abs(ref[max(j, 0)])
		if cosine {
			tol = 1e-6
		}
		if j < 0 || math.Abs(e.Score-ref[j]) > e.Radius || e.Radius > tol {
			t.Errorf("point %s: score %v, reference %v, radius %v", e.ID, e.Score, ref[max(j, 0)], e.Radius)
		}
	}
	top := make([]int, len(a.TopK))
	certify.TopKTo(top, ref)
	if a.Verdict == string(certify.Certified) {
		for _, i := range top {
			if !slices.ContainsFunc(a.TopK, func(e stream.Scored) bool { return e.ID == s.Grad.IDs[i] }) {
				t.Errorf("certified top-%d lacks %s, of the reference top-%d", len(top), s.Grad.IDs[i], len(top))
			}
		}
	} else {
		t.Errorf("gradient answer %s, want certified (deterministic radii at rounding level)", a.Verdict)
	}
}

// checkSignedAudits: every audit event is signed by the daemon's key, which /audit/key
// publishes; a tampered copy does not verify; and the chain head is published as a
// signed checkpoint on the status topic.
func checkSignedAudits(t *testing.T, r *running, audits, status string) {
	t.Helper()
	resp, err := http.Get("http://" + r.d.HTTPAddr() + "/audit/key")
	if err != nil {
		t.Fatal(err)
	}
	var key AuditKey
	err = json.NewDecoder(resp.Body).Decode(&key)
	resp.Body.Close()
	if err != nil || key != r.d.AuditKey() {
		t.Fatalf("/audit/key %+v (%v), want %+v", key, err, r.d.AuditKey())
	}
	pub, err := hex.DecodeString(key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	dec32 := func(s string) [32]byte {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("hash %q", s)
		}
		return [32]byte(b)
	}
	var last stream.Audit
	for _, m := range r.messages(audits) {
		var a stream.Audit
		if err := json.Unmarshal(m.Value, &a); err != nil {
			t.Fatal(err)
		}
		sig, err := hex.DecodeString(a.Sig)
		if err != nil || a.KeyID != key.KeyID || !auditsig.VerifyRecord(pub, a.Seq, dec32(a.PrevHash), dec32(a.Hash), sig) {
			t.Errorf("audit %d: key %q, signature does not verify (%v)", a.Seq, a.KeyID, err)
		}
		if auditsig.VerifyRecord(pub, a.Seq+1, dec32(a.PrevHash), dec32(a.Hash), sig) {
			t.Errorf("audit %d: its signature verifies for seq %d too", a.Seq, a.Seq+1)
		}
		if a.Seq > last.Seq {
			last = a
		}
	}
	// The checkpoint leaves in the head's transaction but on the status topic, which the
	// test's reader may fetch later than the audits: wait for it, then check every one.
	head := func() bool {
		for _, m := range r.messages(status) {
			var st stream.Status
			var cp Checkpoint
			if json.Unmarshal(m.Value, &st) == nil && st.Kind == "audit_checkpoint" && json.Unmarshal(st.Data, &cp) == nil &&
				cp.Seq == last.Seq && cp.Hash == last.Hash {
				return true
			}
		}
		return false
	}
	waitFor(t, fmt.Sprintf("the signed checkpoint of the chain head %d", last.Seq), 30*time.Second, head)
	for _, m := range r.messages(status) {
		var st stream.Status
		var cp Checkpoint
		if json.Unmarshal(m.Value, &st) != nil || st.Kind != "audit_checkpoint" || json.Unmarshal(st.Data, &cp) != nil {
			continue
		}
		sig, _ := hex.DecodeString(cp.Sig)
		if !auditsig.VerifyCheckpoint(pub, cp.Seq, dec32(cp.Hash), sig) {
			t.Errorf("checkpoint %+v does not verify", cp)
		}
	}
}

// scanFiles reads every file under dir (the embedded broker's data, the slot files) and
// fails if any holds one of the gone values, or if none holds kept (then the scan
// would prove nothing).
func scanFiles(t *testing.T, dir string, gone map[string][]byte, kept []byte) {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for id, v := range gone {
			if bytes.Contains(b, v) {
				t.Errorf("the bytes of deleted point %s are still in %s", id, path)
			}
		}
		found = found || bytes.Contains(b, kept)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("no file under %s holds a surviving point's bytes: the scan reads nothing", dir)
	}
}

// slotBytesOf is the input bytes, as storage writes them to a slot, of a point of set
// that is neither of the deleted ones.
func slotBytesOf(_ *Daemon, set *dataset.Set, deleted ...string) []byte {
	for i, id := range set.IDs {
		if !slices.Contains(deleted, id) {
			var b []byte
			for _, v := range set.Row(i) {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			}
			return b
		}
	}
	return nil
}
