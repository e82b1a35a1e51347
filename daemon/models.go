package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// modelsState is the daemon's side of the models topic (internal/modelbus): the
// leader's mask changes waiting for their batch's transaction and its publisher's
// wake-up; a follower's (replica, standby) progress through the topic.
type modelsState struct {
	maskDirty bool // under train.mu: the serving mask changed in the batch being applied
	kick      chan struct{}
	// floor is the highest model version seen on the topic: a leader numbers its next
	// version above it, so that replicas (which ignore older versions) install it.
	floor atomic.Uint64
	// next is the offset after the last models-topic message a follower applied.
	next atomic.Int64
	// eraseDue says points left the serving model since the models topic was last
	// compacted (the leader's removing hook sets it).
	eraseDue atomic.Bool
	advance  chan struct{} // signalled when next moves
	asm      modelbus.Assembler
}

// kickModels wakes the model publisher.
func (d *Daemon) kickModels() {
	select {
	case d.models.kick <- struct{}{}:
	default:
	}
}

// commitMask is the ingest's Commit hook: in the transaction of a deletion that
// masked landmarks of the serving model, the leader enqueues the model's new mask on
// the models topic, ahead of the deletion's audit (modelbus, "The deletion fence").
// d.train.mu is held.
func (d *Daemon) commitMask(tx *storage.Tx) error {
	if !d.models.maskDirty || !d.leading.Load() {
		return nil
	}
	s := d.serve.model.Load()
	if s == nil {
		return nil
	}
	m := modelbus.Mask(s.Version, s.MaskedIDs())
	_, err := tx.Enqueue(d.cfg.Kafka.Topics.Models, m.Key, m.Value)
	return err
}

// runModels is the leader's model publisher: every model version it serves goes on
// the models topic as content pieces (modelbus.ContentChunks: only those not live on
// the topic already, so a refit on the same pool writes its fit, not its inputs), then
// its index, then tombstones for every key the version does not name (erased from the
// embedded broker's files at once by compaction). A failed write is retried with a
// doubling wait; the version is published again.
func (d *Daemon) runModels(ctx context.Context, w *stream.Writer) error {
	var (
		b      fault.Backoff
		pubVer uint64 // the version last published by this leader, and its masked count
		pubMsk int
	)
	live, err := d.scanModels(ctx)
	for err != nil {
		wait := b.Next()
		d.faults.Fail("models", err, wait)
		if !fault.Sleep(ctx, wait) {
			return nil
		}
		live, err = d.scanModels(ctx)
	}
	for {
		s := d.serve.model.Load()
		// A new version, or the published one with more landmarks masked: republished
		// under the same keys with the deleted points' rows zeroed, so that compaction
		// drops the copies that held them.
		if s != nil && (s.Version > d.models.floor.Load() || (s.Version == pubVer && s.MaskedCount() != pubMsk)) {
			if err := d.publishModel(ctx, w, s, live); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				wait := b.Next()
				d.faults.Fail("models", err, wait)
				if !fault.Sleep(ctx, wait) {
					return nil
				}
				continue
			}
			b.Reset()
			d.faults.Recovered("models")
			pubVer, pubMsk = s.Version, s.MaskedCount()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.models.kick:
		}
	}
}

