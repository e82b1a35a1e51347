package daemon

import (
	"context"
	"errors"
	"hash/fnv"
	"path/filepath"
	"time"

	"github.com/cairnhq/cairn/internal/cluster"
	"github.com/cairnhq/cairn/internal/role/replica"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// runReplica is Run for role replica (internal/role/replica): no store and no
// ingestion. It follows the models topic (modeltopic.Follower) for the model versions and masks,
// and answers the query topic as one member of the replicas' consumer group
// (kafka.group), writing each batch's answers straight to Kafka before the group
// commits its offsets, behind the deletion fence (modeltopic.Follower.Fence).
func (d *Daemon) runReplica(ctx context.Context) (err error) {
	h, err := d.startHTTP()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.stop()) }()
	if err := d.connect(ctx); err != nil {
		return err
	}
	// Evaluation draws are named apart from every other replica's: by the data
	// directory (each replica has its own).
	abs, _ := filepath.Abs(d.cfg.DataDir)
	f := fnv.New64a()
	f.Write([]byte(abs))
	d.serve.drawNonce = f.Sum64()
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: d.kafka, Events: cluster.Events(d.cfg)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	d.direct = w
	rep, err := replica.New(replica.Config{Kafka: d.kafka, Group: d.cfg.Kafka.Group, Topic: d.cfg.Kafka.Topics.Queries,
		SessionTimeout: d.cfg.Kafka.SessionTimeout, FetchMaxBytes: max(8<<20, 2*d.cfg.Limits.MaxMessageBytes),
		Writer: w, Fence: d.models.follow.Fence, Model: d.servingFor, Answers: d.answers, Faults: d.faults})
	if err != nil {
		return err
	}
	err = d.runGroups(ctx, h.failed, func(work, _ spawnFunc) error {
		work("models", d.models.follow.Run)
		work("queries", rep.Run)
		work("ui", d.runUISamples)
		return nil
	}, func() {
		d.log.Info().Str("role", "replica").Strs("brokers", d.kafka.Brokers).Str("group", d.cfg.Kafka.Group).
			Str("http", d.httpAddr).Msg("cairnd serving")
	})
	d.log.Info().Err(err).Msg("cairnd stopped")
	return err
}

// servingFor waits for the first model, then returns the serving model with room in
// its evaluation draw for n more answers (redraw when it has none).
func (d *Daemon) servingFor(ctx context.Context, n int) (*serving.Model, error) {
	select {
	case <-d.serve.modelReady:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s := d.serve.model.Load()
	if s != nil && s.Draw != nil && s.Draw.Used.Load()+int64(n) > int64(d.cfg.Query.DrawQueries) {
		if err := d.redraw(s); err != nil {
			return nil, err
		}
		s = d.serve.model.Load()
	}
	return s, nil
}

// emitDirect writes one status event straight to Kafka (a replica's, which has no
// outbox); a failure is logged.
func (d *Daemon) emitDirect(kind string, data any) {
	if d.direct == nil {
		return
	}
	v, err := statusValue(kind, data)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// ce_time: the event's own time (a replica keeps no state to take one from).
		err = d.direct.Write(ctx, stream.Message{Topic: d.cfg.Kafka.Topics.Status, Key: []byte(kind), Value: v, Time: time.Now().UTC()})
		cancel()
	}
	if err != nil {
		d.log.Warn().Err(err).Str("kind", kind).Msg("status event not written")
	}
}
