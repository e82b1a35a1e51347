package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/cairnhq/cairn/stream"
)

// topicWatch holds the partition counts of the checked topics as the start's check
// found them, the reference runTopicWatch compares the cluster against.
type topicWatch struct {
	mu    sync.Mutex
	start map[string]int
}

// topicRoles names the topics whose settings carry erasure and the audit chain.
func (d *Daemon) topicRoles() stream.TopicRoles {
	t := d.cfg.Kafka.Topics
	return stream.TopicRoles{Train: t.Train, Models: t.Models, Audits: t.Audits, Erasures: stream.DefaultErasuresTopic}
}

// recordPartitions keeps the partition counts the start's check saw; a cluster that
// cannot be asked leaves the watch without a reference (it then takes the first counts
// it reads).
func (d *Daemon) recordPartitions(ctx context.Context) {
	r := d.topicRoles()
	parts, err := stream.TopicPartitions(ctx, d.kafka, []string{r.Train, r.Models, r.Audits, r.Erasures})
	if err != nil {
		d.log.Warn().Err(err).Msg("partition counts of the checked topics unknown at start")
		return
	}
	d.watch.mu.Lock()
	d.watch.start = parts
	d.watch.mu.Unlock()
}

// runTopicWatch reads the checked topics' partition counts every
// kafka.topic_check_interval. When they differ from the last read it checks the topics
// again (stream.CheckTopics) and compares the training topic's count with the start's
// (stream.PartitionsChanged): what it finds replaces the topics' part of readiness, so
// /readyz answers 503 with each problem, and each is logged as an error. A read that
// fails is retried at the next tick (the broker's own state is reported elsewhere).
func (d *Daemon) runTopicWatch(ctx context.Context) error {
	r := d.topicRoles()
	names := []string{r.Train, r.Models, r.Audits, r.Erasures}
	t := time.NewTicker(d.cfg.Kafka.TopicCheckInterval)
	defer t.Stop()
	d.watch.mu.Lock()
	last := maps.Clone(d.watch.start)
	d.watch.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, err := stream.TopicPartitions(ctx, d.kafka, names)
		if err != nil {
			d.log.Debug().Err(err).Msg("topic watch: partition counts unknown")
			continue
		}
		if last == nil {
			last = now
			d.watch.mu.Lock()
			d.watch.start = now
			d.watch.mu.Unlock()
			continue
		}
		if maps.Equal(now, last) {
			continue
		}
		d.log.Warn().Interface("was", last).Interface("now", now).Msg("topic watch: partition counts changed; checking the topics again")
		last = now
		d.judgeTopics(ctx, now)
	}
}

// judgeTopics checks the topics after a partition change and stores the result as the
// topics' part of readiness (nil when every guarantee still holds).
func (d *Daemon) judgeTopics(ctx context.Context, now map[string]int) {
	r := d.topicRoles()
	d.watch.mu.Lock()
	start := d.watch.start
	d.watch.mu.Unlock()
	err := errors.Join(stream.PartitionsChanged(r, start, now), stream.CheckTopics(ctx, d.kafka, r))
	if err == nil {
		d.topicErr.Store(nil)
		d.log.Info().Msg("topic watch: the topics still keep erasure and the audit chain")
		return
	}
	for _, e := range unjoin(err) {
		for _, e := range unjoin(e) {
			if p, ok := errors.AsType[*stream.TopicProblem](e); ok {
				d.log.Error().Str("topic", p.Topic).Str("setting", p.Setting).Str("value", p.Value).Str("reason", p.Reason).
					Msg("topic watch: a topic no longer keeps a guarantee (not ready)")
			} else {
				d.log.Error().Err(e).Msg("topic watch: the topics could not be checked (not ready)")
			}
		}
	}
	err = fmt.Errorf("topics (changed while running): %w", err)
	d.topicErr.Store(&err)
}
