package modeltopic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// Floor is the highest model version seen on the models topic: a leader numbers its
// next version above it, so that replicas (which ignore older versions) install it.
// It is safe for concurrent use.
type Floor struct{ v atomic.Uint64 }

// Load returns the floor.
func (f *Floor) Load() uint64 { return f.v.Load() }

// Raise sets the floor to v if v is higher.
func (f *Floor) Raise(v uint64) {
	for {
		cur := f.v.Load()
		if v <= cur || f.v.CompareAndSwap(cur, v) {
			return
		}
	}
}

// PublisherConfig is what a Publisher needs.
type PublisherConfig struct {
	Kafka stream.Config
	// Topic is the models topic; Features the fingerprint of the feature pipeline the
	// versions were fitted under (pipeline.Features.Fingerprint).
	Topic, Features string
	Floor           *Floor
	// Serving returns the serving model now (nil before the first).
	Serving func() *serving.Model
	// Compact compacts the broker's models topic (the embedded broker); nil with
	// external brokers, which compact by themselves.
	Compact func(ctx context.Context) error
	Faults  *fault.Tracker
	Log     zerolog.Logger
}

// Publisher is the leader's model publisher.
type Publisher struct {
	cfg  PublisherConfig
	kick chan struct{}
	// eraseDue says points left the serving model since the topic was last compacted.
	eraseDue atomic.Bool
}

// NewPublisher returns a Publisher under c; it connects nothing.
func NewPublisher(c PublisherConfig) *Publisher {
	return &Publisher{cfg: c, kick: make(chan struct{}, 1)}
}

// Kick wakes the publisher: the serving model changed.
func (p *Publisher) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// EraseDue notes that points left the serving model: the next publication compacts
// the topic (with Compact set), so that no copy of their rows stays on it.
func (p *Publisher) EraseDue() { p.eraseDue.Store(true) }

// Run publishes every model version the leader serves, until ctx ends: content pieces
// (modelbus.ContentChunks: only those not live on the topic already, so a refit on the
// same pool writes its fit, not its inputs), then its index, then tombstones for every
// key the version does not name (erased from the embedded broker's files at once by
// compaction). A failed write is retried with a doubling wait (fault component
// "models"); the version is published again. It returns nil when ctx ends.
func (p *Publisher) Run(ctx context.Context, w *stream.Writer) error {
	var (
		b      fault.Backoff
		pubVer uint64 // the version last published by this leader, and its masked count
		pubMsk int
	)
	faults := p.cfg.Faults
	live, err := p.scan(ctx)
	for err != nil {
		wait := b.Next()
		faults.Fail("models", err, wait)
		if !fault.Sleep(ctx, wait) {
			return nil
		}
		live, err = p.scan(ctx)
	}
	var pts pointsState
	tick := time.NewTicker(pointsEvery)
	defer tick.Stop()
	for {
		s := p.cfg.Serving()
		var err error
		wrote := false
		// The points first: a version published after a deletion then follows the
		// tombstone of the deleted point's record, so a replica never builds its row
		// into that version.
		if s != nil && pts.changed(s) {
			if err = p.publishPoints(ctx, w, s, live, &pts); err == nil {
				wrote = true
			}
		}
		// A new version, or the published one with more landmarks masked: republished
		// under the same keys with the deleted points' rows zeroed, so that compaction
		// drops the copies that held them.
		if err == nil && s != nil && (s.Version > p.cfg.Floor.Load() || (s.Version == pubVer && s.MaskedCount() != pubMsk)) {
			if err = p.publish(ctx, w, s, live); err == nil {
				pubVer, pubMsk, wrote = s.Version, s.MaskedCount(), true
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait := b.Next()
			faults.Fail("models", err, wait)
			if !fault.Sleep(ctx, wait) {
				return nil
			}
			continue
		}
		if wrote {
			b.Reset()
			faults.Recovered("models")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-tick.C: // rows of points stored since the last version (no kick)
		}
	}
}

// publish writes version s: its content pieces that are not in live (key → version of
// the live keys on the topic), then its index; then tombstones for every key in live
// that s does not name, except the masks of s and newer versions. It updates live.
func (p *Publisher) publish(ctx context.Context, w *stream.Writer, s *serving.Model, live map[string]uint64) error {
	topic := p.cfg.Topic
	v := modelbus.FromModel(s, p.cfg.Features)
	content, index := modelbus.ContentChunks(&v)
	named := map[string]bool{string(index.Key): true}
	var msgs []stream.Message
	for _, m := range content {
		named[string(m.Key)] = true
		if _, ok := live[string(m.Key)]; !ok {
			msgs = append(msgs, stream.Message{Topic: topic, Key: m.Key, Value: m.Value})
		}
	}
	msgs = append(msgs, stream.Message{Topic: topic, Key: index.Key, Value: index.Value})
	t0 := time.Now()
	if err := w.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("publish model %d: %w", s.Version, err)
	}
	p.cfg.Floor.v.Store(s.Version)
	var stones []stream.Message
	for k, kv := range live {
		mask := strings.HasPrefix(k, "mask/")
		if !named[k] && !modelbus.IsPointKey(k) && (!mask || kv < s.Version) {
			stones = append(stones, stream.Message{Topic: topic, Key: []byte(k)})
		}
	}
	if err := w.Write(ctx, stones...); err != nil {
		return fmt.Errorf("tombstones of models older than %d: %w", s.Version, err)
	}
	for _, m := range stones {
		delete(live, string(m.Key))
	}
	for k := range named {
		live[k] = s.Version
	}
	// Compaction erases the older copies of rows and inputs of points that left since
	// they were written: run it (embedded broker) only then, not at every version.
	if p.cfg.Compact != nil && p.eraseDue.Swap(false) {
		if err := p.cfg.Compact(ctx); err != nil {
			p.eraseDue.Store(true) // not compacted: the next publish tries again
			return err
		}
	}
	p.cfg.Log.Info().Uint64("model", s.Version).Int("chunks", len(msgs)-1).Int("reused", len(named)-len(msgs)).Int("tombstones", len(stones)).
		Dur("took", time.Since(t0)).Msg("model published on the models topic")
	return nil
}

// scan reads the models topic from its start to its end and returns its live keys (a
// value, not a tombstone, last) with their versions; the highest version of an index
// or manifest raises the floor.
func (p *Publisher) scan(ctx context.Context) (map[string]uint64, error) {
	topic := p.cfg.Topic
	live := map[string]uint64{}
	ends, err := stream.EndOffsets(ctx, p.cfg.Kafka, topic)
	if err != nil {
		return nil, err
	}
	end := ends[0]
	if end == 0 {
		return live, nil
	}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: p.cfg.Kafka, Topics: []string{topic},
		Start: func(string, int) (int64, bool, error) { return 0, false, nil }, FetchMaxBytes: 16 << 20})
	if err != nil {
		return nil, err
	}
	done := errors.New("scanned")
	err = r.Run(ctx, func(_ context.Context, batch []stream.Message) error {
		for _, m := range batch {
			dm, err := modelbus.Decode(m.Key, m.Value)
			switch {
			case err != nil:
				p.cfg.Log.Warn().Err(err).Int64("offset", m.Offset).Msg("models topic: undecodable record")
			case dm.Kind == modelbus.KindTombstone:
				delete(live, string(m.Key))
			default:
				live[string(m.Key)] = dm.Version
				if dm.Kind == modelbus.KindManifest || dm.Kind == modelbus.KindIndex {
					p.cfg.Floor.Raise(dm.Version)
				}
			}
			if m.Offset >= end-1 {
				return done
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, done) {
		return nil, err
	}
	return live, ctx.Err()
}
