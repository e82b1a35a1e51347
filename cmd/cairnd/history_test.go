package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// historyConfig is the YAML of the daemons under test, a small MNIST model, in either
// broker mode: an external broker at broker, or (broker == "") the embedded one at
// embedded, which dies with every kill.
func historyConfig(dir, broker, embedded, http string) string {
	b := fmt.Sprintf("brokers: [%s]", broker)
	if broker == "" {
		b = fmt.Sprintf("embedded_broker: %s", embedded)
	}
	return fmt.Sprintf(`data_dir: %s
http: %s
shutdown_timeout: 5s
kafka:
  %s
  partitions: 2
model: {arch: "mlp:784-32-10", seed: 5, untrained: true}
sketch: {h: 2, s: 128}
pool: {m: 16}
fit: {k: 16, epochs: 2, batch: 64, fits: 2}
refit: {idle: 400ms, min_points: 32, delete_debounce: 100ms, points_changed: 1000}
audit: {random: 5, reference: 100, test: 30}
limits: {batch_events: 64}
`, dir, http, b)
}

// historyInput is the seeded workload: upserts, re-upserts, deletions of stored and of
// never-stored ids, bad messages on cairn.train, and queries by id on cairn.queries;
// and bursts on one id produced back to back (an upsert, its deletion and a re-upsert,
// and longer alternations), whose re-upserts reach the partition before the deletion's
// tombstone: compaction must not erase them from the broker (ingest doc.go, "Versions").
func historyInput(t *testing.T, set *dataset.Set, seed uint64) []stream.Message {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	tp := config.Default().Kafka.Topics
	lim := stream.Limits{InputDim: set.D}
	var msgs []stream.Message
	enc := func(ev stream.TrainEvent) {
		v, err := stream.EncodeTrain(ev, lim)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.Message{Topic: tp.Train, Key: []byte(ev.ID), Value: v})
	}
	upsert := func(id string, row int) {
		lab := int64(set.Labels[row])
		enc(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: set.Row(row), Label: &lab})
	}
	bursts := [][]string{ // u: an upsert with another row, d: a deletion
		{"u", "d", "u"}, {"u", "d", "u", "d"}, {"d", "u", "d", "u"}, {"u", "d", "u", "d", "u"},
	}
	for i := range set.N {
		lab := int64(set.Labels[i])
		enc(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[i], X: set.Row(i), Label: &lab})
		switch {
		case i > 100 && r.IntN(20) == 0:
			id := set.IDs[r.IntN(i)]
			for k, op := range bursts[r.IntN(len(bursts))] {
				if op == "u" {
					upsert(id, r.IntN(set.N))
				} else {
					enc(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: fmt.Sprintf("burst-%d-%d", i, k)})
				}
			}
		case i > 100 && r.IntN(10) == 0:
			j := r.IntN(set.N)
			lab := int64(set.Labels[j])
			enc(stream.TrainEvent{Op: stream.OpUpsert, ID: set.IDs[r.IntN(i)], X: set.Row(j), Label: &lab})
		case i > 100 && r.IntN(25) == 0:
			id := set.IDs[r.IntN(i)]
			if r.IntN(4) == 0 {
				id = "ghost-" + strconv.Itoa(i)
			}
			enc(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: "del-" + strconv.Itoa(i)})
		case i > 200 && r.IntN(15) == 0:
			q := "q-" + strconv.Itoa(i)
			v, err := stream.EncodeQuery(stream.QueryEvent{Request: q, ID: set.IDs[r.IntN(i)], K: 5}, lim)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, stream.Message{Topic: tp.Queries, Key: []byte(q), Value: v})
		case r.IntN(100) == 0:
			msgs = append(msgs, stream.Message{Topic: tp.Train, Key: []byte("bad"), Value: []byte(`{"v":1,"op":"upsert","id":"bad","x":[1]}`)})
		}
	}
	return msgs
}

