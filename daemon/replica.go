package daemon

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairnhq/cairn/stream"
)

// runReplica is Run for role replica: no store and no ingestion. It reads model
// versions and masks from the models topic (runFollow) and answers the query topic as
// one member of the replicas' consumer group (kafka.group), writing each batch's
// attributions and dead letters straight to Kafka and committing the batch's offsets to
// the group only after the broker acknowledged them: answers are at least once, and a
// repeated answer carries the same request id (the key). Every batch is answered
// behind the deletion fence (fence, internal/modelbus).
func (d *Daemon) runReplica(ctx context.Context) (err error) {
	h, err := d.startHTTP()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.stop()) }()
	if _, err := d.connect(ctx); err != nil {
		return err
	}
	// Evaluation draws are named apart from every other replica's: by the data
	// directory (each replica has its own).
	abs, _ := filepath.Abs(d.cfg.DataDir)
	f := fnv.New64a()
	f.Write([]byte(abs))
	d.serve.drawNonce = f.Sum64()
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: d.kafka})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	d.direct = w
	gr, err := stream.NewGroupReader(stream.GroupReaderConfig{Kafka: d.kafka, Group: d.cfg.Kafka.Group,
		Topic: d.cfg.Kafka.Topics.Queries, MaxBatch: 64, SessionTimeout: d.cfg.Kafka.SessionTimeout,
		FetchMaxBytes: max(8<<20, 2*d.cfg.Limits.MaxMessageBytes)})
	if err != nil {
		return err
	}
	work, stop := context.WithCancel(context.Background())
	defer stop()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.runFollow(work); err != nil {
			errc <- fmt.Errorf("daemon: models: %w", err)
		}
	})
	wg.Go(func() {
		if err := d.faults.KeepReading(work, "queries", gr, d.handleReplicaQueries, nil); err != nil {
			errc <- fmt.Errorf("daemon: queries: %w", err)
		}
	})
	wg.Go(func() { _ = d.runUISamples(work) }) // returns nil when work ends
	close(d.ready)
	d.log.Info().Str("role", "replica").Strs("brokers", d.kafka.Brokers).Str("group", d.cfg.Kafka.Group).
		Str("http", d.httpAddr).Msg("cairnd serving")
	select {
	case <-ctx.Done():
	case err = <-errc:
		d.log.Error().Err(err).Msg("component failed; shutting down")
	case herr := <-h.failed:
		err = fmt.Errorf("daemon: http: %w", herr)
	}
	d.stopping.Store(true)
	stop()
	wg.Wait()
	close(errc)
	for e := range errc {
		err = errors.Join(err, e)
	}
	d.log.Info().Err(err).Msg("cairnd stopped")
	return err
}

// handleReplicaQueries answers one batch of the query topic on a replica: behind the
// deletion fence, on the serving model, written to Kafka before the group reader
// commits the batch.
func (d *Daemon) handleReplicaQueries(ctx context.Context, batch []stream.Message) error {
	if err := d.fence(ctx); err != nil {
		return err
	}
	select {
	case <-d.serve.modelReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	s := d.serve.model.Load()
	if s != nil && s.Draw != nil && s.Draw.Used.Load()+int64(len(batch)) > int64(d.cfg.Query.DrawQueries) {
		if err := d.redraw(s); err != nil {
			return err
		}
		s = d.serve.model.Load()
	}
	outs := d.answers.Batch(&d.query.work, s, batch, nil)
	msgs := make([]stream.Message, 0, len(batch))
	for _, o := range outs {
		if !o.Skip {
			msgs = append(msgs, stream.Message{Topic: o.Topic, Key: o.Key, Value: o.Value})
		}
	}
	if err := d.direct.Write(ctx, msgs...); err != nil {
		return err
	}
	d.faults.Recovered("queries")
	d.answers.Account(outs, s)
	return nil
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
		err = d.direct.Write(ctx, stream.Message{Topic: d.cfg.Kafka.Topics.Status, Key: []byte(kind), Value: v})
		cancel()
	}
	if err != nil {
		d.log.Warn().Err(err).Str("kind", kind).Msg("status event not written")
	}
}
