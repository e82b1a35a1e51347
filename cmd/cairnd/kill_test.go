package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
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

// killConfig is the YAML of the daemons under test: a small MNIST model against an
// external broker (the test's), so killing cairnd never loses broker data.
func killConfig(dir, broker, http string) string { return historyConfig(dir, broker, "", http) }

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is one cairnd process.
type proc struct {
	cmd  *exec.Cmd
	done chan error
	http string
	log  string // the file its stderr and stdout are appended to
}

// startMark begins each start's part of the shared log.
const startMark = "=== cairnd started by the test ==="

// logTail is the end of this start's part of the daemon's log, for failure messages:
// its first 20 lines and its last 60, broker fetch retries counted instead of shown.
// With TEST_CAIRND_LOGS set to a directory, the whole log is copied there too.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if dir := os.Getenv("TEST_CAIRND_LOGS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(p.log), time.Now().UnixNano())), b, 0o644)
	}
	s := string(b)
	if i := strings.LastIndex(s, startMark); i >= 0 {
		s = s[i:]
	}
	var lines []string
	fetches := 0
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if strings.Contains(l, "fetch error (retrying)") {
			fetches++
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > 80 {
		lines = append(append(lines[:20:20], "[…]"), lines[len(lines)-60:]...)
	}
	return fmt.Sprintf("(%d fetch retries not shown)\n%s", fetches, strings.Join(lines, "\n"))
}

func startCairnd(t *testing.T, bin, cfgPath, http string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Env = append(os.Environ(), "CAIRN_LOG_LEVEL=info")
	logf, err := os.OpenFile(cfgPath+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(logf, startMark); err != nil {
		t.Fatal(err)
	}
	cmd.Stderr, cmd.Stdout = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), http: http, log: cfgPath + ".log"}
	exited := make(chan struct{})
	go func() { p.done <- cmd.Wait(); logf.Close(); close(exited) }()
	// A test that fails while the daemon runs must not leave it running.
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return p
}

// status reads /status; ok is false while the daemon does not answer.
func (p *proc) status() (daemon.StatusReport, bool) {
	var s daemon.StatusReport
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.http + "/status")
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(&s) != nil {
		return s, false
	}
	return s, true
}

// quiesce waits until the daemon is quiet (waitQuiet) and stops it (stopGracefully).
func quiesce(t *testing.T, p *proc, want int) {
	t.Helper()
	waitQuiet(t, p, want)
	stopGracefully(t, p)
}

// waitQuiet waits until the daemon has applied every message, holds want points,
// serves a model fitted on all of them and owes no audit.
func waitQuiet(t *testing.T, p *proc, want int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s, ok := p.status()
		lagged := !ok
		for _, l := range s.Lag {
			lagged = lagged || l > 0
		}
		if !lagged && len(s.Lag) > 0 && s.Points == want && s.ModelPoints == want && !s.RefitRunning && s.PendingDeletions == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not quiescent after 3 minutes: %+v (answering %v; want %d points); the end of its log:\n%s", s, ok, want, p.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopGracefully stops the daemon with SIGTERM and checks the graceful exit.
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("cairnd exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("cairnd did not stop within 15 s of SIGTERM")
	}
}

// stateHash is ingest.StateHash of the stopped daemon configured by cfgPath.
func stateHash(t *testing.T, cfgPath string) string { return hashStore(t, cfgPath, ingest.StateHash) }

// contentHash is stateHash without the consumed offsets (ingest.ContentHash).
func contentHash(t *testing.T, cfgPath string) string {
	return hashStore(t, cfgPath, ingest.ContentHash)
}

