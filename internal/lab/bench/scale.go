package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/stream"
)

// ScaleReport is the output of `cairnctl bench-scale`: a deployment of cairnd
// processes on one broker (run inside cairnctl), measured in one run.
type ScaleReport struct {
	Data    string `json:"data"`
	N       int    `json:"n"`
	Queries int    `json:"queries"`
	// ReplicaGOMAXPROCS is each replica's GOMAXPROCS (one core each by default).
	ReplicaGOMAXPROCS int `json:"replica_gomaxprocs"`
	Cores             int `json:"cores"`
	// Rounds: query throughput with 1, 2, 3… replicas, each round on a fresh query
	// topic and consumer group; Speedup[i] is round i's rate over round 0's.
	Rounds  []ScaleRound `json:"rounds"`
	Speedup []float64    `json:"speedup"`
	// Kill: a replica killed (SIGKILL) under load.
	Kill *KillReport `json:"kill,omitempty"`
	// Takeover: the primary killed (SIGKILL) with a standby running.
	Takeover *TakeoverReport `json:"takeover,omitempty"`
	// Featurize: ingestion with 0, then each of ScaleOptions.Featurizers featurizer
	// processes (scale_feat.go).
	Featurize  *FeaturizeReport `json:"featurize,omitempty"`
	TargetsMet map[string]bool  `json:"targets_met"`
	Note       string           `json:"note"`
}

// ScaleRound is one throughput round of bench-scale.
type ScaleRound struct {
	Replicas         int      `json:"replicas"`
	Answered         int      `json:"answered"`
	Seconds          float64  `json:"seconds"`
	QueriesPerSecond float64  `json:"queries_per_second"`
	PerReplica       []uint64 `json:"per_replica"`
	// CPUSeconds each replica process used during the round (/proc, user + system):
	// near Seconds·GOMAXPROCS means the replicas were the bottleneck.
	CPUSeconds []float64 `json:"cpu_seconds"`
	// BrokerCPUSeconds is this process's (broker, producer, reader) CPU in the round,
	// PrimaryCPUSeconds the primary's.
	BrokerCPUSeconds  float64 `json:"broker_cpu_seconds"`
	PrimaryCPUSeconds float64 `json:"primary_cpu_seconds"`
	// Scores counts the round's answers by ranking ("score"): the replicas' default.
	Scores map[string]int `json:"scores"`
}

// KillReport is bench-scale's replica killed under load.
type KillReport struct {
	Replicas   int `json:"replicas"`
	Queries    int `json:"queries"`
	KilledAt   int `json:"killed_after_answers"`
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// RecoverySeconds: from the kill until every query had an answer.
	RecoverySeconds float64 `json:"recovery_seconds"`
}

// TakeoverReport is bench-scale's primary killed with a standby running.
type TakeoverReport struct {
	// Seconds: from the primary's SIGKILL until the standby reports leading.
	Seconds float64 `json:"seconds"`
	// DeletionToAuditSeconds: a deletion written right after the kill, until its audit.
	DeletionToAuditSeconds float64 `json:"deletion_to_audit_seconds"`
	// What the new leader applied: every upsert once (Upserts == N) and the points left.
	Upserts uint64 `json:"upserts"`
	Points  int    `json:"points"`
	// AuditSeqs are the audit records' seqs in order of arrival (re-sent copies
	// included); ChainOK says they continue one chain with no gap or fork.
	AuditSeqs []uint64 `json:"audit_seqs"`
	ChainOK   bool     `json:"chain_ok"`
	Lost      bool     `json:"events_lost"`
	Twice     bool     `json:"events_applied_twice"`
}

// CairndPath finds the cairnd binary: the flag, next to this executable, or on PATH.
func CairndPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "cairnd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("cairnd")
	if err != nil {
		return "", fmt.Errorf("--cairnd: no cairnd next to cairnctl or on PATH (go build -o DIR ./cmd/... puts both in DIR)")
	}
	return p, nil
}

