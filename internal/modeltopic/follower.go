package modeltopic

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/stream"
)

// FollowerConfig is what a Follower needs.
type FollowerConfig struct {
	Kafka stream.Config
	// Topic is the models topic; Features the fingerprint of this daemon's feature
	// pipeline (a version fitted under another is refused, modelbus.ErrFeatures).
	Topic, Features string
	Floor           *Floor
	// Leading says whether this daemon leads now: a leader serves its own versions and
	// reads the topic only for the floor.
	Leading func() bool
	// Install serves version v with mask, the ids masked in models of its version.
	Install func(v *modelbus.Version, mask []string) error
	// Mask applies the masks read so far to the serving model: mask(version) lists
	// the ids masked in models of that version or older.
	Mask func(mask func(version uint64) []string)
	// Points, when set, takes the gradient rankings' point records (package doc,
	// "Points") in topic order: each run of them in a batch at once, before the next
	// record of another kind is applied (a mask after a point then masks its row).
	// Tombstones carry the id alone (Point.X nil); classes is the class count of the
	// last class-count record in the run (0: none); mask is Mask's.
	Points  func(pts []modelbus.Point, classes int, mask func(version uint64) []string)
	Faults  *fault.Tracker
	Metrics *metrics.Set
	Log     zerolog.Logger
}

// Follower is a follower's reader of the models topic (a replica, or a standby and a
// primary with external brokers).
type Follower struct {
	cfg FollowerConfig
	// pts and classes are the run of point records not yet handed to Points (the
	// reader goroutine's).
	pts     []modelbus.Point
	classes int
	ptsEnd  int64         // the offset after the run's last record (0: no run)
	next    atomic.Int64  // the offset after the last record applied
	advance chan struct{} // signalled when next moves
	asm     modelbus.Assembler
}

// NewFollower returns a Follower that has read nothing.
func NewFollower(c FollowerConfig) *Follower {
	return &Follower{cfg: c, advance: make(chan struct{}, 1)}
}

// Run follows the topic until ctx ends: it assembles versions, installs each newer one
// as the serving model with the masks that apply to it, and applies every new mask to
// the serving model at once. A record that does not decode is logged, counted and
// skipped; a failed read is retried (fault component "models"). It returns nil when
// ctx ends.
func (f *Follower) Run(ctx context.Context) error {
	f.asm = modelbus.Assembler{Features: f.cfg.Features}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: f.cfg.Kafka, Topics: []string{f.cfg.Topic},
		Start: func(string, int) (int64, bool, error) {
			n := f.next.Load()
			return n - 1, n > 0, nil
		}, FetchMaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	return f.cfg.Faults.KeepReading(ctx, "models", r, f.handle, nil)
}

// handle applies a batch of the models topic.
func (f *Follower) handle(_ context.Context, batch []stream.Message) error {
	asm, log := &f.asm, f.cfg.Log
	for _, m := range batch {
		if f.cfg.Leading() {
			// A leader serves its own versions; it reads the topic only for the floor.
			if dm, err := modelbus.Decode(m.Key, m.Value); err == nil && (dm.Kind == modelbus.KindManifest || dm.Kind == modelbus.KindIndex) {
				f.cfg.Floor.Raise(dm.Version)
			}
			f.next.Store(m.Offset + 1)
			continue
		}
		if modelbus.IsPointKey(string(m.Key)) {
			f.point(m) // next moves when the run is handed over
			continue
		}
		f.flushPoints()
		v, err := asm.Add(m.Key, m.Value)
		if err != nil {
			f.cfg.Metrics.AddReject("models_record", 1)
			log.Warn().Err(err).Int64("offset", m.Offset).Msg("models topic: record refused")
		}
		if v != nil {
			if err := f.cfg.Install(v, asm.MaskFor(v.Version)); err != nil {
				log.Error().Err(err).Uint64("model", v.Version).Msg("models topic: version not installed")
			}
		} else if err == nil {
			f.cfg.Mask(asm.MaskFor)
		}
		f.cfg.Floor.Raise(asm.Latest())
		f.next.Store(m.Offset + 1)
	}
	f.flushPoints()
	select {
	case f.advance <- struct{}{}:
	default:
	}
	return nil
}

// Fence waits until the follower has applied every record written before the call
// (the end offset it asks the broker for now), so that an answer computed afterwards
// uses every mask acknowledged before it (modelbus, "The deletion fence"). It returns
// ctx's error if ctx ends first.
func (f *Follower) Fence(ctx context.Context) error {
	ends, err := stream.EndOffsets(ctx, f.cfg.Kafka, f.cfg.Topic)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for f.next.Load() < ends[0] {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.advance:
		case <-t.C:
		}
	}
	return nil
}

// point takes one point record or class count into the current run (a record that does
// not decode is counted and skipped).
func (f *Follower) point(m stream.Message) {
	f.ptsEnd = m.Offset + 1
	if f.cfg.Points == nil {
		return
	}
	d, err := modelbus.Decode(m.Key, m.Value)
	switch {
	case err != nil:
		f.cfg.Metrics.AddReject("models_record", 1)
		f.cfg.Log.Warn().Err(err).Int64("offset", m.Offset).Msg("models topic: point record refused")
	case d.Kind == modelbus.KindClasses:
		f.classes = int(d.Version)
	case d.Point != nil:
		f.pts = append(f.pts, *d.Point)
	}
}

// flushPoints hands the current run of point records to Points, then moves next past
// them (a fence returns only once they are applied).
func (f *Follower) flushPoints() {
	if f.ptsEnd == 0 {
		return
	}
	if len(f.pts) > 0 || f.classes > 0 {
		f.cfg.Points(f.pts, f.classes, f.asm.MaskFor)
	}
	f.next.Store(f.ptsEnd)
	f.pts, f.classes, f.ptsEnd = nil, 0, 0
}
