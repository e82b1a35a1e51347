package featurizer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// Group is the featurizers' default consumer group.
const Group = "cairn.featurizers"

// Config is what a Featurizer needs from the daemon.
type Config struct {
	Kafka stream.Config
	// Group is the featurizers' consumer group, Topic the training topic, Out the
	// features topic.
	Group, Topic, Out string
	SessionTimeout    time.Duration
	FetchMaxBytes     int
	// Writer writes the records; it must be Partitioned.
	Writer *stream.Writer
	// Features is the deployment's pipeline, Limits the training events' limits
	// (ingest.TrainLimits with ingest.IndexLimits), as the primary decodes them.
	Features *pipeline.Features
	Limits   stream.Limits
	Faults   *fault.Tracker
	Log      zerolog.Logger
}

// Featurizer computes the features of the training topic as one member of the
// featurizers' consumer group.
type Featurizer struct {
	cfg Config
	gr  *stream.GroupReader
	// applied reads the primary's applied offsets (featrec.AppliedGroup); next is
	// what it last read (per partition, the first offset not applied), readAt when.
	applied *stream.Progress
	parts   []int
	next    map[int]int64
	readAt  time.Time
	keep    []stream.Message
	skipped atomic.Uint64
	// Buffers of Records, reused batch to batch.
	xs, views, feats []float64
	ids              []string
	src              []int // the batch index of each upsert
}

// New checks c and builds the group reader; it connects nothing.
func New(c Config) (*Featurizer, error) {
	if c.Writer == nil || c.Features == nil || c.Faults == nil || c.Out == "" {
		return nil, fmt.Errorf("featurizer: a writer, a pipeline, a fault tracker and an output topic are required")
	}
	if err := c.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("featurizer: limits: %w", err)
	}
	if c.Limits.InputDim != c.Features.InputDim() {
		return nil, fmt.Errorf("featurizer: limits' input length %d is not the backbone's %d", c.Limits.InputDim, c.Features.InputDim())
	}
	gr, err := stream.NewGroupReader(stream.GroupReaderConfig{Kafka: c.Kafka, Group: c.Group, Topic: c.Topic,
		MaxBatch: 64, SessionTimeout: c.SessionTimeout, FetchMaxBytes: c.FetchMaxBytes})
	if err != nil {
		return nil, err
	}
	applied, err := stream.NewProgress(c.Kafka, featrec.AppliedGroup, c.Topic)
	if err != nil {
		return nil, err
	}
	return &Featurizer{cfg: c, gr: gr, applied: applied}, nil
}

// Skipped is how many upserts the featurizer skipped because the primary had applied
// them already.
func (f *Featurizer) Skipped() uint64 { return f.skipped.Load() }

// Run featurizes the training topic until ctx ends; a failure (a broker that stopped
// answering, a write that failed) restarts the reader after a doubling wait
// (fault.Tracker KeepReading, component "featurize"), from the group's committed
// offsets. It returns nil once ctx ends.
func (f *Featurizer) Run(ctx context.Context) error {
	defer f.applied.Close()
	return f.cfg.Faults.KeepReading(ctx, "featurize", f.gr, f.handle, nil)
}

// readApplied is how often a featurizer reads the primary's applied offsets, as often
// as the primary publishes them (featsource).
const readApplied = 500 * time.Millisecond

// chunk is how many events a featurizer computes before it writes their records: on a
// costly backbone (the ONNX ResNet-20 takes about 64 ms per point, both views, on one core)
// a whole batch of 64 would hold every record back for seconds, while the primary waits
// at most ingest.featurizer_timeout for the next record of its batch.
const chunk = 16

// handle writes one batch's records to Kafka, chunk by chunk, before the group reader
// commits it.
func (f *Featurizer) handle(ctx context.Context, batch []stream.Message) error {
	for lo := 0; lo < len(batch); lo += chunk {
		out, err := f.Records(f.unapplied(ctx, batch[lo:min(lo+chunk, len(batch))]))
		if err != nil {
			return err
		}
		if err := f.cfg.Writer.Write(ctx, out...); err != nil {
			return err
		}
	}
	f.cfg.Faults.Recovered("featurize")
	return nil
}

// unapplied returns the events of part the primary has not applied yet, by the applied
// offsets it publishes (read again, for every partition of the training topic, when
// readApplied has passed). When they cannot be
// read it keeps the last ones it read: skipping is an economy, and a record for an
// applied event is only dropped by the primary as stale.
func (f *Featurizer) unapplied(ctx context.Context, part []stream.Message) []stream.Message {
	if time.Since(f.readAt) >= readApplied {
		var err error
		if f.parts == nil {
			f.parts, err = stream.Partitions(ctx, f.cfg.Kafka, f.cfg.Topic)
		}
		var next map[int]int64
		if err == nil {
			next, err = f.applied.Read(ctx, f.parts)
		}
		if err == nil {
			f.next, f.readAt = next, time.Now()
		} else if ctx.Err() == nil {
			f.cfg.Log.Debug().Err(err).Msg("featurizer: reading the primary's applied offsets failed")
		}
	}
	f.keep = f.keep[:0]
	for _, m := range part {
		if next, ok := f.next[m.Partition]; ok && m.Offset < next {
			f.skipped.Add(1)
			continue
		}
		f.keep = append(f.keep, m)
	}
	return f.keep
}

// Records returns the feature records of batch's upserts, in batch order, each
// addressed to Out on its event's partition and keyed by its id. An event that is not
// an upsert or does not decode has none. batch is not modified.
func (f *Featurizer) Records(batch []stream.Message) ([]stream.Message, error) {
	f.xs, f.ids, f.src = f.xs[:0], f.ids[:0], f.src[:0]
	for i, m := range batch {
		if m.Value == nil {
			continue // a tombstone
		}
		ev, err := stream.DecodeTrain(m.Value, f.cfg.Limits)
		if err != nil || ev.Op != stream.OpUpsert {
			continue
		}
		f.xs = append(f.xs, ev.X...)
		f.ids = append(f.ids, ev.ID)
		f.src = append(f.src, i)
	}
	n, q := len(f.ids), f.cfg.Features.Dim()
	if n == 0 {
		return nil, nil
	}
	f.views = grow(f.views, 2*n*f.cfg.Features.InputDim())
	f.feats = grow(f.feats, 2*n*q)
	f.cfg.Features.BothViewsTo(f.feats, f.views, f.xs, f.ids)
	out := make([]stream.Message, n)
	fp := f.cfg.Features.Fingerprint()
	for r, i := range f.src {
		m := batch[i]
		rec := featrec.Record{ID: f.ids[r], Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
			Fingerprint: fp, Features: f.feats[2*r*q : (2*r+2)*q]}
		b, err := rec.Encode()
		if err != nil {
			return nil, fmt.Errorf("featurizer: %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
		}
		out[r] = stream.Message{Topic: f.cfg.Out, Partition: m.Partition, Key: []byte(rec.ID), Value: b, Time: m.Time}
	}
	return out, nil
}

// grow returns b resized to n, reallocated only when too small.
func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
