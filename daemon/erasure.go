package daemon

import (
	"context"
	"fmt"

	"github.com/cairnhq/cairn/internal/erasure"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// Data subjects' requests (internal/ingest, "Data subjects"). The training reader reads
// the erasures topic too, and the ingest applies its requests in the training batches
// (exactly once, with the batch's offsets); an erasure's audit is written by the refit
// that follows, like a deletion's. The daemon's part is small: the topic, and what
// /status and /metrics show (internal/erasure), which never names a subject other than
// by its keyed hash.

// ErasureStatus is the "erasures" part of /status (erasure.Status).
type ErasureStatus = erasure.Status

// ErasureDone is an erasure whose audit the broker acknowledged (erasure.Done).
type ErasureDone = erasure.Done

// ensureErasures creates the erasures topic when it is missing: compacted (the last
// request of each subject stays), with kafka.partitions partitions.
func (d *Daemon) ensureErasures(ctx context.Context) error {
	rf := 1
	if d.embedded != nil {
		rf = -1
	}
	t := stream.DefaultErasuresTopic
	err := stream.EnsureTopicsWithConfigs(ctx, d.kafka, d.cfg.Kafka.Partitions, rf,
		map[string]map[string]string{t: {"cleanup.policy": "compact"}}, t)
	if err != nil {
		return fmt.Errorf("daemon: create the erasures topic: %w", err)
	}
	return nil
}

// publishErasures publishes the ingest's pending subject requests for /status and the
// metrics (erasure.Tracker.Publish); d.train.mu is held.
func (d *Daemon) publishErasures(in *ingest.State) { d.erasures.Publish(in) }

// erasuresWritten is the writer's OnWritten part for the subjects' requests: the
// deadline measure of each audit acknowledged (erasure.Tracker.Written).
func (d *Daemon) erasuresWritten(msgs []stream.Message) { d.erasures.Written(d.log, msgs) }

// erasureStatus is the "erasures" part of /status.
func (d *Daemon) erasureStatus() *ErasureStatus { return d.erasures.Status() }