// produceAll writes msgs in chunks to addr, retrying each chunk until the broker
// acknowledges it (the broker may be down, or die with the daemon, meanwhile). A
// retried chunk may land twice; the history checks read what the topics hold.
func produceAll(ctx context.Context, addr string, msgs []stream.Message) error {
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{addr}},
		Attempts: 3, BackoffMax: 200 * time.Millisecond, Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	for lo := 0; lo < len(msgs); lo += 40 {
		chunk := msgs[lo:min(lo+40, len(msgs))]
		for w.Write(ctx, chunk...) != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // spread the input over the kills (about 13 s)
	}
	return nil
}

// readTopics reads every message of the topics from addr (each topic's whole
// content, per partition in offset order).
func readTopics(t *testing.T, addr string, topics ...string) map[string][]stream.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	kcfg := stream.Config{Brokers: []string{addr}}
	out := map[string][]stream.Message{}
	for _, topic := range topics {
		ends, err := stream.EndOffsets(ctx, kcfg, topic)
		if err != nil {
			t.Fatal(err)
		}
		// Read each partition to its end offset (compaction leaves gaps, so count
		// offsets, not messages; a partition's last record is never compacted).
		remaining := 0
		for _, e := range ends {
			if e > 0 {
				remaining++
			}
		}
		if remaining == 0 {
			continue
		}
		// kafka-go gives the broker MaxWait to start its answer to a fetch, and the test's
		// broker (in this process, slow under -race) assembles a megabyte-sized answer
		// first: a 20 ms MaxWait timed out every fetch and read nothing in 120 s. The
		// broker answers as soon as it has data (MinBytes 1), so a long MaxWait costs
		// nothing here.
		r, err := stream.NewReader(stream.ReaderConfig{Kafka: kcfg, Topics: []string{topic},
			Start: func(string, int) (int64, bool, error) { return 0, false, nil }, MaxWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := map[int]bool{}
		last := map[int]int64{} // the highest offset read per partition, for the failure message
		err = r.Run(rctx, func(_ context.Context, batch []stream.Message) error {
			for _, m := range batch {
				last[m.Partition] = max(last[m.Partition], m.Offset)
				if m.Offset >= ends[m.Partition] {
					continue
				}
				out[topic] = append(out[topic], m)
				if m.Offset == ends[m.Partition]-1 && !done[m.Partition] {
					done[m.Partition] = true
					remaining--
				}
			}
			if remaining == 0 {
				stop()
			}
			return nil
		})
		stop()
		if err != nil || remaining > 0 {
			t.Fatalf("read %s: %d partitions not read to their ends %v, highest offsets read %v (%v)", topic, remaining, ends, last, err)
		}
		slices.SortStableFunc(out[topic], func(a, b stream.Message) int {
			if a.Partition != b.Partition {
				return a.Partition - b.Partition
			}
			return int(a.Offset - b.Offset)
		})
	}
	return out
}

// checkHistory checks the outputs against the inputs the topics hold: every delete
// message has exactly one audit (by its source coordinates) and the chain verifies;
// every query has an answer or (its id not stored) a dead letter; no answer on a model fitted after an id's last deletion
// names that id.
func checkHistory(t *testing.T, in, out map[string][]stream.Message, st *storage.Store, compacted bool) {
	t.Helper()
	tp := config.Default().Kafka.Topics
	deletes := map[string]bool{}  // topic/partition/offset of each delete message
	lastOp := map[string]string{} // id → "upsert" or "delete", in offset order (key = id, one partition)
	for _, m := range in[tp.Train] {
		if _, claim := m.Header(ingest.VersionHeader); claim {
			continue // cairnd's own republication, no input
		}
		var ev struct {
			Op string `json:"op"`
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Value, &ev) != nil || ev.ID == "bad" {
			continue
		}
		lastOp[ev.ID] = ev.Op
		if ev.Op == "delete" {
			deletes[fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)] = true
		}
	}
	audited := map[string]stream.Audit{}
	deletedAfter := map[string]uint64{} // id → model_after of its audit
	for _, m := range out[tp.Audits] {
		var a stream.Audit
		var body struct {
			Source string `json:"source"`
			Known  bool   `json:"known"`
		}
		if json.Unmarshal(m.Value, &a) != nil || json.Unmarshal([]byte(a.Body), &body) != nil {
			t.Fatalf("audit %s does not decode", m.Value)
		}
		if prev, ok := audited[body.Source]; ok && (prev.Seq != a.Seq || prev.Hash != a.Hash) {
			t.Errorf("delete %s has two audits: seq %d and %d", body.Source, prev.Seq, a.Seq)
		}
		audited[body.Source] = a
		if body.Known && lastOp[a.ID] == "delete" {
			deletedAfter[a.ID] = max(deletedAfter[a.ID], a.ModelAfter)
		}
	}
	if !compacted {
		for src := range deletes {
			if _, ok := audited[src]; !ok {
				t.Errorf("delete %s has no audit", src)
			}
		}
		for src := range audited {
			if !deletes[src] {
				t.Errorf("audit of %s, which is no delete message", src)
			}
		}
	}
	if err := st.VerifyAudit(); err != nil {
		t.Errorf("audit chain: %v", err)
	}
	var records int
	if err := st.View(func(tx *storage.ReadTx) error {
		return tx.ForEachAudit(1, func(storage.AuditRecord) error { records++; return nil })
	}); err != nil || records != len(audited) || (!compacted && records != len(deletes)) {
		t.Errorf("%d audit records in the store (%v), want one per audited delete message (%d) and per delete message (%d)",
			records, err, len(audited), len(deletes))
	}
	queries := map[string]bool{}
	for _, m := range in[tp.Queries] {
		queries[string(m.Key)] = true
	}
	answered := map[string]bool{}
	for _, m := range out[tp.Attributions] {
		var a stream.Attribution
		if json.Unmarshal(m.Value, &a) != nil {
			t.Fatalf("attribution %s does not decode", m.Value)
		}
		answered[a.Request] = true
		for _, s := range a.TopK {
			if v, ok := deletedAfter[s.ID]; ok && a.Model >= v && v > 0 {
				t.Errorf("answer %s on model %d names %s, deleted for good before model %d", a.Request, a.Model, s.ID, v)
			}
		}
	}
	// A query by an id that is not stored when it is read is dead-lettered instead.
	for _, m := range out[tp.DLQ] {
		var dl stream.DeadLetter
		if json.Unmarshal(m.Value, &dl) == nil && dl.Topic == tp.Queries {
			answered[string(dl.Key)] = true
		}
	}
	for q := range queries {
		if !answered[q] {
			t.Errorf("query %s has neither an answer nor a dead letter", q)
		}
	}
	t.Logf("history: %d train and %d query messages, %d deletes audited, %d answers", len(in[tp.Train]), len(in[tp.Queries]),
		len(audited), len(out[tp.Attributions]))
}