// ScaleOptions are the settings of cairnctl bench-scale, each named by its flag.
type ScaleOptions struct {
	Bin        string        // --cairnd: the cairnd binary (CairndPath)
	Config     config.Config // the configuration --config loads, which the deployment starts from
	ConfigFile string        // --config, passed on to every cairnd
	Keep       bool          // --keep: keep the deployment's directory and print its path on stderr
	Data       string        // --data
	N          int           // --n: training rows the primary ingests
	Queries    int           // --queries: queries per throughput round
	Procs      int           // --gomaxprocs of each replica
	Replicas   []int         // --replicas: replica counts of the throughput rounds
	Kill       bool          // --kill: kill a replica under load
	Takeover   bool          // --takeover: kill the primary with a standby running
	Stderr     io.Writer     // progress lines
	// Featurizers: --featurizers, the featurizer counts of the ingestion rounds (none:
	// no such rounds); Model: --model, an ONNX file the ingestion rounds' processes use
	// instead of the configured model.
	Featurizers []int
	Model       string
	// FeaturizerTimeout: --featurizer-timeout, the primaries' ingest.featurizer_timeout
	// in the ingestion rounds (0: the configured one).
	FeaturizerTimeout time.Duration
	// Fitted: --fitted, the ingestion rounds' primaries serve a model fitted on the
	// warm-up and ingest labelled rows (FeaturizeReport.Fitted).
	Fitted bool
}

// Scale is cairnctl bench-scale: a deployment of cairnd processes (o.Bin) on one
// embedded broker in this process, in a temporary directory: a primary ingests o.N
// training rows, then rounds of o.Replicas[i] replicas answer o.Queries queries each
// (throughput), a replica is killed under load (o.Kill) and the primary is killed with a
// standby running (o.Takeover). Every process it starts is stopped before it returns;
// the report holds what was measured up to an error.
func Scale(ctx context.Context, o ScaleOptions) (ScaleReport, error) {
	s := &scaleRun{bin: o.Bin, cfg: o.Config, cfgFile: o.ConfigFile, keep: o.Keep, data: o.Data, n: o.N, queries: o.Queries,
		procs: o.Procs, stderr: o.Stderr, featurizers: o.Featurizers, model: o.Model, featWait: o.FeaturizerTimeout, fitted: o.Fitted}
	return s.run(ctx, o.Replicas, o.Kill, o.Takeover)
}

// scaleRun is one bench-scale deployment: its settings, broker, client and processes.
type scaleRun struct {
	bin     string
	cfg     config.Config
	cfgFile string
	keep    bool
	data    string
	n       int
	queries int
	procs   int
	stderr  io.Writer
	// featurizers and model: the ingestion rounds (scale_feat.go).
	featurizers []int
	model       string
	featWait    time.Duration
	fitted      bool

	dir    string
	broker string
	kc     stream.Config
	train  *dataset.Set
	test   *dataset.Set
	lim    stream.Limits
	w      *stream.Writer
	c      *client.Client // the deployment's client: upserts and watches
	procsU []*cairnd
}

// cairnd is one daemon process of the deployment.
type cairnd struct {
	name string
	cmd  *exec.Cmd
	http string
	done chan error
}

