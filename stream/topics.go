package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"
)

// DefaultErasuresTopic is the data subjects' erasure topic (docs/events.md); its name is fixed.
const DefaultErasuresTopic = "cairn.erasures"

// TopicRoles names the topics whose settings carry cairn's guarantees, for CheckTopics.
// Train, Models and Audits must exist; Erasures (may be empty) is checked only when the
// cluster has it.
type TopicRoles struct {
	Train, Models, Audits string
	Erasures              string
}

// The settings CheckTopics reads, as Kafka names them.
const (
	settingCleanup   = "cleanup.policy"
	settingRetention = "retention.ms"
	settingBytes     = "retention.bytes"
	settingMinISR    = "min.insync.replicas"
)

// TopicProblem is one topic setting that breaks a guarantee (CheckTopics). It matches
// ErrTopicSettings.
type TopicProblem struct {
	Topic   string
	Setting string // a topic setting, e.g. cleanup.policy; "partitions" or "replication" from the metadata
	Value   string
	Reason  string
}

func (p *TopicProblem) Error() string {
	return fmt.Sprintf("stream: topic %q: %s=%s: %s", p.Topic, p.Setting, p.Value, p.Reason)
}

// Is makes every *TopicProblem match ErrTopicSettings.
func (p *TopicProblem) Is(target error) bool { return target == ErrTopicSettings }

// topicState is what CheckTopics learns of one topic.
type topicState struct {
	settings    map[string]string // effective values of the settings read
	partitions  int
	replication int // the fewest replicas of any partition
}

// CheckTopics reads the effective settings of the topics in roles (DescribeConfigs and
// Metadata through kafka.Client) and returns every one that cannot keep erasure or the
// audit chain, joined, each a *TopicProblem matching ErrTopicSettings; an error that
// does not match it means the cluster could not be asked (a required topic missing
// included). The rules, from docs/architecture.md ("Events", "State and storage"):
//
//   - Train, Models and Erasures: cleanup.policy includes compact. On the training
//     topic a deletion's tombstone makes compaction drop the point's upserts (the
//     erasure from the broker's log); on the models topic a version's chunks and the
//     deletion masks stay until replaced, so a replica can always load what it serves
//     and fence on the masks; on the erasures topic the last request per subject stays.
//   - Audits: cleanup.policy does not include compact, since compaction keeps one
//     record per key and the hash chain needs every record.
//   - Every checked topic whose cleanup.policy includes delete: retention.ms and
//     retention.bytes are -1, since deletion by age or size would drop audits (the
//     chain could no longer be verified from its first record), model versions still
//     served, or training points that were never deleted (which a standby or a replay
//     then lacks). With infinite retention "delete" deletes nothing.
//   - Models: one partition, which keeps chunks, manifests, masks and tombstones in
//     order.
//   - Every checked topic: min.insync.replicas at most its replication factor; cairn
//     writes with acks=all (RequireAll), which a topic with fewer replicas than that
//     refuses forever (NOT_ENOUGH_REPLICAS), so no output or tombstone would go out.
//
// Not checked: max.compaction.lag.ms. Kafka's default (unbounded) lets an erased
// point's upsert stay in an inactive segment until the cleaner gets to it; a deadline
// for erasure from an external broker's log needs it set (the embedded broker compacts
// at each erasure).
func CheckTopics(ctx context.Context, cfg Config, roles TopicRoles) error {
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	states, err := describeTopics(ctx, cl, roles)
	if err != nil {
		return err
	}
	return roles.check(states)
}

// describeTopics reads the settings and the partitions of the topics of roles; an
// absent Erasures topic is left out of the result, an absent required one is an error.
func describeTopics(ctx context.Context, cl *kafka.Client, roles TopicRoles) (map[string]topicState, error) {
	names := []string{settingCleanup, settingRetention, settingBytes, settingMinISR}
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range roles.all() {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: names})
	}
	resp, err := cl.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("stream: describe the settings of topics %s: %w", strings.Join(roles.all(), ","), err)
	}
	states := map[string]topicState{}
	var errs []error
	for _, r := range resp.Resources {
		switch {
		case r.Error != nil && r.ResourceName == roles.Erasures && errors.Is(r.Error, kafka.UnknownTopicOrPartition):
			continue // optional, and not there
		case r.Error != nil:
			errs = append(errs, fmt.Errorf("stream: describe the settings of topic %q: %w", r.ResourceName, r.Error))
			continue
		}
		st := topicState{settings: map[string]string{}}
		for _, e := range r.ConfigEntries {
			st.settings[e.ConfigName] = e.ConfigValue
		}
		states[r.ResourceName] = st
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var present []string
	for _, t := range roles.all() {
		if _, ok := states[t]; ok {
			present = append(present, t)
		}
	}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: present})
	if err != nil {
		return nil, fmt.Errorf("stream: metadata for topics %s: %w", strings.Join(present, ","), err)
	}
	if err := roles.addMetadata(states, md.Topics); err != nil {
		return nil, err
	}
	return states, nil
}

