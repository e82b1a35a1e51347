package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/stream"
)

// KafkaConfig is the stream configuration of cfg's external brokers (TLS and SASL
// included); with the embedded broker Connect fills in its address.
func KafkaConfig(cfg config.Config) stream.Config {
	k := cfg.Kafka
	sasl := stream.SASLConfig{Username: k.SASL.Username, Password: k.SASL.Password}
	switch k.SASL.Mechanism {
	case "plain":
		sasl.Mechanism = stream.SASLPlain
	case "scram-sha-256":
		sasl.Mechanism = stream.SASLScramSHA256
	case "scram-sha-512":
		sasl.Mechanism = stream.SASLScramSHA512
	}
	return stream.Config{
		Brokers: slices.Clone(k.Brokers), ClientID: "cairnd",
		TLS: stream.TLSConfig{Enable: k.TLS.Enabled, CAFile: k.TLS.CAFile, CertFile: k.TLS.CertFile,
			KeyFile: k.TLS.KeyFile, InsecureSkipVerify: k.TLS.InsecureSkipVerify},
		SASL: sasl, AllowPlaintextSASL: k.AllowPlaintextSASL,
	}
}

// TopicConfigs are the settings of the topics cairnd creates with kafka.partitions
// partitions under cfg: the audit topic keeps every record (retention.ms and
// retention.bytes -1), so that the hash chain can be verified from its first record, and
// so does the lineage topic (not compacted: every run's START and its COMPLETE or FAIL
// stay, under one key), and the training topic is compacted (the models topic, which cairnd creates with one
// partition, is compacted too). On an external cluster a topic that exists keeps its
// settings, which kafka.topic_policy then judges (stream.CheckTopics); the embedded
// broker applies them. A deployment (or a test) that creates the topics itself gives
// them these.
func TopicConfigs(cfg config.Config) map[string]map[string]string {
	return map[string]map[string]string{
		cfg.Kafka.Topics.Audits:  {"retention.ms": "-1", "retention.bytes": "-1"},
		cfg.Kafka.Topics.Lineage: {"retention.ms": "-1", "retention.bytes": "-1"},
		// Compaction keeps the last record of each id: a deletion's tombstone (null
		// value) makes it erase the point's upserts.
		cfg.Kafka.Topics.Train: {"cleanup.policy": "compact"},
	}
}

// Events stamps cairnd's records under cfg with their CloudEvents headers
// (stream.Events): ce_source cfg.EventSource(), and the ce_type of each output topic.
// The input topics and the training topic's claims are not listed: they carry no
// CloudEvents headers of cairnd's.
func Events(cfg config.Config) *stream.Events {
	t := cfg.Kafka.Topics
	return &stream.Events{Source: cfg.EventSource(), Types: map[string]stream.EventType{
		t.Attributions: stream.TypeAttribution, t.Audits: stream.TypeAudit, t.DLQ: stream.TypeDeadLetter,
		t.Status: stream.TypeStatus, t.Models: stream.TypeModel, t.Lineage: stream.TypeLineage}}
}

// Conn is cairnd's side of the Kafka cluster once Connect has returned: the client
// configuration, the embedded broker (if any), and what the topics' check found.
type Conn struct {
	// Kafka is the client configuration (the embedded broker's address in the
	// default mode).
	Kafka stream.Config
	// Embedded is the in-process broker, nil with external brokers.
	Embedded *stream.Broker
	// TrainPolicy is the training topic's cleanup.policy as the cluster describes it
	// at start ("compact" on the embedded broker, "unknown" when it cannot be asked).
	TrainPolicy string

	cfg config.Config
	log zerolog.Logger
	// topicErr is what the topics' check found wrong with their settings under
	// kafka.topic_policy warn, or since by the watch (nil: nothing).
	topicErr atomic.Pointer[error]
	// watchMu guards start, the partition counts of the checked topics as the start's
	// check found them: the reference Watch compares the cluster against.
	watchMu sync.Mutex
	start   map[string]int
}

