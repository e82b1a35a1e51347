package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// FeaturizeReport is bench-scale's ingestion against the number of featurizer
// processes (cairnd --role featurizer, GOMAXPROCS = ReplicaGOMAXPROCS each), each round
// a fresh primary with ingest.featurizers on (off in round 0: the primary alone) on a
// fresh training topic, measured while it ingests N rows after a warm-up.
type FeaturizeReport struct {
	// Model is the ONNX file of --model, or the configured architecture.
	Model string `json:"model"`
	N     int    `json:"n"`
	// Fitted (--fitted): each primary served a model fitted on the warm-up while it
	// ingested the labelled rows, so each stored point also got its gradient row.
	Fitted bool             `json:"fitted"`
	Rounds []FeaturizeRound `json:"rounds"`
	// Speedup[i] is round i's events/s over the one-featurizer round's (0 without one);
	// PrimaryCPURatio[i] its primary CPU per event over round 0's.
	Speedup         []float64 `json:"speedup"`
	PrimaryCPURatio []float64 `json:"primary_cpu_ratio"`
}

// FeaturizeRound is one ingestion round of bench-scale.
type FeaturizeRound struct {
	Featurizers     int     `json:"featurizers"`
	Events          int     `json:"events"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	// PrimaryCPUSeconds is the primary's CPU (user + system) in the round,
	// PrimaryCPUPerEventMs the same per event; FeaturizerCPUSeconds each featurizer's,
	// BrokerCPUSeconds this process's (broker and producer).
	PrimaryCPUSeconds    float64   `json:"primary_cpu_seconds"`
	PrimaryCPUPerEventMs float64   `json:"primary_cpu_per_event_ms"`
	FeaturizerCPUSeconds []float64 `json:"featurizer_cpu_seconds"`
	BrokerCPUSeconds     float64   `json:"broker_cpu_seconds"`
	// FeaturesTaken: the measured upserts whose features came from a featurizer's record
	// (the others the primary computed after its timeout).
	FeaturesTaken uint64 `json:"features_taken"`
	// RecordsFiled and RecordsStale: the records the primary's reader filed in the round,
	// and those that came for events it had applied already (rows computed twice; the
	// primary's /status "features").
	RecordsFiled uint64 `json:"records_filed"`
	RecordsStale uint64 `json:"records_stale"`
	// Applied is the upserts the primary applied in the round and Points the points it
	// holds after it: Events and warm-up + Events when nothing was lost or applied twice.
	Applied uint64 `json:"applied"`
	Points  int    `json:"points"`
	// Warm is the number of warm-up rows applied before the measured ones (warmUp).
	Warm int `json:"warm_up"`
	// PrimaryPhases is where the primary's ingest spent the round's wall time
	// (ingest.Phases over the round's batches): "features" is computing the features
	// or waiting for featurizers' records.
	PrimaryPhases ingest.Phases `json:"primary_phase_seconds"`
	// GradientRows is how many points the primary's gradient ranking held after the
	// round (0 unless fitted).
	GradientRows int `json:"gradient_rows"`
	// Killed: the last featurizer was killed (SIGKILL) once a third of the rows were
	// produced (the kill round, with --kill).
	Killed bool `json:"killed,omitempty"`
}

// featWarm is the number of rows of a featurize round's warm-up batch (at most n);
// warmUp produces at most featWarmTries of them, featWarmPause apart (30 s in all).
const (
	featWarm      = 128
	featWarmTries = 60
	featWarmPause = 500 * time.Millisecond
)

// featurize runs the ingestion rounds: 0 featurizers, then s.featurizers.
func (s *scaleRun) featurize(ctx context.Context, targets map[string]bool, kill bool) (*FeaturizeReport, error) {
	rep := &FeaturizeReport{Model: s.cfg.Model.Arch, N: s.n, Fitted: s.fitted}
	if s.model != "" {
		rep.Model = s.model
	}
	counts := append([]int{0}, s.featurizers...)
	if kill {
		counts = append(counts, 2)
	}
	one := -1
	for i, c := range counts {
		r, err := s.featurizeRound(ctx, i, c, kill && i == len(counts)-1)
		if err != nil {
			return rep, err
		}
		rep.Rounds = append(rep.Rounds, r)
		if c == 1 && one < 0 {
			one = i
		}
		if r.Killed {
			targets["featurizer_kill_nothing_lost_or_twice"] = r.Applied == uint64(s.n) && r.Points == r.Warm+s.n
		}
		fmt.Fprintf(s.stderr, "cairnctl: %d featurizers: %.0f events/s, primary %.2f ms CPU per event (%d features from records)\n",
			c, r.EventsPerSecond, r.PrimaryCPUPerEventMs, r.FeaturesTaken)
	}
	for _, r := range rep.Rounds {
		sp := 0.0
		if one >= 0 {
			sp = r.EventsPerSecond / rep.Rounds[one].EventsPerSecond
		}
		rep.Speedup = append(rep.Speedup, sp)
		rep.PrimaryCPURatio = append(rep.PrimaryCPURatio, r.PrimaryCPUPerEventMs/rep.Rounds[0].PrimaryCPUPerEventMs)
	}
	cpuMet := true
	for i, r := range rep.Rounds {
		if r.Featurizers == 2 && one >= 0 {
			targets["two_featurizers_1.8x"] = rep.Speedup[i] >= 1.8
		}
		if r.Featurizers > 0 && !r.Killed {
			cpuMet = cpuMet && rep.PrimaryCPURatio[i] <= 0.2
		}
	}
	targets["featurizers_primary_cpu_0.2x"] = cpuMet
	return rep, nil
}

// featurizeRound starts count featurizers and a primary on a training topic of its
// own, warms them up, and measures the ingestion of s.n rows.
func (s *scaleRun) featurizeRound(ctx context.Context, round, count int, kill bool) (_ FeaturizeRound, err error) {
	r := FeaturizeRound{Featurizers: count, Events: s.n, Killed: kill}
	// A broker of its own: a round that follows another on one embedded broker found
	// its primary's reads stalled (its connections' first requests unanswered for
	// seconds) while the new featurizers joined the group the last round's had left.
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 6,
		DataDir: filepath.Join(s.dir, fmt.Sprintf("kafka-f%d", round))})
	if err != nil {
		return r, err
	}
	defer b.Close()
	broker, kc := s.broker, s.kc
	s.broker, s.kc = b.Addr(), stream.Config{Brokers: []string{b.Addr()}}
	defer func() { s.broker, s.kc = broker, kc }()
	topics, env, err := s.featurizeEnv(ctx, round, count)
	if err != nil {
		return r, err
	}
	var procs []*cairnd
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range count {
		p, err := s.startEnv(ctx, fmt.Sprintf("featurizer-%d-%d", round, i), "featurizer", round, env...)
		if err != nil {
			return r, err
		}
		procs = append(procs, p)
	}
	primary, err := s.startEnv(ctx, fmt.Sprintf("primary-f%d", round), "primary", round, env...)
	if err != nil {
		return r, err
	}
	procs = append(procs, primary)
	c, err := client.New(client.Config{Kafka: s.kc, Topics: topics, Limits: s.lim, OnReadError: s.readError})
	if err != nil {
		return r, err
	}
	defer c.Close()
	warm, err := s.warmUp(ctx, c, primary, count)
	if err != nil {
		return r, err
	}
	r.Warm = warm
	if err := s.afterWarmUp(ctx, round, warm, procs[:count], primary); err != nil {
		return r, err
	}
	time.Sleep(time.Second) // the group settles
	cpu0 := cpuOf(procs)
	st0, err := primary.statusRetry(ctx)
	if err != nil {
		return r, err
	}
	self0, t0 := cpuSeconds(os.Getpid()), time.Now()
	third, killedCPU := 0, 0.0
	if kill {
		third = s.n / 3
		if err := s.produceRows(ctx, c, "", 0, third); err != nil {
			return r, err
		}
		victim := procs[count-1]
		killedCPU = cpuSeconds(victim.cmd.Process.Pid) - cpu0[count-1] // its /proc goes with it
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return r, err
		}
	}
	if err := s.produceRows(ctx, c, "", third, s.n); err != nil {
		return r, err
	}
	if err := waitUpserts(ctx, primary, uint64(warm+s.n)); err != nil {
		return r, err
	}
	r.Seconds = time.Since(t0).Seconds()
	r.EventsPerSecond = float64(s.n) / r.Seconds
	r.BrokerCPUSeconds = cpuSeconds(os.Getpid()) - self0
	for i, p := range procs[:count] {
		cpu := cpuSeconds(p.cmd.Process.Pid) - cpu0[i]
		if kill && i == count-1 {
			cpu = killedCPU // until the kill
		}
		r.FeaturizerCPUSeconds = append(r.FeaturizerCPUSeconds, cpu)
	}
	r.PrimaryCPUSeconds = cpuSeconds(primary.cmd.Process.Pid) - cpu0[count]
	r.PrimaryCPUPerEventMs = 1000 * r.PrimaryCPUSeconds / float64(s.n)
	st, err := primary.statusRetry(ctx)
	if err != nil {
		return r, err
	}
	r.FeaturesTaken, r.GradientRows = st.Ingest.FeaturesTaken-st0.Ingest.FeaturesTaken, st.GradientRows
	r.Applied, r.Points = st.Ingest.Upserts-st0.Ingest.Upserts, st.Points
	r.PrimaryPhases = phasesSince(st.Ingest.Phases, st0.Ingest.Phases)
	if st.Features != nil && st0.Features != nil {
		r.RecordsFiled, r.RecordsStale = st.Features.Filed-st0.Features.Filed, st.Features.Stale-st0.Features.Stale
	}
	return r, nil
}

// phasesSince is the phases of cumulative now less those of before.
func phasesSince(now, before ingest.Phases) ingest.Phases {
	return ingest.Phases{Between: now.Between - before.Between, Decode: now.Decode - before.Decode,
		Features: now.Features - before.Features, Pools: now.Pools - before.Pools, Commit: now.Commit - before.Commit,
		Ahead: now.Ahead - before.Ahead}
}

// warmUp produces batches of featWarm warm-up rows (at most n each), featWarmPause
// apart, each applied by the primary before the next, until, with featurizers, the
// primary has taken a feature from a featurizer's record. Without the wait a featurizer
// that had not joined its group yet left every measured row of a round to the primary
// alone (a round in several, 2026-11-26 and -27; once still after 5 quick batches).
// After featWarmTries batches it returns anyway; the round's features_taken then shows
// it. It returns the number of warm-up rows.
func (s *scaleRun) warmUp(ctx context.Context, c *client.Client, primary *cairnd, count int) (int, error) {
	warm, k := 0, min(featWarm, s.n)
	for try := range featWarmTries {
		prefix := "w"
		if try > 0 {
			prefix = fmt.Sprintf("w%d-", try)
			select {
			case <-ctx.Done():
				return warm, ctx.Err()
			case <-time.After(featWarmPause):
			}
		}
		if err := s.produceRows(ctx, c, prefix, 0, k); err != nil {
			return warm, err
		}
		warm += k
		if err := waitUpserts(ctx, primary, uint64(warm)); err != nil {
			return warm, err
		}
		if count == 0 {
			break
		}
		st, err := primary.statusRetry(ctx)
		if err != nil {
			return warm, err
		}
		if st.Ingest.FeaturesTaken > 0 {
			break
		}
	}
	return warm, nil
}

// featurizeEnv creates round's training topic (compacted, as the primary requires) and
// returns its topics and the settings of its processes.
func (s *scaleRun) featurizeEnv(ctx context.Context, round, count int) (config.Topics, []string, error) {
	topics := s.cfg.Kafka.Topics
	topics.Train = fmt.Sprintf("bench.train.f%d", round)
	topics.Models = fmt.Sprintf("bench.models.f%d", round)
	topics.Leader = fmt.Sprintf("bench.leader.f%d", round)
	dc := s.cfg
	dc.Kafka.Topics = topics
	if err := stream.EnsureTopicsWithConfigs(ctx, s.kc, 6, -1, daemon.TopicConfigs(dc), topics.Train); err != nil {
		return topics, nil, err
	}
	env := []string{"CAIRN_KAFKA_TOPICS_TRAIN=" + topics.Train, "CAIRN_KAFKA_TOPICS_MODELS=" + topics.Models,
		"CAIRN_KAFKA_TOPICS_LEADER=" + topics.Leader, "CAIRN_KAFKA_LEADER_GROUP=" + topics.Leader,
		"CAIRN_INGEST_FEATURIZERS=" + strconv.FormatBool(count > 0),
		// No fit during the round: the primary's CPU is ingestion's.
		"CAIRN_REFIT_POINTS_CHANGED=0", "CAIRN_REFIT_POOL_CHANGE_FRACTION=0", "CAIRN_REFIT_RESIDUAL_INCREASE=0"}
	if s.fitted { // one fit, of the warm-up (the idle trigger; the rows then come without a pause)
		env = append(env, "CAIRN_REFIT_MIN_POINTS="+strconv.Itoa(min(featWarm, s.n)), "CAIRN_REFIT_IDLE=1s")
	} else {
		env = append(env, "CAIRN_REFIT_MIN_POINTS="+strconv.Itoa(s.n+featWarm*featWarmTries+1), "CAIRN_REFIT_IDLE=0s")
	}
	if s.featWait > 0 {
		env = append(env, "CAIRN_INGEST_FEATURIZER_TIMEOUT="+s.featWait.String())
	}
	if s.model != "" {
		abs, err := filepath.Abs(s.model)
		if err != nil {
			return topics, nil, err
		}
		env = append(env, "CAIRN_MODEL_FILE="+abs, "CAIRN_MODEL_ARCH=", "CAIRN_MODEL_WEIGHTS=", "CAIRN_MODEL_UNTRAINED=false")
	}
	return topics, env, nil
}

// afterWarmUp prints the featurizers' log tails when the warm-up took no feature from
// a record (a featurizer that exited at its start was found so), and with --fitted
// waits for the primary's model.
func (s *scaleRun) afterWarmUp(ctx context.Context, round, warm int, featurizers []*cairnd, primary *cairnd) error {
	if len(featurizers) > 0 {
		if st, err := primary.statusRetry(ctx); err == nil && st.Ingest.FeaturesTaken == 0 {
			for _, p := range featurizers {
				fmt.Fprintf(s.stderr, "bench-scale: round %d: no feature from a record after %d warm-up rows; %s's log ends:\n%s\n",
					round, warm, p.name, logTail(filepath.Join(s.dir, p.name, "cairnd.log"), 40))
			}
		}
	}
	if s.fitted {
		return waitModel(ctx, primary)
	}
	return nil
}

// cpuOf is each process's CPU seconds so far (cpuSeconds).
func cpuOf(procs []*cairnd) []float64 {
	cpu := make([]float64, len(procs))
	for i, p := range procs {
		cpu[i] = cpuSeconds(p.cmd.Process.Pid)
	}
	return cpu
}

// logTail is the last n lines of the file at path (what could be read of it).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitModel waits until the primary serves a model and no refit runs.
func waitModel(ctx context.Context, p *cairnd) error {
	for {
		st, err := p.statusRetry(ctx)
		if err != nil {
			return err
		}
		if st.Model > 0 && !st.RefitRunning {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the primary's first model: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// produceRows upserts training rows [from, to) through c with ids prefix+id, 500 per
// acknowledged write.
func (s *scaleRun) produceRows(ctx context.Context, c *client.Client, prefix string, from, to int) error {
	const batch = 500
	for lo := from; lo < to; lo += batch {
		pts := make([]client.Point, 0, batch)
		for i := lo; i < min(lo+batch, to); i++ {
			p := client.Point{ID: prefix + s.train.IDs[i], X: s.train.Row(i)}
			if s.fitted && s.train.Labels != nil {
				l := int64(s.train.Labels[i])
				p.Label = &l
			}
			pts = append(pts, p)
		}
		if err := c.Upsert(ctx, pts...); err != nil {
			return err
		}
	}
	return nil
}

// waitUpserts waits until p has applied n upserts, or has exited.
func waitUpserts(ctx context.Context, p *cairnd, n uint64) error {
	var exited error
	err := pollUntil(ctx, fmt.Sprintf("%s applied %d upserts", p.name, n), 30*time.Minute, func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			exited = fmt.Errorf("%s exited (%v); its log is cairnd.log in its directory", p.name, err)
			return true
		default:
		}
		st, err := p.status(ctx)
		return err == nil && st.Ingest.Upserts >= n
	})
	if exited != nil {
		return exited
	}
	return err
}
