package stream

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// EndOffsets returns, for every partition of topic, the offset the next
// message written to it will get (the high watermark; 0 for an empty
// partition). A client that captures EndOffsets before it produces a
// request and then reads from there (StartAt) sees every answer written
// after the capture and nothing older, without a consumer group.
func EndOffsets(ctx context.Context, cfg Config, topic string) (map[int]int64, error) {
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	ids, err := partitions(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, id := range ids {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(id))
	}
	resp, err := cl.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("stream: list end offsets of topic %q: %w", topic, err)
	}
	out := make(map[int]int64, len(ids))
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("stream: list end offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		if po.LastOffset < 0 {
			return nil, fmt.Errorf("stream: list end offsets of %s/%d: broker answered offset %d", topic, po.Partition, po.LastOffset)
		}
		out[po.Partition] = po.LastOffset
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("stream: list end offsets of %s/%d: no answer for the partition", topic, id)
		}
	}
	return out, nil
}

// StartAt is a StartFunc that starts partition p of topic at offsets[topic][p],
// the offset of the first message to deliver (as EndOffsets returns it), rather
// than after the last applied one. A partition absent from offsets, or listed
// at 0, starts at the earliest retained offset: it had no messages when the
// offsets were captured, so everything in it is newer.
func StartAt(offsets map[string]map[int]int64) StartFunc {
	return func(topic string, partition int) (int64, bool, error) {
		next, ok := offsets[topic][partition]
		if !ok || next <= 0 {
			return 0, false, nil
		}
		return next - 1, true, nil
	}
}