// Connect starts the embedded broker (cfg without kafka.brokers; Close closes it) or
// waits for the external one to take the topics (retrying with a doubling wait while
// it does not answer, reported to faults as component "broker", until ctx ends). Then
// it creates the one-partition topics and checks the topics' settings (checkTopics).
// With kafka.allow_plaintext_sasl it logs a warning first.
func Connect(ctx context.Context, cfg config.Config, faults *fault.Tracker, log zerolog.Logger) (*Conn, error) {
	c := &Conn{Kafka: KafkaConfig(cfg), cfg: cfg, log: log}
	c.warnPlaintextSASL()
	t := cfg.Kafka.Topics
	topics := []string{t.Train, t.Queries, t.Attributions, t.Audits, t.DLQ, t.Status, t.Lineage}
	if len(cfg.Kafka.Brokers) > 0 {
		if err := c.waitTopics(ctx, faults, topics); err != nil {
			return nil, err
		}
		policy, err := stream.TopicSetting(ctx, c.Kafka, t.Train, "cleanup.policy")
		if err != nil {
			log.Warn().Err(err).Msg("cleanup.policy of the training topic unknown")
			policy = "unknown"
		}
		c.TrainPolicy = policy
		if err := c.ensureSingle(ctx); err != nil {
			return nil, err
		}
		if err := c.checkTopics(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	c.TrainPolicy = "compact"
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: cfg.Kafka.EmbeddedBroker, Topics: topics,
		Partitions: cfg.Kafka.Partitions, DataDir: filepath.Join(cfg.DataDir, "kafka"), TopicConfigs: TopicConfigs(cfg)})
	if err != nil {
		return nil, err
	}
	c.Kafka.Brokers = []string{b.Addr()}
	c.Embedded = b
	if err := c.ensureSingle(ctx); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	if err := c.checkTopics(ctx); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	log.Info().Str("addr", b.Addr()).Msg("embedded broker started")
	if b.RestoredCompaction() {
		log.Warn().Msg("embedded broker: a compaction interrupted by a crash was undone and run again")
	}
	return c, nil
}

// Close closes the embedded broker, if there is one.
func (c *Conn) Close() error {
	if c.Embedded == nil {
		return nil
	}
	return c.Embedded.Close()
}

// TopicsErr is the topics' part of readiness: what the start's check found under
// kafka.topic_policy warn, or what the watch found since (nil: nothing).
func (c *Conn) TopicsErr() error {
	if p := c.topicErr.Load(); p != nil {
		return *p
	}
	return nil
}

// waitTopics creates the topics on an external broker, waiting with a doubling delay
// (logged once per fault.LogEvery) while the broker does not answer, until ctx ends.
func (c *Conn) waitTopics(ctx context.Context, faults *fault.Tracker, topics []string) error {
	var b fault.Backoff
	for {
		err := stream.EnsureTopicsWithConfigs(ctx, c.Kafka, c.cfg.Kafka.Partitions, 1, TopicConfigs(c.cfg), topics...)
		if err == nil || ctx.Err() != nil {
			faults.Recovered("broker")
			return err
		}
		if errors.Is(err, stream.ErrConfig) {
			return err
		}
		wait := b.Next()
		faults.Fail("broker", fmt.Errorf("create topics: %w", err), wait)
		if !fault.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// ensureSingle creates the one-partition topics: the models topic (compacted: one
// partition keeps its chunks, manifests, masks and tombstones in order) and the
// election topic.
func (c *Conn) ensureSingle(ctx context.Context) error {
	t := c.cfg.Kafka.Topics
	rf := 1
	if c.Embedded != nil {
		rf = -1
	}
	return stream.EnsureTopicsWithConfigs(ctx, c.Kafka, 1, rf, map[string]map[string]string{
		t.Models: {"cleanup.policy": "compact"}}, t.Models, t.Leader)
}

// warnPlaintextSASL logs, at every start, that kafka.allow_plaintext_sasl lets SASL
// run without TLS.
func (c *Conn) warnPlaintextSASL() {
	k := c.cfg.Kafka
	if k.SASL.Mechanism != "" && !k.TLS.Enabled {
		c.log.Warn().Str("mechanism", k.SASL.Mechanism).Strs("brokers", k.Brokers).
			Msg("kafka.allow_plaintext_sasl: SASL credentials and every record cross the network to the brokers unencrypted")
	}
}
