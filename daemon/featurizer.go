package daemon

import (
	"context"
	"errors"

	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/featsource"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/role/featurizer"
	"github.com/cairnhq/cairn/stream"
)

// runFeaturizer is Run for role featurizer (internal/role/featurizer): no store, no
// pool, no serving. It creates the features topic when missing (as many partitions as
// the training topic, so each record can sit on its event's partition) and featurizes
// the training topic in the featurizers' consumer group, writing each batch's records
// straight to Kafka (acks=all) before the group commits its offsets.
func (d *Daemon) runFeaturizer(ctx context.Context) (err error) {
	h, err := d.startHTTP()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.stop()) }()
	if err := d.connect(ctx); err != nil {
		return err
	}
	train := d.cfg.Kafka.Topics.Train
	if _, err := featsource.EnsureTopic(ctx, d.kafka, train, featrec.Topic); err != nil {
		return err
	}
	lim, err := ingest.TrainLimits(d.cfg, d.feat.InputDim())
	if err != nil {
		return err
	}
	lim.Indices = ingest.IndexLimits(d.feat)
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: d.kafka, Partitioned: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	f, err := featurizer.New(featurizer.Config{Kafka: d.kafka, Group: featurizer.Group, Topic: train, Out: featrec.Topic,
		SessionTimeout: d.cfg.Kafka.SessionTimeout, FetchMaxBytes: max(8<<20, 2*d.cfg.Limits.MaxMessageBytes),
		Writer: w, Features: d.feat, Limits: lim, Faults: d.faults, Log: d.log})
	if err != nil {
		return err
	}
	err = d.runGroups(ctx, h.failed, func(work, _ spawnFunc) error {
		work("featurize", f.Run)
		return nil
	}, func() {
		d.log.Info().Str("role", "featurizer").Strs("brokers", d.kafka.Brokers).Str("group", featurizer.Group).
			Str("fingerprint", d.feat.Fingerprint()).Str("http", d.httpAddr).Msg("cairnd featurizing")
	})
	d.log.Info().Err(err).Uint64("skipped_applied", f.Skipped()).Msg("cairnd stopped")
	return err
}

// useFeaturizers makes in take its features from the featurizers' records when
// ingest.featurizers is set (internal/featsource, read by the "features" component),
// computing the missing ones after ingest.featurizer_timeout; while this daemon leads,
// the component publishes its applied offsets, which the featurizers skip.
func (d *Daemon) useFeaturizers(in *ingest.State) error {
	if !d.cfg.Ingest.Featurizers {
		return nil
	}
	if d.featSrc == nil {
		src, err := featsource.New(featsource.Config{Kafka: d.kafka, Train: d.cfg.Kafka.Topics.Train, Topic: featrec.Topic,
			Applied: d.startOffset, Quiet: d.cfg.Ingest.FeaturizerTimeout, FetchMaxBytes: max(8<<20, 2*d.cfg.Limits.MaxMessageBytes),
			Faults: d.faults, Log: d.log, Publish: d.leading.Load})
		if err != nil {
			return err
		}
		d.featSrc = src
	}
	in.SetFeatureSource(d.featSrc, d.cfg.Ingest.FeaturizerTimeout)
	return nil
}