// addMetadata adds the partition counts and replication of the metadata topics to their
// states. The Erasures topic is optional: one another process is creating as it is asked
// about can have settings but no metadata yet (a featurizer that started beside its
// primary once refused to start on that), and is then left out as absent.
func (r TopicRoles) addMetadata(states map[string]topicState, topics []kafka.Topic) error {
	for _, t := range topics {
		st, ok := states[t.Name]
		switch {
		case !ok:
			continue
		case t.Error != nil && t.Name == r.Erasures && (errors.Is(t.Error, kafka.UnknownTopicOrPartition) || errors.Is(t.Error, kafka.LeaderNotAvailable)):
			delete(states, t.Name)
			continue
		case t.Error != nil:
			return fmt.Errorf("stream: metadata for topic %q: %w", t.Name, t.Error)
		}
		st.partitions = len(t.Partitions)
		for i, p := range t.Partitions {
			if i == 0 || len(p.Replicas) < st.replication {
				st.replication = len(p.Replicas)
			}
		}
		states[t.Name] = st
	}
	return nil
}

// all lists the topics of r, Erasures last when set.
func (r TopicRoles) all() []string {
	ts := []string{r.Train, r.Models, r.Audits}
	if r.Erasures != "" {
		ts = append(ts, r.Erasures)
	}
	return ts
}

// check applies CheckTopics's rules to what describeTopics read (a required topic it
// lacks is a problem here too, so the rules can be tested without a cluster).
func (r TopicRoles) check(states map[string]topicState) error {
	var errs []error
	bad := func(topic, setting, value, reason string) {
		errs = append(errs, &TopicProblem{Topic: topic, Setting: setting, Value: value, Reason: reason})
	}
	for _, t := range r.all() {
		st, ok := states[t]
		if !ok {
			if t != r.Erasures {
				bad(t, "partitions", "0", "the topic does not exist")
			}
			continue
		}
		policy := cleanupPolicy(st.settings[settingCleanup])
		compact, del := slices.Contains(policy, "compact"), slices.Contains(policy, "delete")
		switch t {
		case r.Audits:
			if compact {
				bad(t, settingCleanup, st.settings[settingCleanup], "compaction keeps one audit per key, and the hash chain needs every record: use delete with retention.ms=-1 and retention.bytes=-1")
			}
		case r.Train:
			if !compact {
				bad(t, settingCleanup, st.settings[settingCleanup], "must include compact: a deletion's tombstone erases the point's upserts only by compaction")
			}
		case r.Models:
			if !compact {
				bad(t, settingCleanup, st.settings[settingCleanup], "must include compact: model versions and deletion masks must stay until replaced")
			}
		case r.Erasures:
			if !compact {
				bad(t, settingCleanup, st.settings[settingCleanup], "must include compact: each subject's last erasure request must stay")
			}
		}
		if del {
			for _, s := range []string{settingRetention, settingBytes} {
				if v := st.settings[s]; v != "-1" {
					bad(t, s, v, fmt.Sprintf("must be -1 under cleanup.policy %s: %s", st.settings[settingCleanup], deletes(r, t)))
				}
			}
		}
		if t == r.Models && st.partitions != 1 {
			bad(t, "partitions", strconv.Itoa(st.partitions), "must be 1: one partition keeps a version's chunks, manifests and masks in order")
		}
		if isr, err := strconv.Atoi(st.settings[settingMinISR]); err == nil && isr > st.replication {
			bad(t, settingMinISR, st.settings[settingMinISR], fmt.Sprintf("exceeds the topic's %d replicas: every acks=all write is refused", st.replication))
		}
	}
	return errors.Join(errs...)
}

// deletes says what deletion by age or size would lose on topic t of r.
func deletes(r TopicRoles, t string) string {
	switch t {
	case r.Audits:
		return "deleting old audits breaks the hash chain's verification from its first record"
	case r.Models:
		return "deleting old records drops model versions still served and their masks"
	case r.Erasures:
		return "deleting old records forgets erasure requests"
	}
	return "deleting old records drops training points that were never deleted"
}

// cleanupPolicy splits a cleanup.policy value ("compact,delete") into its words, in
// lower case.
func cleanupPolicy(v string) []string {
	var out []string
	for _, w := range strings.Split(v, ",") {
		if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// TopicPartitions returns the partition count of each of topics that exists on the
// cluster (Metadata through kafka.Client); a topic the cluster lacks is left out.
func TopicPartitions(ctx context.Context, cfg Config, topics []string) (map[string]int, error) {
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("stream: metadata for topics %s: %w", strings.Join(topics, ","), err)
	}
	out := map[string]int{}
	for _, t := range md.Topics {
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		case t.Error != nil:
			return nil, fmt.Errorf("stream: metadata for topic %q: %w", t.Name, t.Error)
		default:
			out[t.Name] = len(t.Partitions)
		}
	}
	return out, nil
}

// PartitionsChanged returns the *TopicProblem of a partition change of r's topics from
// before to now that breaks erasure by itself, whatever the settings: a training topic
// with more (or fewer) partitions than when its points were written. A key's partition
// is a hash of the key modulo the partition count, so a deletion's tombstone now lands
// on another partition than the point's earlier upserts, and compaction, which works per
// partition, never drops them. nil when the training topic kept its count.
func PartitionsChanged(r TopicRoles, before, now map[string]int) error {
	b, ok1 := before[r.Train]
	n, ok2 := now[r.Train]
	if !ok1 || !ok2 || b == n {
		return nil
	}
	return &TopicProblem{Topic: r.Train, Setting: "partitions", Value: fmt.Sprintf("%d (was %d)", n, b),
		Reason: fmt.Sprintf("changed while points are stored: keys hash to other partitions now, so a deletion's tombstone misses the point's earlier upserts and compaction never erases them; re-create the topic with %d partitions and re-produce the stored points", b)}
}
