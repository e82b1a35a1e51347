package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// roleConfig is e2eConfig for one daemon of a deployment on the external broker at addr.
func roleConfig(dir, addr, role string) config.Config {
	c := e2eConfig(dir)
	c.Role = role
	c.Kafka.Brokers = []string{addr}
	c.Kafka.SessionTimeout = 2 * time.Second
	c.Query.OnPrimary = false
	return c
}

// copyKey gives dir the audit key of from (a standby signs as its primary does).
func copyKey(t *testing.T, from, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(from, AuditKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AuditKeyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// quiescent: every training message applied, no refit running, nothing pending.
func quiescent(d *Daemon, train string) bool {
	s := d.Status()
	if s.RefitRunning || s.PendingDeletions > 0 {
		return false
	}
	for k, lag := range s.Lag {
		if len(k) > len(train) && k[:len(train)] == train && lag > 0 {
			return false
		}
	}
	return len(s.Lag) > 0
}

// TestRoles runs a deployment over TCP against one broker: a primary, a standby with
// its own data directory, and a replica that answers every query.
//
//   - The replica installs the primary's model versions from the models topic and
//     answers the queries (the primary answers none: query.on_primary is off).
//   - After a landmark's deletion is audited, no answer names it (the deletion fence).
//   - At quiescence the standby's replayable state is byte-identical to the primary's
//     (ingest.StateHash: points, offsets, pool, latest model), and its audit chain is
//     the published one.
//   - When the primary stops, the standby takes over: its next audit continues the
//     chain, the replica installs its model, and no event is lost or applied twice.
func TestRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("deployment test")
	}
	const n = 160
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	test, err := dataset.Open("mnist", "test", 20)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kafkaDir := filepath.Join(t.TempDir(), "kafka")
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, DataDir: kafkaDir})
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup registered before the daemons' runs after theirs: they stop (and drain
	// their outboxes) while the broker still answers.
	t.Cleanup(func() { b.Close() })
	dirP, dirS, dirR := t.TempDir(), t.TempDir(), t.TempDir()
	cfgP := roleConfig(dirP, b.Addr(), "primary")
	tp := cfgP.Kafka.Topics
	p := startDaemon(t, cfgP)
	waitFor(t, "the primary to lead", 30*time.Second, p.d.leading.Load)
	copyKey(t, dirP, dirS)
	cfgS := roleConfig(dirS, b.Addr(), "standby")
	s := startDaemon(t, cfgS)
	r := startDaemon(t, roleConfig(dirR, b.Addr(), "replica"))

	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	produceMsgs(t, p.d.Brokers(), upserts(t, tp.Train, set, rows))
	waitFor(t, "the primary's model on all points", 120*time.Second, func() bool {
		st := p.d.Status()
		return st.Model > 0 && st.ModelPoints == n && !st.RefitRunning
	})
	waitFor(t, "the replica to install it", 30*time.Second, func() bool { return r.d.Status().Model == p.d.Status().Model })
	if s.d.leading.Load() {
		t.Fatal("the standby leads while the primary runs")
	}

	// The replica builds the primary's gradient rows from the points on the models topic.
	waitFor(t, "the replica's gradient rows", 30*time.Second, func() bool { return r.d.Status().GradientRows == n })

	// Queries: the replica answers them all, the primary none.
	var qs []stream.Message
	for i := range 10 {
		qs = append(qs, queryMsg(t, tp.Queries, stream.QueryEvent{Request: fmt.Sprintf("q%d", i), X: test.Row(i)}, set.D))
	}
	produceMsgs(t, p.d.Brokers(), qs)
	waitFor(t, "10 answers", 30*time.Second, func() bool { return len(keyed[stream.Attribution](t, p, tp.Attributions)) == 10 })
	// The outbox may publish a batch's answers before the batch is counted (Account
	// runs after the commit), so the counter is waited for, not read once.
	waitFor(t, "the replica to count them", 10*time.Second, func() bool { return r.d.Status().Queries >= 10 })
	if rq, pq := r.d.Status().Queries, p.d.Status().Queries; rq < 10 || pq != 0 {
		t.Fatalf("replica answered %d, primary %d; want 10 and 0", rq, pq)
	}
	// The default gradient ranking is answered on the replica with the primary's top-K
	// and scores, bit for bit, and a query naming gradient too.
	ps := p.d.serve.model.Load()
	for req, a := range keyed[stream.Attribution](t, p, tp.Attributions) {
		var i int
		fmt.Sscanf(req, "q%d", &i)
		var w serving.Workspace
		want, err := ps.AnswerRanked(&w, test.Row(i), len(a.TopK), a.Delta, certify.GradientCosine)
		if err != nil || a.Score != "gradient_cosine" || a.Verdict != string(want.Verdict) || len(a.TopK) != len(want.TopK) {
			t.Fatalf("replica answer %s: %q %s with %d points; the primary's %s with %d (%v)", req, a.Score, a.Verdict, len(a.TopK), want.Verdict, len(want.TopK), err)
		}
		for k, e := range want.TopK {
			if id, _ := ps.EntryID(certify.GradientCosine, e); a.TopK[k].ID != id || a.TopK[k].Score != e.Score {
				t.Errorf("replica answer %s #%d: %s %v, the primary's %s %v", req, k+1, a.TopK[k].ID, a.TopK[k].Score, id, e.Score)
			}
		}
	}
	if st := r.d.Status(); st.GradientRows != n || st.GradientRowsError != "" {
		t.Errorf("replica gradient rows %d (%q), want %d", st.GradientRows, st.GradientRowsError, n)
	}
	// A query naming gradient, and one by the id of a stored point (its input from the
	// replica's copy of the points), as the primary would answer it.
	produceMsgs(t, p.d.Brokers(), []stream.Message{
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-grad", X: test.Row(0), Score: "gradient"}, set.D),
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-id", ID: set.IDs[3]}, set.D)})
	waitFor(t, "the gradient answer and the answer by id", 30*time.Second, func() bool {
		as := keyed[stream.Attribution](t, p, tp.Attributions)
		_, ok := as["q-id"]
		return ok && as["q-grad"].Score == "gradient"
	})
	var w serving.Workspace
	byID := keyed[stream.Attribution](t, p, tp.Attributions)["q-id"]
	if want, err := ps.AnswerRanked(&w, set.Row(3), len(byID.TopK), byID.Delta, certify.GradientCosine); err != nil || len(want.TopK) == 0 ||
		byID.Score != "gradient_cosine" || byID.TopK[0].Score != want.TopK[0].Score {
		t.Errorf("replica answer by id: %q %+v; the primary's %+v (%v)", byID.Score, byID.TopK, want.TopK, err)
	}

	// Delete a landmark of the replica's serving model; once its audit is out, no answer
	// names it.
	rs := r.d.serve.model.Load()
	victim := rs.LandmarkIDs[0]
	// The victim's augmented input as the models topic carries it (8 floats from the
	// middle of its row), and a surviving landmark's, for the erasure scan below.
	window := func(l int) []byte {
		dim := len(rs.LandmarkX) / len(rs.LandmarkIDs)
		var b []byte
		for _, v := range rs.LandmarkX[l*dim+dim/2 : l*dim+dim/2+8] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	goneView := window(0)
	keptView := window(slices.IndexFunc(rs.LandmarkIDs, func(id string) bool { return id != victim }))
	produceMsgs(t, p.d.Brokers(), []stream.Message{deleteMsg(t, tp.Train, victim, "del-1")})
	waitFor(t, "the audit of del-1", 60*time.Second, func() bool { _, ok := keyed[stream.Audit](t, p, tp.Audits)["del-1"]; return ok })
	qs = qs[:0]
	for i := range 10 {
		qs = append(qs, queryMsg(t, tp.Queries, stream.QueryEvent{Request: fmt.Sprintf("after%d", i), X: test.Row(i), K: 20}, set.D))
	}
	produceMsgs(t, p.d.Brokers(), qs)
	waitFor(t, "10 more answers", 30*time.Second, func() bool { return len(keyed[stream.Attribution](t, p, tp.Attributions)) == 22 })
	for req, a := range keyed[stream.Attribution](t, p, tp.Attributions) {
		for _, e := range a.TopK {
			if e.ID == victim && strings.HasPrefix(req, "after") {
				t.Fatalf("answer %s after the audit names the deleted %s (model %d)", req, victim, a.Model)
			}
		}
	}

	// Quiescence: the standby holds the primary's state, and the published audit chain.
	waitFor(t, "both quiescent", 120*time.Second, func() bool {
		return quiescent(p.d, tp.Train) && quiescent(s.d, tp.Train) && p.d.Status().ModelPoints == n-1 &&
			s.d.Status().Points == n-1
	})
	time.Sleep(2 * cfgP.Refit.Idle) // a last idle refit of either would show as RefitRunning
	waitFor(t, "both quiescent again", 60*time.Second, func() bool { return quiescent(p.d, tp.Train) && quiescent(s.d, tp.Train) })
	hp, err := ingest.StateHash(cfgP, p.d.store)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := ingest.StateHash(cfgS, s.d.store)
	if err != nil {
		t.Fatal(err)
	}
	if hp != hs {
		t.Fatalf("state hashes differ: primary %s, standby %s", hp, hs)
	}
	// The deleted landmark's row left cairn.models: the version was republished with it
	// zeroed, and compaction dropped the old copies.
	waitFor(t, "the republished version", 30*time.Second, func() bool {
		b.Compact()
		return !dirHolds(t, kafkaDir, goneView)
	})
	scanFiles(t, kafkaDir, map[string][]byte{victim: goneView}, keptView)
	// Its point record (the raw input, deflated) left too: the topic holds its tombstone only.
	if v := liveValues(t, b.Addr(), tp.Models, string(modelbus.PointKey(victim))); v != 0 {
		t.Errorf("after compaction cairn.models holds %d values of the deleted point's record", v)
	}
	headP, headS := chainHead(t, p.d), chainHead(t, s.d)
	if headP != headS || headP == "" {
		t.Fatalf("audit chain heads: primary %q, standby %q", headP, headS)
	}

	// Takeover: the primary stops; the standby leads, audits the next deletion on the
	// chain's continuation, and the replica installs its next model.
	before := p.d.Status().Model
	p.stop(t)
	t0 := time.Now()
	waitFor(t, "the standby to lead", 30*time.Second, s.d.leading.Load)
	t.Logf("takeover after the primary's clean stop: %v", time.Since(t0))
	victim2 := set.IDs[n-1]
	produceMsgs(t, s.d.Brokers(), []stream.Message{deleteMsg(t, tp.Train, victim2, "del-2")})
	waitFor(t, "the audit of del-2", 60*time.Second, func() bool { _, ok := keyed[stream.Audit](t, s, tp.Audits)["del-2"]; return ok })
	audits := keyed[stream.Audit](t, s, tp.Audits)
	a1, a2 := audits["del-1"], audits["del-2"]
	if a2.Seq != a1.Seq+1 || a2.PrevHash != a1.Hash {
		t.Fatalf("del-2's audit seq %d prev %s; want %d after %s", a2.Seq, a2.PrevHash, a1.Seq+1, a1.Hash)
	}
	if a2.KeyID != a1.KeyID {
		t.Errorf("del-2 signed by %s, del-1 by %s", a2.KeyID, a1.KeyID)
	}
	waitFor(t, "the replica on the new leader's model", 60*time.Second, func() bool {
		st := r.d.Status()
		return st.Model > before && st.ModelPoints == n-2
	})
	st := s.d.Status()
	if st.Points != n-2 || st.Ingest.Upserts != n {
		t.Fatalf("new leader: %d points, %d upserts applied; want %d and %d (nothing lost or applied twice)",
			st.Points, st.Ingest.Upserts, n-2, n)
	}
	seqs := []uint64{}
	for _, a := range keyed[stream.Audit](t, s, tp.Audits) {
		seqs = append(seqs, a.Seq)
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []uint64{1, 2}) {
		t.Fatalf("audit seqs %v, want [1 2]", seqs)
	}
}

// chainHead is the hash of d's last stored audit record, hex ("" for none).
func chainHead(t *testing.T, d *Daemon) string {
	t.Helper()
	var h string
	err := d.store.View(func(tx *storage.ReadTx) error {
		l, ok, err := tx.AuditHead()
		if ok {
			h = fmt.Sprintf("%x", l.Hash)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// dirHolds says whether a file under dir contains b.
func dirHolds(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		found = found || bytes.Contains(data, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// liveValues reads topic (one partition) from its start to its end and counts the
// records with key whose value is not null.
func liveValues(t *testing.T, addr, topic, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc := stream.Config{Brokers: []string{addr}}
	ends, err := stream.EndOffsets(ctx, kc, topic)
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] == 0 {
		return 0
	}
	rd, err := stream.NewReader(stream.ReaderConfig{Kafka: kc, Topics: []string{topic},
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
	if err != nil {
		t.Fatal(err)
	}
	n, done := 0, errors.New("read")
	err = rd.Run(ctx, func(_ context.Context, batch []stream.Message) error {
		for _, m := range batch {
			if string(m.Key) == key && m.Value != nil {
				n++
			}
			if m.Offset >= ends[0]-1 {
				return done
			}
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatal(err)
	}
	return n
}