// run runs the deployment and its rounds (Scale).
func (s *scaleRun) run(ctx context.Context, counts []int, kill, takeover bool) (rep ScaleReport, err error) {
	rep = ScaleReport{Data: s.data, N: s.n, Queries: s.queries, ReplicaGOMAXPROCS: s.procs, Cores: runtime.NumCPU(),
		TargetsMet: map[string]bool{},
		Note: "every process shares this machine's cores with the broker (in cairnctl) and the producer; " +
			"rates are measured in the same run, so the speedups compare like with like"}
	if s.train, err = dataset.Open(s.data, "train", s.n); err != nil {
		return rep, fmt.Errorf("--data: %w", err)
	}
	if s.test, err = dataset.Open(s.data, "test", 500); err != nil {
		return rep, fmt.Errorf("--data (test split): %w", err)
	}
	if s.dir, err = os.MkdirTemp("", "cairn-scale-"); err != nil {
		return rep, err
	}
	if s.keep {
		fmt.Fprintf(s.stderr, "cairnctl: deployment in %s (kept)\n", s.dir)
	} else {
		defer os.RemoveAll(s.dir)
	}
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 6, DataDir: filepath.Join(s.dir, "kafka")})
	if err != nil {
		return rep, err
	}
	defer b.Close()
	s.broker = b.Addr()
	s.kc = stream.Config{Brokers: []string{s.broker}}
	if s.w, err = stream.NewWriter(stream.WriterConfig{Kafka: s.kc}); err != nil {
		return rep, err
	}
	defer s.w.Close()
	s.lim = stream.Limits{InputDim: s.train.D, MaxIDBytes: s.cfg.Limits.MaxIDBytes, MaxK: s.cfg.Limits.MaxK}
	if s.c, err = client.New(client.Config{Kafka: s.kc, Topics: s.cfg.Kafka.Topics, Limits: s.lim, OnReadError: s.readError}); err != nil {
		return rep, err
	}
	defer s.c.Close()
	defer s.stopAll()

	if len(s.featurizers) > 0 {
		if rep.Featurize, err = s.featurize(ctx, rep.TargetsMet, kill); err != nil {
			return rep, err
		}
	}
	if len(counts) == 0 && !takeover { // with --featurizers, --kill kills a featurizer
		return rep, nil
	}
	primary, err := s.start(ctx, "primary", "primary", "", 0)
	if err != nil {
		return rep, err
	}
	if err := s.produceTrain(ctx, 0, s.n); err != nil {
		return rep, err
	}
	model, err := s.waitModel(ctx, primary, s.n)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(s.stderr, "cairnctl: primary serves model %d on %d points\n", model, s.n)
	for i, c := range counts {
		round, err := s.throughput(ctx, i, c, model)
		if err != nil {
			return rep, err
		}
		rep.Rounds = append(rep.Rounds, round)
		rep.Speedup = append(rep.Speedup, round.QueriesPerSecond/rep.Rounds[0].QueriesPerSecond)
		fmt.Fprintf(s.stderr, "cairnctl: %d replicas: %.0f queries/s\n", c, round.QueriesPerSecond)
	}
	for i, r := range rep.Rounds {
		if r.Replicas == 2 && rep.Rounds[0].Replicas == 1 {
			rep.TargetsMet["two_replicas_1.8x"] = rep.Speedup[i] >= 1.8
		}
	}
	if kill {
		if rep.Kill, err = s.killReplica(ctx, len(counts), model); err != nil {
			return rep, err
		}
		rep.TargetsMet["kill_no_query_lost"] = rep.Kill.Lost == 0
	}
	if takeover {
		if rep.Takeover, err = s.takeover(ctx, primary); err != nil {
			return rep, err
		}
		t := rep.Takeover
		rep.TargetsMet["takeover_nothing_lost_or_twice"] = t.ChainOK && !t.Lost && !t.Twice
	}
	return rep, nil
}

// start runs one cairnd process with role, on the deployment's broker; a replica's
// query topic and group are those of round.
func (s *scaleRun) start(ctx context.Context, name, role, queries string, round int) (*cairnd, error) {
	var env []string
	if queries != "" {
		env = append(env, "CAIRN_KAFKA_TOPICS_QUERIES="+queries)
	}
	return s.startEnv(ctx, name, role, round, env...)
}