func hashStore(t *testing.T, cfgPath string, hash func(config.Config, *storage.Store) (string, error)) string {
	t.Helper()
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(filepath.Join(cfg.DataDir, daemon.StateFile), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := hash(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestKill9 is the restart guarantee of docs/architecture.md ("State and storage"): a few
// thousand training events (upserts, re-upserts, deletions and bad messages) sit in the
// broker; cairnd is killed with SIGKILL at 24 seeded random moments while it ingests,
// restarted each time, and finally left to quiesce and stopped with SIGTERM. Its state
// hash (ingest.StateHash: points, offsets, served landmarks, latest model) must equal
// that of one uninterrupted run over the same messages: nothing lost, nothing applied
// twice.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairnd and runs it many times")
	}
	set, err := dataset.Open("mnist", "train", 2500)
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

	// The input: 2500 upserts, 200 re-upserts of earlier ids with other rows, 60
	// deletions (some of ids never stored) and 20 bad messages, in a seeded order.
	r := rand.New(rand.NewPCG(9, 9))
	topic := config.Default().Kafka.Topics.Train
	lim := stream.Limits{InputDim: set.D}
	var msgs []stream.Message
	stored := map[string]bool{}
	add := func(id string, row int) {
		lab := int64(set.Labels[row])
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: set.Row(row), Label: &lab}, lim)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.Message{Topic: topic, Key: []byte(id), Value: v})
		stored[id] = true
	}
	for i := range set.N {
		add(set.IDs[i], i)
		switch {
		case i > 100 && r.IntN(12) == 0:
			add(set.IDs[r.IntN(i)], r.IntN(set.N))
		case i > 100 && r.IntN(40) == 0:
			id := set.IDs[r.IntN(i)]
			if r.IntN(4) == 0 {
				id = "ghost-" + strconv.Itoa(i)
			}
			v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: "del-" + strconv.Itoa(i)}, lim)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, stream.Message{Topic: topic, Key: []byte(id), Value: v})
			delete(stored, id)
		case r.IntN(120) == 0:
			msgs = append(msgs, stream.Message{Topic: topic, Key: []byte("bad"), Value: []byte(`{"v":1,"op":"upsert","id":"bad","x":[1]}`)})
		}
	}
	want := len(stored)
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: stream.Config{Brokers: []string{b.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Logf("%d messages, %d points at the end", len(msgs), want)

	dir := t.TempDir()
	killedCfg := filepath.Join(dir, "killed.yaml")
	httpK := freeAddr(t)
	if err := os.WriteFile(killedCfg, []byte(killConfig(filepath.Join(dir, "killed"), b.Addr(), httpK)), 0o644); err != nil {
		t.Fatal(err)
	}
	const kills = 24
	for k := range kills {
		p := startCairnd(t, bin, killedCfg, httpK)
		time.Sleep(time.Duration(150+r.IntN(900)) * time.Millisecond)
		s, _ := p.status()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			log, _ := os.ReadFile(killedCfg + ".log")
			t.Fatalf("kill %d: %v; cairnd log:\n%s", k+1, err, log)
		}
		<-p.done
		t.Logf("kill %d: %d points applied", k+1, s.Points)
	}
	p := startCairnd(t, bin, killedCfg, httpK)
	quiesce(t, p, want)
	killed := stateHash(t, killedCfg)

	// The uninterrupted daemon reads the same training topic but its own models topic:
	// on the killed one's, it would serve the killed daemon's model (the same points)
	// before fitting its own, and waitQuiet, which sees model_points only, could find it
	// quiet with no model in its store.
	cleanCfg := filepath.Join(dir, "clean.yaml")
	httpC := freeAddr(t)
	cleanYAML := strings.Replace(killConfig(filepath.Join(dir, "clean"), b.Addr(), httpC),
		"  partitions: 2\n", "  partitions: 2\n  topics: {models: cairn.models.clean}\n", 1)
	if err := os.WriteFile(cleanCfg, []byte(cleanYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startCairnd(t, bin, cleanCfg, httpC)
	quiesce(t, p, want)
	clean := stateHash(t, cleanCfg)
	if killed != clean {
		t.Fatalf("state after %d kills %s, uninterrupted %s; %s", kills, killed, clean, stateDiff(t, killedCfg, cleanCfg))
	}
}

// stateDiff names what differs between the stopped daemons' stores configured by a
// and b: points, offsets, the latest model's landmarks, coefficients or metadata.
func stateDiff(t *testing.T, a, b string) string {
	t.Helper()
	type state struct {
		points  map[string]string
		offsets string
		model   storage.Model
		ok      bool
	}
	read := func(cfgPath string) state {
		cfg, err := config.Load(cfgPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := storage.Open(filepath.Join(cfg.DataDir, daemon.StateFile), storage.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s := state{points: map[string]string{}}
		if err := st.View(func(tx *storage.ReadTx) error {
			if err := tx.ForEachPoint(func(p storage.Point) error {
				s.points[p.ID] = fmt.Sprint(p.X, p.Label, p.HasLabel)
				return nil
			}); err != nil {
				return err
			}
			offs, err := tx.Offsets()
			s.offsets = fmt.Sprint(offs)
			if err != nil {
				return err
			}
			s.model, s.ok, err = tx.LatestModel()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	x, y := read(a), read(b)
	var diffs []string
	if !maps.Equal(x.points, y.points) {
		diffs = append(diffs, fmt.Sprintf("points (%d against %d)", len(x.points), len(y.points)))
	}
	if x.offsets != y.offsets {
		diffs = append(diffs, fmt.Sprintf("offsets %s against %s", x.offsets, y.offsets))
	}
	switch {
	case x.ok != y.ok:
		diffs = append(diffs, "a model in one store only")
	case !slices.Equal(x.model.Landmarks, y.model.Landmarks):
		diffs = append(diffs, "the model's landmarks")
	case !slices.Equal(x.model.A.Data, y.model.A.Data) || !slices.Equal(x.model.B.Data, y.model.B.Data):
		diffs = append(diffs, "the model's coefficients")
	case string(x.model.Meta) != string(y.model.Meta):
		diffs = append(diffs, fmt.Sprintf("the model's metadata:\n%s\nagainst\n%s", x.model.Meta, y.model.Meta))
	}
	if len(diffs) == 0 {
		return "points, offsets and model agree: the pool differs"
	}
	return "differing: " + strings.Join(diffs, "; ")
}
