package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/stream"
)

// compactPoll is how often Compact looks at the training reader's position.
const compactPoll = 20 * time.Millisecond

// Compact compacts the embedded broker once the training reader has read every record
// of the training topic written before the call: read is the last offset it applied
// in a partition (and whether one is). Compaction keeps only the newest record of each
// id, so a record the reader has not read yet would be gone before it was applied. It
// waits at most until ctx ends; while stopping reports true (the reader has stopped) it
// does not wait and returns an error, leaving the compaction to the next start.
func (c *Conn) Compact(ctx context.Context, read func(part int) (int64, bool, error), stopping func() bool) error {
	topic := c.cfg.Kafka.Topics.Train
	ends, err := stream.EndOffsets(ctx, c.Kafka, topic)
	if err != nil {
		return fmt.Errorf("daemon: end offsets before compacting: %w", err)
	}
	for {
		behind := false
		for part, end := range ends {
			last, ok, err := read(part)
			if err != nil {
				return err
			}
			if end > 0 && (!ok || last < end-1) {
				behind = true
				break
			}
		}
		if !behind {
			return c.Embedded.Compact()
		}
		if stopping() {
			return errors.New("daemon: compaction deferred: the training reader stopped before reading what it would erase")
		}
		if !fault.Sleep(ctx, compactPoll) {
			return fmt.Errorf("daemon: compaction deferred: the training reader has not read what it would erase: %w", ctx.Err())
		}
	}
}
