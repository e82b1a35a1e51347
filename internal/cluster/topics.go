package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cairnhq/cairn/stream"
)

// roles names the topics whose settings carry erasure and the audit chain.
func (c *Conn) roles() stream.TopicRoles {
	t := c.cfg.Kafka.Topics
	return stream.TopicRoles{Train: t.Train, Models: t.Models, Audits: t.Audits, Erasures: stream.DefaultErasuresTopic}
}

// checkTopics verifies, once the topics exist, that their settings keep erasure and the
// audit chain (stream.CheckTopics: the training, models and audits topics, and the
// erasures topic when the cluster has it). Under kafka.topic_policy "enforce" a problem
// (or a cluster that cannot be asked) fails the start with every problem named; under
// "warn" each is logged and the readiness reports them (TopicsErr) until the watch
// finds them fixed or the process ends. Either way the partition counts it saw become
// the watch's reference.
func (c *Conn) checkTopics(ctx context.Context) error {
	err := stream.CheckTopics(ctx, c.Kafka, c.roles())
	if err == nil {
		c.recordPartitions(ctx)
		return nil
	}
	if c.cfg.Kafka.TopicPolicy != "warn" {
		return fmt.Errorf("daemon: refusing to start (kafka.topic_policy enforce; \"warn\" starts not ready instead): %w", err)
	}
	logged := false
	for _, e := range unjoin(err) {
		if p, ok := errors.AsType[*stream.TopicProblem](e); ok {
			c.log.Warn().Str("topic", p.Topic).Str("setting", p.Setting).Str("value", p.Value).Str("reason", p.Reason).
				Msg("topic setting breaks a guarantee (kafka.topic_policy warn: not ready)")
			logged = true
		}
	}
	if !logged {
		c.log.Warn().Err(err).Msg("topic settings not verified (kafka.topic_policy warn: not ready)")
	}
	err = fmt.Errorf("topics (kafka.topic_policy warn): %w", err)
	c.topicErr.Store(&err)
	c.recordPartitions(ctx)
	return nil
}

// unjoin lists the errors an errors.Join made (err itself otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// recordPartitions keeps the partition counts the start's check saw; a cluster that
// cannot be asked leaves the watch without a reference (it then takes the first counts
// it reads).
func (c *Conn) recordPartitions(ctx context.Context) {
	r := c.roles()
	parts, err := stream.TopicPartitions(ctx, c.Kafka, []string{r.Train, r.Models, r.Audits, r.Erasures})
	if err != nil {
		c.log.Warn().Err(err).Msg("partition counts of the checked topics unknown at start")
		return
	}
	c.watchMu.Lock()
	c.start = parts
	c.watchMu.Unlock()
}

// Watch reads the checked topics' partition counts every kafka.topic_check_interval
// until ctx ends. When they differ from the last read it checks the topics again
// (stream.CheckTopics) and compares the training topic's count with the start's
// (stream.PartitionsChanged): what it finds replaces the topics' part of readiness
// (TopicsErr), and each problem is logged as an error. A read that fails is retried at
// the next tick (the broker's own state is reported elsewhere). It returns nil.
func (c *Conn) Watch(ctx context.Context) error {
	r := c.roles()
	names := []string{r.Train, r.Models, r.Audits, r.Erasures}
	t := time.NewTicker(c.cfg.Kafka.TopicCheckInterval)
	defer t.Stop()
	c.watchMu.Lock()
	last := maps.Clone(c.start)
	c.watchMu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, err := stream.TopicPartitions(ctx, c.Kafka, names)
		if err != nil {
			c.log.Debug().Err(err).Msg("topic watch: partition counts unknown")
			continue
		}
		if last == nil {
			last = now
			c.watchMu.Lock()
			c.start = now
			c.watchMu.Unlock()
			continue
		}
		if maps.Equal(now, last) {
			continue
		}
		if grown(last, now) {
			c.log.Info().Interface("was", last).Interface("now", now).Msg("topic watch: a checked topic appeared; checking the topics again")
		} else {
			c.log.Warn().Interface("was", last).Interface("now", now).Msg("topic watch: partition counts changed; checking the topics again")
		}
		last = now
		c.judgeTopics(ctx, now)
	}
}

// judgeTopics checks the topics after a partition change and stores the result as the
// topics' part of readiness (nil when every guarantee still holds).
func (c *Conn) judgeTopics(ctx context.Context, now map[string]int) {
	r := c.roles()
	c.watchMu.Lock()
	start := c.start
	c.watchMu.Unlock()
	err := errors.Join(stream.PartitionsChanged(r, start, now), stream.CheckTopics(ctx, c.Kafka, r))
	if err == nil {
		c.topicErr.Store(nil)
		c.log.Info().Msg("topic watch: the topics still keep erasure and the audit chain")
		return
	}
	for _, e := range unjoin(err) {
		for _, e := range unjoin(e) {
			if p, ok := errors.AsType[*stream.TopicProblem](e); ok {
				c.log.Error().Str("topic", p.Topic).Str("setting", p.Setting).Str("value", p.Value).Str("reason", p.Reason).
					Msg("topic watch: a topic no longer keeps a guarantee (not ready)")
			} else {
				c.log.Error().Err(e).Msg("topic watch: the topics could not be checked (not ready)")
			}
		}
	}
	err = fmt.Errorf("topics (changed while running): %w", err)
	c.topicErr.Store(&err)
}

// grown says whether now only adds topics to last (one the daemon creates after its
// start, such as the erasures topic), every topic of last keeping its count.
func grown(last, now map[string]int) bool {
	for t, n := range last {
		if now[t] != n {
			return false
		}
	}
	return true
}