// publishModel writes version s: its content pieces that are not in live (key →
// version of the live keys on the topic), then its index; then tombstones for every key
// in live that s does not name, except the masks of s and newer versions. It updates
// live.
func (d *Daemon) publishModel(ctx context.Context, w *stream.Writer, s *serving.Model, live map[string]uint64) error {
	topic := d.cfg.Kafka.Topics.Models
	v := modelbus.FromModel(s, d.feat.Fingerprint())
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
	d.models.floor.Store(s.Version)
	var stones []stream.Message
	for k, kv := range live {
		mask := strings.HasPrefix(k, "mask/")
		if !named[k] && (!mask || kv < s.Version) {
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
	// Compaction erases the older copies of rows of points that left since they were
	// written: run it (embedded broker) only then, not at every version.
	if d.embedded != nil && d.models.eraseDue.Swap(false) {
		if err := d.compact(ctx); err != nil {
			d.models.eraseDue.Store(true) // not compacted: the next publish tries again
			return err
		}
	}
	d.log.Info().Uint64("model", s.Version).Int("chunks", len(msgs)-1).Int("reused", len(named)-len(msgs)).Int("tombstones", len(stones)).
		Dur("took", time.Since(t0)).Msg("model published on the models topic")
	return nil
}

// scanModels reads the models topic from its start to its end and returns its live
// keys (a value, not a tombstone, last) with their versions; the highest becomes the
// version floor.
func (d *Daemon) scanModels(ctx context.Context) (map[string]uint64, error) {
	topic := d.cfg.Kafka.Topics.Models
	live := map[string]uint64{}
	ends, err := stream.EndOffsets(ctx, d.kafka, topic)
	if err != nil {
		return nil, err
	}
	end := ends[0]
	if end == 0 {
		return live, nil
	}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: d.kafka, Topics: []string{topic},
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
				d.log.Warn().Err(err).Int64("offset", m.Offset).Msg("models topic: undecodable record")
			case dm.Kind == modelbus.KindTombstone:
				delete(live, string(m.Key))
			default:
				live[string(m.Key)] = dm.Version
				if (dm.Kind == modelbus.KindManifest || dm.Kind == modelbus.KindIndex) && dm.Version > d.models.floor.Load() {
					d.models.floor.Store(dm.Version)
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

// runFollow is a follower's reader of the models topic (replica, standby): it
// assembles versions, installs each newer one as the serving model with the masks that
// apply to it, and applies every new mask to the serving model at once. A record that
// does not decode is logged and skipped.
func (d *Daemon) runFollow(ctx context.Context) error {
	d.models.asm = modelbus.Assembler{Features: d.feat.Fingerprint()}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: d.kafka, Topics: []string{d.cfg.Kafka.Topics.Models},
		Start: func(string, int) (int64, bool, error) {
			n := d.models.next.Load()
			return n - 1, n > 0, nil
		}, FetchMaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	return d.faults.KeepReading(ctx, "models", r, d.handleModels, nil)
}

// handleModels applies a batch of the models topic (runFollow).
func (d *Daemon) handleModels(_ context.Context, batch []stream.Message) error {
	asm := &d.models.asm
	for _, m := range batch {
		if d.leading.Load() {
			// A leader serves its own versions; it reads the topic only for the floor.
			if dm, err := modelbus.Decode(m.Key, m.Value); err == nil && (dm.Kind == modelbus.KindManifest || dm.Kind == modelbus.KindIndex) &&
				dm.Version > d.models.floor.Load() {
				d.models.floor.Store(dm.Version)
			}
			d.models.next.Store(m.Offset + 1)
			continue
		}
		v, err := asm.Add(m.Key, m.Value)
		if err != nil {
			d.metrics.AddReject("models_record", 1)
			d.log.Warn().Err(err).Int64("offset", m.Offset).Msg("models topic: record refused")
		}
		if v != nil {
			if err := d.installVersion(v); err != nil {
				d.log.Error().Err(err).Uint64("model", v.Version).Msg("models topic: version not installed")
			}
		} else if s := d.serve.model.Load(); s != nil && err == nil {
			if ns := s.WithMask(asm.MaskFor(s.Version)); ns != s {
				d.serve.mu.Lock()
				if d.serve.model.CompareAndSwap(s, ns) {
					d.metrics.SetModel(ns.Version, ns.MaskedCount())
					d.log.Info().Uint64("model", ns.Version).Int("masked", ns.MaskedCount()).Msg("deletion mask applied")
				}
				d.serve.mu.Unlock()
			}
		}
		if asm.Latest() > d.models.floor.Load() {
			d.models.floor.Store(asm.Latest())
		}
		d.models.next.Store(m.Offset + 1)
	}
	select {
	case d.models.advance <- struct{}{}:
	default:
	}
	return nil
}

// installVersion builds the serving form of a version read from the models topic, with
// the masks that apply to it, and serves it.
func (d *Daemon) installVersion(v *modelbus.Version) error {
	s, err := d.newServing(v.Input())
	if err != nil {
		return err
	}
	s = s.WithMask(d.models.asm.MaskFor(v.Version))
	d.serve.mu.Lock()
	mark := len(d.serve.removals) // a follower's own removals are not the version's
	d.serve.mu.Unlock()
	d.install(s, mark)
	d.log.Info().Uint64("model", s.Version).Str("model_id", s.ID).Int("masked", s.MaskedCount()).Msg("model installed from the models topic")
	return nil
}

// fence waits until the follower has applied every models-topic record written before
// the call (the end offset it asks the broker for now), so that an answer computed
// afterwards uses every mask acknowledged before it (modelbus, "The deletion fence").
func (d *Daemon) fence(ctx context.Context) error {
	ends, err := stream.EndOffsets(ctx, d.kafka, d.cfg.Kafka.Topics.Models)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for d.models.next.Load() < ends[0] {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.models.advance:
		case <-t.C:
		}
	}
	return nil
}