// TestHistory is a Jepsen-style check over TCP, in both broker modes: a seeded workload
// of upserts, re-upserts, deletions, bad messages and queries is produced while cairnd
// is killed with SIGKILL 20 times at random moments, with disk-full windows (every
// state-file write fails with ENOSPC; cairnd built with -tags faultinject) and, with the
// external broker, broker restarts. The embedded broker dies with every kill. Then the
// history is checked (checkHistory) and the final state hash must equal that of one
// uninterrupted daemon fed the messages the topics hold: every event applied exactly
// once.
func TestHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairnd and kills it 40 times")
	}
	set, err := dataset.Open("mnist", "train", 900)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "cairnd")
	if out, err := exec.Command("go", "build", "-tags", "faultinject", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, mode := range []string{"external", "embedded"} {
		t.Run(mode, func(t *testing.T) { runHistory(t, bin, set, mode) })
	}
}

func runHistory(t *testing.T, bin string, set *dataset.Set, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tp := config.Default().Kafka.Topics
	topics := []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(20, uint64(len(mode))))
	var b *stream.Broker
	bcfg := stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topics: topics, DataDir: filepath.Join(dir, "broker"),
		TopicConfigs: daemon.TopicConfigs(config.Default())}
	startBroker := func() {
		var err error
		for range 100 {
			if b, err = stream.StartBroker(ctx, bcfg); err == nil {
				bcfg.Addr = b.Addr()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal(err)
	}
	startBroker()
	defer func() { b.Close() }()
	killedDir := filepath.Join(dir, "killed")
	cfgPath, httpK, produceTo := filepath.Join(dir, "killed.yaml"), freeAddr(t), bcfg.Addr
	external, embedded := bcfg.Addr, ""
	if mode == "embedded" {
		embedded, external = freeAddr(t), ""
		produceTo = embedded
	}
	if err := os.WriteFile(cfgPath, []byte(historyConfig(killedDir, external, embedded, httpK)), 0o644); err != nil {
		t.Fatal(err)
	}
	msgs := historyInput(t, set, 20)
	prodErr := make(chan error, 1)
	go func() { prodErr <- produceAll(ctx, produceTo, msgs) }()

	const kills = 20
	for k := range kills {
		p := startCairnd(t, bin, cfgPath, httpK)
		time.Sleep(time.Duration(300+r.IntN(900)) * time.Millisecond)
		switch {
		case k%5 == 2: // a disk-full window
			enospc := filepath.Join(killedDir, enospcFile)
			if err := os.WriteFile(enospc, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(500+r.IntN(1000)) * time.Millisecond)
			if err := os.Remove(enospc); err != nil {
				t.Fatal(err)
			}
		case k%5 == 4 && mode == "external": // a broker restart under the running daemon
			b.Close()
			time.Sleep(time.Duration(200+r.IntN(800)) * time.Millisecond)
			startBroker()
		}
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			log, _ := os.ReadFile(cfgPath + ".log")
			t.Fatalf("kill %d: %v; cairnd log:\n%s", k+1, err, log)
		}
		<-p.done
	}
	p := startCairnd(t, bin, cfgPath, httpK)
	if err := <-prodErr; err != nil {
		t.Fatalf("producing: %v", err)
	}
	startCairndReady(t, p, produceTo)
	want := survivors(msgs) // what was produced (a retried chunk lands twice, to the same effect)
	waitQuiet(t, p, want)
	waitSettled(t, p, produceTo)
	in := readTopics(t, produceTo, tp.Train, tp.Queries)
	out := readTopics(t, produceTo, tp.Attributions, tp.Audits, tp.DLQ)
	stopGracefully(t, p)
	st, err := storage.Open(filepath.Join(killedDir, daemon.StateFile), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkHistory(t, in, out, st, mode == "embedded")
	checkBrokerHolds(t, in[tp.Train], st, set.D)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The embedded broker compacted cairn.train (the deletions' tombstones), so the replay
	// numbers its records differently: compare everything but the offsets there.
	hash := stateHash
	if mode == "embedded" {
		hash = contentHash
	}
	killed := hash(t, cfgPath)
	if log, err := os.ReadFile(cfgPath + ".log"); err == nil {
		t.Logf("%s: %d kills; the killed daemon logged %d disk-full failures and %d publish retries", mode, kills,
			strings.Count(string(log), "no space left on device"), strings.Count(string(log), "publishing the outbox failed"))
	}

	// The uninterrupted run: a fresh broker holding the same messages, partition by
	// partition in the same order, and a daemon that is never interrupted.
	cbcfg := stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topics: topics, TopicConfigs: daemon.TopicConfigs(config.Default())}
	cb, err := stream.StartBroker(ctx, cbcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	for _, topic := range []string{tp.Train, tp.Queries} {
		if err := replay(ctx, cb.Addr(), in[topic]); err != nil {
			t.Fatal(err)
		}
	}
	cleanPath, httpC := filepath.Join(dir, "clean.yaml"), freeAddr(t)
	if err := os.WriteFile(cleanPath, []byte(historyConfig(filepath.Join(dir, "clean"), cb.Addr(), "", httpC)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCairnd(t, bin, cleanPath, httpC)
	quiesce(t, c, want)
	if clean := hash(t, cleanPath); killed != clean {
		t.Fatalf("%s: state after %d kills %s, uninterrupted %s", mode, kills, killed, clean)
	}
}

// replay writes msgs (one topic, sorted by partition and offset) to the broker at addr
// so that each lands in the same partition at the same offset: one partition at a
// time, in order, keyed as before (the partition is a function of the key).
func replay(ctx context.Context, addr string, msgs []stream.Message) error {
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{addr}}})
	if err != nil {
		return err
	}
	defer w.Close()
	for _, m := range msgs {
		if err := w.Write(ctx, stream.Message{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: m.Headers}); err != nil {
			return err
		}
	}
	return nil
}

// waitSettled waits, after waitQuiet, until the training topic stops growing and the
// daemon has read it to its end: the republications the last tombstones caused are
// published and read back.
func waitSettled(t *testing.T, p *proc, addr string) {
	t.Helper()
	topic := config.Default().Kafka.Topics.Train
	deadline := time.Now().Add(time.Minute)
	var last map[int]int64
	quiet := 0
	for quiet < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the training topic did not settle in a minute; the end of the daemon's log:\n%s", p.logTail())
		}
		time.Sleep(time.Second) // the daemon's lag is refreshed every second
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err := stream.EndOffsets(ctx, stream.Config{Brokers: []string{addr}}, topic)
		cancel()
		s, ok := p.status()
		lagged := !ok
		for _, l := range s.Lag {
			lagged = lagged || l > 0
		}
		if err != nil || lagged || !maps.Equal(ends, last) {
			quiet, last = 0, ends
			continue
		}
		quiet++
	}
}

