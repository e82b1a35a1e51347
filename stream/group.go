package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// GroupReaderConfig configures a GroupReader.
type GroupReaderConfig struct {
	Kafka Config
	// Group is the consumer group; Topic the topic its members share.
	Group, Topic string
	// MaxBatch bounds the messages handed to one call of the handler. Default 64.
	MaxBatch int
	// MaxWait bounds how long a batch gathers more messages once it has one (it ends
	// sooner when none comes for a millisecond), and how long the broker holds a fetch
	// open. Default 10ms.
	MaxWait time.Duration
	// FetchMaxBytes bounds one fetch response. Default 8 MiB.
	FetchMaxBytes int
	// SessionTimeout is how long the coordinator waits for a silent member before it
	// gives the member's partitions to the others. Default 10s; heartbeats go every
	// third of it.
	SessionTimeout time.Duration
}

// batchGap ends a GroupReader's batch when no further message comes for that long.
const batchGap = time.Millisecond

// GroupReader consumes a topic as one member of a consumer group: Kafka spreads the
// partitions between the members and moves a member's partitions to the others when it
// leaves or falls silent. Offsets are committed to the group after the handler
// returns, so delivery is at least once: a batch handled by a member that dies before
// its commit is delivered again to the member that takes the partition over.
type GroupReader struct {
	cfg    GroupReaderConfig
	dialer *kafka.Dialer
}

// NewGroupReader checks cfg and returns a GroupReader; it connects nothing.
func NewGroupReader(cfg GroupReaderConfig) (*GroupReader, error) {
	errs := []error{cfg.Kafka.Validate()}
	if cfg.Group == "" || cfg.Topic == "" {
		errs = append(errs, fmt.Errorf("%w: group reader: group %q and topic %q must be set", ErrConfig, cfg.Group, cfg.Topic))
	}
	if cfg.MaxBatch < 0 || cfg.MaxWait < 0 || cfg.FetchMaxBytes < 0 || cfg.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: group reader: negative limit", ErrConfig))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 64
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 10 * time.Millisecond
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = 8 << 20
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	d, err := cfg.Kafka.dialer()
	if err != nil {
		return nil, err
	}
	return &GroupReader{cfg: cfg, dialer: d}, nil
}

// Run joins the group and hands batches to handle, on the calling goroutine, until ctx
// ends (then it leaves the group and returns nil) or handle or a commit fails (it
// returns that error; the uncommitted batch goes to whichever member holds its
// partition next). A partition with no committed offset starts at its first message.
func (g *GroupReader) Run(ctx context.Context, handle Handler) (err error) {
	kr := kafka.NewReader(kafka.ReaderConfig{
		Brokers: g.cfg.Kafka.Brokers, GroupID: g.cfg.Group, Topic: g.cfg.Topic, Dialer: g.dialer,
		MinBytes: 1, MaxBytes: g.cfg.FetchMaxBytes, MaxWait: g.cfg.MaxWait,
		SessionTimeout: g.cfg.SessionTimeout, HeartbeatInterval: g.cfg.SessionTimeout / 3,
		RebalanceTimeout: g.cfg.SessionTimeout, JoinGroupBackoff: 200 * time.Millisecond,
		StartOffset: kafka.FirstOffset, ReadLagInterval: -1, MaxAttempts: 3,
		ReadBackoffMin: time.Millisecond, ReadBackoffMax: 250 * time.Millisecond,
		// CommitInterval 0: CommitMessages commits synchronously.
	})
	defer func() {
		if cerr := kr.Close(); cerr != nil && err == nil && ctx.Err() == nil {
			err = cerr
		}
	}()
	batch := make([]kafka.Message, 0, g.cfg.MaxBatch)
	out := make([]Message, 0, g.cfg.MaxBatch)
	for {
		km, err := kr.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("stream: group %s: fetch: %w", g.cfg.Group, err)
		}
		batch = append(batch[:0], km)
		// The batch takes what follows without a pause: it ends once no message comes
		// for batchGap (at a low rate a query waits that long, not MaxWait), at MaxWait
		// after its first, or at MaxBatch. A message the reader already holds comes at
		// once, so a backlog still fills whole batches.
		deadline := time.Now().Add(g.cfg.MaxWait)
		for len(batch) < g.cfg.MaxBatch {
			wait := min(time.Until(deadline), batchGap)
			if wait <= 0 {
				break
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			km, err := kr.FetchMessage(wctx)
			cancel()
			if err != nil {
				break
			}
			batch = append(batch, km)
		}
		out = out[:0]
		for _, km := range batch {
			out = append(out, Message{Topic: km.Topic, Partition: km.Partition, Offset: km.Offset, Key: km.Key, Value: km.Value, Time: km.Time})
		}
		if err := handle(ctx, out); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// A handled batch is committed even when ctx ended meanwhile (a clean shutdown),
		// so that no other member handles it again.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SessionTimeout)
		err = kr.CommitMessages(cctx, batch...)
		ccancel()
		if err != nil {
			return fmt.Errorf("stream: group %s: commit: %w", g.cfg.Group, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
