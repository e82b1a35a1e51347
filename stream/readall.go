package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// errReadEnough stops ReadAll's reader once every partition reached its end.
var errReadEnough = errors.New("stream: read to the end")

// ReadAll reads every partition of topic from its earliest retained offset up to the
// end offsets the topic has when the call starts (records written later are left out),
// and returns the records in the order read (each partition's in offset order). It
// returns when every partition reached its end, or with ctx's error when ctx ends
// first, naming what was read. It starts and joins its own reader.
func ReadAll(ctx context.Context, cfg Config, topic string) ([]Message, error) {
	ends, err := EndOffsets(ctx, cfg, topic)
	if err != nil {
		return nil, fmt.Errorf("stream: end offsets of %q (is the broker at %s up?): %w", topic, strings.Join(cfg.Brokers, ","), err)
	}
	remaining := 0
	for _, e := range ends {
		if e > 0 {
			remaining++
		}
	}
	if remaining == 0 {
		return nil, nil
	}
	r, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, MaxWait: 100 * time.Millisecond,
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
	if err != nil {
		return nil, err
	}
	var out []Message
	err = r.Run(ctx, func(_ context.Context, batch []Message) error {
		for _, m := range batch {
			end := ends[m.Partition]
			if m.Offset >= end {
				continue
			}
			out = append(out, m)
			if m.Offset == end-1 {
				remaining--
			}
		}
		if remaining == 0 {
			return errReadEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errReadEnough) {
		return nil, err
	}
	if remaining > 0 {
		return nil, fmt.Errorf("stream: read %q: %d partitions not read to their end offsets %v (%d records read): %w",
			topic, remaining, ends, len(out), orErr(ctx.Err(), context.DeadlineExceeded))
	}
	return out, nil
}

// orErr is err, or def when err is nil.
func orErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