// checkBrokerHolds checks that the broker lost no stored point: for every point in the
// state file, the newest record of its id on the training topic (what compaction keeps,
// and all a rebuild from the topic sees of it) holds its input and label.
func checkBrokerHolds(t *testing.T, train []stream.Message, st *storage.Store, dim int) {
	t.Helper()
	newest := map[string]stream.Message{}
	republished := 0
	for _, m := range train {
		newest[string(m.Key)] = m
		if _, claim := m.Header(ingest.VersionHeader); claim && m.Value != nil {
			republished++
		}
	}
	stored, lost := 0, 0
	err := st.View(func(tx *storage.ReadTx) error {
		return tx.ForEachPoint(func(p storage.Point) error {
			stored++
			m, ok := newest[p.ID]
			ev, err := stream.DecodeTrain(m.Value, stream.Limits{InputDim: dim})
			if !ok || m.Value == nil || err != nil || ev.Op != stream.OpUpsert || !slices.Equal(ev.X, p.X) ||
				(ev.Label != nil) != p.HasLabel || (p.HasLabel && *ev.Label != p.Label) {
				lost++
				if lost <= 5 {
					t.Errorf("stored point %s: the newest record of its id on the topic (offset %d, %d value bytes) does not hold it",
						p.ID, m.Offset, len(m.Value))
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if lost > 0 {
		t.Errorf("%d of %d stored points lost from the broker", lost, stored)
	}
	t.Logf("broker: %d stored points, %d lost; %d republications on the training topic", stored, lost, republished)
}

// survivors is the number of points stored after applying train in order.
func survivors(train []stream.Message) int {
	stored := map[string]bool{}
	for _, m := range train {
		var ev struct {
			Op string    `json:"op"`
			ID string    `json:"id"`
			X  []float64 `json:"x"`
		}
		if json.Unmarshal(m.Value, &ev) != nil || len(ev.X) == 1 {
			continue
		}
		switch ev.Op {
		case "upsert":
			stored[ev.ID] = true
		case "delete":
			delete(stored, ev.ID)
		}
	}
	return len(stored)
}

// enospcFile is faultinject.go's ENOSPCFile (that file is built only with the tag).
const enospcFile = "ENOSPC"

// startCairndReady waits until p answers /status and the broker at addr answers.
func startCairndReady(t *testing.T, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := p.status(); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := stream.EndOffsets(ctx, stream.Config{Brokers: []string{addr}}, config.Default().Kafka.Topics.Train)
			cancel()
			if err == nil {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("cairnd not answering 60 s after its last start")
}