// startEnv is start with the settings env (CAIRN_ variables) over the deployment's.
func (s *scaleRun) startEnv(ctx context.Context, name, role string, round int, env ...string) (*cairnd, error) {
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	// The deployment's settings go in the environment, over --config.
	args := []string{"--role", role, "--data-dir", dir, "--http", addr, "--brokers", s.broker}
	if s.cfgFile != "" {
		args = append(args, "--config", s.cfgFile)
	}
	m := offline.WeightsForData(s.cfg.Model, s.train.Name)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(os.Environ(), "CAIRN_LOG_LEVEL=warn", "CAIRN_KAFKA_PARTITIONS=6", "CAIRN_KAFKA_SESSION_TIMEOUT=2s",
		fmt.Sprintf("CAIRN_KAFKA_GROUP=cairn.replicas.%d", round), "CAIRN_QUERY_ON_PRIMARY=false",
		"CAIRN_MODEL_ARCH="+m.Arch, "CAIRN_MODEL_WEIGHTS="+m.Weights, fmt.Sprintf("CAIRN_MODEL_UNTRAINED=%v", m.Untrained))
	cmd.Env = append(cmd.Env, env...)
	if role == "replica" || role == "featurizer" {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", s.procs))
	}
	if role == "featurizer" { // its group's joins and failures, for a round that took no record
		cmd.Env = append(cmd.Env, "CAIRN_LOG_LEVEL=info")
	}
	logf, err := os.Create(filepath.Join(dir, "cairnd.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &cairnd{name: name, cmd: cmd, http: addr, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	s.procsU = append(s.procsU, p)
	return p, nil
}

// stop ends p with SIGTERM (SIGKILL after 20 s) and waits for it.
func (p *cairnd) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.done <- nil // later stops return at once
}

func (s *scaleRun) stopAll() {
	for _, p := range s.procsU {
		select {
		case err := <-p.done:
			p.done <- err
		default:
			p.stop()
		}
	}
}

// status reads p's /status.
func (p *cairnd) status(ctx context.Context) (daemon.StatusReport, error) {
	var st daemon.StatusReport
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.http+"/status", nil)
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// statusRetry is status, tried up to five times: a count read must not silently be zero.
func (p *cairnd) statusRetry(ctx context.Context) (daemon.StatusReport, error) {
	var err error
	for range 5 {
		var st daemon.StatusReport
		if st, err = p.status(ctx); err == nil {
			return st, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return daemon.StatusReport{}, fmt.Errorf("%s /status: %w", p.name, err)
}

// pollUntil calls cond every 100 ms until it holds, ctx ends or limit passes.
func pollUntil(ctx context.Context, what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// produceTrain upserts training rows [from, to) through the deployment's client, 500
// rows per acknowledged write.
func (s *scaleRun) produceTrain(ctx context.Context, from, to int) error {
	const batch = 500
	for lo := from; lo < to; lo += batch {
		pts := make([]client.Point, 0, batch)
		for i := lo; i < min(lo+batch, to); i++ {
			p := client.Point{ID: s.train.IDs[i], X: s.train.Row(i)}
			if s.train.Labels != nil {
				l := int64(s.train.Labels[i])
				p.Label = &l
			}
			pts = append(pts, p)
		}
		if err := s.c.Upsert(ctx, pts...); err != nil {
			return err
		}
	}
	return nil
}

// readError reports an error reading an output topic (the read is retried).
func (s *scaleRun) readError(topic string, partition int, err error) {
	fmt.Fprintf(s.stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
}

// waitModel waits until p serves a model fitted on points points and returns its version.
func (s *scaleRun) waitModel(ctx context.Context, p *cairnd, points int) (uint64, error) {
	var model uint64
	err := pollUntil(ctx, p.name+" model on all points", 30*time.Minute, func() bool {
		st, err := p.status(ctx)
		model = st.Model
		return err == nil && st.Model > 0 && st.ModelPoints == points && !st.RefitRunning
	})
	return model, err
}

// queryBatch encodes count queries (test rows, repeated) with request ids prefix-i.
func (s *scaleRun) queryBatch(topic, prefix string, count int) ([]stream.Message, error) {
	out := make([]stream.Message, count)
	for i := range out {
		req := fmt.Sprintf("%s-%d", prefix, i)
		v, err := stream.EncodeQuery(stream.QueryEvent{Request: req, X: s.test.Row(i % s.test.N)}, s.lim)
		if err != nil {
			return nil, err
		}
		out[i] = stream.Message{Topic: topic, Key: []byte(req), Value: v}
	}
	return out, nil
}

// startReplicas starts count replicas on topic and group round, waits until each
// serves model and has answered part of a warm-up (so the group has settled with
// every member holding partitions).
func (s *scaleRun) startReplicas(ctx context.Context, round, count int, model uint64) ([]*cairnd, string, error) {
	topic := fmt.Sprintf("bench.queries.%d", round)
	if err := stream.EnsureTopics(ctx, s.kc, 6, -1, topic); err != nil {
		return nil, "", err
	}
	var reps []*cairnd
	for i := range count {
		p, err := s.start(ctx, fmt.Sprintf("replica-%d-%d", round, i), "replica", topic, round)
		if err != nil {
			return nil, "", err
		}
		reps = append(reps, p)
	}
	for _, p := range reps {
		if err := pollUntil(ctx, p.name+" model", 5*time.Minute, func() bool {
			st, err := p.status(ctx)
			return err == nil && st.Model >= model
		}); err != nil {
			return nil, "", err
		}
	}
	warm := 0
	err := pollUntil(ctx, "every replica answering", 2*time.Minute, func() bool {
		msgs, err := s.queryBatch(topic, fmt.Sprintf("warm%d-%d", round, warm), 24)
		if err != nil || s.w.Write(ctx, msgs...) != nil {
			return false
		}
		warm++
		time.Sleep(300 * time.Millisecond)
		for _, p := range reps {
			if st, err := p.status(ctx); err != nil || st.Queries == 0 {
				return false
			}
		}
		return true
	})
	return reps, topic, err
}

// send starts reading the attribution topic at its end, then writes s.queries queries
// with request ids prefix-i to topic; the caller closes the tail.
func (s *scaleRun) send(ctx context.Context, topic, prefix string) (*client.Watcher, error) {
	t, err := s.c.Watch(ctx, s.cfg.Kafka.Topics.Attributions)
	if err != nil {
		return nil, err
	}
	msgs, err := s.queryBatch(topic, prefix, s.queries)
	if err == nil {
		err = s.w.Write(ctx, msgs...)
	}
	if err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// await reads t until want distinct requests starting with prefix have an answer,
// counting their rankings in scores (nil: not counted).
func await(ctx context.Context, t *client.Watcher, prefix string, want int, seen, scores map[string]int) error {
	distinct := 0
	for _, c := range seen {
		if c > 0 {
			distinct++
		}
	}
	for distinct < want {
		m, err := t.Next(ctx)
		if err != nil {
			return fmt.Errorf("%d of %d answers: %w", distinct, want, err)
		}
		req := string(m.Key)
		if !strings.HasPrefix(req, prefix) {
			continue
		}
		if seen[req]++; seen[req] == 1 {
			distinct++
			var a struct {
				Score string `json:"score"`
			}
			if scores != nil && json.Unmarshal(m.Value, &a) == nil {
				scores[a.Score]++
			}
		}
	}
	return nil
}

// throughput is one round: count replicas answer s.queries queries.
func (s *scaleRun) throughput(ctx context.Context, round, count int, model uint64) (ScaleRound, error) {
	r := ScaleRound{Replicas: count}
	reps, topic, err := s.startReplicas(ctx, round, count, model)
	if err != nil {
		return r, err
	}
	defer func() {
		for _, p := range reps {
			p.stop()
		}
	}()
	var (
		before []uint64
		cpu0   []float64
	)
	for _, p := range reps {
		st, err := p.statusRetry(ctx)
		if err != nil {
			return r, err
		}
		before = append(before, st.Queries)
		cpu0 = append(cpu0, cpuSeconds(p.cmd.Process.Pid))
	}
	self0, prim0 := cpuSeconds(os.Getpid()), cpuSeconds(s.procsU[0].cmd.Process.Pid)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("r%d", round)
	t0 := time.Now()
	t, err := s.send(wctx, topic, prefix)
	if err != nil {
		return r, err
	}
	defer t.Close()
	r.Scores = map[string]int{}
	if err := await(wctx, t, prefix+"-", s.queries, map[string]int{}, r.Scores); err != nil {
		return r, err
	}
	r.Seconds = time.Since(t0).Seconds()
	r.Answered = s.queries
	r.QueriesPerSecond = float64(s.queries) / r.Seconds
	// A replica counts an answer just after the broker acknowledged it: read the counts
	// until they cover every answer seen (or for 10 s).
	for deadline := time.Now().Add(10 * time.Second); ; {
		r.PerReplica, r.CPUSeconds = r.PerReplica[:0], r.CPUSeconds[:0]
		var sum uint64
		for i, p := range reps {
			st, err := p.statusRetry(ctx)
			if err != nil {
				return r, err
			}
			r.PerReplica = append(r.PerReplica, st.Queries-before[i])
			r.CPUSeconds = append(r.CPUSeconds, cpuSeconds(p.cmd.Process.Pid)-cpu0[i])
			sum += st.Queries - before[i]
		}
		if sum >= uint64(s.queries) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.BrokerCPUSeconds = cpuSeconds(os.Getpid()) - self0
	r.PrimaryCPUSeconds = cpuSeconds(s.procsU[0].cmd.Process.Pid) - prim0
	return r, nil
}

// killReplica: count replicas answer s.queries queries; one is killed (SIGKILL) after
// a third of the answers; every query must still be answered, by the others.
func (s *scaleRun) killReplica(ctx context.Context, round int, model uint64) (*KillReport, error) {
	const count = 2
	k := &KillReport{Replicas: count, Queries: s.queries}
	reps, topic, err := s.startReplicas(ctx, round, count, model)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range reps {
			p.stop()
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("kill%d", round)
	t, err := s.send(wctx, topic, prefix)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	seen := map[string]int{}
	var killedAt time.Time
	err = await(wctx, t, prefix+"-", s.queries/3, seen, nil)
	if err != nil {
		return nil, err
	}
	victim := reps[1]
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	killedAt = time.Now()
	k.KilledAt = len(seen)
	if err := await(wctx, t, prefix+"-", s.queries, seen, nil); err != nil {
		return nil, err
	}
	k.RecoverySeconds = time.Since(killedAt).Seconds()
	// Late duplicates: answers re-sent for batches the victim answered but had not
	// committed arrive within a few seconds of the takeover of its partitions.
	late, lcancel := context.WithTimeout(ctx, 3*time.Second)
	for {
		m, err := t.Next(late)
		if err != nil {
			break
		}
		if req := string(m.Key); strings.HasPrefix(req, prefix+"-") {
			seen[req]++
		}
	}
	lcancel()
	for _, c := range seen {
		k.Duplicated += c - 1
	}
	k.Lost = s.queries - len(seen)
	return k, nil
}

// takeover starts a standby next to primary, waits until it has caught up, kills the
// primary (SIGKILL) and measures the standby's takeover and a deletion's audit.
func (s *scaleRun) takeover(ctx context.Context, primary *cairnd) (*TakeoverReport, error) {
	r := &TakeoverReport{}
	// The standby signs with the primary's key, so the chain verifies under one key.
	key, err := os.ReadFile(filepath.Join(s.dir, "primary", daemon.AuditKeyFile))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "standby"), 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "standby", daemon.AuditKeyFile), key, 0o600); err != nil {
		return nil, err
	}
	standby, err := s.start(ctx, "standby", "standby", "", 0)
	if err != nil {
		return nil, err
	}
	audits, err := s.c.Watch(ctx, s.cfg.Kafka.Topics.Audits)
	if err != nil {
		return nil, err
	}
	defer audits.Close()
	// One deletion while both run: the standby adopts its audit.
	if err := s.w.Write(ctx, deleteEvent(s, s.train.IDs[0], "scale-del-1")); err != nil {
		return nil, err
	}
	if err := pollUntil(ctx, "the standby caught up", 30*time.Minute, func() bool {
		st, err := standby.status(ctx)
		pst, perr := primary.status(ctx)
		return err == nil && perr == nil && st.Ingest.Upserts == uint64(s.n) && st.PendingDeletions == 0 &&
			pst.PendingDeletions == 0 && !st.Leading
	}); err != nil {
		return nil, err
	}
	if err := primary.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := s.w.Write(ctx, deleteEvent(s, s.train.IDs[1], "scale-del-2")); err != nil {
		return nil, err
	}
	if err := pollUntil(ctx, "the standby leading", 2*time.Minute, func() bool {
		st, err := standby.status(ctx)
		return err == nil && st.Leading
	}); err != nil {
		return nil, err
	}
	r.Seconds = time.Since(t0).Seconds()
	seqs := map[string][]uint64{}
	hashes := map[uint64]string{}
	r.ChainOK = true
	for {
		m, err := audits.Next(ctx)
		if err != nil {
			return nil, err
		}
		var a stream.Audit
		if err := json.Unmarshal(m.Value, &a); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		r.AuditSeqs = append(r.AuditSeqs, a.Seq)
		if h, ok := hashes[a.Seq]; ok && h != a.Hash {
			r.ChainOK = false // two different records with one seq: a fork
		}
		hashes[a.Seq] = a.Hash
		if p, ok := hashes[a.Seq-1]; a.Seq > 1 && ok && p != a.PrevHash {
			r.ChainOK = false
		}
		if !slices.Contains(seqs[a.Request], a.Seq) {
			seqs[a.Request] = append(seqs[a.Request], a.Seq)
		}
		if a.Request == "scale-del-2" {
			r.DeletionToAuditSeconds = time.Since(t0).Seconds()
			break
		}
	}
	for _, ss := range seqs {
		if len(ss) > 1 {
			r.Twice = true // one deletion audited under two seqs
		}
	}
	st, err := standby.status(ctx)
	if err != nil {
		return nil, err
	}
	r.Upserts, r.Points = st.Ingest.Upserts, st.Points
	r.Lost = st.Points != s.n-2 || st.Ingest.Upserts < uint64(s.n)
	r.Twice = r.Twice || st.Ingest.Upserts > uint64(s.n)
	return r, nil
}

// deleteEvent is the delete message of id under request.
func deleteEvent(s *scaleRun, id, request string) stream.Message {
	v, _ := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpDelete, ID: id, Request: request}, s.lim)
	return stream.Message{Topic: s.cfg.Kafka.Topics.Train, Key: []byte(id), Value: v}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpuSeconds is the user + system CPU time of process pid from /proc (0 where there
// is no /proc), at the kernel's 100 ticks per second.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100
}
