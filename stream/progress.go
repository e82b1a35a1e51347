package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Progress publishes and reads how far a consumer without a consumer group of its own
// has got in a topic, as the committed offsets of a Kafka consumer group that has no
// members (simple commits, generation −1): per partition the offset of the next message
// it will consume. The primary publishes its applied offsets of the training topic this
// way so that featurizers skip events it has applied already (internal/featsource,
// internal/role/featurizer); anything that speaks Kafka can read them (kcat -Q, or
// kafka-consumer-groups --describe).
type Progress struct {
	group, topic string
	tr           *kafka.Transport
	cl           *kafka.Client
}

// NewProgress builds the publisher and reader of group's offsets in topic; it
// connects nothing until used. Close releases its connections.
func NewProgress(cfg Config, group, topic string) (*Progress, error) {
	if group == "" || topic == "" {
		return nil, errors.New("stream: progress: a group and a topic are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr, err := cfg.transport(context.Background())
	if err != nil {
		return nil, err
	}
	return &Progress{group: group, topic: topic, tr: tr,
		cl: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second}}, nil
}

// Publish commits next (partition → offset of the next message to consume) as the
// group's offsets, in one request.
func (p *Progress) Publish(ctx context.Context, next map[int]int64) error {
	if len(next) == 0 {
		return nil
	}
	req := &kafka.OffsetCommitRequest{GroupID: p.group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{}}
	for _, part := range slices.Sorted(maps.Keys(next)) {
		req.Topics[p.topic] = append(req.Topics[p.topic], kafka.OffsetCommit{Partition: part, Offset: next[part]})
	}
	resp, err := p.cl.OffsetCommit(ctx, req)
	if err != nil {
		return fmt.Errorf("stream: progress: commit %s's offsets of %s: %w", p.group, p.topic, err)
	}
	for _, pc := range resp.Topics[p.topic] {
		if pc.Error != nil {
			return fmt.Errorf("stream: progress: commit %s's offset of %s/%d: %w", p.group, p.topic, pc.Partition, pc.Error)
		}
	}
	return nil
}

// Read returns the group's committed offsets of partitions parts: the offset of the
// next message its consumer will consume, for the partitions that have one.
func (p *Progress) Read(ctx context.Context, parts []int) (map[int]int64, error) {
	resp, err := p.cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: p.group, Topics: map[string][]int{p.topic: parts}})
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if errors.Is(err, kafka.GroupIdNotFound) { // nothing published yet (kfake says so; Kafka answers −1)
		return map[int]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: progress: fetch %s's offsets of %s: %w", p.group, p.topic, err)
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[p.topic] {
		if po.Error == nil && po.CommittedOffset >= 0 {
			out[po.Partition] = po.CommittedOffset
		}
	}
	return out, nil
}

// Close releases the connections.
func (p *Progress) Close() { p.tr.CloseIdleConnections() }
