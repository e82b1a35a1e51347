package daemon

import (
	"context"

	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/modeltopic"
	"github.com/cairnhq/cairn/internal/role/replica"
	"github.com/cairnhq/cairn/storage"
)

// modelsState is the daemon's side of the models topic (internal/modeltopic): the
// leader's publisher, a follower's reader, the version floor both keep, and whether the
// serving mask changed in the training batch being applied.
type modelsState struct {
	maskDirty bool // under train.mu: the serving mask changed in the batch being applied
	floor     modeltopic.Floor
	pub       *modeltopic.Publisher // set by openModels, with the broker
	follow    *modeltopic.Follower
	points    *replica.Points // a replica's copy of the primary's gradient points; nil otherwise
}

// openModels builds the models topic's publisher and follower once the broker is
// known (connect): the publisher compacts the embedded broker after deletions.
func (d *Daemon) openModels() {
	var compact func(context.Context) error
	if d.embedded != nil {
		compact = d.compact
	}
	topic, fp := d.cfg.Kafka.Topics.Models, d.feat.Fingerprint()
	d.models.pub = modeltopic.NewPublisher(modeltopic.PublisherConfig{Kafka: d.kafka, Topic: topic, Features: fp,
		Floor: &d.models.floor, Serving: d.serve.model.Load, Compact: compact, Faults: d.faults, Log: d.log})
	fc := modeltopic.FollowerConfig{Kafka: d.kafka, Topic: topic, Features: fp, Floor: &d.models.floor,
		Leading: d.leading.Load, Install: d.installVersion, Mask: d.applyMask, Faults: d.faults, Metrics: d.metrics, Log: d.log}
	if d.cfg.Role == "replica" { // the gradient rankings, from the primary's points
		d.models.points = &replica.Points{Backbone: d.feat.Backbone(), Budget: d.cfg.Query.GradientMemoryBytes}
		fc.Points = d.applyPoints
	}
	d.models.follow = modeltopic.NewFollower(fc)
}

// applyPoints applies a run of the models topic's point records to a replica's serving
// model (replica.Points.Apply), with the masks that apply to it.
func (d *Daemon) applyPoints(pts []modelbus.Point, classes int, mask func(uint64) []string) {
	d.serve.mu.Lock()
	defer d.serve.mu.Unlock()
	if s := d.serve.model.Load(); s == nil {
		d.models.points.Apply(nil, pts, classes)
	} else if ns := d.models.points.Mask(d.models.points.Apply(s, pts, classes), mask(s.Version)); ns != s {
		d.serve.model.Store(ns)
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

// installVersion serves a version read from the models topic (modeltopic.Follower),
// with mask, the masks that apply to it.
func (d *Daemon) installVersion(v *modelbus.Version, mask []string) error {
	in := v.Input()
	d.models.points.Install(&in)
	s, err := d.newServing(in)
	if err != nil {
		return err
	}
	s = d.models.points.Mask(s, mask)
	d.serve.mu.Lock()
	mark := len(d.serve.removals) // a follower's own removals are not the version's
	d.serve.mu.Unlock()
	d.install(s, mark)
	d.log.Info().Uint64("model", s.Version).Str("model_id", s.ID).Int("masked", s.MaskedCount()).Msg("model installed from the models topic")
	return nil
}

// applyMask applies the models topic's masks to the serving model (modeltopic.Follower):
// mask(version) lists the ids masked in models of that version or older.
func (d *Daemon) applyMask(mask func(version uint64) []string) {
	s := d.serve.model.Load()
	if s == nil {
		return
	}
	if ns := d.models.points.Mask(s, mask(s.Version)); ns != s {
		d.serve.mu.Lock()
		if d.serve.model.CompareAndSwap(s, ns) {
			d.metrics.SetModel(ns.Version, ns.MaskedCount())
			d.log.Info().Uint64("model", ns.Version).Int("masked", ns.MaskedCount()).Msg("deletion mask applied")
		}
		d.serve.mu.Unlock()
	}
}
